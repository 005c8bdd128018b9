"""`launchkit --help` stays light: no beaker-py, grpc, GitPython, yaml or pydantic (see bench/ for timings)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

HEAVY = ("beaker", "grpc", "git", "yaml", "pydantic", "rich", "google")


def imported_modules(*args: str, cwd=None) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "launchkit", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", proc.stderr, re.MULTILINE)
    }


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["--version"]])
def test_help_imports_nothing_heavy(args, repo):
    (repo.path / "pyproject.toml").write_text('[tool.launchkit]\nworkspace = "ai2/x"\n')
    mods = imported_modules(*args, cwd=repo.path)
    # Stock Typer (>= 0.2x) coerces every non-bool option value with a pydantic TypeAdapter, and the
    # root group's options (--verbose, --beaker-timeout) are processed before `run --help` is seen.
    allowed = {"pydantic"} if args[0] == "run" else set()
    heavy = sorted(m for m in mods if m.split(".")[0] in set(HEAVY) - allowed)
    assert not heavy, heavy


@pytest.mark.slow
def test_dry_run_does_not_load_the_beaker_client(repo):
    """The dry run needs beaker-py's spec types and GitPython only: no gRPC client, requests or PyYAML."""
    mods = imported_modules("run", "--dry-run", "--", "python", "train.py", cwd=repo.path)
    assert "beaker.beaker_pb2" in mods  # beaker.types itself loads via importlib (not listed)
    assert "git.repo" in mods  # the repository is read with GitPython
    loaded = sorted(
        m for m in mods if m.split(".")[0] in ("grpc", "requests", "yaml") or m == "beaker._client"
    )
    assert not loaded, loaded


def test_version():
    proc = subprocess.run(
        [sys.executable, "-m", "launchkit", "--version"], capture_output=True, text=True, timeout=60
    )
    from launchkit import __version__

    assert proc.returncode == 0 and proc.stdout.strip() == f"launchkit {__version__}"
