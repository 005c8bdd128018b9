"""`--retry-on CAUSE`: retries by cause, on the mechanisms that can tell the causes apart
(docs/retries.md). No I/O.

- `preemption`: Beaker's auto-resume (the spec's `context.autoResume`, Beaker's default; without
  `preemption` in the list it is turned off); locally, the supervisor starts a new attempt of a
  replica ended by SIGTERM from outside launchkit.
- `failure` (the command's own non-zero exit) and `never-started` (a job that failed before the
  command ran: a setup step, an image pull): Beaker's task retries (`retry.allowedTaskRetries`, the
  cap), which retry both alike, so `never-started` alone is refused on Beaker
  (backends/beaker/prepare.py); locally the supervisor tells them apart.
- `stalled`: the runtime restarts the command in place after its watchdog stopped it
  (runtime/node/launch/restart.py), up to the cap, on both backends; one replica only.
- `node-lost`: refused: whether Beaker starts a new job after a lost node is not known (fact sheet
  10.2), and a local run's node is this machine.

Without `--retry-on`, `--retries N` is gantry's: Beaker's cause-blind task retries.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from launchkit.errors import UsageError

if TYPE_CHECKING:
    from launchkit.core.request import LaunchRequest

PREEMPTION, NODE_LOST, NEVER_STARTED, STALLED, FAILURE = (
    "preemption",
    "node-lost",
    "never-started",
    "stalled",
    "failure",
)
CAUSES = (PREEMPTION, NODE_LOST, NEVER_STARTED, STALLED, FAILURE)
DEFAULT_CAP = 3  # retries when --retry-on is given without --retries
TASK_RETRIED = (FAILURE, NEVER_STARTED)  # what Beaker's task retries retry (alike)
# The spec's record of them, for the local supervisor, the runtime (stalled) and `why`/`list`
ENV_RETRY_ON = "LAUNCHKIT_RETRY_ON"  # the causes, comma-separated
ENV_RETRY_CAP = "LAUNCHKIT_RETRY_CAP"  # the cap of retries
ENV_ATTEMPT = "LAUNCHKIT_ATTEMPT"  # set on the node where the attempt number is known
# --require-resume: the runtime stops an attempt that restarted below the step the one before reached
ENV_REQUIRE_RESUME = "LAUNCHKIT_REQUIRE_RESUME"
ENV_RESUME_FROM = "LAUNCHKIT_RESUME_FROM"  # that step, given to the attempt on the node
IN_PLACE = (STALLED,)  # causes the runtime retries in place, where it sees the start before


def parse(values: Iterable[str], where: str = "--retry-on") -> tuple[str, ...]:
    """The causes of repeated and comma-separated values, in CAUSES order; one line for a bad one."""
    found: set[str] = set()
    for value in values:
        for item in str(value).split(","):
            name = item.strip().lower().replace("_", "-").replace(" ", "-")
            if name not in CAUSES:
                raise UsageError(
                    f"{where} {item.strip()!r}: unknown cause", hint="use one of: " + ", ".join(CAUSES)
                )
            found.add(name)
    return tuple(c for c in CAUSES if c in found)


def cap(request: LaunchRequest) -> int:
    """How many retries `--retry-on` allows: --retries, else DEFAULT_CAP."""
    return DEFAULT_CAP if request.retries is None else request.retries


def check(request: LaunchRequest) -> None:
    """Refuse, with one line each, what `--retry-on` cannot honour on any backend."""
    causes = request.retry_on
    if request.require_resume and not causes and not request.retries:
        raise UsageError(
            "--require-resume checks a retried attempt against the one before, but nothing retries this run",
            hint="add --retry-on CAUSE (e.g. --retry-on preemption,stalled)",
        )
    if not causes:
        return
    if NODE_LOST in causes:
        raise UsageError(
            "--retry-on node-lost cannot be honoured: whether Beaker starts a new job after a lost node"
            " is not known, and a local run's node is this machine",
            hint="use --retries N: Beaker's task retries, which also retry your command's failures",
        )
    if request.retries == 0:
        raise UsageError("--retries 0 with --retry-on retries nothing", hint="give --retries N (N >= 1)")
    if PREEMPTION in causes and request.no_auto_resume:
        raise UsageError(
            "--retry-on preemption and --no-auto-resume contradict each other", hint="drop one of them"
        )
    if request.preemptible is not None and PREEMPTION not in causes:
        raise UsageError(
            "--preemptible/--not-preemptible cannot be combined with a --retry-on that leaves out"
            " preemption (Beaker refuses it beside autoResume: false)",
            hint="use --min-runtime (0 = preemptible at any time) instead",
        )
    if STALLED in causes:
        if request.stall_timeout is None and request.inactive_timeout is None:
            raise UsageError(
                "--retry-on stalled needs a watchdog to stop a stalled command",
                hint="add --stall-timeout DURATION or --inactive-timeout DURATION",
            )
        if request.replicas > 1:
            raise UsageError(
                f"--retry-on stalled restarts one replica's command in place, which cannot rejoin the"
                f" other {request.replicas - 1} replicas",
                hint="use --retry-on failure: with --propagate-failure every replica starts again",
            )


def task_retries(request: LaunchRequest) -> int | None:
    """The spec's `retry.allowedTaskRetries`: --retries alone (gantry's), or the cap when a cause that
    Beaker's task retries honour is named."""
    if not request.retry_on:
        return request.retries or None
    return cap(request) if any(c in request.retry_on for c in TASK_RETRIED) else None


def auto_resume(request: LaunchRequest) -> bool | None:
    """The spec's `context.autoResume`: off with --no-auto-resume, or when --retry-on leaves
    preemption out; else Beaker's default (on)."""
    if request.no_auto_resume or (request.retry_on and PREEMPTION not in request.retry_on):
        return False
    return None


def env(request: LaunchRequest) -> dict[str, str | None]:
    """The task env that records --retry-on (None: not set)."""
    resume = "1" if request.require_resume else None
    if not request.retry_on:
        return {ENV_RETRY_ON: None, ENV_RETRY_CAP: None, ENV_REQUIRE_RESUME: resume}
    return {
        ENV_RETRY_ON: ",".join(request.retry_on),
        ENV_RETRY_CAP: str(cap(request)),
        ENV_REQUIRE_RESUME: resume,
    }


def from_env(value: str | None) -> tuple[str, ...]:
    """The causes a spec's LAUNCHKIT_RETRY_ON names (unknown names ignored)."""
    return tuple(c for c in (value or "").split(",") if c in CAUSES)
