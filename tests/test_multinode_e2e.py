"""Real multi-replica runs with the local backend: `launchkit run --local --replicas 2 --follow`, every
replica a real process with the BEAKER_* variables Beaker would set, all on 127.0.0.1, using a session
venv with CPU PyTorch, Ray and Accelerate (`--no-python`: the job uses the `python` on PATH)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import run_cli
from mn_helpers import mn_bin, this_machine_torch_plan  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

pytestmark = pytest.mark.slow
_, WHY = this_machine_torch_plan()
if WHY:
    pytest.skip(f"multi-node e2e: {WHY}", allow_module_level=True)  # one line, not one per test
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

ACCELERATE = """
import os, sys
import torch
from accelerate import Accelerator
from accelerate.utils import gather
acc = Accelerator()
total = gather(torch.tensor([acc.process_index + 1])).sum().item()
kind = acc.distributed_type.value
print(f"process {acc.process_index} of {acc.num_processes} ({kind}): total {total}", flush=True)
acc.wait_for_everyone()
acc.end_training()
sys.stdout.flush()
os._exit(0)  # gloo can abort in interpreter teardown once a peer is gone (see examples/torchrun-ddp)
"""

RAY = [
    "--env",
    "LK_RAY_POLL=1",
    "--env",
    "LK_RAY_WAIT=120",
    "--env",
    "LK_RAY_START_ARGS=--num-cpus=1",
    "--env",
    "LK_RAY_HEAD_ARGS=--include-dashboard=false",
]


def run_replicas(repo, mn_bin, launcher, script, extra=(), count=2, timeout=300):  # noqa: F811
    text = script.read_text() if isinstance(script, Path) else script
    repo.commit({"job.py": text})
    r = run_cli(
        "run",
        "--local",
        "--no-python",
        "--replicas",
        str(count),
        f"--{launcher}",
        *extra,
        "--follow",
        "--",
        "python",
        "job.py",
        cwd=repo.path,
        timeout=timeout,
        env={"PATH": os.pathsep.join([str(mn_bin), os.environ["PATH"]])},
    )
    return r.code, r.stdout + r.stderr


def replica(out: str, rank: int) -> str:
    return "\n".join(line[len(f"[{rank}] ") :] for line in out.splitlines() if line.startswith(f"[{rank}] "))


@pytest.mark.parametrize("method", ["exec", "bash"])
def test_torchrun_two_replicas_all_reduce(repo, mn_bin, method):  # noqa: F811
    code, out = run_replicas(
        repo, mn_bin, "torchrun", EXAMPLES / "torchrun-ddp" / "train.py", extra=["--exec-method", method]
    )
    assert code == 0, out
    for rank in (0, 1):
        assert f"rank {rank} of 2: summed rank 1, loss" in replica(out, rank), out


def test_accelerate_two_replicas(repo, mn_bin):  # noqa: F811
    code, out = run_replicas(repo, mn_bin, "accelerate", ACCELERATE)
    assert code == 0, out
    for rank in (0, 1):
        assert f"process {rank} of 2 (MULTI_CPU): total 3" in replica(out, rank), out


@pytest.mark.parametrize("method", ["exec", "bash"])
def test_ray_head_driver_and_worker(repo, mn_bin, method):  # noqa: F811
    extra = [*RAY, "--exec-method", method]
    code, out = run_replicas(repo, mn_bin, "ray", EXAMPLES / "ray" / "driver.py", extra=extra)
    assert code == 0, out
    assert "driver sees 2 nodes; sum of squares 2470" in replica(out, 0), out
    worker = replica(out, 1)
    assert "driver sees" not in worker  # the driver runs on rank 0 only
    assert re.search(r"ray head 127\.0\.0\.1:\d+ is gone; worker exiting 0", worker), out


def test_ray_driver_failure_is_the_job_exit_code(repo, mn_bin):  # noqa: F811
    code, out = run_replicas(repo, mn_bin, "ray", "import sys; sys.exit(7)\n", extra=RAY)
    assert code == 7, out
    assert "driver exited with 7" in replica(out, 0), out
