"""The Beaker backend against the fake Beaker server (real beaker-py wire protocol)."""

from __future__ import annotations

import io
import json
import os
import re
import threading
import time

import pytest

fakebeaker = pytest.importorskip("fakebeaker.server")
from fakebeaker.state import Options, State
from launchkit.backends import LogQuery, RunStatus, Submission
from launchkit.core.specview import SpecView
from launchkit.errors import NotFoundError, PreconditionError, UsageError
from timescale import scaled

SECRET_VALUES = ("hf-value-123", "wandb-mine-456", "wandb-shared-789", "my-secret-value")
MINUTE_NS = 60 * 1_000_000_000


def populate(st: State) -> None:
    st.add_user("alice")
    st.add_user("bob")
    st.add_budget("ai2/budget")
    st.add_workspace(
        "ai2/ws",
        budget="ai2/budget",
        author="alice",
        secrets={
            "HF_TOKEN": SECRET_VALUES[0],
            "alice_WANDB_API_KEY": SECRET_VALUES[1],
            "WANDB_API_KEY": SECRET_VALUES[2],
            "MY_SECRET": SECRET_VALUES[3],
        },
    )
    st.add_workspace("ai2/nobudget", author="alice")
    st.add_image("alice/img", workspace="ai2/ws")
    st.add_cluster(
        "ai2/jupiter",
        aliases=["jup"],
        tags=["interconnect:ib"],
        nodes=[{"gpu_type": "NVIDIA_H100", "gpus": 8, "assigned": 3}] * 2,
    )
    st.add_cluster(
        "ai2/mixed",
        nodes=[
            {"gpu_type": "NVIDIA_H100", "gpus": 8},
            {"gpu_type": "NVIDIA_A100_80GB", "gpus": 8, "assigned": 2},
        ],
    )
    st.add_cluster("ai2/sessions", max_task_timeout=0, nodes=[{"gpu_type": "NVIDIA_L4", "gpus": 4}])
    st.add_cluster("ai2/full", nodes=[{"gpu_type": "NVIDIA_A100_40GB", "gpus": 8, "assigned": 8}])
    st.add_group("ai2/ws", "sweep")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    st = State(options=Options.parse(json.loads(os.environ.get("FAKEBEAKER_OPTIONS") or "{}")))
    populate(st)
    with fakebeaker.FakeBeaker(
        st, scenario=None, directory=tmp_path / "fake", default_user="alice", default_workspace="ai2/ws"
    ) as f:
        for k, v in f.env.items():
            monkeypatch.setenv(k, v)
        yield f


@pytest.fixture
def backend(fake):
    from launchkit.backends.beaker import BeakerBackend

    b = BeakerBackend(timeout=20)
    yield b
    b.close()


def spec(**task_extra) -> dict:
    task = {
        "name": "main",
        "image": {"docker": "python:3.11"},
        "context": {},
        "command": ["python", "-c", "print(1)"],
        "result": {"path": "/results"},
        "envVars": [{"name": "LAUNCHKIT_RUN_ID", "value": "run123"}],
    }
    task.update(task_extra)
    return {"version": "v2", "description": "my job", "tasks": [task]}


def only_experiment(fake, name=None):
    exps = [e for e in fake.state.experiments.values() if name is None or e.name.startswith(name)]
    assert len(exps) == 1, [e.name for e in exps]
    return exps[0]


# ---------------------------------------------------------------------------------------------- submit
def test_submit_resolves_everything(fake, backend):
    s = spec(image={"beaker": "alice/img"}, constraints={"cluster": ["jup", "ai2/*e*"]})
    s["tasks"][0]["envVars"].append({"name": "X", "secret": "MY_SECRET"})
    preset = "HF_TOKEN,WANDB_API_KEY=WANDB_API_KEY,OPENAI_API_KEY"  # `NAME`: NAME=NAME
    s["tasks"][0]["envVars"].append({"name": "LAUNCHKIT_PRESET_SECRETS", "value": preset})
    s["groups"] = ["sweep"]
    run = backend.submit(Submission(name="exp1", spec=SpecView(s)))
    assert run.url and run.id in run.url
    exp = only_experiment(fake, "exp1")
    task = exp.spec["tasks"][0]
    assert task["constraints"]["cluster"] == ["ai2/jupiter", "ai2/mixed"]  # sessions-only cluster left out
    assert re.fullmatch(r"[0-9A-Z]{26}", task["image"]["beaker"])  # the image's ID
    env = {e["name"]: e for e in task["envVars"]}
    assert env["HF_TOKEN"]["secret"] == "HF_TOKEN"
    assert env["WANDB_API_KEY"]["secret"] == "alice_WANDB_API_KEY"  # <user>_NAME preferred
    assert "OPENAI_API_KEY" not in env  # a preset secret the workspace lacks is left out
    assert "LAUNCHKIT_PRESET_SECRETS" not in env  # answered here: not for the job
    assert "[launchkit]" in exp.description
    assert exp.spec["groups"] == [next(iter(fake.state.groups))]
    assert not any(v in repr(exp.spec) for v in SECRET_VALUES)


def test_no_secret_is_added_unless_a_preset_asks_for_it(fake, backend):
    """The workspace has HF_TOKEN and WANDB_API_KEY: a job without a preset gets neither (issue 19)."""
    backend.submit(Submission(name="plain", spec=SpecView(spec())))
    task = only_experiment(fake, "plain").spec["tasks"][0]
    assert not any(e.get("secret") for e in task["envVars"])


def test_submit_no_auto_secrets_and_gpu_type_filter(fake, backend):
    s = spec(constraints={"cluster": ["ai2/*"]})
    s["tasks"][0]["envVars"].append({"name": "LAUNCHKIT_CONSTRAINT_GPU_TYPES", "value": "a100"})
    s["tasks"][0]["envVars"].append({"name": "LAUNCHKIT_PRESET_SECRETS", "value": "HF_TOKEN=HF_TOKEN"})
    backend.submit(Submission(name="exp2", spec=SpecView(s), auto_secrets=False))
    task = only_experiment(fake, "exp2").spec["tasks"][0]
    # A100 80GB sits on the second node of the mixed cluster; the full cluster still takes jobs.
    assert task["constraints"]["cluster"] == ["ai2/full", "ai2/mixed"]
    assert not any(e.get("secret") for e in task["envVars"])


@pytest.mark.parametrize(
    "mutate, error, words",
    [
        (
            lambda s: s["tasks"][0]["envVars"].append({"name": "X", "secret": "NOPE"}),
            PreconditionError,
            ["NOPE"],
        ),
        (
            lambda s: s["tasks"][0].update(constraints={"cluster": ["ai2/nothing*"]}),
            NotFoundError,
            ["ai2/nothing*"],
        ),
        (
            lambda s: s["tasks"][0].update(constraints={"cluster": ["ai2/sessions"]}),
            UsageError,
            ["sessions", "no batch jobs"],
        ),
        (lambda s: s["tasks"][0].update(image={"beaker": "alice/missing"}), NotFoundError, ["alice/missing"]),
        (lambda s: s.update(budget="ai2/nobudget"), NotFoundError, ["ai2/nobudget"]),
        (lambda s: s.update(groups=["bob/nogroup"]), NotFoundError, ["bob/nogroup"]),  # not alice's
        (
            lambda s: s["tasks"][0]["envVars"].append(
                {"name": "LAUNCHKIT_CONSTRAINT_TAGS", "value": "storage:weka"}
            ),
            PreconditionError,
            ["storage:weka"],
        ),
    ],
)
def test_submit_says_what_is_wrong(fake, backend, mutate, error, words):
    s = spec()
    mutate(s)
    with pytest.raises(error) as e:
        backend.submit(Submission(name="bad", spec=SpecView(s)))
    for w in words:
        assert w in e.value.one_line()
    assert not fake.state.experiments


def test_a_missing_group_is_created_at_submit_and_never_by_prepare(fake, backend):
    """gantry 3.7.0 creates a missing --group (after a prompt); launchkit creates it without one."""
    s = spec()
    s["groups"] = ["new-sweep", "alice/other", "sweep"]
    prepared = backend.prepare(Submission(name="g", spec=SpecView(s)))
    assert prepared.spec.groups[:2] == ["new-sweep", "alice/other"]  # a dry run creates nothing
    assert {g.name for g in fake.state.groups.values()} == {"sweep"}
    backend.submit(Submission(name="g", spec=SpecView(s)))
    by_name = {g.name: g.id for g in fake.state.groups.values()}
    assert set(by_name) == {"sweep", "new-sweep", "other"}
    assert only_experiment(fake, "g").spec["groups"] == [
        by_name["new-sweep"],
        by_name["other"],
        by_name["sweep"],
    ]
    backend.submit(Submission(name="g2", spec=SpecView(s)))  # the second time it exists: not created again
    assert len(fake.state.groups) == 3


def test_submit_workspace_checks(fake, backend):
    with pytest.raises(NotFoundError, match="ai2/nope"):
        backend.submit(Submission(name="x", spec=SpecView(spec()), workspace="ai2/nope"))
    with pytest.raises(UsageError, match="no budget"):
        backend.submit(Submission(name="x", spec=SpecView(spec()), workspace="ai2/nobudget"))


@pytest.mark.parametrize("mode", ["503", "500", "drop"])
def test_ambiguous_create_failure_creates_exactly_one(fake, backend, mode):
    fake.faults.fail_create_after_record(1, mode)
    run = backend.submit(Submission(name="idem", spec=SpecView(spec())))
    exp = only_experiment(fake)
    assert run.id == exp.id and exp.name == "idem"


@pytest.mark.slow
def test_unavailable_on_create_then_success(fake, backend):
    fake.faults.unavailable(2, "CreateExperiment")
    backend.submit(Submission(name="retry", spec=SpecView(spec())))
    assert only_experiment(fake).name == "retry"


def test_ambiguous_failure_never_adopts_an_older_experiment_of_the_same_run(fake, backend):
    old = fake.state.add_experiment(
        "ai2/ws", "same", author="alice", spec=spec(), created=time.time_ns() - 3600 * 10**9
    )  # same run id, an hour ago
    fake.faults.unavailable(1, "CreateExperiment")  # ambiguous: then the lookup finds the old one
    run = backend.submit(Submission(name="same", spec=SpecView(spec())))
    assert run.id != old.id and len(fake.state.experiments) == 2


def test_taken_name_gets_a_suffix(fake, backend):
    fake.state.add_experiment("ai2/ws", "taken", author="alice")
    run = backend.submit(Submission(name="taken", spec=SpecView(spec())))
    assert run.name.startswith("taken-") and len(fake.state.experiments) == 2


# ---------------------------------------------------------------------------------------------- logs
def _exp_with_job(fake, name="job", author="alice", replicas=1, description="x [launchkit]"):
    exp = fake.state.add_experiment("ai2/ws", name, author=author, replicas=replicas, description=description)
    return exp, [t.latest_job for t in exp.tasks]


@pytest.mark.slow
def test_logs_cut_every_few_hundred_lines_arrive_exactly_once(fake, backend):
    exp, (job,) = _exp_with_job(fake)
    fake.state.append_synthetic_logs(job, 100_000, fmt="line {i:06d}")
    fake.state.finish_job(job, 0)
    fake.faults.cut_streams(after_lines=300, count=None)
    out = io.BytesIO()
    backend.write_logs(backend.get(exp.id), LogQuery(), out)
    lines = out.getvalue().split(b"\n")
    assert lines[-1] == b""
    assert lines[:-1] == [b"line %06d" % i for i in range(100_000)]


def test_logs_resume_inside_a_run_of_equal_timestamps(fake, backend):
    exp, (job,) = _exp_with_job(fake)
    t0 = time.time_ns()
    stamps = [t0 + (i // 7) for i in range(350)]  # groups of 7 lines share a timestamp
    fake.state.append_logs(job, [f"l{i}" for i in range(350)], timestamps=stamps)
    fake.state.finish_job(job, 0)
    fake.faults.cut_streams(after_lines=10, count=None)  # every cut lands inside a group
    out = io.BytesIO()
    backend.write_logs(backend.get(exp.id), LogQuery(), out)
    assert out.getvalue() == b"".join(b"l%d\n" % i for i in range(350))
    # beaker-py's own resume (since = last + 1 ns) loses the rest of each group: why we resume ourselves.
    fake.faults.cut_streams(after_lines=10, count=None)
    with fake.client() as client:
        got = [log.message for log in client.job.logs(client.job.get(job.id))]
    assert len(got) < 350


def test_logs_raw_bytes_tail_head_since(fake, backend):
    exp, (job,) = _exp_with_job(fake)
    t0 = time.time_ns()
    raw = [b"\xff\xfe not utf-8", b"x" * 300, b"[bold]markup[/bold]"] + [b"n%d" % i for i in range(10)]
    fake.state.append_logs(job, raw, timestamps=[t0 + i * MINUTE_NS for i in range(len(raw))])
    fake.state.finish_job(job, 0)
    run = backend.get(exp.id)

    def logs(**kw) -> bytes:
        out = io.BytesIO()
        backend.write_logs(run, LogQuery(**kw), out)
        return out.getvalue()

    assert logs() == b"".join(m + b"\n" for m in raw)  # no wrapping, no decoding
    assert logs(tail=2) == b"n8\nn9\n"
    assert logs(head=2) == raw[0] + b"\n" + raw[1] + b"\n"
    import datetime as dt

    since = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=(t0 + 11 * MINUTE_NS) // 1000)
    assert logs(since=since) == b"n8\nn9\n"
    with pytest.raises(UsageError):
        logs(tail=1, since=since)


def test_logs_replicas_and_tasks(fake, backend):
    exp, jobs = _exp_with_job(fake, replicas=3)
    for rank, job in enumerate(jobs):
        fake.state.append_logs(job, [f"rank{rank}-{i}" for i in range(5)])
        fake.state.finish_job(job, 0)
    run = backend.get(exp.id)
    out = io.BytesIO()
    backend.write_logs(run, LogQuery(replica=2), out)
    assert out.getvalue().splitlines() == [b"rank2-%d" % i for i in range(5)]
    out = io.BytesIO()
    backend.write_logs(run, LogQuery(tail=1), out)
    assert out.getvalue() == b"[0] rank0-4\n[1] rank1-4\n[2] rank2-4\n"
    out = io.BytesIO()
    backend.write_logs(run, LogQuery(replica=0, head=1, timestamps=True), out)
    assert out.getvalue().endswith(b"Z rank0-0\n") and out.getvalue()[:2] == b"20"
    with pytest.raises(NotFoundError):
        backend.write_logs(run, LogQuery(replica=7), out)
    with pytest.raises(NotFoundError):
        backend.write_logs(run, LogQuery(task="nope"), out)


def test_logs_first_task_unless_all(fake, backend):
    exp = fake.state.add_experiment("ai2/ws", "two-tasks", author="alice", task_names=("train", "eval"))
    for t in exp.tasks:
        fake.state.append_logs(t.latest_job, [f"from {t.name}"])
        fake.state.finish_job(t.latest_job, 0)
    run = backend.get(exp.id)
    out = io.BytesIO()
    backend.write_logs(run, LogQuery(), out)
    assert out.getvalue() == b"from train\n"
    out = io.BytesIO()
    backend.write_logs(run, LogQuery(task="eval"), out)
    assert out.getvalue() == b"from eval\n"
    out = io.BytesIO()
    backend.write_logs(run, LogQuery(), out, all_tasks=True)
    assert sorted(out.getvalue().splitlines()) == [b"[eval] from eval", b"[train] from train"]


# ---------------------------------------------------------------------------------------------- follow
def _in_thread(fn):
    result: dict = {}

    def target():
        try:
            result["value"] = fn()
        except BaseException as e:
            result["error"] = e

    th = threading.Thread(target=target, daemon=True)
    th.start()
    return th, result


def wait_until(predicate, timeout: float = 60) -> None:
    """Until `predicate()` holds (a state the test waits for; the timeout only ends a hang)."""
    deadline = time.monotonic() + scaled(timeout)
    while not predicate():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.01)


@pytest.mark.slow
def test_follow_events_then_logs_then_exit_code(fake, backend, capsys):
    exp, (job,) = _exp_with_job(fake)
    out = io.BytesIO()
    run = backend.get(exp.id)
    th, result = _in_thread(lambda: backend.follow(run, out))
    fake.state.schedule_job(job)
    fake.state.add_event(job, "pulling", "Pulling image python:3.11")
    asked = fake.calls["ListSummarizedJobEvents"]
    wait_until(lambda: fake.calls["ListSummarizedJobEvents"] > asked)  # the follower read the event
    fake.state.start_job(job)
    fake.faults.end_streams(after_lines=2, count=3)  # Beaker ends follow streams early sometimes
    for i in range(10):
        fake.state.append_logs(job, [f"step {i}"])
    wait_until(lambda: b"step 9\n" in out.getvalue())  # all of it while the job still runs
    fake.state.finish_job(job, 3)
    th.join(scaled(30))
    assert result.get("value") == 3, result
    assert out.getvalue() == b"".join(b"step %d\n" % i for i in range(10))
    assert "Pulling image" in capsys.readouterr().err


@pytest.mark.slow
def test_follow_live_job_through_cuts_and_early_ends_exactly_once(fake, backend):
    exp, (job,) = _exp_with_job(fake)
    fake.state.start_job(job)
    fake.faults.cut_streams(after_lines=300, count=10)  # then: streams that end early while it runs
    fake.faults.end_streams(after_lines=100, count=5)
    out = io.BytesIO()
    th, result = _in_thread(lambda: backend.follow(backend.get(exp.id), out))
    n = 0
    for _ in range(20):
        fake.state.append_logs(job, [f"live {n + i}" for i in range(250)])
        n += 250
    wait_until(lambda: f"live {n - 1}\n".encode() in out.getvalue())  # all of it while the job still runs
    fake.state.finish_job(job, 0)
    th.join(scaled(60))
    assert result.get("value") == 0, result
    assert out.getvalue() == b"".join(b"live %d\n" % i for i in range(n))
    assert fake.calls["StreamJobLogs"] >= 11  # the cuts (10) and at least one early end happened


def test_follow_through_preemption(fake, backend):
    exp, (job,) = _exp_with_job(fake)
    fake.state.start_job(job)
    fake.state.append_logs(job, ["first job"])
    out = io.BytesIO()
    th, result = _in_thread(lambda: backend.follow(backend.get(exp.id), out))
    wait_until(lambda: out.getvalue() == b"first job\n")
    nxt = fake.state.preempt_job(job, start_next=True)
    fake.state.append_logs(nxt, ["second job"])
    wait_until(lambda: b"second job" in out.getvalue())  # the next job followed while it runs
    fake.state.finish_job(nxt, 0)
    th.join(scaled(30))
    assert result.get("value") == 0, result
    assert out.getvalue() == b"first job\nsecond job\n"


def test_follow_all_replicas_prefix_and_first_failure(fake, backend):
    exp, jobs = _exp_with_job(fake, replicas=2)
    for rank, job in enumerate(jobs):
        fake.state.append_logs(job, [f"hello from {rank}"])
        fake.state.finish_job(job, 0 if rank == 0 else 7)
    out = io.BytesIO()
    code = backend.follow(backend.get(exp.id), out, all_replicas=True)
    assert code == 7 and backend.get(exp.id).exit_code == 7
    assert sorted(out.getvalue().splitlines()) == [b"[0] hello from 0", b"[1] hello from 1"]
    out = io.BytesIO()
    assert backend.follow(backend.get(exp.id), out, replica=1) == 7
    assert out.getvalue() == b"hello from 1\n"


# ---------------------------------------------------------------------------------------------- latest/stop
def test_latest_and_stop_never_touch_another_users_job(fake, backend):
    mine, _ = _exp_with_job(fake, "mine")
    theirs, _ = _exp_with_job(fake, "theirs", author="bob")  # newer
    latest = backend.latest()
    assert latest is not None and latest.id == mine.id
    assert backend.latest(author="bob").id == theirs.id
    with pytest.raises(PreconditionError, match="bob"):
        backend.stop(backend.get(theirs.id))
    assert fake.state.experiments[theirs.id].canceled is None
    stopped = backend.stop(backend.get(mine.id))
    assert stopped.status == RunStatus.canceled
    assert fake.state.experiments[mine.id].tasks[0].latest_job.canceled is not None


def test_get_by_name_and_not_found(fake, backend):
    exp, _ = _exp_with_job(fake, "named")
    assert backend.get("named").id == exp.id
    assert backend.get("alice/named").id == exp.id
    with pytest.raises(NotFoundError):
        backend.get("nope")


# ---------------------------------------------------------------------------------------------- list
def test_list_filters_on_the_server_and_costs_few_calls(fake, backend):
    now = time.time_ns()
    for i in range(60):
        fake.state.add_experiment(
            "ai2/ws",
            f"lk{i}",
            author="alice" if i % 2 else "bob",
            description="run [launchkit]",
            created=now - (60 - i) * MINUTE_NS,
        )
    for i in range(5):
        fake.state.add_experiment("ai2/ws", f"other{i}", author="alice", description="by hand")
    fake.reset_calls()
    rows = backend.list_runs(limit=25)
    assert len(rows) == 25 and all(r.launchkit for r in rows)
    assert rows[0].created >= rows[-1].created
    assert {r.author for r in rows} == {"alice", "bob"}
    # org, workloads (1 page), GetUser per author; queued rows (issue 33): the org's unscheduled jobs
    # (read alongside the workloads) and the newest 5 queued rows' events (at once)
    from launchkit.backends.beaker.scheduling import LIST_REASONS

    assert fake.total_calls <= 7 + 1 + LIST_REASONS, dict(fake.calls)
    assert len(backend.list_runs(limit=100, include_all=True)) == 65
    mine = backend.list_runs(limit=100, author="alice")
    assert len(mine) == 30 and {r.author for r in mine} == {"alice"}
    assert [r.name for r in backend.list_runs(text="lk59")] == ["lk59"]
    assert len(backend.list_runs(limit=100, max_age=__import__("datetime").timedelta(minutes=10.5))) == 10
    fake.state.start_job(fake.state.experiments[rows[0].id])
    running = backend.list_runs(statuses=["running"])
    assert [r.id for r in running] == [rows[0].id]
    with pytest.raises(UsageError):
        backend.list_runs(statuses=["bogus"])


def test_list_without_a_configured_workspace_covers_the_org_as_gantry(fake, backend):
    """gantry 3.7.0's `list`: [tool.gantry].workspace, else no workspace filter (not Beaker's default)."""
    fake.state.add_workspace("ai2/elsewhere", budget="ai2/b")
    fake.state.add_experiment("ai2/ws", "here", author="alice", description="[launchkit]")
    fake.state.add_experiment("ai2/elsewhere", "there", author="alice", description="[launchkit]")
    assert {r.name for r in backend.list_runs(limit=10)} == {"here", "there"}
    assert {r.name for r in backend.list_runs(limit=10, workspace="ai2/ws")} == {"here"}


# ---------------------------------------------------------------------------------------------- find-gpus
def test_find_gpus_all_node_types_and_batch_only(fake, backend):
    rows = backend.find_gpus()
    by = {r["cluster"]: r for r in rows}
    assert set(by) == {"ai2/jupiter", "ai2/mixed"}  # full left out; sessions-only never shown
    assert by["ai2/mixed"]["gpu_types"] == ["NVIDIA A100 80GB", "NVIDIA H100"]
    assert by["ai2/jupiter"]["free_gpus"] == 10 and by["ai2/jupiter"]["total_slots"] == 16
    assert by["ai2/jupiter"]["used_slots"] == 6
    everything = {r["cluster"] for r in backend.find_gpus(include_all=True)}
    assert everything == {"ai2/jupiter", "ai2/mixed", "ai2/full"}
    assert [r["cluster"] for r in backend.find_gpus(gpu_types=["a100"], include_all=True)] == [
        "ai2/mixed",
        "ai2/full",
    ]


def test_find_gpus_node_lookups_are_concurrent(fake, backend):
    for i in range(8):
        fake.state.add_cluster(f"ai2/extra{i}", nodes=[{"gpu_type": "NVIDIA_H100", "gpus": 8}])
    fake.faults.together("ListNodes", 2, wait=10)  # serial lookups would never have two in flight
    rows = backend.find_gpus()
    assert len(rows) == 10 and fake.faults.met["ListNodes"] == 10


# ---------------------------------------------------------------------------------------------- deadline
@pytest.mark.slow
@pytest.mark.timeout(60)  # a hang past the deadline fails here
def test_unreachable_server_fails_within_the_deadline(tmp_path, monkeypatch):
    """A server that takes the connection and never answers: the deadline (a refused connection is
    told at once: tests/test_newcomer_leftovers.py)."""
    from lk_helpers import unreachable_beaker_config

    monkeypatch.setenv("BEAKER_CONFIG", str(unreachable_beaker_config(tmp_path)))
    from launchkit.backends.beaker import BeakerBackend
    from launchkit.backends.beaker.client import BeakerUnreachable

    with pytest.raises(BeakerUnreachable, match="did not answer within 2s"):
        BeakerBackend(timeout=2).list_runs()
