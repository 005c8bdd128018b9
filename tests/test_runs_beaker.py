"""Issue 32 on the Beaker backend: a run of many tasks, replicas and attempts, told truthfully by
follow, why, list, logs and results, against the fake's behaviours (tests/fakebeaker/README.md, "Runs of
many jobs"); both ways where real Beaker is unknown. Each test failed on the code before issue 32."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading

import pytest

from fakebeaker.plugin import both_ways
from fakebeaker.state import AutoRun, Invalid
from inproc import run_main
from timescale import scaled

WS = "ai2/launchkit"


def _spec(*, replicas: int = 1, tasks: tuple[str, ...] = ("main",), retries: int = 0, **task_extra) -> dict:
    spec: dict = {
        "version": "v2",
        "description": "[launchkit] test",
        "tasks": [
            {
                "name": name,
                "image": {"docker": "python:3.11"},
                "context": {},
                "command": ["python", "train.py"],
                "replicas": replicas,
                "result": {"path": "/results"},
                **task_extra,
            }
            for name in tasks
        ],
    }
    if retries:
        spec["retry"] = {"allowedTaskRetries": retries}
    return spec


def _exp(fake, name: str, **kw):
    return fake.state.create_experiment(WS, _spec(**kw), name=name, author="alice")


def _run(repo, *args: str):
    return run_main("run", "--workspace", WS, "--yes", *args, "--", "python", "train.py", cwd=repo.path)


def _follow(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "launchkit", "follow", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _done(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"follow did not end: {err}") from None
    return proc.returncode, out, err


def _mine(fake, name: str):
    return next(e for e in fake.state.experiments.values() if e.name == name)


def _by_attempt(code_of):
    """AutoRun.plan: attempt N of replica R exits code_of(R, N) after 0.3 s (None: keeps running)."""

    def plan(job):
        code = code_of(job.task.replica_rank, job.task.jobs.index(job) + 1)
        return (0, None) if code is None else (code, 0.3)

    return plan


# -- retries ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_retry_that_succeeds_is_followed_to_success_and_told(repo, fake_beaker):
    fake_beaker.state.set_auto(
        AutoRun(
            start_after=0.1, lines=["attempt {attempt}"], plan=_by_attempt(lambda r, n: 3 if n == 1 else 0)
        )
    )
    r = _run(repo, "--name", "retried", "--retries", "2", "--follow")
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines()[-2:] == ["attempt 1", "attempt 2"]  # both attempts' logs, in order
    assert "attempt 1 failed with exit code 3; it is retried (retry 1 of 2)" in r.stderr, r.stderr
    exp = _mine(fake_beaker, "retried")
    why = run_main("why", exp.id).stdout
    assert why.startswith(f"{exp.id} succeeded after 1 retry (attempt 1: exit code 3)"), why
    assert f"`launchkit logs {exp.id} --attempt 1`" in why
    assert run_main("logs", exp.id, "--attempt", "1").stdout == "attempt 1\n"
    assert run_main("logs", exp.id).stdout == "attempt 2\n"
    row = next(x for x in json.loads(run_main("list", "--json").stdout) if x["id"] == exp.id)
    assert (row["status"], row["exit_code"], row["attempts"]) == ("succeeded", 0, 2)


@pytest.mark.slow
def test_every_attempt_failing_shows_every_log_and_the_last_exit_code(repo, fake_beaker):
    fake_beaker.state.set_auto(
        AutoRun(start_after=0.1, lines=["attempt {attempt}"], plan=_by_attempt(lambda r, n: 2 + n))
    )
    r = _run(repo, "--name", "allfail", "--retries", "1", "--follow")
    assert r.code == 4, r.stderr  # attempt 2's own exit code
    assert r.stdout.splitlines()[-2:] == ["attempt 1", "attempt 2"]
    assert "failed with exit code 4 (attempt 2 of 2; attempt 1: exit code 3)" in r.stderr, r.stderr


def test_follow_started_after_a_failed_attempt_names_it_and_its_log(fake_beaker):
    s = fake_beaker.state
    exp = _exp(fake_beaker, "late", retries=1)
    first = exp.tasks[0].latest_job
    s.append_logs(first, ["attempt 1"])
    s.finish_job(first, 3)  # Beaker retries it: attempt 2
    second = exp.tasks[0].latest_job
    assert second.retry_ancestor_id == first.id
    s.append_logs(second, ["attempt 2"])
    s.finish_job(second, 0)
    r = run_main("follow", exp.id)
    assert r.code == 0 and r.stdout == "attempt 2\n", r.stderr
    note = f"following attempt 2; attempt 1 failed with exit code 3 (its log: `launchkit logs {exp.id} --attempt 1`)"
    assert note in r.stderr, r.stderr


def test_retries_above_beakers_cap_are_refused_at_create(fake_beaker):
    with pytest.raises(Invalid, match="maximum is 10"):
        _exp(fake_beaker, "too-many", retries=11)
    assert _exp(fake_beaker, "ten", retries=10).allowed_retries == 10


# -- replicas ---------------------------------------------------------------------------------------
@pytest.mark.slow
@both_ways("replica_task_names", ("same", "distinct"))
def test_torchrun_replica_1_failing_exits_with_its_own_code(repo, fake_beaker):
    fake_beaker.state.set_auto(
        AutoRun(start_after=0.1, lines=["rank {rank}"], plan=_by_attempt(lambda r, n: 7 if r == 1 else None))
    )
    r = _run(repo, "--name", "ddp", "--torchrun", "--replicas", "2", "--gpus", "1", "--follow")
    exp = _mine(fake_beaker, "ddp")
    assert r.code == 7, r.stderr
    line = "replica 1 of 2 failed with exit code 7 (replica 0 was stopped for it)"
    assert line in r.stderr, r.stderr
    assert [t.latest_job.canceled_code for t in exp.tasks if t.replica_rank == 0] == [
        8
    ]  # SIBLING_TASK_FAILED
    why = run_main("why", exp.id).stdout
    assert line in why and f"`launchkit logs {exp.id} --replica 1 --tail 50`" in why, why
    assert run_main("logs", exp.id, "--replica", "1", "--tail", "50").stdout == "rank 1\n"
    row = next(x for x in json.loads(run_main("list", "--json").stdout) if x["id"] == exp.id)
    assert (row["status"], row["exit_code"]) == ("failed", 7) and line in row["end"]["line"]
    jobs = [j.id for t in exp.tasks for j in t.jobs]
    assert not [j for j in jobs if j in r.stderr + why], "messages name job ids the user never typed"


def test_a_siblings_preemption_is_followed_to_the_resumed_jobs(fake_beaker):
    s = fake_beaker.state
    exp = _exp(fake_beaker, "pp", replicas=2, propagatePreemption=True)
    first = [t.latest_job for t in exp.tasks]
    for j in first:
        s.start_job(j)
        s.append_logs(j, [f"first {j.task.replica_rank}"])
    proc = _follow(exp.id)
    assert s.wait_for(
        lambda: fake_beaker.calls["StreamJobLogs"] >= 1, timeout=120
    )  # a new process's first call
    s.preempt_job(first[1])  # replica 1 preempted: replica 0 canceled SIBLING_TASK_PREEMPTION, both resume
    assert first[0].canceled_code == 9 and all(len(t.jobs) == 2 for t in exp.tasks)
    for t in exp.tasks:
        s.append_logs(t.latest_job, [f"second {t.replica_rank}"])
        s.finish_job(t.latest_job, 0)
    code, out, err = _done(proc)
    assert code == 0, err
    assert out == "first 0\nsecond 0\n", out
    assert f"{exp.id} succeeded" in err and "it resumes as a new attempt" in err, err


# -- tasks ------------------------------------------------------------------------------------------
def test_why_of_a_multi_task_failure_points_at_the_failing_tasks_log(fake_beaker):
    s = fake_beaker.state
    exp = _exp(fake_beaker, "multi", tasks=("main__0", "main__1"))
    ok, bad = (t.latest_job for t in exp.tasks)
    s.append_logs(ok, ["fine"])
    s.finish_job(ok, 0)
    s.append_logs(bad, ["boom"])
    s.finish_job(bad, 5)
    r = run_main("why", exp.id)
    assert r.stdout.startswith(f"{exp.id} task main__1 failed with exit code 5"), r.stdout
    assert f"`launchkit logs {exp.id} --task main__1 --tail 50`" in r.stdout
    assert run_main("logs", exp.id, "--task", "main__1", "--tail", "50").stdout == "boom\n"
    r = run_main("follow", exp.id, "--task", "main__0")
    assert r.code == 5 and "task main__1 failed with exit code 5" in r.stderr, r.stderr


def test_results_of_two_tasks_go_to_a_directory_each_printed_once(fake_beaker, tmp_path):
    s = fake_beaker.state
    exp = _exp(fake_beaker, "res2", tasks=("main__0", "main__1"))
    for t in exp.tasks:
        s.finish_job(t.latest_job, 0)
        s.datasets[t.latest_job.result_dataset_id].files["who.txt"] = t.name.encode()
    out = tmp_path / "out"
    r = run_main("results", exp.id, "-o", str(out))
    assert r.code == 0, r.stderr
    assert r.stdout.split() == [str(out / "main__0"), str(out / "main__1")]
    assert [(out / n / "who.txt").read_text() for n in ("main__0", "main__1")] == ["main__0", "main__1"]
    assert str(out) not in r.stderr  # the directories once, on stdout


def test_a_deleted_result_dataset_is_named_as_such(fake_beaker, tmp_path):
    s = fake_beaker.state
    exp = _exp(fake_beaker, "gone", tasks=("main__0", "main__1"))
    for t in exp.tasks:
        s.finish_job(t.latest_job, 0)
        s.datasets[t.latest_job.result_dataset_id].files["f"] = b"x"
    ids = [t.latest_job.result_dataset_id for t in exp.tasks]
    s.delete_dataset(ids[1])
    r = run_main("results", exp.id, "-o", str(tmp_path / "a"))
    assert r.code == 0 and r.stdout.split() == [str(tmp_path / "a" / "main__0")], r.stderr
    assert f"the result dataset of task main__1 of {exp.id} was deleted" in r.stderr, r.stderr
    s.delete_dataset(ids[0])
    r = run_main("results", exp.id, "-o", str(tmp_path / "b"))
    assert r.code == 4 and f"the result datasets of {exp.id} were deleted" in r.stderr, r.stderr
    assert not [i for i in ids if i in r.stderr]


# -- canceled before a job, deleted while followed ----------------------------------------------------
@pytest.mark.parametrize("fake_beaker", [{"job_creation_delay": 3600.0}], indirect=True)
def test_follow_of_a_run_canceled_before_its_job_existed_ends_at_once(fake_beaker):
    exp = _exp(fake_beaker, "never")
    proc = _follow(exp.id)
    assert fake_beaker.state.wait_for(
        lambda: fake_beaker.calls["ListJobs"] >= 1, timeout=120
    )  # a new process's first call
    fake_beaker.state.cancel_experiment(exp, by="bob")
    code, _, err = _done(proc)
    assert code == 1, err
    assert "was canceled before any job of it existed (Canceled by bob)" in err, err
    assert "was canceled before any job" in run_main("why", exp.id).stdout
    row = next(x for x in json.loads(run_main("list", "--json").stdout) if x["id"] == exp.id)
    assert row["status"] == "canceled" and "before any job of it existed" in row["end"]["line"], row


def test_an_experiment_deleted_while_followed_ends_follow_and_says_so(fake_beaker):
    s = fake_beaker.state
    exp = _exp(fake_beaker, "doomed")
    job = exp.tasks[0].latest_job
    s.start_job(job)
    s.append_logs(job, ["before"])
    proc = _follow(exp.id)
    assert s.wait_for(
        lambda: fake_beaker.calls["StreamJobLogs"] >= 1, timeout=120
    )  # a new process's first call
    s.delete_experiment(exp)
    code, out, err = _done(proc)
    assert code == 4 and f"experiment {exp.id} was deleted while it was followed" in err, err
    assert out == "before\n" and job.id not in err


# -- logs re-sent on a resume -------------------------------------------------------------------------
@both_ways("resume_resend", ("none", "second", "all"), tie_timestamps=True)
def test_every_line_once_when_a_resumed_stream_re_sends_lines(fake_beaker):
    s = fake_beaker.state
    exp = _exp(fake_beaker, "resend")
    job = exp.tasks[0].latest_job
    s.start_job(job)
    base = (s.now() // 1_000_000_000 + 1) * 1_000_000_000  # every line within one second, ties too
    s.append_logs(
        job, [f"line {i}" for i in range(60)], timestamps=[base + (i // 3) * 1000 for i in range(60)]
    )
    s.finish_job(job, 0)
    fake_beaker.faults.cut_streams(after_lines=7, count=6)
    r = run_main("logs", exp.id)
    assert r.code == 0, r.stderr
    assert r.stdout == "".join(f"line {i}\n" for i in range(60))


# -- node loss with retries -----------------------------------------------------------------------------
@both_ways("retry_node_loss")
def test_node_loss_on_a_run_with_retries(fake_beaker):
    from launchkit.backends.beaker import BeakerBackend
    from launchkit.backends.ending import describe

    s = fake_beaker.state
    exp = _exp(fake_beaker, "node", retries=1)
    job = exp.tasks[0].latest_job
    s.start_job(job)
    s.append_logs(job, ["one"])
    backend = BeakerBackend(timeout=20)
    backend.retry_grace = 0.5
    out = io.BytesIO()
    result: dict = {}
    th = threading.Thread(target=lambda: result.update(code=backend.follow(backend.get(exp.id), out)))
    th.start()
    assert s.wait_for(
        lambda: fake_beaker.calls["StreamJobLogs"] >= 1, timeout=120
    )  # a new process's first call
    s.lose_node(job)
    retried = s.options.retry_node_loss
    if retried:  # Beaker retries it: follow goes on to the new job
        assert len(exp.tasks[0].jobs) == 2
        nxt = exp.tasks[0].latest_job
        s.append_logs(nxt, ["two"])
        s.finish_job(nxt, 0)
    th.join(scaled(60))
    assert not th.is_alive()
    backend.close()
    later = BeakerBackend(timeout=20)
    later.retry_grace = 0.5  # a retry not seen within it is given up on (Beaker's delay is unknown)
    line = describe(later.get(exp.id))
    later.close()
    if retried:
        assert result["code"] == 0 and out.getvalue() == b"one\ntwo\n"
        assert line == "succeeded after 1 retry (attempt 1: node lost); attempt 1's log: " + (
            f"`launchkit logs {exp.id} --attempt 1`"
        ), line
    else:
        assert result["code"] == 1 and out.getvalue() == b"one\n"
        assert "node was lost" in line and "Beaker did not retry it" in line and "--retries" not in line, line
