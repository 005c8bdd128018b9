"""core/runs.py: a run as tasks x replicas x attempts, and its one outcome (no I/O)."""

from __future__ import annotations

from launchkit.core.runs import (
    Job,
    RunView,
    Shape,
    Where,
    attempt_line,
    logs_args,
    outcome,
)
from launchkit.core.status import Cause, RunStatus

S, F, C, R = RunStatus.succeeded, RunStatus.failed, RunStatus.canceled, RunStatus.running


def job(id, state, *, task="main", replica=0, replicas=1, code=None, stop=None, by=None, t=0.0, of=None):
    finished = t + 1 if state.finished else None
    return Job(
        id=id,
        task=task,
        replica=replica,
        replicas=replicas,
        state=state,
        exit_code=code if code is not None else (0 if state == S else None),
        stop=stop,
        stopped_by=by,
        created=t,
        started=t + 0.5,
        finished=finished,
        retry_of=of,
    )


def test_a_failing_replica_is_the_cause_and_keeps_its_exit_code():
    view = RunView.of(
        [
            job("a", C, replica=0, replicas=2, stop=Cause.sibling_failed, t=2),
            job("b", F, replica=1, replicas=2, code=7, t=1),
        ]
    )
    out = outcome(view)
    assert (out.state, out.exit_code, out.going) == (RunStatus.failed, 7, False)
    assert out.text() == "replica 1 of 2 failed with exit code 7 (replica 0 was stopped for it)"
    assert out.where == Where(task="main", replica=1, attempt=1)
    assert logs_args(view, out.where) == ["--replica", "1"]


def test_a_retry_that_succeeds_is_a_success_that_names_the_retry():
    jobs = [job("2", S, t=5, of="1"), job("1", F, code=3, t=0)]  # any order: retry_of links them
    view = RunView.of(jobs, allowed_retries=2)
    out = outcome(view)
    assert (out.state, out.exit_code, out.attempts, out.retries) == (RunStatus.succeeded, 0, 2, 1)
    assert out.text() == "succeeded after 1 retry (attempt 1: exit code 3)"
    assert [j.attempt for j in view.parts[0].attempts] == [1, 2]


def test_a_failed_attempt_with_budget_left_keeps_the_run_going_until_grace_passes():
    view = RunView.of([job("1", F, code=3, t=0)], allowed_retries=2)
    out = outcome(view)
    assert out.going and out.waiting_for == "a retry"
    assert attempt_line(view, view.parts[0].attempts[0]) == (
        "attempt 1 failed with exit code 3; it is retried (retry 1 of 2)"
    )
    waited = RunView.of([job("1", F, code=3, t=0).model_copy(update={"retry_delay": 4.0})], allowed_retries=2)
    assert attempt_line(waited, waited.parts[0].attempts[0]).endswith("; it is retried in 4 s (retry 1 of 2)")
    # told once the run ended (follow replaying it): the retry is past, its wait is not told
    done = RunView.of([job("1", F, code=3, t=0).model_copy(update={"retry_delay": 4.0}), job("2", S, t=5, of="1")],
                      allowed_retries=2)  # fmt: skip
    assert attempt_line(done, done.parts[0].attempts[0], ended=True) == (
        "attempt 1 failed with exit code 3; it was retried (retry 1 of 2)"
    )
    late = outcome(view, now=100.0, grace=30.0)  # no retry came: the failure stands
    assert (late.going, late.state, late.exit_code) == (False, RunStatus.failed, 3)
    assert not outcome(RunView.of([job("1", F, code=3)])).going  # no budget: ends at once


def test_every_attempt_failing_names_the_last_and_the_earlier_ones():
    view = RunView.of(
        [job("1", F, code=3, t=0), job("2", F, code=3, t=2, of="1"), job("3", F, code=4, t=4, of="2")],
        allowed_retries=2,
    )
    out = outcome(view)
    assert (out.going, out.exit_code, out.where) == (False, 4, Where(task="main", attempt=3))
    assert out.text() == (
        "failed with exit code 4 (attempt 3 of 3; attempt 1: exit code 3, attempt 2: exit code 3)"
    )
    assert logs_args(view, Where(task="main", attempt=1)) == ["--attempt", "1"]


def test_a_sibling_preemption_resumes_and_the_run_goes_on():
    first = [
        job("a", C, replica=0, replicas=2, stop=Cause.sibling_preempted, t=0),
        job("b", C, replica=1, replicas=2, stop=Cause.preempted, t=0),
    ]
    out = outcome(RunView.of(first))  # no new jobs (they come with the cancel): not resumed
    assert (out.state, out.going, out.exit_code) == (RunStatus.preempted, False, None)
    assert out.text() == "replica 1 of 2 was preempted (replica 0 was stopped for it)"
    view = RunView.of([*first, job("c", R, replica=0, replicas=2, t=3, of="a")])
    assert outcome(view).going and outcome(view).state == RunStatus.running
    assert attempt_line(view, first[0]) == (
        "replica 0 of 2: attempt 1 was stopped because another part of the run was preempted; "
        "it resumes as a new attempt"
    )
    done = [
        *first,
        job("c", S, replica=0, replicas=2, t=3, of="a"),
        job("d", S, replica=1, replicas=2, t=3, of="b"),
    ]
    out = outcome(RunView.of(done))
    assert (out.state, out.exit_code, out.going) == (RunStatus.succeeded, 0, False)
    assert out.text() == "succeeded (resumed after 1 preemption)"


def test_one_failing_task_of_several_is_named():
    view = RunView.of(
        [job("a", S, task="main__0"), job("b", F, task="main__1", code=5)],
        tasks=[Shape(name="main__0"), Shape(name="main__1")],
    )
    out = outcome(view)
    assert out.text() == "task main__1 failed with exit code 5"
    assert logs_args(view, out.where) == ["--task", "main__1"]


def test_canceled_before_any_job_ends_at_once_and_says_who():
    out = outcome(RunView.of([], tasks=[Shape(name="main")], canceled=True, canceled_by="Canceled by bob"))
    assert (out.state, out.going) == (RunStatus.canceled, False)
    assert out.text() == "was canceled before any job of it existed (Canceled by bob)"
    assert outcome(RunView.of([], tasks=[Shape(name="main")])).going  # not canceled: waits


def test_node_loss_with_retries_left_waits_for_the_retry():
    view = RunView.of([job("1", C, stop=Cause.node_lost)], allowed_retries=1)
    assert outcome(view).going
    out = outcome(view, now=1000.0, grace=10.0)  # Beaker did not retry it (unknown whether it does)
    assert (out.state, out.going, out.exit_code) == (RunStatus.failed, False, None)
    assert out.text() == "was stopped: its node was lost"
    assert not outcome(RunView.of([job("1", C, stop=Cause.node_lost)])).going


def test_a_user_cancel_is_a_cancel_and_a_running_part_keeps_it_going():
    out = outcome(RunView.of([job("1", C, stop=Cause.canceled, by="Canceled by alice")], canceled=True))
    assert (out.state, out.text()) == (RunStatus.canceled, "was canceled (Canceled by alice)")
    out = outcome(RunView.of([job("a", F, task="x", code=1), job("b", R, task="y")]))
    assert out.going and out.state == RunStatus.running


def test_the_retry_budget_counts_per_run():
    view = RunView.of(
        [
            job("a1", F, task="x", code=1, t=0),
            job("a2", S, task="x", t=2, of="a1"),
            job("b1", F, task="y", code=2, t=3),
        ],
        allowed_retries=1,
    )
    out = outcome(view)  # x used the one retry: y's failure is final
    assert (out.going, out.text()) == (False, "task y failed with exit code 2")
