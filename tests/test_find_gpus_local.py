"""`launchkit find-gpus --local`: what nvidia-smi reports, or one line saying there is nothing."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

NVIDIA_SMI = """#!/bin/sh
cat <<'CSV'
0, NVIDIA H100 80GB HBM3, 81559, 1024, 37
1, NVIDIA H100 80GB HBM3, 81559, 0, 0
CSV
"""


def _path_with(tmp_path: Path, nvidia_smi: str | None) -> dict[str, str]:
    """PATH holding python (and nvidia-smi when given) but none of this machine's GPU tools."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    if nvidia_smi is not None:
        tool = bin_dir / "nvidia-smi"
        tool.write_text(nvidia_smi)
        tool.chmod(0o755)
    return {"PATH": os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])}


def test_find_gpus_without_nvidia_smi(tmp_path):
    env = _path_with(tmp_path, None)
    assert not any((Path(d) / "nvidia-smi").exists() for d in env["PATH"].split(os.pathsep))
    r = run_cli("find-gpus", "--local", env=env)
    assert (r.code, r.stdout, r.stderr) == (0, "", "no GPUs here (nvidia-smi finds none)\n")
    r = run_cli("find-gpus", "--local", "--json", env=env)
    assert (r.code, json.loads(r.stdout)) == (0, [])


def test_find_gpus_lists_what_nvidia_smi_reports(tmp_path):
    env = _path_with(tmp_path, NVIDIA_SMI)
    r = run_cli("find-gpus", "--local", env=env)
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines() == [
        "INDEX  NAME                   MEMORY_TOTAL_MIB  MEMORY_USED_MIB  UTILIZATION_PCT",
        "0      NVIDIA H100 80GB HBM3  81559             1024             37",
        "1      NVIDIA H100 80GB HBM3  81559             0                0",
    ]
    rows = json.loads(run_cli("find-gpus", "--local", "--json", env=env).stdout)
    assert [(g["index"], g["memory_used_mib"]) for g in rows] == [(0, 1024), (1, 0)]
