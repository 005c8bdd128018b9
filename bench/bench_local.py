#!/usr/bin/env python3
"""Local-run benchmark: `launchkit run --local --no-python --follow -- echo hi`, this tree against a
baseline commit, interleaved in one run.

Usage (from the repository root):  uv run python bench/bench_local.py [-n 15] [--baseline REF ...]

- Extracts each baseline's src/ (`git archive`; --baseline is repeatable, default cc8c626, the
  release issue 46 compares with, and 04f37a3, before issue 46) into bench/results/, byte-compiles the trees, and
  runs each through the same interpreter with PYTHONPATH pointing at its src/ (the supervisor a run
  starts inherits it), each with its own LAUNCHKIT_LOCAL_HOME, in a small repository.
- Reports median/min/max wall time (and the median CPU time of the CLI, less sensitive to load) in
  ms, with `run --local --dry-run` (no job at all) as the floor of the CLI itself, and below it
  `python -c pass`, the libraries `run` uses (bench_startup.LIBRARIES) and the job alone (the entrypoint,
  run directly). Targets: the local follow run < 250 ms median (issue 25), and at most 1.05x
  cc8c626's when it is a baseline (issue 46), by wall time and by the CLI's CPU time (steadier under
  load). Exit 1 if missed.
- Splits each tree's follow run by the run's own record (its clock is the wall clock, as the bench's):
  the CLI (start to the backend's submit), submit to the job's start (the supervisor, its replica's
  gate opened), the job (gate to exit, as the supervisor saw it) and the end to the CLI's exit (the
  final record, follow's wake-up, the final status line).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_startup import (
    LIBRARIES,
    ROOT,
    baseline_src,
    compile_all,
    no_python_job_env,
    site_packages,
    small_repo,
    time_once,
)

PARTS = ("CLI", "submit to start", "job", "end to exit")

LIBRARIES_ROW = "the libraries alone"
TARGET_MS = 250.0  # issue 25 (issue 11 had 200 ms on a quieter machine)
REFERENCE, AT_MOST = "cc8c626", 1.05  # issue 46: the local follow at most 1.05x the previous release's
RUN = ["run", "--local", "--no-python", "--follow", "--", "echo", "hi"]
FLOOR = ["run", "--local", "--no-python", "--dry-run", "--", "echo", "hi"]


def job_alone(repo: Path, where: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The entrypoint a local run starts, run directly: clone the checkout, `echo hi`. (The runtime
    dir is reused, as a checkout that is already there costs git no less than a fresh one.)"""
    sys.path.insert(0, str(ROOT / "src"))
    from bench_entrypoint import runtime_entry

    return ["bash", runtime_entry(where / "lk-runtime"), "echo", "hi"], no_python_job_env(repo, where, env)


def split_once(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, dict[str, float]]:
    """time_once for a follow run, and its parts (ms) from the run's record (empty when it has no
    such timestamps: an older tree)."""
    start = time.time()
    wall, cpu = time_once(cmd, cwd, env)
    end = start + wall / 1000
    runs = Path(env["LAUNCHKIT_LOCAL_HOME"]) / "runs"
    newest = max(runs.iterdir(), key=lambda d: d.stat().st_mtime)
    rec = json.loads((newest / "status.json").read_text())
    rank = (rec.get("ranks") or {}).get("0") or {}
    if not (rank.get("started") and rank.get("finished")):
        return wall, cpu, {}
    marks = [start, rec["created"], rank["started"], rank["finished"], end]
    return wall, cpu, {part: (b - a) * 1000 for part, a, b in zip(PARTS, marks[:-1], marks[1:], strict=True)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="runs per command (default 15)")
    ap.add_argument(
        "--baseline", action="append", help="git ref to compare with (repeatable; default cc8c626, 04f37a3)"
    )
    args = ap.parse_args()
    refs = args.baseline or [REFERENCE, "04f37a3"]

    python = Path(sys.executable)
    trees = {**{ref: baseline_src(ref) for ref in refs}, "current": ROOT / "src"}
    compile_all(python, site_packages(python), *trees.values())
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_"))}
    base_env.pop("PYTHONDONTWRITEBYTECODE", None)
    base_env["NO_COLOR"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        repo = small_repo(Path(tmp))
        base_env["HOME"] = tmp
        envs = {
            name: {
                **base_env,
                "PYTHONPATH": str(src),
                "LAUNCHKIT_LOCAL_HOME": str(Path(tmp) / f"state-{name}"),
            }
            for name, src in trees.items()
        }
        lk = [str(python), "-m", "launchkit"]
        commands = {
            f"{name} {label}": ([*lk, *cmd], envs[name])
            for name in trees
            for label, cmd in (("run --local --follow", RUN), ("run --local --dry-run", FLOOR))
        }
        # What `run` cannot go below: the interpreter, and importing the libraries it must use
        commands["python -c pass"] = ([str(python), "-c", "pass"], envs["current"])
        commands[LIBRARIES_ROW] = ([str(python), "-c", LIBRARIES], envs["current"])
        commands["the job alone (entrypoint)"] = job_alone(repo, Path(tmp) / "job", base_env)
        for cmd, env in commands.values():  # warm the page cache (and uv's symlink in each run dir)
            time_once(cmd, repo, env)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        splits: dict[str, list[dict[str, float]]] = {name: [] for name in commands if "follow" in name}
        for _ in range(args.n):
            for name, (cmd, env) in commands.items():
                if name in splits:
                    wall, cpu, parts = split_once(cmd, repo, env)
                    samples[name].append((wall, cpu))
                    if parts:
                        splits[name].append(parts)
                else:
                    samples[name].append(time_once(cmd, repo, env))

    print(
        f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
        f"  (n={args.n}, baselines {', '.join(refs)})"
    )
    # cpu: the CLI's own and its waited-for children's (git), not the detached supervisor's or job's
    print(f"{'command':<34} {'median':>8} {'min':>7} {'max':>7} {'cpu':>7}")
    for name, pairs in samples.items():
        walls = [w for w, _ in pairs]
        cpu = statistics.median(c for _, c in pairs)
        print(
            f"{name:<34} {statistics.median(walls):7.0f}ms {min(walls):6.0f}ms {max(walls):6.0f}ms {cpu:6.0f}ms"
        )
    print("the follow run in parts (median ms, from the run's record):")
    print(f"{'':<34} " + " ".join(f"{part:>15}" for part in PARTS))
    for name, parts_list in splits.items():
        if parts_list:
            cells = " ".join(f"{statistics.median(p[part] for p in parts_list):13.0f}ms" for part in PARTS)
            print(f"{name:<34} {cells}")
    current = statistics.median(w for w, _ in samples["current run --local --follow"])
    floor = sum(
        statistics.median(w for w, _ in samples[n]) for n in (LIBRARIES_ROW, "the job alone (entrypoint)")
    )
    print(
        f"floor: the libraries alone + the job alone = {floor:.0f} ms (target {TARGET_MS:.0f} ms); "
        f"launchkit's own part of the follow run: {current - floor:.0f} ms"
    )
    ok = current < TARGET_MS
    print(f"target: current run --local --follow < {TARGET_MS:.0f} ms median: {'ok' if ok else 'MISSED'}")
    ref = f"{REFERENCE} run --local --follow"
    if ref in samples:
        walls = statistics.median(w for w, _ in samples[ref])
        cpus = statistics.median(c for _, c in samples[ref])
        wall_x = current / walls
        cpu_x = statistics.median(c for _, c in samples["current run --local --follow"]) / cpus
        near = wall_x <= AT_MOST
        print(
            f"target: the local follow <= {AT_MOST}x {REFERENCE}: {wall_x:.2f}x wall, {cpu_x:.2f}x the CLI's CPU:"
            f" {'ok' if near else 'MISSED'}"
        )
        ok = ok and near
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
