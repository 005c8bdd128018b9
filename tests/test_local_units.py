"""Local backend units: the log record format (raw bytes in, same bytes out), GPU shares, doorbells."""

from __future__ import annotations

import io
import os
import time

import pytest

from launchkit.backends.local import logs
from timescale import scaled


def test_pump_and_parse_round_trip_raw_bytes(tmp_path):
    data = b"plain\n\xff\xfe binary \x1b[0m\r progress\r\n" + b"y" * 5000 + b"\n\ntrailing without newline"
    path = tmp_path / "r.log"
    logs.pump(io.BytesIO(data), str(path))
    records = logs.read_records(str(path))
    assert b"".join(line for _, line in records) == data
    assert len(records) == 5
    stamps = [ts for ts, _ in records]
    assert stamps == sorted(stamps) and stamps[0] > 1_600_000_000 * 10**9


def test_tail_reader_keeps_partial_records_for_later(tmp_path):
    path = tmp_path / "r.log"
    path.write_bytes(b"1 one\n2 tw")
    tail = logs.Tail(str(path))
    assert list(tail.read()) == [(1, b"one\n")]
    with open(path, "ab") as f:
        f.write(b"o\n3~end\n")
    assert list(tail.read()) == [(2, b"two\n"), (3, b"end")]
    assert list(tail.read()) == []


def test_gpu_share_gives_each_replica_its_own_gpus():
    from launchkit.backends.local.supervisor import gpu_share

    assert gpu_share(0, 4, 2, 1) == (0, None)
    assert gpu_share(8, 0, 1, 0) == (0, "")  # --gpus 0: none visible
    assert gpu_share(8, 4, 2, 0) == (4, "0,1,2,3")
    assert gpu_share(8, 4, 2, 1) == (4, "4,5,6,7")
    assert gpu_share(2, 4, 2, 1) == (2, None)  # not enough for disjoint shares: all share all
    assert gpu_share(2, None, 1, 0) == (2, None)


def rung(door, timeout: float = 30) -> bool:
    """Whether the bell rings within `timeout` seconds (then every ring is taken)."""
    import select

    ready = bool(select.select([door.sock], [], [], scaled(timeout))[0])
    door.wait(0)
    return ready


@pytest.mark.parametrize("depth", [1, 120], ids=["short-path", "too-long-for-af-unix"])
def test_ringer_rings_every_bell_and_removes_stale_ones(tmp_path, depth):
    from launchkit.backends.local.bell import BELLS, Doorbell, Ringer

    rdir = tmp_path / ("d" * depth)
    rdir.mkdir()
    ringer = Ringer(str(rdir))
    try:
        with Doorbell(rdir) as a, Doorbell(rdir) as b:
            assert a.sock is not None and b.sock is not None
            assert os.path.islink(a.entry) == (depth > 1)  # bound in a short temp dir, linked here
            sockets = [os.path.realpath(a.entry), os.path.realpath(b.entry)]
            ringer.ring()
            assert rung(a) and rung(b)
            assert not rung(a, 0.2)  # every ring taken: the next wait sleeps
            b.sock.close()  # a follower killed before it could remove its bell
            for _ in range(50):
                ringer.ring()
            assert rung(a)
            deadline = time.monotonic() + scaled(30)  # the notifier thread removes the stale bell as it rings
            while len(os.listdir(rdir / BELLS)) > 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert os.listdir(rdir / BELLS) == [os.path.basename(a.entry)]
        assert os.listdir(rdir / BELLS) == []  # a follower removes its own bell
        for path in sockets:  # with their temp dirs, if any
            assert not os.path.exists(path) and (depth == 1 or not os.path.exists(os.path.dirname(path)))
    finally:
        ringer.close()
    assert not ringer.thread.is_alive()


def test_doorbell_without_a_bell_dir_still_waits(tmp_path):
    from launchkit.backends.local.bell import BELLS, Doorbell

    (tmp_path / BELLS).write_text("not a directory")
    with Doorbell(tmp_path) as door:
        assert door.sock is None
        start = time.monotonic()
        door.wait(0.05)
        assert time.monotonic() - start >= 0.05
    with Doorbell(tmp_path / "removed-run") as door:  # never re-creates a removed run dir
        assert door.sock is None and not (tmp_path / "removed-run").exists()


def test_a_bash_found_good_is_not_run_again_until_it_changes(tmp_path, monkeypatch):
    from launchkit.backends.local.backend import check_bash
    from launchkit.errors import PreconditionError

    folder, runs = tmp_path / "bin", tmp_path / "runs.txt"
    folder.mkdir()
    bash = folder / "bash"
    bash.write_text(f'#!/bin/sh\necho run >> {runs}\necho "5 2"\n')
    bash.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    memo = tmp_path / "bash-checked"
    check_bash(memo)
    check_bash(memo)
    assert runs.read_text().count("run") == 1 and str(bash) in memo.read_text()
    bash.write_text(f'#!/bin/sh\n# old\necho run >> {runs}\necho "3 2"\n')  # replaced by an old one
    with pytest.raises(PreconditionError, match=r"is 3\.2"):
        check_bash(memo)
    with pytest.raises(PreconditionError, match=r"is 3\.2"):  # a verdict against it is never kept
        check_bash(memo)
    assert runs.read_text().count("run") == 3


def test_a_ringer_started_late_rings_what_was_rung_before(tmp_path):
    from launchkit.backends.local.bell import Doorbell, Ringer

    ringer = Ringer(str(tmp_path), start=False)
    with Doorbell(tmp_path) as door:
        ringer.ring()
        assert not rung(door, 0.1)  # held until the notifier starts
        ringer.start()
        assert rung(door)
    never = Ringer(str(tmp_path), start=False)
    with Doorbell(tmp_path) as door:
        never.close()  # the last ring goes even from a notifier never started
        assert rung(door) and not never.thread.is_alive()
    ringer.close()


def test_a_runs_db_from_before_attempts_gets_its_jobs_column(tmp_path):
    """An index written by a launchkit without per-job records is used, not rebuilt: it gains the
    column, keeps its rows, and indexes a run's jobs from then on."""
    import sqlite3

    from launchkit.backends.local import record
    from launchkit.backends.local.store import Store, row_jobs

    (tmp_path / "runs").mkdir()
    old = sqlite3.connect(tmp_path / "runs.db")
    old.executescript(
        "CREATE TABLE runs (id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL, exit_code INTEGER,"
        " created REAL NOT NULL, started REAL, finished REAL, replicas INTEGER NOT NULL, supervisor_pid INTEGER,"
        " message TEXT);"
        "INSERT INTO runs VALUES ('local-old', 'old', 'succeeded', 0, 1.0, 1.0, 2.0, 1, NULL, NULL);"
    )
    old.commit()
    old.close()
    store = Store(tmp_path)
    assert row_jobs(store.run("local-old")) == {}  # nothing kept for it: read as before
    rec = record.new("local-new", "new", 1)
    rec.update(jobs=[{"replica": 0, "attempt": 1, "status": "failed", "exit_code": 3}], allowed_retries=2)
    store.upsert(rec)
    assert row_jobs(store.run("local-new")) == {"jobs": rec["jobs"], "allowed_retries": 2}
    assert [r["id"] for r in store.runs(limit=None)] == ["local-new", "local-old"]


def test_a_record_from_before_attempts_reads_as_first_attempts():
    """A run recorded with only `ranks` (each replica's one job) reads as the model's first attempts."""
    from launchkit.backends.local import outcome

    rec = {
        "id": "local-x",
        "replicas": 2,
        "status": "failed",
        "ranks": {
            "1": {"pgid": 11, "status": "failed", "exit_code": 7, "started": 1.0, "finished": 2.0},
            "0": {"pgid": 10, "status": "canceled", "exit_code": 143, "started": 1.0, "finished": 3.0},
        },
    }
    result = outcome.of(rec)
    assert (result.state.value, result.exit_code, result.attempts) == ("failed", 7, 1)
    assert result.text() == "replica 1 of 2 failed with exit code 7"  # whom it was stopped for: not kept


@pytest.mark.parametrize(
    ("fields", "cause"),
    [
        ({"stop": "sibling_failed", "stopped_for": 1}, "sibling_failed"),  # what the supervisor writes
        ({"stopped_for": 1}, "sibling_failed"),  # a record from before `stop` was kept for each job
        ({"stop": "canceled"}, "canceled"),
        ({}, "canceled"),  # before `stop`: canceled by `stop`
        ({"stop": "preempted"}, "preempted"),  # --retry-on: local/retry.py
    ],
)
def test_a_canceled_jobs_stop_is_the_one_cause_vocabulary(fields, cause):
    """A local record keeps why each canceled job was canceled as a `Cause` value; older records,
    without it, read the same."""
    from launchkit.backends.local import outcome
    from launchkit.core.status import Cause

    rec = {
        "id": "local-x",
        "replicas": 2,
        "jobs": [
            {"replica": 0, "attempt": 1, "status": "canceled", "exit_code": 143, **fields},
            {"replica": 1, "attempt": 1, "status": "failed", "exit_code": 7},
        ],
    }
    job = next(j for j in outcome.view(rec).jobs if j.replica == 0)
    assert job.stop is Cause(cause)
