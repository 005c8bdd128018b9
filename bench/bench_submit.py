#!/usr/bin/env python3
"""A real submit, side by side: launchkit (this tree and a baseline) and gantry 3.7.0 against one fake.

Usage (from the repository root):
    uv run python bench/bench_submit.py [-n 5] [--latency 0.02,0.1] [--baseline REF|DIR] [--json FILE]

For each latency (seconds added to every call the fake answers), in the same run, alternating:
- `launchkit run --yes --budget B -- python train.py` from a pushed commit, warm (the runtime dataset
  made by an earlier launch, as every launch but a workspace's first);
- the same with `--baseline`'s src/ (default cc8c626, the previous release; '' for none);
- `gantry run --yes --budget B --name N -- python train.py` (gantry 3.7.0, its GitHub check answered by
  the fake's github.com).
Printed per tool: median wall time, the fake's calls, and the calls *in series*: rounds of calls, where
a call that reaches the fake before the round's first could be answered joins that round (independent
calls sent at once, or while others are in flight, make one round). The ratio launchkit/gantry is the
target (issue 46: <= 0.7 at 20 ms per call). Load is printed.
Every tool's sources are byte-compiled first (this machine sets PYTHONDONTWRITEBYTECODE: without it each
launch would compile its modules, which no user's second launch does).
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

from beaker_vs_gantry import compile_all
from bench_startup import GANTRY_VENV, ROOT, baseline_src, gantry_bin

sys.path.insert(0, str(ROOT / "tests"))

BUDGET = "ai2/oe-default"
WS = "ai2/launchkit"


def repo_at(tmp: Path) -> Path:
    """A repository whose origin is a GitHub URL (the fake answers github.com for both tools)."""
    repo = tmp / "repo"
    repo.mkdir()
    (repo / "train.py").write_text("print(1)\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "init"],
        ["remote", "add", "origin", "https://github.com/alice/proj.git"],
        ["update-ref", "refs/remotes/origin/main", "HEAD"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)
    return repo


class Arrivals:
    """When each call reached the fake: a gRPC call when it arrives (`faults.meet`, before the fake's
    added latency), an HTTP call when it is recorded (on arrival too)."""

    def __init__(self, fake) -> None:
        self.times: list[float] = []
        self._held: dict[str, int] = {}
        meet, record = fake.faults.meet, fake._record_call

        def arrived(name: str) -> None:
            self.times.append(time.monotonic())
            self._held[name] = self._held.get(name, 0) + 1
            meet(name)

        def recorded(name: str, *a, **k):
            if self._held.get(name):
                self._held[name] -= 1  # its arrival is counted already
            else:
                self.times.append(time.monotonic())
            return record(name, *a, **k)

        fake.faults.meet, fake._record_call = arrived, recorded

    def clear(self) -> None:
        self.times.clear()
        self._held.clear()


def rounds(arrivals: list[float], latency: float) -> int:
    """Calls in series: a call that reaches the fake before the current round's first call could be
    answered (its arrival + `latency`) went out without waiting for it and joins the round; a later
    one begins a new round."""
    n, answered = 0, None
    for t in sorted(arrivals):
        if answered is None or t >= answered:
            n, answered = n + 1, t + latency
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="launches per tool and latency")
    ap.add_argument("--latency", default="0.02,0.1", help="seconds per call, comma-separated")
    ap.add_argument("--baseline", default="cc8c626", help="git ref or directory ('' for none)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from fakebeaker import FakeBeaker, State, scenarios

    gantry = str(gantry_bin())
    results: dict[str, dict] = {"load": list(os.getloadavg())}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        repo = repo_at(tmp)
        fake = FakeBeaker(scenarios.basic(State()), directory=tmp / "fb").start()
        calls = Arrivals(fake)
        try:
            env = {
                k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_", "GANTRY"))
            }
            env.update(
                fake.env,
                HOME=str(tmp),
                NO_COLOR="1",
                HTTPS_PROXY=fake.github_proxy,
                GANTRY_CHECK_FOR_UPGRADES="0",
                LAUNCHKIT_WORKSPACE=WS,
                COLUMNS="200",
            )
            env.pop("GITHUB_TOKEN", None)
            tools: dict[str, list[str]] = {}
            srcs = {"launchkit": ROOT / "src"}
            if args.baseline:
                srcs[f"launchkit {args.baseline}"] = baseline_src(args.baseline)
            compile_all(GANTRY_VENV / "bin" / "python")  # no tool pays for compiling its sources
            compile_all(sys.executable)
            for src in srcs.values():
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=False, timeout=900)
            for label in srcs:
                tools[label] = [sys.executable, "-m", "launchkit", "run", "--yes", "--budget", BUDGET]
            tools["gantry 3.7.0"] = [gantry, "run", "--yes", "--budget", BUDGET, "--workspace", WS]

            def launch(label: str, i: int) -> tuple[float, int, int]:
                cmd = [*tools[label]]
                run_env = dict(env)
                if label in srcs:
                    run_env["PYTHONPATH"] = str(srcs[label])
                else:
                    cmd += ["--name", f"g{i}-{time.monotonic_ns()}"]
                calls.clear()
                t0 = time.perf_counter()
                p = subprocess.run(
                    [*cmd, "--", "python", "train.py"],
                    cwd=repo,
                    env=run_env,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                wall = time.perf_counter() - t0
                if p.returncode != 0:
                    raise SystemExit(f"{label} failed ({p.returncode}):\n{p.stderr[-2000:]}")
                return wall, len(calls.times), rounds(calls.times, latency)

            latency = 0.0
            for label in tools:  # warm: runtime datasets made, bytecode written, caches filled
                launch(label, 0)
            for latency in (float(x) for x in args.latency.split(",")):
                fake.faults.latency(latency)
                got: dict[str, list[tuple[float, int, int]]] = {label: [] for label in tools}
                for i in range(args.n):
                    for label in tools:
                        got[label].append(launch(label, i + 1))
                row: dict[str, dict] = {}
                for label, runs in got.items():
                    row[label] = {
                        "wall_s": round(statistics.median(r[0] for r in runs), 3),
                        "min_s": round(min(r[0] for r in runs), 3),
                        "calls": runs[-1][1],
                        "in_series": runs[-1][2],
                    }
                g = row["gantry 3.7.0"]["wall_s"]
                for label in srcs:
                    row[label]["x_gantry"] = round(row[label]["wall_s"] / g, 3)
                results[f"{int(latency * 1000)} ms per call"] = row
                print(f"{int(latency * 1000)} ms per call (load {os.getloadavg()[0]:.1f}):")
                for label, r in row.items():
                    extra = f"  {r['x_gantry']}x gantry" if "x_gantry" in r else ""
                    print(
                        f"  {label:<24} {r['wall_s']:.3f}s (min {r['min_s']:.3f})  "
                        f"{r['calls']} calls, {r['in_series']} in series{extra}"
                    )
        finally:
            fake.stop()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
