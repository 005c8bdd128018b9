#!/usr/bin/env python3
"""What each queue-facing command prints and costs (issue 33), this tree beside a baseline, against the
fake Beaker with LATENCY added to every call: `why` and `list` of a job held by the workspace's slot
limit, `run` of a request no node can take and of one into a full workspace, `find-gpus` and
`find-gpus --gpus 8`. Calls are counted by the fake; wall times (median of 3) include the process
start-up, so they are noisy on a shared machine: the calls are exact.

Usage (from the repository root):  uv run python bench/bench_queue.py [--baseline REF] [--json FILE]

Each tree gets a fresh fake in the same state: workspace ai2/launchkit may hold 8 unallocated slots,
`busy` (8 GPUs) runs, `held` (8 GPUs) waits for the slot limit, the budget has 32 slots on ai2/jupiter,
and 20 finished runs fill the list. Printed, not guarded (bench_calls.py guards `list`'s calls).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_startup import ROOT, baseline_src, small_repo

sys.path.insert(0, str(ROOT / "tests"))

WS = "ai2/launchkit"
LATENCY = 0.02  # seconds added to every call
REPEAT = 3  # runs of each command (the median wall time is shown)
BASELINE = "a88a165"  # the tree before issue 33


def arrange(fake) -> str:
    """The state above; returns the held experiment's id."""
    from fakebeaker import scheduling

    st = fake.state
    st.workspaces[st.find_workspace(WS).id].slot_limit = 8
    scheduling.allocate(st, "ai2/jupiter", 32, budget="ai2/oe-default")
    now = time.time_ns()
    for i in range(20):
        exp = st.add_experiment(WS, f"done{i}", author="alice", description="run [launchkit]")
        exp.created = now - (40 - i) * 60_000_000_000
        st.finish_job(exp.tasks[0].latest_job, i % 2)

    def gpu_run(name: str) -> str:
        return scheduling.gpu_experiment(st, name, preemptible=True).id

    st.start_job(gpu_run("busy"))
    return gpu_run("held")


def commands(held: str) -> dict[str, list[str]]:
    run = ["run", "--yes", "--workspace", WS]
    return {
        "why (held by the slot limit)": ["why", held],
        "list": ["list", "-w", WS],
        "run --gpus 16 --cluster ai2/jupiter": [*run, "--gpus", "16", "--cluster", "ai2/jupiter", "--", "python", "t.py"],
        "run --gpus 8 (workspace full)": [*run, "--gpus", "8", "--cluster", "ai2/jupiter", "--", "python", "t.py"],
        "run --torchrun --replicas 16 --dry-run": [
            *run, "--dry-run", "--torchrun", "--replicas", "16", "--gpus", "8", "--", "python", "t.py",
        ],
        "find-gpus": ["find-gpus"],
        "find-gpus --gpus 8": ["find-gpus", "--gpus", "8", "-w", WS],
    }  # fmt: skip


def measure(src: Path, tmp: Path, repo: Path) -> dict[str, dict[str, object]]:
    from fakebeaker import FakeBeaker, State, scenarios

    fake = FakeBeaker(scenarios.basic(State()), directory=tmp / f"fb-{src.parent.name}").start()
    out: dict[str, dict[str, object]] = {}
    try:
        held = arrange(fake)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_"))}
        env.update(fake.env, HOME=str(tmp / "home"), NO_COLOR="1", PYTHONPATH=str(src))
        for warm in (["list", "-w", WS], ["run", "--dry-run", "-w", WS, "--", "python", "t.py"]):
            # the user-name cache and the runtime dataset (made once per workspace) exist, as for a user
            subprocess.run([sys.executable, "-m", "launchkit", *warm], cwd=repo, env=env, capture_output=True,
                           timeout=120)  # fmt: skip
        fake.faults.latency(LATENCY)
        for name, args in commands(held).items():
            walls = []
            for i in range(REPEAT):  # the first run's output and calls; the median wall time
                fake.reset_calls()
                t = time.perf_counter()
                run = subprocess.run(
                    [sys.executable, "-m", "launchkit", *args],
                    cwd=repo,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                walls.append(time.perf_counter() - t)
                if i == 0:
                    proc, calls = run, dict(fake.calls)
            out[name] = {
                "exit": proc.returncode,
                "calls": sum(calls.values()),
                "wall_ms": round(statistics.median(walls) * 1000),
                "top": dict(sorted(calls.items(), key=lambda kv: -kv[1])[:6]),
                "stdout": proc.stdout,
                "stderr": proc.stderr,
                "created": [
                    e.name for e in fake.state.experiments_of(author="alice") if e.name.startswith("lk")
                ],
            }
    finally:
        fake.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE, help="git ref to compare with ('' for none)")
    ap.add_argument("--json", type=Path, help="write everything (outputs too) here")
    ap.add_argument("--show", action="store_true", help="print each command's output")
    args = ap.parse_args()
    trees = {"this tree": ROOT / "src"}
    if args.baseline:
        trees[f"baseline {args.baseline}"] = baseline_src(args.baseline)
    results = {}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        repo = small_repo(tmp)
        for label, src in trees.items():
            results[label] = measure(src, tmp, repo)
    print(
        f"{'command':<42} {'tree':<18} {'exit':>4} {'calls':>6} {'wall ms':>8}  at {LATENCY * 1000:.0f} ms a call"
    )
    names = list(next(iter(results.values())))
    for name in names:
        for label, rows in results.items():
            r = rows[name]
            top = ", ".join(f"{k}={n}" for k, n in r["top"].items())  # type: ignore[union-attr]
            print(f"{name:<42} {label:<18} {r['exit']:>4} {r['calls']:>6} {r['wall_ms']:>8}  {top}")
            if args.show:
                for stream in ("stdout", "stderr"):
                    text = str(r[stream]).strip()
                    if text and (stream == "stderr" or not name.endswith("--dry-run")):
                        print("    " + text.replace("\n", "\n    "))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
