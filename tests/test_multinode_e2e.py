"""Real multi-replica runs: every replica is a real bash process running the entrypoint's runtime parts
with the BEAKER_* variables Beaker would set, all on 127.0.0.1, with CPU PyTorch, Ray and Accelerate.

(Once the local backend lands, these become `launchkit run --local --replicas 2 ...`.)
"""

from __future__ import annotations

import re
import shutil
import socket
from pathlib import Path

import pytest
from mn_helpers import collect, mn_bin, start_replicas  # noqa: F401 - mn_bin is a fixture

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

ACCELERATE = """
import torch
from accelerate import Accelerator
from accelerate.utils import gather
acc = Accelerator()
total = gather(torch.tensor([acc.process_index + 1])).sum().item()
kind = acc.distributed_type.value
print(f"process {acc.process_index} of {acc.num_processes} ({kind}): total {total}", flush=True)
acc.end_training()
"""

RAY = {
    "LAUNCHKIT_RAY_POLL": "1",
    "LAUNCHKIT_RAY_WAIT": "120",
    "LAUNCHKIT_RAY_START_ARGS": "--num-cpus=1",
    "LAUNCHKIT_RAY_HEAD_ARGS": "--include-dashboard=false",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_replicas(tmp_path, mn_bin, launcher, script, count=2, extra_env=None, timeout=240):  # noqa: F811
    if isinstance(script, Path):
        shutil.copy(script, tmp_path / "job.py")
    else:
        (tmp_path / "job.py").write_text(script)
    env = {
        "LAUNCHKIT_LAUNCHER": launcher,
        "LAUNCHKIT_RDZV_PORT": str(free_port()),
        "LAUNCHKIT_RDZV_ID": "e2e",
        "BEAKER_ASSIGNED_GPU_COUNT": "0",
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    procs = start_replicas(["python", "job.py"], count, env, cwd=tmp_path, path_prepend=[mn_bin])
    return collect(procs, timeout)


def test_torchrun_two_replicas_all_reduce(tmp_path, mn_bin):  # noqa: F811
    results = run_replicas(tmp_path, mn_bin, "torchrun", EXAMPLES / "torchrun-ddp" / "train.py")
    for rank, (code, out) in enumerate(results):
        assert code == 0, out
        assert f"rank {rank} of 2: summed rank 1, loss" in out, out


def test_accelerate_two_replicas(tmp_path, mn_bin):  # noqa: F811
    results = run_replicas(tmp_path, mn_bin, "accelerate", ACCELERATE)
    for rank, (code, out) in enumerate(results):
        assert code == 0, out
        assert f"process {rank} of 2 (MULTI_CPU): total 3" in out, out


def test_ray_head_driver_and_worker(tmp_path, mn_bin):  # noqa: F811
    results = run_replicas(tmp_path, mn_bin, "ray", EXAMPLES / "ray" / "driver.py", extra_env=RAY)
    (head_code, head_out), (worker_code, worker_out) = results
    assert head_code == 0, head_out
    assert "driver sees 2 nodes; sum of squares 2470" in head_out, head_out
    assert worker_code == 0, worker_out
    assert "driver sees" not in worker_out  # the driver runs on rank 0 only
    assert re.search(r"ray head 127\.0\.0\.1:\d+ is gone; worker exiting 0", worker_out), worker_out


def test_ray_driver_failure_is_reported_by_rank_0(tmp_path, mn_bin):  # noqa: F811
    results = run_replicas(tmp_path, mn_bin, "ray", "import sys; sys.exit(7)\n", extra_env=RAY)
    assert results[0][0] == 7, results[0][1]
    assert results[1][0] == 0, results[1][1]
