"""Where the multi-node e2e tests get PyTorch: the local CPU wheel, PyPI where that is safe, or a
skip with one reason, never GBs of CUDA wheels unasked (issue 11, item 6)."""

from __future__ import annotations

import sys

from mn_helpers import torch_plan

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def test_local_cpu_wheel_is_used_when_present(tmp_path):
    wheel = tmp_path / f"torch-2.13.0+cpu-{TAG}-{TAG}-manylinux_2_28_x86_64.whl"
    wheel.touch()
    (tmp_path / "torch-2.13.0+cpu-cp39-cp39-manylinux_2_28_x86_64.whl").touch()  # another Python's
    assert torch_plan(tmp_path, "Linux-x86_64", online=lambda: False) == ([str(wheel)], None)


def test_no_wheel_on_linux_x86_64_skips_rather_than_pull_cuda(tmp_path):
    args, why = torch_plan(tmp_path / "missing", "Linux-x86_64", online=lambda: True)
    assert args == [] and "CUDA" in why and "LAUNCHKIT_TEST_TORCH_CUDA_OK=1" in why
    args, why = torch_plan(tmp_path, "Linux-x86_64", online=lambda: True, cuda_ok=True)
    assert args == ["torch==2.13.0"] and why is None


def test_pypi_torch_where_it_is_a_cpu_build_and_a_skip_when_offline(tmp_path):
    assert torch_plan(tmp_path, "Darwin-arm64", online=lambda: True) == (["torch==2.13.0"], None)
    args, why = torch_plan(tmp_path, "Darwin-arm64", online=lambda: False)
    assert args == [] and "unreachable" in why
