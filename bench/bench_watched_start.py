#!/usr/bin/env python3
"""A watched job's start (issue 40 item 3: progress matching with a budget), baseline against this
tree, interleaved in one run: the node runtime as the entrypoint execs it (`python -s -S -m
launchkit_node launch`, the package copied out as on the node) under the watchdog, running a command
that prints the wall clock at its start. Two settings: the default patterns (matched in the
watchdog) and a pattern of the user's (this tree: matched in a matcher process it starts).

Usage (from the repository root):  uv run python bench/bench_watched_start.py [-n 15] [--baseline main]

Reports, per tree and setting, the median and min of: ms from starting the runtime to the command's
start (what the job waits for), and ms to the runtime's exit; with the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_startup import ROOT, baseline_src

# Each setting for both kinds of tree: the run's policy in one variable (runtime/node/policy.py) and
# the variables a tree before it read (the baseline may be either).
SETTINGS = {
    "defaults": {
        "LAUNCHKIT_POLICY": '{"parent":true,"stall_timeout":600}',
        "LAUNCHKIT_STALL_TIMEOUT": "600",
    },
    "own pattern": {
        "LAUNCHKIT_POLICY": '{"parent":true,"stall_timeout":600,"progress_patterns":["iter \\\\d+"]}',
        "LAUNCHKIT_STALL_TIMEOUT": "600",
        "LAUNCHKIT_PROGRESS_PATTERNS": r"iter \d+",
    },
}


def node_copy(src: Path, into: Path) -> Path:
    """src's node package as the node has it: `launchkit_node` in a directory of its own."""
    shutil.copytree(src / "launchkit" / "runtime" / "node", into / "launchkit_node")
    return into


def once(node_dir: Path, extra: dict[str, str]) -> tuple[float, float]:
    """(ms to the command's start, ms to the runtime's exit)."""
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(node_dir),
        "LAUNCHKIT_LAUNCHER": "none",
        **extra,
    }
    cmd = [sys.executable, "-s", "-S", "-m", "launchkit_node", "launch", "--cwd", str(node_dir), "--"]
    t0 = time.time_ns()
    start = time.perf_counter()
    out = subprocess.run(
        [*cmd, "date", "+%s%N"],
        cwd=node_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    done = time.perf_counter() - start
    return (int(out.strip()) - t0) / 1e6, done * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument("--baseline", default="main", help="a git ref, or a checkout's directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {
            "baseline": node_copy(baseline_src(args.baseline), Path(tmp, "a")),
            "this tree": node_copy(ROOT / "src", Path(tmp, "b")),
        }
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.n):  # interleaved: drift in the machine's speed hits both alike
            for setting, extra in SETTINGS.items():
                for tree, node_dir in trees.items():
                    times.setdefault((tree, setting), []).append(once(node_dir, extra))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.n} runs each")
    print(f"{'setting':<13} {'tree':<10} {'to command start ms':>22} {'to exit ms':>16}")
    for (tree, setting), got in sorted(times.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        starts, exits = [g[0] for g in got], [g[1] for g in got]
        print(
            f"{setting:<13} {tree:<10} {statistics.median(starts):>12.1f} (min {min(starts):5.1f})"
            f" {statistics.median(exits):>7.1f} (min {min(exits):5.1f})"
        )


if __name__ == "__main__":
    main()
