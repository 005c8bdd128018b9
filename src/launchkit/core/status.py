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
