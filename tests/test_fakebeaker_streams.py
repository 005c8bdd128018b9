"""StreamJobLogs semantics and stream faults, through beaker-py's own `job.logs` (and the raw stub)."""

from __future__ import annotations

import datetime as dt
import threading

import grpc
import pytest
from beaker import BeakerCancelationCode, BeakerExperimentSpec, BeakerWorkloadStatus
from beaker import beaker_pb2 as pb2
from beaker._service_client import coerce_rpc_error
from beaker.exceptions import BeakerStreamConnectionClosedError

from fakebeaker.state import NS

pytestmark = pytest.mark.timeout(120)

BASE = 1_700_000_000 * NS  # timestamps at whole microseconds, so datetimes round-trip exactly


def new_job(fake, name="logs"):
    exp = fake.state.add_experiment("ai2/launchkit", name, author="alice")
    return exp, exp.tasks[0].latest_job


def messages(logs) -> list[str]:
    return [log.message.decode() for log in logs]


def as_datetime(ns: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ns // 1000 / 1e6, tz=dt.UTC)


def test_since_is_inclusive_and_tail_counts_from_the_end(fake_beaker):
    _exp, job = new_job(fake_beaker)
    stamps = [BASE + i * 1000 for i in range(10)]
    fake_beaker.state.start_job(job)
    fake_beaker.state.append_logs(job, [f"l{i}" for i in range(10)], timestamps=stamps)
    fake_beaker.state.finish_job(job)
    beaker = fake_beaker.client()
    pjob = beaker.job.get(job.id)
    assert messages(beaker.job.logs(pjob)) == [f"l{i}" for i in range(10)]
    assert messages(beaker.job.logs(pjob, since=as_datetime(stamps[4]))) == [f"l{i}" for i in range(4, 10)]
    assert messages(beaker.job.logs(pjob, tail_lines=3)) == ["l7", "l8", "l9"]
    assert messages(beaker.job.logs(pjob, since=as_datetime(stamps[8]), tail_lines=5)) == ["l8", "l9"]
    # exact nanoseconds through the raw stub: since == a line's timestamp includes it, +1 ns excludes it
    meta = [("authorization", "bearer token-alice")]
    raw = beaker.service.StreamJobLogs(
        pb2.StreamJobLogsRequest(job_id=job.id, since={"seconds": stamps[5] // NS, "nanos": stamps[5] % NS}),
        metadata=meta,
    )
    got = list(raw)
    assert next(m.message for m in got) == b"l5"
    assert got[0].timestamp.seconds * NS + got[0].timestamp.nanos == stamps[5]
    raw = beaker.service.StreamJobLogs(
        pb2.StreamJobLogsRequest(
            job_id=job.id, since={"seconds": stamps[5] // NS, "nanos": stamps[5] % NS + 1}
        ),
        metadata=meta,
    )
    assert next(m.message for m in raw) == b"l6"


def test_follow_streams_new_lines_until_the_job_finishes(fake_beaker):
    _exp, job = new_job(fake_beaker)
    s = fake_beaker.state
    s.start_job(job)
    s.append_logs(job, ["before"])
    beaker = fake_beaker.client()
    stream = iter(beaker.job.logs(beaker.job.get(job.id), follow=True))
    got = [next(stream).message.decode()]
    for i in range(5):  # each line is written only after the stream delivered the one before
        s.append_logs(job, [f"live {i}"])
        got.append(next(stream).message.decode())
    s.finish_job(job, exit_code=7)
    got += messages(stream)
    assert got == ["before"] + [f"live {i}" for i in range(5)]
    assert beaker.job.get(job.id).status.exit_code == 7
    assert fake_beaker.calls["StreamJobLogs"] == 1


def test_follow_stream_that_ends_early_is_resumed_without_loss_or_duplicates(fake_beaker):
    _exp, job = new_job(fake_beaker)
    s = fake_beaker.state
    s.start_job(job)
    s.append_logs(job, [f"a{i}" for i in range(10)])
    fake_beaker.faults.end_streams(after_lines=4, count=2)  # server closes cleanly while the job runs
    beaker = fake_beaker.client()
    seen: list[str] = []

    def finish_later():
        s.wait_for(lambda: len(seen) >= 10)
        s.append_logs(job, ["b0", "b1"])
        s.finish_job(job)

    threading.Thread(target=finish_later, daemon=True).start()
    for log in beaker.job.logs(beaker.job.get(job.id), follow=True):
        seen.append(log.message.decode())
    assert seen == [f"a{i}" for i in range(10)] + ["b0", "b1"]
    assert fake_beaker.calls["StreamJobLogs"] == 3  # 4 lines, 4 lines, then the rest
    assert fake_beaker.calls["GetJob"] >= 3  # beaker-py checks the job after each clean end


def test_cut_streams_surface_as_rst_stream_and_beaker_py_resumes(fake_beaker):
    _exp, job = new_job(fake_beaker)
    s = fake_beaker.state
    s.start_job(job)
    s.append_synthetic_logs(job, 1000, fmt="n{i}")
    s.finish_job(job)
    beaker = fake_beaker.client()
    fake_beaker.faults.cut_streams(after_lines=150, count=1)
    with pytest.raises(grpc.RpcError) as info:
        list(
            beaker.service.StreamJobLogs(
                pb2.StreamJobLogsRequest(job_id=job.id), metadata=[("authorization", "bearer token-alice")]
            )
        )
    assert info.value.code() == grpc.StatusCode.INTERNAL and "RST_STREAM" in info.value.details()
    assert isinstance(coerce_rpc_error(info.value), BeakerStreamConnectionClosedError)

    fake_beaker.reset_calls()
    fake_beaker.faults.cut_streams(after_lines=150, count=None)  # every stream
    got = messages(beaker.job.logs(beaker.job.get(job.id)))
    assert got == [f"n{i}" for i in range(1000)]
    assert fake_beaker.calls["StreamJobLogs"] == 7  # 6 cut streams + the one that reaches the end


def test_preemption_creates_the_next_job(fake_beaker):
    exp, job = new_job(fake_beaker)
    s = fake_beaker.state
    s.start_job(job)
    s.append_logs(job, ["first run"])
    nxt = s.preempt_job(job)
    beaker = fake_beaker.client()
    old = beaker.job.get(job.id)
    assert old.status.HasField("finalized")
    assert old.status.canceled_code == BeakerCancelationCode.system_preemption
    wl = beaker.workload.get(exp.id)
    latest = beaker.workload.get_latest_job(wl)
    assert latest.id == nxt.id and latest.id != job.id
    assert wl.status == BeakerWorkloadStatus.queued
    events = [e.status for e in beaker.job.list_summarized_events(old)]
    assert "canceled" in events
    s.start_job(nxt)
    s.append_logs(nxt, ["second run"])
    s.finish_job(nxt)
    assert messages(beaker.job.logs(latest, follow=True)) == ["second run"]
    assert beaker.workload.get(exp.id).status == BeakerWorkloadStatus.succeeded


@pytest.mark.slow
def test_large_synthetic_log_is_lazy_and_tail_is_cheap(fake_beaker):
    _exp, job = new_job(fake_beaker)
    s = fake_beaker.state
    s.start_job(job)
    s.append_synthetic_logs(job, 200_000, fmt="line {i:06d}")
    s.append_logs(job, ["the end"])
    s.finish_job(job)
    assert job.logs.count == 200_001
    beaker = fake_beaker.client()
    assert messages(beaker.job.logs(beaker.job.get(job.id), tail_lines=2)) == ["line 199999", "the end"]
    ts_mid, _ = job.logs.line(193_456)
    got = list(
        beaker.service.StreamJobLogs(
            pb2.StreamJobLogsRequest(
                job_id=job.id, since={"seconds": ts_mid // NS, "nanos": ts_mid % NS}, tail_lines=0
            ),
            metadata=[("authorization", "bearer token-alice")],
        )
    )
    assert got[0].message == b"line 193456" and len(got) == 200_001 - 193_456


def test_summarized_events_in_order(fake_beaker):
    _exp, job = new_job(fake_beaker)
    s = fake_beaker.state
    s.add_event(job, "waiting", "Waiting for GPUs")
    s.add_event(job, "waiting", "Waiting for GPUs")
    s.start_job(job)
    beaker = fake_beaker.client()
    from beaker import BeakerSortOrder

    events = list(
        beaker.job.list_summarized_events(beaker.job.get(job.id), sort_order=BeakerSortOrder.ascending)
    )
    assert [e.status for e in events] == ["queued", "waiting", "scheduled", "pulling", "started"]
    waiting = events[1]
    assert waiting.occurrences == 2 and waiting.latest_message == "Waiting for GPUs"


def test_synthetic_spec_through_beaker_py_creates_replicas(fake_beaker):
    beaker = fake_beaker.client()
    spec = BeakerExperimentSpec.new(docker_image="python:3.11", command=["true"], replicas=3)
    wl = beaker.experiment.create(spec=spec, name="multi")
    assert [t.name for t in wl.experiment.tasks] == ["main"] * 3
    ranks = [
        beaker.workload.get_latest_job(wl, task=t).system_details.replica_group_details.rank
        for t in wl.experiment.tasks
    ]
    assert ranks == [0, 1, 2]


@pytest.mark.slow
def test_idle_follow_stream_ended_by_time_is_resumed(fake_beaker):
    _exp, job = new_job(fake_beaker)
    s = fake_beaker.state
    s.start_job(job)
    s.append_logs(job, ["start"])
    fake_beaker.faults.end_streams(after_seconds=0.2, count=None)
    beaker = fake_beaker.client()
    seen: list[str] = []

    def later():  # once the idle stream was ended and resumed, a line; once resumed again, the end
        s.wait_for(lambda: fake_beaker.calls["StreamJobLogs"] >= 2, 60)
        s.append_logs(job, ["after idle"])
        s.wait_for(lambda: fake_beaker.calls["StreamJobLogs"] >= 3, 60)
        s.finish_job(job)

    threading.Thread(target=later, daemon=True).start()
    seen = messages(beaker.job.logs(beaker.job.get(job.id), follow=True))
    assert seen == ["start", "after idle"]
    assert fake_beaker.calls["StreamJobLogs"] >= 3


def test_state_api_accepts_beaker_py_objects(fake_beaker):
    beaker = fake_beaker.client()
    wl = beaker.experiment.create(
        spec=BeakerExperimentSpec.new(docker_image="python:3.11", command=["true"]), name="objs"
    )
    fake_beaker.state.start_job(wl)
    job = beaker.workload.get_latest_job(wl)
    fake_beaker.state.append_logs(job, ["via pb2"])
    fake_beaker.state.finish_job(job, 2)
    assert beaker.job.get(job.id).status.exit_code == 2
