"""`launchkit --help` and `launchkit CMD --help` stay light: no beaker-py, grpc, GitPython, yaml or pydantic;
the common launch reads git without GitPython (see bench/ for timings)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

HEAVY = ("beaker", "grpc", "git", "yaml", "pydantic", "rich", "google")


def imported_modules(*args: str, cwd=None, env=None) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "launchkit", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", proc.stderr, re.MULTILINE)
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [["--help"], ["run", "--help"], ["run", "-h"], ["list", "--help"], ["session", "--help"], ["--version"]],
)
def test_help_imports_nothing_heavy(args, repo):
    """Stock Typer coerces every processed option through a pydantic TypeAdapter (even an absent one):
    `CMD --help` is answered by the command itself, without processing the root group's options."""
    (repo.path / "pyproject.toml").write_text('[tool.launchkit]\nworkspace = "ai2/x"\n')
    mods = imported_modules(*args, cwd=repo.path)
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY)
    assert not heavy, heavy


@pytest.mark.slow
def test_dry_run_does_not_load_the_beaker_client(repo):
    """The dry run needs beaker-py's spec types only: no gRPC client, requests, PyYAML or GitPython (a
    branch at its upstream is read with plain git calls)."""
    mods = imported_modules("run", "--dry-run", "--", "python", "train.py", cwd=repo.path)
    assert "beaker.beaker_pb2" in mods  # beaker.types itself loads via importlib (not listed)
    loaded = sorted(
        m
        for m in mods
        if m.split(".")[0] in ("grpc", "requests", "yaml", "git", "gitdb") or m == "beaker._client"
    )
    assert not loaded, loaded


@pytest.mark.slow
def test_local_run_loads_no_gitpython_or_beaker_client(repo, tmp_path):
    """`run --local --no-python --follow -- echo hi`: no GitPython, gRPC, requests or PyYAML."""
    env_home = {"LAUNCHKIT_LOCAL_HOME": str(tmp_path / "state")}
    mods = imported_modules(
        "run", "--local", "--no-python", "--follow", "--", "echo", "hi", cwd=repo.path, env=env_home
    )
    loaded = sorted(
        m
        for m in mods
        if m.split(".")[0] in ("grpc", "requests", "yaml", "git", "gitdb") or m == "beaker._client"
    )
    assert not loaded, loaded


def test_version():
    proc = subprocess.run(
        [sys.executable, "-m", "launchkit", "--version"], capture_output=True, text=True, timeout=60
    )
    from launchkit import __version__

    assert proc.returncode == 0 and proc.stdout.strip() == f"launchkit {__version__}"
