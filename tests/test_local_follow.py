"""`follow` of a local run wakes on new output (the supervisor rings its doorbell, bell.py), and
still ends right when rings are missing: a killed supervisor or follower, a bell dir that cannot be
used. Real supervisors and jobs; the follower runs in-process where its timing is measured."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from conftest import run_cli
from lk_helpers import FAST_ENV, launched_id, processes_with
from timescale import scaled

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

NO_PY = ("--local", "--no-python")


def two_lines(go: Path) -> list[str]:
    """A job: a line, then another once the test creates `go`, then the end."""
    return ["bash", "-c", f"echo one; until [ -e {go} ]; do sleep 0.01; done; echo two"]


@pytest.fixture
def state(tmp_path) -> Path:
    return tmp_path / "lkstate"


@pytest.fixture
def env(state, monkeypatch) -> dict[str, str]:
    monkeypatch.setenv("LAUNCHKIT_LOCAL_HOME", str(state))  # for the in-process follower
    return {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(state)}


def launch(repo, env, cmd: list[str]) -> str:
    r = run_cli("run", *NO_PY, "--", *cmd, cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    return launched_id(r.stderr)


class Arrivals:
    """follow's output."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> int:
        self.data += data
        return len(data)

    def flush(self) -> None:
        pass


def follow_here(run_id: str, out: Arrivals | None = None) -> tuple[int, Arrivals]:
    """Follow in this process: (exit code, output)."""
    from launchkit.backends.local.backend import LocalBackend

    backend = LocalBackend()
    out = out or Arrivals()
    return backend.follow(backend.get(run_id), out), out  # type: ignore[arg-type]


def logged(state: Path, run_id: str) -> list[tuple[int, bytes]]:
    from launchkit.backends.local import logs

    return logs.read_records(logs.log_file(state / "runs" / run_id, 0))


def bells(state: Path, run_id: str) -> list[str]:
    folder = state / "runs" / run_id / "bells"
    return os.listdir(folder) if folder.is_dir() else []


class Acking(Arrivals):
    """Arrivals that acknowledge each line as a file in `folder`: a job waits for them."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def write(self, data: bytes) -> int:
        for line in data.splitlines():
            if line.isalpha():  # the job's words, not launchkit's notes
                (self.folder / line.decode()).touch()
        return super().write(data)


@pytest.mark.timeout(360)  # a missing ring leaves follow asleep (no fallback): it fails here
def test_follow_wakes_on_new_output_not_on_a_timer(repo, env, state, monkeypatch, tmp_path):
    from launchkit.backends.local import backend

    monkeypatch.setattr(backend, "WAKE_FALLBACK", 3600.0)  # only a ring can wake follow
    acks = tmp_path / "acks"
    acks.mkdir()
    # each line waits until follow delivered the one before: every line, and the end, need a ring
    wait = "until [ -e {}/{} ]; do sleep 0.01; done"
    job = f"echo one; {wait.format(acks, 'one')}; echo two; {wait.format(acks, 'two')}"
    run_id = launch(repo, env, ["bash", "-c", job])
    code, out = follow_here(run_id, Acking(acks))
    assert code == 0
    records = logged(state, run_id)
    assert out.data == b"".join(line for _, line in records)  # every line, exactly once
    assert out.data.endswith(b"one\ntwo\n")
    assert bells(state, run_id) == []  # the follower removed its bell


@pytest.mark.timeout(360)  # a follow that does not end fails here
def test_follow_ends_when_the_bell_dir_is_unusable_or_removed(repo, env, state, tmp_path):
    # `bells` is a file: no bell; follow polls as before and the supervisor does not mind
    run_id = launch(repo, env, two_lines(tmp_path / "go1"))
    (state / "runs" / run_id / "bells").write_text("in the way")
    (tmp_path / "go1").touch()
    code, out = follow_here(run_id)
    assert code == 0 and b"one\ntwo\n" in out.data
    assert (state / "runs" / run_id / "bells").read_text() == "in the way"

    # the bell dir removed under a registered follower: no ring reaches it, the fallback ends it
    run_id = launch(repo, env, two_lines(tmp_path / "go2"))
    result: list[tuple[int, Arrivals]] = []
    t = threading.Thread(target=lambda: result.append(follow_here(run_id)), daemon=True)
    t.start()
    folder = state / "runs" / run_id / "bells"
    deadline = time.monotonic() + scaled(30)
    while not bells(state, run_id):
        assert time.monotonic() < deadline and t.is_alive()
        time.sleep(0.01)
    shutil.rmtree(folder)
    (tmp_path / "go2").touch()
    t.join(timeout=scaled(60))
    assert not t.is_alive() and result
    code, out = result[0]
    assert code == 0 and out.data.endswith(b"one\ntwo\n")


def follower(run_id: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "launchkit", "follow", run_id],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_bell(state: Path, run_id: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + scaled(60)
    while not bells(state, run_id):
        assert time.monotonic() < deadline and proc.poll() is None, "follow never registered a bell"
        time.sleep(0.01)


def test_follow_of_a_run_whose_supervisor_is_killed_ends_as_lost(repo, env, state, marker):
    run_id = launch(repo, env, ["bash", "-c", f"echo up; exec -a {marker} sleep 300"])
    p = follower(run_id, env)
    try:
        wait_for_bell(state, run_id, p)
        rec = json.loads((state / "runs" / run_id / "status.json").read_text())
        os.kill(rec["supervisor_pid"], signal.SIGKILL)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 5 and "is lost" in err, err
    assert "up" in out
    assert bells(state, run_id) == []  # removed on the way out, error or not
    assert run_cli("stop", "--yes", run_id, env=env).code == 0
    assert processes_with(marker) == []


@pytest.fixture
def short_home():
    home = tempfile.mkdtemp(prefix="lk", dir="/tmp")
    yield Path(home)
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize("deep", [False, True], ids=["bell-in-run-dir", "bell-in-temp-dir"])
def test_bells_of_killed_followers_are_cleaned_up(repo, env, short_home, deep, monkeypatch):
    # a run dir too deep for an AF_UNIX path has its bells in temp dirs, linked from it
    state = short_home / ("d" * 90 if deep else "s")
    env = {**env, "LAUNCHKIT_LOCAL_HOME": str(state)}
    monkeypatch.setenv("LAUNCHKIT_LOCAL_HOME", str(state))
    go = short_home / "go"  # the job waits for it: the follower registers its bell however slow it starts
    loop = "for i in $(seq 30); do echo line $i; sleep 0.1; done"
    job = ["bash", "-c", f"echo line 0; until [ -e {go} ]; do sleep 0.05; done; {loop}"]
    run_id = launch(repo, env, job)
    p = follower(run_id, env)
    try:
        wait_for_bell(state, run_id, p)
        entry = state / "runs" / run_id / "bells" / bells(state, run_id)[0]
        sock = os.path.realpath(entry)
        assert entry.is_symlink() == deep
        p.kill()  # SIGKILL: no chance to remove its bell
        p.communicate(timeout=30)
    finally:
        p.kill()
        go.touch()
    code, out = follow_here(run_id)  # rings go on: the supervisor drops the dead bell
    assert code == 0 and b"line 30\n" in out.data
    assert bells(state, run_id) == [] and not os.path.exists(sock)
    if deep:
        assert not os.path.exists(os.path.dirname(sock))

    # a bell left behind after the supervisor ended: list (rebuilding runs.db) and prune cope
    from launchkit.backends.local.bell import Doorbell

    left = Doorbell(state / "runs" / run_id)
    assert left.sock is not None and left.entry is not None
    sock = os.path.realpath(left.entry)
    left.sock.close()
    (state / "runs.db").unlink()
    r = run_cli("list", "--local", "--json", env=env)
    assert r.code == 0 and json.loads(r.stdout)[0]["status"] == "succeeded", r.stderr
    r = run_cli("prune", "--older-than", "0s", "--yes", env=env)
    assert r.code == 0 and "removed 1 runs" in r.stderr, r.stderr
    assert not (state / "runs" / run_id).exists() and not os.path.exists(sock)


def test_run_follow_gets_a_burst_exactly_once_and_ends(repo, env):
    # follow starts before the supervisor rings anything; 20,000 lines come in one burst
    r = run_cli("run", *NO_PY, "--follow", "--", "seq", "20000", cwd=repo.path, env=env, timeout=120)
    assert r.code == 0, r.stderr
    numbers = [line for line in r.stdout.splitlines() if line.isdigit()]
    assert numbers == [str(i) for i in range(1, 20001)]
