"""Helpers for the profile / multi-node tests: run the entrypoint's runtime parts with a faked node,
and a session venv with the CPU PyTorch wheel, Ray and Accelerate for real multi-replica runs."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "src" / "launchkit" / "runtime"
REAL_HOME = os.environ.get("HOME", "")  # before the isolation fixture swaps it

# The entrypoint's library parts plus the two calls the main flow makes (without the clone/Python).
HARNESS_MAIN = """
set -euo pipefail
lk_cluster_setup
lk_wrap_command "$@"
exec "${LK_CMD[@]}"
"""


def harness_script() -> str:
    return "\n".join((RUNTIME / p).read_text() for p in ("lib.sh", "nccl.sh", "launchers.sh")) + HARNESS_MAIN


def run_node(
    argv: list[str],
    env: dict[str, str],
    *,
    timeout: float = 60,
    cwd: Path | None = None,
    path_prepend: list[Path] = (),
) -> subprocess.CompletedProcess:
    """Run the runtime parts as one node: `bash -c <parts> launchkit-entrypoint ARGV` with `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BEAKER_", "LAUNCHKIT_", "NCCL_"))}
    base.pop("LD_LIBRARY_PATH", None)
    full = {**base, **env}
    if path_prepend:
        full["PATH"] = os.pathsep.join([*map(str, path_prepend), full.get("PATH", "")])
    return subprocess.run(
        ["bash", "-c", harness_script(), "launchkit-entrypoint", *argv],
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


# --- the session venv for real runs
TORCH = "torch==2.13.0+cpu"
MN_REQUIREMENTS = [TORCH, "ray==2.60.0", "accelerate==1.15.0"]
# Read at import, before the env isolation fixture drops LAUNCHKIT_* variables.
FIND_LINKS = os.environ.get("LAUNCHKIT_TEST_TORCH_FIND_LINKS", "/opt/wheels")
VENV_DIR = Path(os.environ.get("LAUNCHKIT_TEST_VENV_DIR", ROOT / ".venv-multinode"))


@pytest.fixture(scope="session")
def mn_bin() -> Path:
    """bin/ of a venv with CPU torch, ray and accelerate (built once, reused across sessions)."""
    key = hashlib.sha256(" ".join([sys.version, *MN_REQUIREMENTS]).encode()).hexdigest()[:12]
    venv = VENV_DIR
    marker = venv / f".launchkit-ready-{key}"
    if not marker.exists():
        env = {**os.environ, "HOME": REAL_HOME, "VIRTUAL_ENV": str(venv)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        py = f"{sys.version_info.major}.{sys.version_info.minor}"
        subprocess.run(
            ["uv", "venv", "-q", "--clear", "--python", py, str(venv)], env=env, check=True, timeout=300
        )
        subprocess.run(
            [
                "uv",
                "pip",
                "install",
                "-q",
                "--python",
                str(venv / "bin" / "python"),
                "--find-links",
                FIND_LINKS,
                *MN_REQUIREMENTS,
            ],
            env=env,
            check=True,
            timeout=1200,
        )
        # PYTHONDONTWRITEBYTECODE is set here: without .pyc files every replica recompiles torch.
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "compileall",
                "-q",
                "-j",
                "0",
                str(next((venv / "lib").glob("python3*/site-packages"))),
            ],
            env=env,
            capture_output=True,
            timeout=1200,
        )
        marker.touch()
    return venv / "bin"
