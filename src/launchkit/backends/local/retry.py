"""`--retry-on` for a local run (the run's policy: runtime/node/policy.py): how a replica's job
ended, by cause, and whether its supervisor starts a new attempt for it. Standard library only (the
supervisor imports it); the log is read only for the exit codes that need it.

- `preemption`: ended by SIGTERM (exit 143) that launchkit did not send (its own stops, a sibling's
  stop and --task-timeout are told apart before): a machine's scheduler or a person preempting it.
- `stalled`: the runtime's watchdog stopped it (exit 124 and its log's last `[launchkit] stopped:`
  line); the runtime has already restarted it in place as often as allowed, so it is not retried again.
- `never-started`: a setup step's exit code (100-109) before its log says the command started.
- `failure`: anything else non-zero.
"""

from __future__ import annotations

from launchkit.backends.local import logs
from launchkit.core.status import Cause, RunStatus
from launchkit.runtime.node.policy import FAILURE, NEVER_STARTED, PREEMPTION, STALLED, Policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading
    from collections.abc import Sequence
    from typing import Any

SIGTERM_EXIT = 143  # 128 + SIGTERM
WATCHDOG_EXIT = 124  # backends/ending.py's (it loads pydantic: imported only when a log is read)
SETUP_CODES = range(100, 110)
TAIL = 64 * 1024  # bytes of an attempt's log read for the step it reached (backends/progress.py's TAIL_BYTES)
NOT_RESUMING = "not resuming"  # the cause of an attempt --require-resume stopped (never retried)


def cause_of(code: int, rdir: str, rank: int, attempt: int, pump: threading.Thread | None) -> str:
    """The cause of a job's non-zero exit `code` (replica `rank`'s `attempt`, whose log `pump` writes)."""
    if code == SIGTERM_EXIT:
        return PREEMPTION
    if code != WATCHDOG_EXIT and code not in SETUP_CODES:
        return FAILURE
    from launchkit.backends import ending

    if pump is not None:
        pump.join(timeout=5)  # its last lines are in its log
    path = logs.log_file(rdir, rank, attempt)
    if code == WATCHDOG_EXIT:
        return STALLED if ending.watchdog_stop(logs.last_lines(path)) else FAILURE
    return FAILURE if ending.command_started(logs.lines(path)) else NEVER_STARTED


def resume_stopped(code: int, rdir: str, rank: int, attempt: int, pump: threading.Thread | None) -> bool:
    """Whether the runtime stopped the job for --require-resume (its log's last `[launchkit] stopped:`
    line says so): launchkit's stop, which nothing retries."""
    if code != WATCHDOG_EXIT:
        return False
    from launchkit.backends import ending

    if pump is not None:
        pump.join(timeout=5)
    why = ending.watchdog_stop(logs.last_lines(logs.log_file(rdir, rank, attempt)))
    return why is not None and why.endswith(f"({ending.REQUIRE_RESUME})")


def resume_from(rdir: str, rank: int, attempt: int, patterns: Sequence[str]) -> str | None:
    """The step replica `rank`'s `attempt` reached (its log's newest progress line with a step, by the
    policy's `patterns`), as policy.ENV_RESUME_FROM gives it to the next attempt; None: none, or the
    patterns are not valid."""
    from launchkit.runtime.node.launch import watchdog

    try:
        compiled = watchdog.progress_patterns(patterns)
    except ValueError:
        return None
    found = watchdog.progress_of(logs.last_lines(logs.log_file(rdir, rank, attempt), TAIL), compiled, True)
    if found is None or found[1] is None:
        return None
    return watchdog.step_value(found[1])


def fields(cause: str) -> dict[str, Any]:
    """The job record's fields for a cause (outcome.view reads them)."""
    if cause == PREEMPTION:
        return {"status": RunStatus.canceled.value, "stop": Cause.preempted.value}
    if cause in (STALLED, NEVER_STARTED):
        return {"status": "failed", "cause": cause.replace("-", " ")}
    return {"status": "failed"}


def wanted(policy: Policy, cause: str | None) -> bool:
    """Whether the supervisor retries a job that ended for `cause` (without --retry-on: any failure,
    as Beaker's task retries; stalled: the runtime did, in place)."""
    return not policy.retry_on or (cause is not None and cause != STALLED and policy.retries(cause))
