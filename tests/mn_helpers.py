"""Helpers for the profile / multi-node tests: run the entrypoint's runtime parts with a faked node,
and a session venv with the CPU PyTorch wheel, Ray and Accelerate for real multi-replica runs."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "src" / "launchkit" / "runtime"
REAL_HOME = os.environ.get("HOME", "")  # before the isolation fixture swaps it

# The entrypoint's library parts plus the two calls the main flow makes (without the clone/Python).
HARNESS_MAIN = """
set -euo pipefail
lk_cluster_setup
lk_exec "$@"
"""


def node_dir() -> str:
    """The folder the harness finds the launchkit_node package in (the runtime's files)."""
    from lk_helpers import entrypoint_path

    return os.path.dirname(entrypoint_path())


def harness_script() -> str:
    parts = [(RUNTIME / p).read_text() for p in ("lib.sh", "nccl.sh", "launchers.sh")]
    return "\n".join(parts) + HARNESS_MAIN


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
    with tempfile.TemporaryDirectory() as tmp:
        return subprocess.run(
            ["bash", "-c", harness_script(), "launchkit-entrypoint", *argv],
            env={**full, "TMPDIR": env.get("TMPDIR", tmp), "LK_NODE_DIR": node_dir()},
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )


# --- the session venv for real runs
TORCH_VERSION = "2.13.0"
OTHERS = ["ray==2.60.0", "accelerate==1.15.0"]
# Read at import, before the env isolation fixture drops LAUNCHKIT_* variables.
FIND_LINKS = Path(os.environ.get("LAUNCHKIT_TEST_TORCH_FIND_LINKS", "/opt/wheels"))
CUDA_OK = os.environ.get("LAUNCHKIT_TEST_TORCH_CUDA_OK") == "1"  # allow PyPI's Linux x86_64 torch (GBs)
VENV_DIR = Path(os.environ.get("LAUNCHKIT_TEST_VENV_DIR", ROOT / ".venv-multinode"))
INDEX_HOST = ("pypi.org", 443)


def local_torch_wheel(folder: Path) -> Path | None:
    """A CPU torch wheel for this Python in `folder` (e.g. this kind of machine's /opt/wheels)."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    found = sorted(folder.glob(f"torch-*-{tag}-{tag}-*.whl")) if folder.is_dir() else []
    return next((w for w in found if "+cpu" in w.name), found[0] if found else None)


def index_reachable(host: tuple[str, int] = INDEX_HOST, timeout: float = 3) -> bool:
    import socket

    try:
        socket.create_connection(host, timeout=timeout).close()
    except OSError:
        return False
    return True


def torch_plan(
    folder: Path, machine: str, online: Callable[[], bool], cuda_ok: bool = False
) -> tuple[list[str], str | None]:
    """(uv pip install arguments for torch, None), or ([], why the multi-node tests must skip).

    The local CPU wheel when there is one; else PyPI's torch where that is a CPU build (macOS,
    Linux on ARM), or anywhere with LAUNCHKIT_TEST_TORCH_CUDA_OK=1: on Linux x86_64 PyPI's torch
    pulls several GB of CUDA wheels, which a test run must never do unasked.
    """
    wheel = local_torch_wheel(folder)
    if wheel is not None:
        return [str(wheel)], None
    if not online():
        return [], f"no local torch wheel in {folder} and {INDEX_HOST[0]} is unreachable"
    if machine == "Linux-x86_64" and not cuda_ok:
        return [], (
            f"no local CPU torch wheel in {folder} (LAUNCHKIT_TEST_TORCH_FIND_LINKS), and PyPI's torch "
            "for Linux x86_64 brings GBs of CUDA wheels: set LAUNCHKIT_TEST_TORCH_CUDA_OK=1 to allow it"
        )
    return [f"torch=={TORCH_VERSION}"], None


def this_machine_torch_plan() -> tuple[list[str], str | None]:
    import platform

    return torch_plan(FIND_LINKS, f"{platform.system()}-{platform.machine()}", index_reachable, CUDA_OK)


@pytest.fixture(scope="session")
def mn_bin() -> Path:
    """bin/ of a venv with CPU torch, ray and accelerate (built once, reused across sessions)."""
    torch, why = this_machine_torch_plan()
    if why:
        pytest.skip(f"multi-node e2e: {why}")
    key = hashlib.sha256(" ".join([sys.version, *torch, *OTHERS]).encode()).hexdigest()[:12]
    venv = VENV_DIR
    marker = venv / f".launchkit-ready-{key}"
    VENV_DIR.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{VENV_DIR}.lock", "w") as lock:  # pytest-xdist workers build it once, one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            _build_venv(venv, torch, marker)
    return venv / "bin"


def _build_venv(venv: Path, torch: list[str], marker: Path) -> None:
    env = {**os.environ, "HOME": REAL_HOME, "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run(
        ["uv", "venv", "-q", "--clear", "--python", py, str(venv)], env=env, check=True, timeout=300
    )
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *torch, *OTHERS],
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
