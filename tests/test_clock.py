"""The waiting limits never compare a clock reading with zero (issue 18).

`time.monotonic()` counts from boot on Linux: on a freshly started machine it reads a few seconds, so
a sentinel of 0.0 for "never warned" meant no soft-inactivity warning during a machine's first hour.
The watchdog takes its clock as a parameter; these tests drive it with a clock that starts at 0 and
with one that starts late, and one test runs a real `launchkit` in a time namespace whose monotonic
clock reads about 60 s.
"""

from __future__ import annotations

import datetime as dt
import io
import shutil
import subprocess
import sys

import pytest

from launchkit.application import Application
from launchkit.backends import RunInfo, RunStatus
from launchkit.cli.following import Limits, _Sink, _Watchdog


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Backend:
    """Just what the watchdog asks of a backend."""

    def __init__(self, status: RunStatus = RunStatus.running) -> None:
        self.status = status
        self.stopped = 0

    def get(self, run_id: str) -> RunInfo:
        return RunInfo(
            id=run_id, name="x", backend="local", status=self.status, created=dt.datetime.now(dt.UTC)
        )

    def stop(self, run: RunInfo, *, reason: str | None = None) -> None:
        self.stopped += 1


def _dog(clock: Clock, limits: Limits, backend: Backend | None = None) -> tuple[_Watchdog, io.StringIO]:
    err = io.StringIO()
    app = Application(stderr=err, color=False)
    sink = _Sink(io.BytesIO(), True, clock)
    run = Backend().get("local-1")
    return _Watchdog(app, backend or Backend(), run, sink, limits), err  # type: ignore[arg-type]


@pytest.mark.parametrize("origin", [0.0, 5.0, 59.0, 10_000.0])
def test_soft_inactivity_warns_whatever_the_clock_origin(origin):
    clock = Clock(origin)
    dog, err = _dog(clock, Limits(inactive_soft=2))
    assert not dog.check() and not err.getvalue()  # the job started; nothing quiet yet
    clock.now += 2.5
    assert not dog.check()
    assert err.getvalue().count("no log output for 2.5s") == 1
    clock.now += 10  # warned again only after max(soft, 1 h)
    dog.check()
    assert err.getvalue().count("no log output") == 1
    clock.now += 3600
    dog.check()
    assert err.getvalue().count("no log output") == 2


@pytest.mark.parametrize("origin", [0.0, 0.5, 10_000.0])
def test_the_first_status_check_happens_at_once_whatever_the_clock_origin(origin):
    clock = Clock(origin)
    backend = Backend(RunStatus.queued)
    dog, _ = _dog(clock, Limits(start=30), backend)
    dog.check()
    assert dog.checked == origin  # looked at the run on the first tick, not STATUS_EVERY later
    backend.status = RunStatus.running
    clock.now += 1
    dog.check()
    assert dog.started_at == origin + 1
    clock.now += 100
    assert not dog.check() and backend.stopped == 0  # started: --start-timeout no longer applies


def test_timeouts_count_from_the_start_of_following():
    clock = Clock(0.0)
    backend = Backend(RunStatus.queued)
    dog, err = _dog(clock, Limits(timeout=10, start=5), backend)
    clock.now = 4.9
    assert not dog.check()
    clock.now = 5.0
    assert dog.check() and backend.stopped == 1
    assert "did not start within --start-timeout 5s" in err.getvalue()


def test_inactive_timeout_stops_a_quiet_run():
    clock = Clock(0.0)
    backend = Backend()
    dog, err = _dog(clock, Limits(inactive=3), backend)
    dog.check()
    dog.sink.write(b"line\n")
    clock.now = 2.9
    dog.sink.write(b"line\n")
    clock.now = 5.8
    assert not dog.check()
    clock.now = 5.9
    assert dog.check() and backend.stopped == 1 and "--inactive-timeout 3s" in err.getvalue()


def _time_namespace_works() -> bool:
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(
        ["unshare", "--fork", "--time", "--monotonic=0", "true"], capture_output=True, timeout=30
    )
    return r.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _time_namespace_works(), reason="needs unshare --time (root, Linux 5.6+)")
def test_soft_inactivity_warning_on_a_freshly_booted_clock(repo):
    """A real `launchkit run --local --follow` whose monotonic clock reads ~60 s, as on a machine that
    has just started: the soft-inactivity warning still appears."""
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    offset = int(60 - uptime)
    probe = [sys.executable, "-c", "import time; print(time.monotonic())"]
    ns = ["unshare", "--fork", "--time", f"--monotonic={offset}", f"--boottime={offset}"]
    seen = float(subprocess.run([*ns, *probe], capture_output=True, text=True, timeout=30).stdout)
    assert 55 < seen < 120, seen  # the namespace works as intended
    r = subprocess.run(
        [*ns, sys.executable, "-m", "launchkit", "run", "--local", "--no-python", "--follow"]
        + ["--inactive-soft-timeout", "2", "--", "bash", "-c", "echo a; sleep 5; echo b"],
        cwd=repo.path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    warning = "[launchkit] warning: no output for 2s (--inactive-soft-timeout)"  # the job's runtime's
    assert warning in r.stdout and "a\n" in r.stdout and "b\n" in r.stdout, r.stdout
