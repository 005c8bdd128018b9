"""A local run's jobs, read from its record, as the run model's (core/runs.py) per-job records.

The record keeps one entry per job (`jobs`: a replica's attempt, with its status, exit code, times
and, when it was stopped for another replica's failure, which one). `view(rec)` turns them into the
model's `RunView` and `of(rec)` is the run's outcome from `core.runs.outcome`, the one place a run's
outcome and cause are decided, for Beaker runs too. `jobs()` and `job_id()` are standard library
only (the supervisor uses them); `view()`/`of()` load the model (pydantic).
"""

from __future__ import annotations

from launchkit.core.status import Cause, RunStatus

TYPE_CHECKING = False  # the supervisor imports this module: no `typing` at run time
if TYPE_CHECKING:
    from typing import Any

    from launchkit.core.runs import Outcome, RunView, Where

CAUSES = {c.value: c for c in Cause}
TASK = "main"  # a local run has one task (core/tasks.py names a single task `main`)


def job_id(run_id: str, rank: int, attempt: int = 1) -> str:
    """A job's id (its BEAKER_JOB_ID): a retry is a new job."""
    return f"{run_id}-{rank}" + (f"-attempt-{attempt}" if attempt > 1 else "")


def jobs(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every job of the run as the record keeps it, oldest attempt first; a record from before
    attempts were kept (only `ranks`) as each replica's first attempt."""
    found = rec.get("jobs")
    if isinstance(found, list):
        return [j for j in found if isinstance(j, dict)]
    out = []
    for rank, job in sorted((rec.get("ranks") or {}).items(), key=lambda kv: int(kv[0])):
        out.append({**job, "replica": int(rank), "attempt": int(job.get("attempt") or 1)})
    return out


def recorded(rec: dict[str, Any], where: Where | None) -> dict[str, Any] | None:
    """The record's own entry for the job at `where` (its replica and attempt)."""
    if where is None:
        return None
    return next(
        (j for j in jobs(rec) if (j["replica"], j["attempt"]) == (where.replica, where.attempt)), None
    )


def view(rec: dict[str, Any]) -> RunView:
    """The run as the model reads it: one task, `replicas` parts, each job an attempt."""
    from launchkit.core.runs import Job, RunView, Shape

    states = {s.value: s for s in RunStatus}
    model_jobs = []
    for j in jobs(rec):
        state = states.get(j.get("status") or "", RunStatus.running)
        stop = None
        if state == RunStatus.canceled:  # by the user (`stop`), for another replica's failure, or
            # preempted from outside launchkit (--retry-on: local/retry.py)
            stop = CAUSES.get(j.get("stop") or "")  # a record from before `stop` was kept for each:
            if stop is None:
                stop = Cause.canceled if j.get("stopped_for") is None else Cause.sibling_failed
        model_jobs.append(
            Job(
                id=job_id(rec["id"], j["replica"], j["attempt"]),
                task=TASK,
                replica=j["replica"],
                replicas=int(rec.get("replicas") or 1),
                attempt=j["attempt"],
                state=state,
                exit_code=j.get("exit_code"),
                stop=stop,
                cause=j.get("cause"),
                spent=True if stop == Cause.preempted else None,  # its supervisor's retries all spend
                created=j.get("started") or rec.get("created") or 0.0,
                started=j.get("started"),
                finished=j.get("finished"),
                retry_delay=j.get("retry_delay"),
            )
        )
    return RunView.of(
        model_jobs,
        tasks=[Shape(name=TASK, replicas=int(rec.get("replicas") or 1))],
        allowed_retries=int(rec.get("allowed_retries") or 0),
    )


def of(rec: dict[str, Any]) -> Outcome:
    """The outcome of a run its supervisor has ended (no retry is still to come)."""
    from launchkit.core.runs import outcome

    return outcome(view(rec), now=float("inf"), grace=0.0)
