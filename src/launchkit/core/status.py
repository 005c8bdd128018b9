"""The one vocabulary of how a run stands and ends: `RunStatus`, where a run, a job or a task stands
(what every backend reports, every command shows and `list --status` takes), and `Cause`, why a run or
one of its jobs ended (standard library only: completion and the local supervisor read them)."""

from __future__ import annotations

from enum import Enum


class RunStatus(str, Enum):
    queued = "queued"
    starting = "starting"
    running = "running"
    stopping = "stopping"  # canceled, the job is still shutting down (Beaker's STOPPING)
    uploading = "uploading"  # the job exited; results are being uploaded (Beaker's UPLOADING_RESULTS)
    succeeded = "succeeded"
    failed = "failed"  # exited non-zero, or failed without an exit code
    canceled = "canceled"
    preempted = "preempted"  # preempted and not resumed
    lost = "lost"  # local: its supervisor died; processes it left may still run until `stop`

    @property
    def finished(self) -> bool:
        return self in FINISHED

    @property
    def is_terminal(self) -> bool:
        """It ended for good (`finished`; a preempted run may still be resumed by Beaker)."""
        return self in FINISHED

    @property
    def is_failure(self) -> bool:
        """It ended without doing its work for a reason of its own (not a cancelation): failed, lost."""
        return self in (RunStatus.failed, RunStatus.lost)

    def shell_code(self, exit_code: int | None) -> int:
        """The exit code `follow` (and `run --follow`, the Python API's wait) gives a run that ended
        this way with the deciding job's `exit_code`: 0 only when it succeeded; else that exit code,
        and 1 (EXIT_JOB_FAILED) when it has none or it is 0 (a run canceled after its command exited 0,
        a replica's 0 beside a sibling's failure). The one place this is decided."""
        if self == RunStatus.succeeded:
            return 0
        return exit_code if exit_code not in (None, 0) else 1


class Cause(str, Enum):
    """Why a run ended (`EndReason.kind`, `why --json`'s `end.kind`; backends/ending.py turns each into
    one line with its fix), and why a canceled job was canceled (`Job.stop`: Beaker's cancelation codes,
    grouped by what they mean here; a local record's `stop`). One enum: a cause both tell shares its
    member (preempted, timeout, node_lost, unschedulable, canceled: a person's cancel, from the web UI,
    `stop` or a teammate)."""

    succeeded = "succeeded"
    exit_code = "exit_code"  # your command exited non-zero
    oom = "oom"  # killed for memory (exit 137 / the OOM killer)
    setup = "setup"  # a launchkit setup step failed (entrypoint exit codes 100-109, docs/runtime.md)
    image_pull = "image_pull"  # the image could not be pulled: no exit code at all
    failed = "failed"  # failed without an exit code, for another reason the backend names
    lost = "lost"  # local: its supervisor died
    canceled = "canceled"  # by a person (web UI, `stop`, a teammate; who, when known)
    preempted = "preempted"  # system or user preemption: the task resumes with a new job
    timeout = "timeout"  # by a timeout (which one); Beaker's task timeout (code 5)
    node_lost = "node_lost"  # its node went away: unavailable/unhealthy, health check failed (6, 12, 10)
    unschedulable = "unschedulable"  # never scheduled: slot limit, no matching cluster (7)
    sibling_failed = "sibling_failed"  # propagateFailure: another replica/task failed (code 8)
    sibling_preempted = "sibling_preempted"  # propagatePreemption: another was preempted (code 9)
    sibling_retry = "sibling_retry"  # another replica/task is retried (code 11)
    idle = "idle"  # canceled for being idle (3)
    other = "other"  # canceled with a code not named here

    @property
    def resumes(self) -> bool:
        """A canceled job's part goes on by itself with a new job (auto-resume)."""
        return self in (Cause.preempted, Cause.sibling_preempted, Cause.sibling_retry)

    @property
    def by_sibling(self) -> bool:
        """Canceled for what another replica/task of the run did."""
        return self in (Cause.sibling_failed, Cause.sibling_preempted, Cause.sibling_retry)


FINISHED = (RunStatus.succeeded, RunStatus.failed, RunStatus.canceled, RunStatus.lost)

# how a many-task run's counts are told: what runs first, then what waits, then how the rest ended
SUMMARY_ORDER = (
    RunStatus.running,
    RunStatus.starting,
    RunStatus.queued,
    RunStatus.stopping,
    RunStatus.uploading,
    RunStatus.succeeded,
    RunStatus.failed,
    RunStatus.canceled,
    RunStatus.preempted,
    RunStatus.lost,
)


def task_summary(statuses: dict[str, int]) -> str:
    """`1000 tasks: 12 running, 980 queued, 8 succeeded` (states with no task left out; replicas
    count as the tasks Beaker makes of them)."""
    total = sum(statuses.values())
    order = [s.value for s in SUMMARY_ORDER]
    order += sorted(set(statuses) - set(order))
    parts = [f"{statuses[s]} {s}" for s in order if statuses.get(s)]
    return f"{total} tasks: " + ", ".join(parts)
