"""Shared fixtures: isolated environment, real git repositories with local bare remotes, CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

import timescale
from timescale import VARIABLE, scaled

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

pytest_plugins = ["fakebeaker.plugin"]  # the `fake_beaker` fixture (tests/fakebeaker/README.md)


# The launching shell's settings that change what launchkit, uv and the fake Beaker do (a cluster's
# UV_CACHE_DIR turns the env store on, UV_OFFLINE changes the preflight, XDG_* moves config and caches,
# BEAKER_* points at a real Beaker): dropped for the whole session, so session fixtures and every
# subprocess run without them; a test sets what it needs. (LAUNCHKIT_* is dropped per test below: test
# helpers read LAUNCHKIT_TEST_* knobs when they are imported.)
SHELL_SETTINGS = ("UV_", "XDG_", "BEAKER_")


def pytest_configure(config):
    for var in [v for v in os.environ if v.startswith(SHELL_SETTINGS)]:
        del os.environ[var]
    if timescale.SCALE != 1:
        _scale_subprocess_waits()


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    """pytest-timeout's limit (pyproject's `timeout`, --timeout, PYTEST_TIMEOUT) times the one factor
    (tests/timescale.py)."""
    config = session.config
    if timescale.SCALE != 1 and getattr(config, "_env_timeout", None):
        config._env_timeout = scaled(config._env_timeout)


def pytest_collection_modifyitems(config, items):
    """A test's own `timeout` marker times the one factor too (the scaled marker goes first: closest)."""
    if timescale.SCALE == 1:
        return
    for item in items:
        marker = item.get_closest_marker("timeout")
        if marker is not None and marker.args and isinstance(marker.args[0], int | float):
            item.add_marker(pytest.mark.timeout(scaled(marker.args[0]), *marker.args[1:]), append=False)


def _called_from_a_test() -> bool:
    """Whether a file of the suite made this wait, itself or through `subprocess.run`/`call` (not
    launchkit code that a test runs in process: its own deadlines are what some tests check; nor the
    subprocess module's inner waits, whose time is already scaled)."""
    frame = sys._getframe(2)
    if frame.f_code.co_filename == subprocess.__file__ and frame.f_code.co_name not in ("run", "call"):
        return False
    while frame is not None and frame.f_code.co_filename == subprocess.__file__:
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(str(TESTS) + os.sep)


def _scale_subprocess_waits() -> None:
    """Every `timeout=` a test gives a subprocess wait (`subprocess.run`, `.wait`, `.communicate`) times
    the one factor: the suite's hundreds of such guards, each an idle machine's bound."""
    # (the plain methods, should these be wrapped already)
    wait = getattr(subprocess.Popen.wait, "__wrapped__", subprocess.Popen.wait)
    communicate = getattr(subprocess.Popen.communicate, "__wrapped__", subprocess.Popen.communicate)

    def scaled_wait(self, timeout=None):
        if timeout is not None and _called_from_a_test():
            timeout = scaled(timeout)
        return wait(self, timeout)

    def scaled_communicate(self, input=None, timeout=None):
        if timeout is not None and _called_from_a_test():
            timeout = scaled(timeout)
        return communicate(self, input, timeout)

    scaled_wait.__wrapped__ = wait  # type: ignore[attr-defined]
    scaled_communicate.__wrapped__ = communicate  # type: ignore[attr-defined]
    subprocess.Popen.wait = scaled_wait  # type: ignore[method-assign]
    subprocess.Popen.communicate = scaled_communicate  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path_factory, monkeypatch):
    """Keep tests away from the developer's real config, state, caches and Beaker credentials."""
    home = tmp_path_factory.mktemp("home")
    for var in list(os.environ):
        if var.startswith((*SHELL_SETTINGS, "LAUNCHKIT_")) and var != VARIABLE:
            monkeypatch.delenv(var)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local/state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Test")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "test@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Test")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "test@example.com")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=60
    ).stdout.strip()


@dataclass
class Repo:
    path: Path
    remote: Path  # bare repository used as `origin`

    def commit(self, files: dict[str, str], message: str = "change", push: bool = True) -> str:
        for name, text in files.items():
            p = self.path / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        if push:
            git(self.path, "push", "-q", "origin", "HEAD")
        return git(self.path, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path) -> Repo:
    """A real repository with one pushed commit and a local bare `origin`."""
    remote = tmp_path / "remote.git"
    work = tmp_path / "work"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True, timeout=60)
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    git(work, "remote", "add", "origin", remote.as_uri())
    r = Repo(work, remote)
    r.commit({"train.py": "import sys\nprint('args', sys.argv[1:])\n"}, "init")
    git(work, "branch", "-q", "--set-upstream-to=origin/main")
    return r


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
) -> Result:
    """Run `python -m launchkit ARGS` in a real subprocess (with a timeout)."""
    proc = subprocess.run(
        [sys.executable, "-m", "launchkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        input=input if input is not None else "",
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def marker():
    """A unique word for a test's processes; whatever still carries it afterwards is killed."""
    from lk_helpers import processes_with

    word = f"lkmarker-{uuid.uuid4().hex}"
    yield word
    for pid in processes_with(word):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's addopts): one worker more than the usable cores. The end-to-end tests spend
    much of their time waiting on processes (uv, bash, the fake Beaker), so a core idles with one worker
    each: the 894 tests of the issue-18 baseline take 6m11s with 3 workers on 2 cores."""
    return len(os.sched_getaffinity(0)) + 1


def pytest_addoption(parser):
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite tests/golden/*.yaml from the current output",
    )
