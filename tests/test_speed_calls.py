"""Round trips of `list`, submit and upload against the fake Beaker (issue 25): call counts, not timings."""

from __future__ import annotations

import time

import pytest

from launchkit.core.specview import SpecView
from test_beaker_backend import spec

WS = "ai2/launchkit"


@pytest.fixture
def backend(fake_beaker, tmp_path, monkeypatch):
    from launchkit.backends.beaker import BeakerBackend

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    b = BeakerBackend(timeout=30, workspace=WS)
    yield b
    b.close()


def _runs(fake, n: int, finished: int) -> None:
    now = time.time_ns()
    for i in range(n):
        exp = fake.state.add_experiment(
            WS,
            f"lk{i}",
            author="alice",
            description="run [launchkit]",
            created=now - (n - i) * 60_000_000_000,
        )
        if i < finished:
            fake.state.finish_job(exp.tasks[0].latest_job, i % 3)


def test_list_costs_four_calls(fake_beaker, backend):
    """org, workspace, one page of workloads, one of finished jobs (bench/bench_calls.py: the rounds)."""
    _runs(fake_beaker, 20, 10)
    from launchkit.backends.beaker import BeakerBackend

    backend.list_runs(limit=20)  # the author's name cached on disk, as in a user's second list
    fake_beaker.reset_calls()
    fresh = BeakerBackend(timeout=30, workspace=WS)  # a new process: nothing resolved yet
    rows = fresh.list_runs(limit=20)
    fresh.close()
    assert len(rows) == 20 and {r.exit_code for r in rows[10:]} == {0, 1, 2}
    # + queued rows (issue 33): the org's unscheduled jobs, then the newest 5 queued rows' events
    assert fake_beaker.total_calls <= 4 + 1 + 5, dict(fake_beaker.calls)


def test_list_without_queued_rows_costs_four_calls(fake_beaker, backend):
    _runs(fake_beaker, 20, 20)
    backend.list_runs(limit=20)
    fake_beaker.reset_calls()
    assert len(backend.list_runs(limit=20)) == 20
    assert fake_beaker.total_calls <= 4, dict(fake_beaker.calls)


def test_list_without_finished_statuses_reads_no_jobs(fake_beaker, backend):
    _runs(fake_beaker, 5, 2)
    fake_beaker.reset_calls()
    assert len(backend.list_runs(statuses=["running", "queued"])) == 3
    # no finished jobs read: only the queued rows' (one listing of unscheduled jobs, issue 33)
    assert fake_beaker.calls["ListJobs"] == 1, dict(fake_beaker.calls)


def test_default_names_are_free_up_front():
    from launchkit.launch import default_name

    names = {default_name("0123456789abcdef") for _ in range(50)}
    assert len(names) > 40 and all(n.startswith("launchkit-01234567-") and len(n) == 23 for n in names)


def test_submit_asks_nothing_after_the_create(fake_beaker, backend):
    """No GetUser after CreateExperiment (the author's name is cached), and one create per launch."""
    from launchkit.backends import Submission
    from launchkit.backends.beaker import BeakerBackend

    backend.submit(Submission(name="first", spec=SpecView(spec()), workspace=WS))
    fake_beaker.reset_calls()
    fresh = BeakerBackend(timeout=30, workspace=WS)  # a new process: only the on-disk caches
    run = fresh.submit(Submission(name="second", spec=SpecView(spec()), workspace=WS))
    fresh.close()
    assert run.author == "alice" and run.name == "second"
    assert fake_beaker.calls["CreateExperiment"] == 1 and fake_beaker.calls["GetUser"] == 0, dict(
        fake_beaker.calls
    )


def _upload_41(fake_beaker, tmp_path) -> dict[str, int]:
    from launchkit.application import Application
    from launchkit.backends.beaker.client import Connection
    from launchkit.backends.beaker.upload import Uploader, scan

    d = tmp_path / "d"
    (d / "pkg").mkdir(parents=True)
    (d / "pkg" / "__init__.py").write_bytes(b"")
    for i in range(40):
        (d / f"{i}.txt").write_text(str(i))
    tree = scan(str(d))
    conn = Connection(60)
    ws = conn.beaker.workspace.get(WS)
    fake_beaker.reset_calls()
    ds_id = Uploader(conn, Application(verbosity=-1), ws).ensure(tree)
    conn.close()
    assert len(fake_beaker.state.datasets[ds_id].files) == 41
    return dict(fake_beaker.calls)


def test_first_upload_takes_one_call_a_file(fake_beaker, tmp_path):
    """A fresh dataset: its storage asked once, one PUT a file (the empty one too), no listing before."""
    calls = _upload_41(fake_beaker, tmp_path)
    assert calls["UploadDatasetFile"] == 41 and calls["GetDatasetStorage"] == 1, dict(calls)
    assert calls["ListDatasetFiles"] == 1, dict(calls)  # the check before the commit only


def test_upload_without_beaker_pys_helper_uses_the_public_upload(fake_beaker, tmp_path, monkeypatch):
    """Another beaker-py whose private per-file helper differs: the public `dataset.upload` (2 calls)."""
    from beaker._dataset import DatasetClient

    original = DatasetClient._upload_file

    def changed(self, dataset, **kw):  # still what `dataset.upload` calls, with another signature
        return original(self, dataset, **kw)

    monkeypatch.setattr(DatasetClient, "_upload_file", changed)
    calls = _upload_41(fake_beaker, tmp_path)
    assert calls["UploadDatasetFile"] == 41 and calls["GetDatasetStorage"] == 41, dict(calls)
