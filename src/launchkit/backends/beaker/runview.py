"""Beaker's jobs as launchkit's run model (core/runs.py): one record per job, the run's outcome, and
its end reason with the `logs` command that shows the part that matters.

An experiment's task is one part (a replica is a task of its own on Beaker, fact 4.7); its jobs, newest
first from ListJobs, are the part's attempts (`retry_ancestor_id` links a retry to the job it retries,
fact 4.9 / 10.1)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from beaker import beaker_pb2 as pb2

from launchkit.backends.beaker.ending import job_end
from launchkit.backends.protocol import Cause, EndReason, RunStatus
from launchkit.core import runs

C = pb2.CancelationCode
_STOPS = {
    C.CANCELATION_CODE_SYSTEM_PREEMPTION: Cause.preempted,
    C.CANCELATION_CODE_USER_PREEMPTION: Cause.preempted,
    C.CANCELATION_CODE_IDLE: Cause.idle,
    C.CANCELATION_CODE_MANUAL: Cause.canceled,
    C.CANCELATION_CODE_TIMEOUT: Cause.timeout,
    C.CANCELATION_CODE_NODE_UNAVAILABLE: Cause.node_lost,
    C.CANCELATION_CODE_IMPOSSIBLE_TO_SCHEDULE: Cause.unschedulable,
    C.CANCELATION_CODE_SIBLING_TASK_FAILED: Cause.sibling_failed,
    C.CANCELATION_CODE_SIBLING_TASK_PREEMPTION: Cause.sibling_preempted,
    C.CANCELATION_CODE_HEALTHCHECK_FAILED: Cause.node_lost,
    C.CANCELATION_CODE_SIBLING_TASK_RETRY: Cause.sibling_retry,
    C.CANCELATION_CODE_NODE_UNHEALTHY: Cause.node_lost,
}


def _secs(ts: Any) -> float | None:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    return int(ts.seconds) + int(ts.nanos) / 1e9


def job_state(job: Any) -> RunStatus:
    """From timestamps, as Beaker's clients do (fact sheet 4.2). A FAILED job may have no exit code."""
    s = job.status
    if s.HasField("canceled"):
        return RunStatus.canceled if s.HasField("finalized") else RunStatus.stopping
    if s.HasField("finalized") or s.HasField("exited") or s.HasField("failed"):
        if not s.HasField("finalized"):
            return RunStatus.uploading
        if s.HasField("failed") or (s.HasField("exit_code") and s.exit_code != 0):
            return RunStatus.failed
        return RunStatus.succeeded
    if s.HasField("started"):
        return RunStatus.running
    if s.HasField("scheduled"):
        return RunStatus.starting
    return RunStatus.queued


def exited_at(job: Any) -> float | None:
    """When the job's process exited (seconds since the epoch), if it has."""
    return _secs(job.status.exited) if job.status.HasField("exited") else None


def task_name(task: Any) -> str:
    """The task's name as the spec has it: a replica's without a `-<rank>` suffix (in case Beaker names
    replica tasks that way; fact 4.7: unknown)."""
    sd = task.system_details
    if sd.HasField("replica_group_details") and sd.replica_group_details.size > 1:
        return str(task.name).removesuffix(f"-{sd.replica_group_details.rank}")
    return str(task.name)


def rank_of(task: Any, job: Any | None) -> tuple[int, int]:
    for src in (job.system_details if job is not None else None, task.system_details):
        if src is not None and src.HasField("replica_group_details"):
            g = src.replica_group_details
            return int(g.rank), max(1, int(g.size))
    return 0, 1


def record(task: Any, job: Any) -> runs.Job:
    s = job.status
    state = job_state(job)
    stop = None
    if s.HasField("canceled"):
        stop = _STOPS.get(s.canceled_code, Cause.other)
    rank, size = rank_of(task, job)
    return runs.Job(
        id=job.id,
        task=task_name(task),
        replica=rank,
        replicas=size,
        retry_of=job.retry_ancestor_id or None,
        state=state,
        exit_code=s.exit_code if s.HasField("exit_code") else None,
        stop=stop,
        stopped_by=s.canceled_for or None,
        message=s.message or None,
        created=_secs(s.created) or 0.0,
        started=_secs(s.started),
        finished=_secs(s.finalized),
    )


def view_of(
    wl: Any, jobs: Iterable[tuple[Any, list[Any]]], *, allowed_retries: int = 0, complete: bool = True
) -> runs.RunView:
    """The run from (task, its jobs) pairs. `complete`: every task's jobs were read (else the parts
    of tasks not read are left out, and the view only names causes)."""
    ex = wl.experiment
    pairs = list(jobs)
    shapes: dict[str, int] = {}
    if complete:
        for t in ex.tasks:
            name = task_name(t)
            shapes[name] = max(shapes.get(name, 0), rank_of(t, None)[1])
    return runs.RunView.of(
        [record(t, j) for t, js in pairs for j in js],
        tasks=[runs.Shape(name=n, replicas=r) for n, r in shapes.items()],
        allowed_retries=allowed_retries,
        canceled=ex.HasField("canceled"),
        canceled_by=ex.canceled_for or None,
    )


def status_of(out: runs.Outcome) -> RunStatus | None:
    """The status of a run that has ended (None: it is still going)."""
    if out.going:
        return None
    return RunStatus.failed if out.state == RunStatus.lost else out.state


def run_end(
    view: runs.RunView,
    out: runs.Outcome,
    run_id: str,
    pb_jobs: dict[str, Any],
    *,
    events: list[str] | None = None,
    started: bool | None = False,
    stopped: str | None = None,
) -> EndReason:
    """Why the run ended: the deciding job's own reason (backends/beaker/ending.py) told for its part
    (`replica 1 of 2 failed with exit code 7 (replica 0 was stopped for it)`), and a fix whose `logs`
    command shows that part's log. `pb_jobs`: job id -> pb2.Job; `started`: whether the deciding
    job's log says the user's command started, `stopped` why the runtime's watchdog ended it
    (ending.from_exit_code)."""
    logs_ref = " ".join([run_id, *runs.logs_args(view, out.where)])  # `launchkit logs <this>`
    cause = out.cause
    if cause is None:
        if out.state == RunStatus.succeeded:
            fix = None
            failed = [(p, j) for p in view.parts for j in p.attempts[:-1] if j.spends_retry]
            if failed:
                p, j = failed[-1]
                where = runs.Where(task=p.task, replica=p.replica, attempt=j.attempt or 1)
                args = " ".join([run_id, *runs.logs_args(view, where)])
                fix = f"attempt {j.attempt}'s log: `launchkit logs {args}`"
            return EndReason(kind=Cause.succeeded, line=out.text(), fix=fix, exit_code=0)
        return EndReason(kind=Cause.canceled, line=out.text(), by=view.canceled_by)
    pb = pb_jobs.get(cause.id)
    base = job_end(pb, logs_ref, events=events, started=started, stopped=stopped) if pb is not None else None
    if base is None:
        return EndReason(kind=Cause.failed, line=out.text(), exit_code=out.exit_code)
    fix = base.fix
    if base.kind == Cause.node_lost and view.allowed_retries:
        if view.retries_used >= view.allowed_retries:
            fix = f"launch it again (not your code's fault); its {view.allowed_retries} retries were used"
        else:
            fix = "launch it again (not your code's fault); Beaker did not retry it"
    return base.model_copy(update={"line": out.text(base.line), "fix": fix, "exit_code": out.exit_code})
