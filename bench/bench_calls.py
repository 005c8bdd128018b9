#!/usr/bin/env python3
"""Round trips per command against the fake Beaker, guarded: exit 1 when a count goes above its ceiling.

Usage (from the repository root):  uv run python bench/bench_calls.py [--gantry] [--json FILE]

Each command runs as users run it (the console entry point in a subprocess, this tree's src/) against
the fake Beaker (tests/fakebeaker, in this process), which counts every gRPC method and HTTP route.
Counts are not timings: they do not depend on the machine's load, so the ceilings are exact.

- why:     `launchkit why` of a finished, a queued and a running run of the list's runs (their phases included).
- list:    `launchkit list` (20 rows; once on a machine that has nothing cached, then as a user's second
           list) and `list --limit 200` of 200 launchkit runs in the workspace (every
           other one finished, a quarter running, 2 authors; a quarter's description replaced by its job). Beaker pages hold 50 rows, so 200 rows take 4 ListWorkloads
           and, for the EXIT column, 2 ListJobs in series.
- submit:  `launchkit run -- python train.py` (no --upload), three times from the same commit: the first
           makes the runtime dataset (once per launchkit version and workspace), the later ones find it
           with one call; the third launch must not have its create rejected for a taken name. A fourth,
           at 100 ms a call, counts its calls in series (bench_submit.rounds), guarded too.
- upload:  the first `launchkit run --upload DIR:/data` of 1,000 small files (plus an empty one); the
           dataset calls and the whole launch's calls. And the second launch of the same directory.
--gantry also runs gantry 3.7.0's `gantry run --upload` of the 1,000 files (without the empty one, which
gantry cannot upload) against the same fake (bench/results/gantry-venv, or LK_BENCH_GANTRY_VENV) and
prints its counts; the recorded ones (GANTRY) are ceilings too (issue 25: no more calls than gantry).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_startup import ROOT, baseline_src, small_repo

sys.path.insert(0, str(ROOT / "tests"))
from launchkit.runtime import runtime_files

WS = "ai2/launchkit"
FILES = 1000
# command -> ceiling of the fake's total calls: what this tree makes (issue 25: list <= 5), so an extra
# round trip fails the bench. ListDatasetFiles pages hold 100 files in the fake: 10 pages for 1,000.
# Queued rows (issue 33): + one listing of the org's unscheduled jobs and the newest 5 queued rows' events
# (populate() leaves every other run queued; a full workspace's slot limit would be read once).
QUEUED = 1 + 5
# Running rows (issue 34, the PROGRESS column): the newest 5 running rows' newest job (one ListJobs each)
# and their log's tail (one StreamJobLogs each), all at once (backends/beaker/backend.py: PROGRESS_ROWS).
RUNNING = 2 * 5
CEILINGS = {
    "list": 5 + QUEUED + RUNNING,
    "list --limit 200": 8 + QUEUED + RUNNING,  # org, workspace, 4 pages of workloads, 2 of finished jobs
    # a machine's first list: + one GetUser per author, at once (2; was ResolveUserName + GetUser each, in
    # series), + the running rows' specs, read once per experiment for their secrets' names (5)
    "list (first on this machine)": 5 + QUEUED + RUNNING + 2 + 5,
    # why (issue 43): org, workload (name, get), its jobs, and the run's own read (the retry budget's spec,
    # the queued job's events, the running job's log tail) = 5; its phases add, at once, the job's
    # summarized events (waiting history) and its log's first lines (setup markers), or for a queued job
    # the org's unscheduled jobs (its position; one page of 50 here)
    "why (finished)": 5 + 2,
    "why (queued)": 5 + 2,
    "why (running)": 5 + 2 + 2,  # + the workload and spec read to mask its progress text (masked_run)
    # The first launch into a workspace makes launchkit's runtime dataset (docs/runtime.md), once per
    # launchkit version: the launch's 9 above, user 1, lookup 1, budget 1, create 2, storage 1, verify 1,
    # commit 2, and one PUT per runtime file (entrypoint.sh, profiles.txt, launchkit_node/**.py)
    "submit (first: makes the runtime dataset)": 17 + len(runtime_files()),
    # workspace 1 (by the id remembered on this machine), image 1 (ResolveImageName of gantry's default
    # image), secrets 1, budget 1, create 1 (+ GetWorkload), and the runtime dataset: 1 (GetDataset of
    # the id remembered here): 7 calls in 3 rounds (SUBMIT_ROUNDS), 9 in 8 before issue 46, then 7 in 4
    "submit": 7,
    "submit again (same commit)": 7,  # no create refused for a taken name
    "upload: whole launch": FILES + 27,
    # find 2, create 2, storage 1, PUT 1,000, commit 2, verify 10; +1 the runtime dataset's GetDataset
    "upload: dataset calls": FILES + 17,
    "upload with an empty file: whole launch": FILES + 1 + 28,
    "upload with an empty file: dataset calls": FILES + 1 + 18,
    "upload again: dataset calls": 14,  # find 2, verify 11, the runtime dataset 1
}
# gantry 3.7.0's `gantry run --upload` of the same 1,000 files against the same fake (its source and
# entrypoint datasets), recorded with --gantry on 2026-11-25: launchkit must stay at or below them.
GANTRY = {"upload: whole launch": 1055, "upload: dataset calls": 1033}
DATASET_CALLS = ("Dataset", "StartUpload", "UploadChunk")


def lk_cmd() -> list[str]:
    return [sys.executable, "-m", "launchkit"]


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")


def counted(fake, cmd: list[str], cwd: Path, env: dict[str, str]) -> dict[str, int]:
    fake.reset_calls()
    run(cmd, cwd, env)
    return dict(fake.calls)


def data_dir(tmp: Path, name: str, *, empty: bool) -> Path:
    d = tmp / name
    (d / "pkg").mkdir(parents=True)
    if empty:
        (d / "pkg" / "__init__.py").write_bytes(b"")  # must be uploaded too (gantry cannot: fact 7.6)
    for i in range(FILES):
        (d / f"f{i:04d}.txt").write_text(f"file {i}\n")
    return d


def populate(fake) -> None:
    now = time.time_ns()
    for i in range(200):
        exp = fake.state.add_experiment(
            WS,
            f"lk{i}",
            author="alice" if i % 3 else "bob",
            # every fourth description replaced by its job, as OLMo-core's callback does while it trains
            # (fact 11.8): told as launchkit's by the tasks' LAUNCHKIT_VERSION (identity.py), at no cost
            description=f"[{i // 2}%, {i * 5}/1,000] run\nhttps://wandb.ai/x/y"
            if i % 4 == 1
            else "run [launchkit]",
            env={"LAUNCHKIT_VERSION": "bench"},
            created=now - (200 - i) * 60_000_000_000,
        )
        if i % 2:
            fake.state.finish_job(exp.tasks[0].latest_job or fake.state.schedule_job(exp), i % 3)
        elif i % 4 == 0:  # running, with a progress line (a quarter of the rows; the rest stay queued)
            fake.state.append_logs(fake.state.start_job(exp), [f"[step={i}/1000] loss=2.0", "NCCL WARN"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gantry", action="store_true", help="also count gantry 3.7.0's upload launch")
    ap.add_argument("--json", type=Path, help="write the counts here")
    ap.add_argument("--baseline", default="095abbc", help="git ref whose `list` rounds are shown alongside")
    args = ap.parse_args()
    from fakebeaker import FakeBeaker, State, scenarios

    results: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        repo = small_repo(tmp)
        fake = FakeBeaker(scenarios.basic(State()), directory=tmp / "fb").start()
        try:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_"))}
            env.update(fake.env, HOME=str(tmp), NO_COLOR="1", PYTHONPATH=str(ROOT / "src"))
            env.update(LAUNCHKIT_WORKSPACE=WS)
            populate(fake)
            lk = lk_cmd()
            cold = {**env, "HOME": str(tmp / "first"), "XDG_CACHE_HOME": str(tmp / "first" / "cache")}
            results["list (first on this machine)"] = counted(fake, [*lk, "list"], repo, cold)
            run([*lk, "list"], repo, env)  # warm launchkit's user-name cache, as a user's second list
            results["list"] = counted(fake, [*lk, "list"], repo, env)
            results["list --limit 200"] = counted(fake, [*lk, "list", "--limit", "200"], repo, env)
            for label, name in (("why (finished)", "lk1"), ("why (queued)", "lk2"), ("why (running)", "lk4")):
                results[label] = counted(fake, [*lk, "why", f"alice/{name}"], repo, env)
            launch = [*lk, "run", "--yes", "--", "python", "train.py"]
            results["submit (first: makes the runtime dataset)"] = counted(fake, launch, repo, env)
            results["submit"] = counted(fake, launch, repo, env)
            results["submit again (same commit)"] = counted(fake, launch, repo, env)
            in_series = submit_rounds(fake, launch, repo, env)
            plain = data_dir(tmp, "plain", empty=False)  # what gantry can upload
            data = data_dir(tmp, "data", empty=True)
            for label, d in (("upload", plain), ("upload with an empty file", data)):
                up = [*lk, "run", "--yes", "--upload", f"{d}:/data", "--", "python", "train.py"]
                whole = counted(fake, up, repo, env)
                results[f"{label}: whole launch"] = whole
                results[f"{label}: dataset calls"] = _dataset_calls(whole)
            results["upload again: dataset calls"] = _dataset_calls(counted(fake, up, repo, env))
            if args.gantry:
                results.update(gantry_counts(fake, repo, env, plain))
            rounds = list_rounds(fake, repo, env, baseline_src(args.baseline) if args.baseline else None)
        finally:
            fake.stop()

    ok = True
    print(f"{'command':<34} {'calls':>6} {'ceiling':>8}")
    for name, calls in results.items():
        total = sum(calls.values())
        ceiling = CEILINGS.get(name)
        line = f"{name:<34} {total:6d} {'' if ceiling is None else ceiling:>8}"
        if ceiling is not None:
            ceiling = min(ceiling, GANTRY.get(name, ceiling))
            ok &= total <= ceiling
            line += "  ok" if total <= ceiling else "  REGRESSED"
        top = sorted(calls.items(), key=lambda kv: -kv[1])[:12]
        print(line + "   " + ", ".join(f"{k}={n}" for k, n in top))
    for name, (wall, calls) in rounds.items():
        print(f"{name:<34} {calls:6d}   {wall * 1000:6.0f} ms at {LATENCY * 1000:.0f} ms a call")
    ok &= in_series <= SUBMIT_ROUNDS
    print(
        f"{'submit: calls in series':<34} {in_series:6d} {SUBMIT_ROUNDS:>8}  "
        + ("ok" if in_series <= SUBMIT_ROUNDS else "REGRESSED")
        + f"   rounds at {LATENCY * 1000:.0f} ms a call (bench/bench_submit.py: rounds)"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if ok else 1


LATENCY = 0.1
# A warm submit's rounds of calls in series (issue 46): the look-ups all at once (the workspace, the image,
# and by the ids remembered on this machine its secrets, default budget and runtime dataset), the
# create, its workload. 8 before issue 46, then 4.
SUBMIT_ROUNDS = 3


def submit_rounds(fake, launch: list[str], repo: Path, env: dict[str, str]) -> int:
    """The rounds of calls in series of `launch` (warm) with LATENCY added to every call."""
    from bench_submit import Arrivals, rounds

    calls = Arrivals(fake)
    fake.faults.latency(LATENCY)
    try:
        run(launch, repo, env)
    finally:
        fake.faults.latency(0)
    return rounds(calls.times, LATENCY)


def list_rounds(fake, repo: Path, env: dict[str, str], base: Path | None) -> dict[str, tuple[float, int]]:
    """Wall time of `list` with LATENCY added to every call (median of 3): calls in series show as
    LATENCY each. The baseline's src/ runs with the same interpreter (a timing: printed, not guarded)."""
    import statistics

    trees = {
        "list (this tree)": ROOT / "src",
        **({f"list (baseline {base.parent.name})": base} if base else {}),
    }
    fake.faults.latency(LATENCY)
    out = {}
    try:
        for name, src in trees.items():
            walls = []
            for _ in range(3):
                fake.reset_calls()
                t = time.perf_counter()
                run([*lk_cmd(), "list"], repo, {**env, "PYTHONPATH": str(src)})
                walls.append(time.perf_counter() - t)
            out[name] = (statistics.median(walls), fake.total_calls)
    finally:
        fake.faults.latency(0)
    return out


def _dataset_calls(calls: dict[str, int]) -> dict[str, int]:
    return {k: n for k, n in calls.items() if any(s in k for s in DATASET_CALLS)}


def gantry_counts(fake, repo: Path, env: dict[str, str], data: Path) -> dict[str, dict[str, int]]:
    from bench_startup import gantry_bin

    gantry = str(gantry_bin())
    genv = {
        **env,
        "HTTPS_PROXY": fake.github_proxy,
        "GANTRY_CHECK_FOR_UPGRADES": "0",
        "BEAKER_DEFAULT_WORKSPACE": WS,
    }
    genv.pop("PYTHONPATH", None)
    cmd = [gantry, "run", "--yes", "--budget", "ai2/oe-default", "--workspace", WS, "--allow-dirty"]
    cmd += ["--upload", f"{data}:/data", "--", "python", "train.py"]
    whole = counted(fake, cmd, repo, genv)
    return {
        "gantry upload: whole launch": whole,
        "gantry upload: dataset calls": {
            k: n for k, n in whole.items() if any(s in k for s in DATASET_CALLS)
        },
    }


if __name__ == "__main__":
    sys.exit(main())
