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

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

NO_PY = ("--local", "--no-python")
# a line, then another a second later, then the end half a second after that
TWO_LINES = ["bash", "-c", "sleep 1; echo one; sleep 1; echo two; sleep 0.5"]


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
    """follow's output, with when each write arrived (ns since epoch, like the log's timestamps)."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, bytes]] = []

    def write(self, data: bytes) -> int:
        self.writes.append((time.time_ns(), data))
        return len(data)

    def flush(self) -> None:
        pass

    @property
    def data(self) -> bytes:
        return b"".join(d for _, d in self.writes)


def follow_here(run_id: str) -> tuple[int, Arrivals, float]:
    """Follow in this process: (exit code, output, seconds from the run's recorded end to follow's)."""
    from launchkit.backends.local.backend import LocalBackend

    backend = LocalBackend()
    out = Arrivals()
    code = backend.follow(backend.get(run_id), out)  # type: ignore[arg-type]
    returned = time.time()
    return code, out, returned - backend._record(run_id)["finished"]


def logged(state: Path, run_id: str) -> list[tuple[int, bytes]]:
    from launchkit.backends.local import logs

    return logs.read_records(logs.log_file(state / "runs" / run_id, 0))


def bells(state: Path, run_id: str) -> list[str]:
    folder = state / "runs" / run_id / "bells"
    return os.listdir(folder) if folder.is_dir() else []


def test_follow_wakes_on_new_output_not_on_a_timer(repo, env, state, monkeypatch):
    from launchkit.backends.local import backend

    monkeypatch.setattr(backend, "WAKE_FALLBACK", 5.0)  # only a ring can make follow look in time
    run_id = launch(repo, env, TWO_LINES)
    started = time.time_ns()
    code, out, late_end = follow_here(run_id)
    assert code == 0
    records = logged(state, run_id)
    assert out.data == b"".join(line for _, line in records)  # every line, exactly once
    arrived = {line: ts for ts, line in out.writes}
    delays = [(arrived[line] - ts) / 1e9 for ts, line in records if ts > started]
    assert b"one\n" in arrived and b"two\n" in arrived and delays
    assert max(delays) < 1.0, delays  # a ring, not the 5 s fallback
    assert late_end < 1.0
    assert bells(state, run_id) == []  # the follower removed its bell


def test_follow_ends_when_the_bell_dir_is_unusable_or_removed(repo, env, state, monkeypatch):
    # `bells` is a file: no bell; follow polls as before and the supervisor does not mind
    run_id = launch(repo, env, TWO_LINES)
    (state / "runs" / run_id / "bells").write_text("in the way")
    code, out, late_end = follow_here(run_id)
    assert code == 0 and b"one\ntwo\n" in out.data and late_end < 1.0
    assert (state / "runs" / run_id / "bells").read_text() == "in the way"

    # the bell dir removed under a registered follower: no ring reaches it, the fallback ends it
    run_id = launch(repo, env, TWO_LINES)
    result: list[tuple[int, Arrivals, float]] = []
    t = threading.Thread(target=lambda: result.append(follow_here(run_id)), daemon=True)
    t.start()
    folder = state / "runs" / run_id / "bells"
    deadline = time.monotonic() + 30
    while not bells(state, run_id):
        assert time.monotonic() < deadline and t.is_alive()
        time.sleep(0.01)
    shutil.rmtree(folder)
    t.join(timeout=60)
    assert not t.is_alive() and result
    code, out, late_end = result[0]
    from launchkit.backends.local.backend import WAKE_FALLBACK

    assert code == 0 and out.data.endswith(b"one\ntwo\n") and late_end < WAKE_FALLBACK + 1.0


def follower(run_id: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "launchkit", "follow", run_id],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_bell(state: Path, run_id: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
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
    code, out, _ = follow_here(run_id)  # rings go on: the supervisor drops the dead bell
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
