#!/usr/bin/env python3
"""Sweeps of many tasks: spec sizes, and a 1,000-task launch against the fake Beaker (issue 24 item 2).

Usage (from the repository root):
    uv run python bench/bench_sweep.py [--latency 0.02] [--tasks 1000] [--baseline REF] [--json FILE]

- sizes:  the YAML `run --dry-run` prints for 1, 100 and 1,000 tasks (`--sweep lr=...`), and the
          bytes each task beyond the first adds, for two cases:
          minimal: `-- python train.py --lr {lr}` (offline);
          heavy:   `--preset ai2-oe --cluster ai2/jupiter --gpus 8 --replicas 2 --torchrun --weka
                   oe-training-default:/weka/oe-training-default -e WANDB_PROJECT=x -e HF_HOME=/weka/hf`,
                   offline, and online against the fake with every secret the preset asks for in the
                   workspace (the preset's 8 secret env vars in each task).
          With --baseline REF (default 443c789; '' for none) the same rows for that commit's src/, in the
          same run. Guarded: minimal one task <= 16 KB and each further <= 2 KB; heavy offline each
          further <= HEAVY_PER_TASK_MAX (the heavy case misses 2 KB: see docs/runtime.md "Sizes").
- launch: `launchkit run --yes --sweep lr=<1,000 values> -- python train.py --lr {lr}` (the console
          entry point in a subprocess) against the fake with LATENCY seconds added to every call;
          wall time, calls, experiments made (guarded: one experiment, at most CALL_CEILING calls).
          The fake's per-job create latency (0.25 s a job beyond the first by default: real Beaker
          creates jobs synchronously) is set to 0 here, so the numbers are launchkit's; with Beaker's
          ~0.2 s a job, the create itself adds ~200 s for 1,000 tasks (submit.py scales its timeout).
- follow: `launchkit follow ID` of that run once every task finished: one summary line, its calls.
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
WS = "ai2/launchkit"
ONE_TASK_MAX, PER_TASK_MAX = 16 * 1024, 2 * 1024
HEAVY_PER_TASK_MAX = 2560  # tests/test_spec_size.py guards the same
HEAVY = [
    "--preset", "ai2-oe", "--cluster", "ai2/jupiter", "--gpus", "8", "--replicas", "2", "--torchrun",
    "--weka", "oe-training-default:/weka/oe-training-default", "-e", "WANDB_PROJECT=x", "-e", "HF_HOME=/weka/hf",
]  # fmt: skip
# workspace 2, image 2, secrets 1, budget 1, create 1 + GetWorkload 1, the runtime dataset (first
# launch: made, ~10 calls; later: 1 GetDataset); a sweep costs no call per task.
CALL_CEILING = 20
FOLLOW_CEILING = 8  # workload, org, user, the lead task's job; no call per task


def lk_cmd() -> list[str]:
    return [sys.executable, "-m", "launchkit"]


def values(n: int) -> str:
    return ",".join(f"{i}e-6" for i in range(1, n + 1))


def sweep_args(n: int) -> list[str]:
    return ["--sweep", f"lr={values(n)}", "--", "python", "train.py", "--lr", "{lr}"]


def size_argv(case: str, n: int) -> list[str]:
    """`run --dry-run` argv of a size row (without --offline)."""
    flags = HEAVY if case == "heavy" else []
    cmd = sweep_args(n) if n > 1 else ["--", "python", "train.py", "--lr", "1"]
    return ["run", "--dry-run", "--yes", *flags, *cmd]


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} ... failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.02, help="seconds added to every call")
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--json", type=Path, help="write the numbers here")
    ap.add_argument("--baseline", action="append", help="git ref whose sizes are shown too (default 443c789)")
    args = ap.parse_args()
    from fakebeaker import FakeBeaker, State, scenarios
    from launchkit.core.presets import WELL_KNOWN_SECRETS

    out: dict[str, object] = {}
    ok = True
    trees = {"this tree": ROOT / "src"} | {
        ref: baseline_src(ref) for ref in args.baseline or ["443c789"] if ref
    }
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        repo = small_repo(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_"))}
        env.update(HOME=str(tmp), NO_COLOR="1", PYTHONPATH=str(ROOT / "src"), LAUNCHKIT_WORKSPACE=WS)
        env["XDG_CACHE_HOME"] = str(tmp / "cache")

        # ---- sizes: offline, and the heavy case online against a fake whose workspace has every
        # secret the preset asks for
        state = scenarios.basic(State())
        ws = state.find_workspace(WS)
        for name in WELL_KNOWN_SECRETS:
            if name not in ws.secrets:
                state.put_secret(ws.id, name, "not-a-real-value")
        sizes_fake = FakeBeaker(state, directory=tmp / "fb-sizes").start()
        rows: dict[str, dict[str, dict[int, int]]] = {}
        try:
            for tree, src in trees.items():
                tree_env = {**env, "PYTHONPATH": str(src)}
                for case, mode in (("minimal", "offline"), ("heavy", "offline"), ("heavy", "online")):
                    row = rows.setdefault(f"{case} {mode}", {}).setdefault(tree, {})
                    for n in (1, 100, args.tasks):
                        argv = size_argv(case, n) + (["--offline"] if mode == "offline" else [])
                        run_env = {**tree_env, **sizes_fake.env} if mode == "online" else tree_env
                        row[n] = len(run([*lk_cmd(), *argv], repo, run_env).stdout.encode())
        finally:
            sizes_fake.stop()
        out["spec_bytes"] = rows
        print(
            f"spec YAML (bytes; {args.tasks} tasks; each further task = ({args.tasks} tasks - 1 task) / {args.tasks - 1}):"
        )
        print(
            f"  {'case':16s} {'tree':10s} {'1 task':>8s} {'100 tasks':>10s} {f'{args.tasks} tasks':>12s} {'further':>8s}"
        )
        for label, by_tree in rows.items():
            for tree, sz in by_tree.items():
                per_task = (sz[args.tasks] - sz[1]) / (args.tasks - 1)
                print(
                    f"  {label:16s} {tree:10s} {sz[1]:8,} {sz[100]:10,} {sz[args.tasks]:12,} {per_task:8,.0f}"
                )
                if tree == "this tree" and label == "minimal offline":
                    size_ok = sz[1] <= ONE_TASK_MAX and per_task <= PER_TASK_MAX
                elif tree == "this tree" and label == "heavy offline":
                    size_ok = per_task <= HEAVY_PER_TASK_MAX
                else:
                    continue
                ok &= size_ok
                print(
                    f"    {'ok' if size_ok else 'EXCEEDED'} (limits: minimal 16 KB / 2 KB, heavy {HEAVY_PER_TASK_MAX:,} B)"
                )

        fake = FakeBeaker(
            scenarios.basic(State()), directory=tmp / "fb", options={"create_latency_per_job": 0.0}
        ).start()
        try:
            env.update(fake.env)
            run(
                [*lk_cmd(), "run", "--yes", "--", "python", "train.py"], repo, env
            )  # the runtime dataset, once
            fake.faults.latency(args.latency)
            fake.reset_calls()
            t0 = time.perf_counter()
            proc = run([*lk_cmd(), "run", "--yes", "--name", "sweep", *sweep_args(args.tasks)], repo, env)
            wall = time.perf_counter() - t0
            calls = dict(fake.calls)
            exps = [e for e in fake.state.experiments.values() if e.name == "sweep"]
            tasks = sum(len(e.tasks) for e in exps)
            total = sum(calls.values())
            launch_ok = len(exps) == 1 and tasks == args.tasks and total <= CALL_CEILING
            ok &= launch_ok
            out["launch"] = {
                "seconds": round(wall, 2),
                "calls": total,
                "experiments": len(exps),
                "tasks": tasks,
            }
            print(
                f"launch of {args.tasks} tasks at {args.latency * 1000:.0f} ms a call: {wall:.1f} s, {total} calls, "
                f"{len(exps)} experiment(s) with {tasks} tasks ({'ok' if launch_ok else 'REGRESSED'}; "
                f"ceiling {CALL_CEILING} calls)   "
                + ", ".join(f"{k}={n}" for k, n in sorted(calls.items(), key=lambda kv: -kv[1])[:8])
            )
            exp_id = proc.stdout.strip().splitlines()[-1]
            for t in exps[0].tasks:
                fake.state.finish_job(t.latest_job, 0)
            fake.reset_calls()
            t0 = time.perf_counter()
            follow = run([*lk_cmd(), "follow", exp_id], repo, env)
            wall = time.perf_counter() - t0
            total = fake.total_calls
            lines = [x for x in follow.stderr.splitlines() if " tasks: " in x]
            follow_ok = total <= FOLLOW_CEILING and any(
                f"{args.tasks} tasks: {args.tasks} succeeded" in x for x in lines
            )
            ok &= follow_ok
            out["follow"] = {"seconds": round(wall, 2), "calls": total}
            print(
                f"follow of the finished run: {wall:.1f} s, {total} calls ({'ok' if follow_ok else 'REGRESSED'}): {lines[-1:]}"
            )
        finally:
            fake.stop()
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
