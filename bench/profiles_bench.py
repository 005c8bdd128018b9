"""Cost of cluster profiles and multi-node wiring: spec side, CLI, and the entrypoint's setup step.

Usage: uv run python bench/profiles_bench.py [--repeat N]
(Byte-compile first for CLI numbers: python -m compileall -q src .venv/lib/python3*/site-packages)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def timed(fn, repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples), min(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    n = ap.parse_args().repeat

    from launchkit.core.gitstate import GitState
    from launchkit.core.multinode import task_additions
    from launchkit.core.parse import build_request
    from launchkit.core.spec import build_spec
    from mn_helpers import run_node

    git = GitState(remote_url="https://github.com/a/b", commit="0" * 40)
    mixed = build_request(
        {"cluster": ["ai2/jupiter", "ai2/augusta"], "replicas": 2, "gpus": 8, "torchrun": True},
        ["python", "train.py"],
    )
    rows = []
    med, _ = timed(lambda: task_additions(mixed, "0123456789abcdef"), n * 50)
    rows.append(("resolve profiles + multi-node fields (mixed job)", f"{med * 1e6:.0f} us"))
    med, _ = timed(lambda: build_spec(mixed, git), n * 5)
    rows.append(("build_spec, 2x8 torchrun, mixed clusters", f"{med * 1e3:.2f} ms"))

    cli = [sys.executable, "-m", "launchkit", "profiles", "ai2/jupiter", "--replicas", "2"]
    med, best = timed(
        lambda: subprocess.run(cli, capture_output=True, check=True, timeout=60), max(3, n // 4)
    )
    rows.append(
        ("`launchkit profiles ai2/jupiter --replicas 2` wall", f"{med * 1e3:.0f} ms (best {best * 1e3:.0f})")
    )

    env = dict(task_additions(mixed, "x").env)
    node = {
        **env,
        "BEAKER_REPLICA_COUNT": "2",
        "BEAKER_ASSIGNED_GPU_COUNT": "8",
        "BEAKER_LEADER_REPLICA_HOSTNAME": "127.0.0.1",
        "BEAKER_NODE_HOSTNAME": "jupiter-1",
        "LAUNCHKIT_LAUNCHER": "",
    }
    med_setup, _ = timed(lambda: run_node(["true"], node), n)
    med_none, _ = timed(lambda: run_node(["true"], {}), n)
    rows.append(("entrypoint parts + IB setup on a jupiter node", f"{med_setup * 1e3:.1f} ms"))
    rows.append(("entrypoint parts, no profile", f"{med_none * 1e3:.1f} ms"))

    width = max(len(r[0]) for r in rows)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, median of {n}+ runs")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
