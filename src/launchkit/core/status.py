"""The one vocabulary of where a run, a job or a task stands: `RunStatus`, what every backend reports,
every command shows and `list --status` takes (standard library only: completion and the local
supervisor read it)."""

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
