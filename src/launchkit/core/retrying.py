"""`--retry-on CAUSE`: retries by cause, on the mechanisms that can tell the causes apart
(docs/retries.md). No I/O. The causes, their checks and the spec's record of them are the run's
policy (runtime/node/policy.py); this module turns a request into that policy and into Beaker's own
mechanisms:

- `preemption`: Beaker's auto-resume (the spec's `context.autoResume`, Beaker's default; without
  `preemption` in the list it is turned off); locally, the supervisor starts a new attempt of a
  replica ended by SIGTERM from outside launchkit.
- `failure` and `never-started`: Beaker's task retries (`retry.allowedTaskRetries`, the cap), which
  retry both alike (the registry row says so: never-started only with failure); locally the
  supervisor tells them apart.
- `stalled`: the runtime restarts the command in place after its watchdog stopped it
  (runtime/node/launch/restart.py), up to the cap, on both backends; one replica only.
- `node-lost`: refused (policy.Policy.problems).

Without `--retry-on`, `--retries N` is gantry's: Beaker's cause-blind task retries.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from launchkit.errors import UsageError
from launchkit.runtime.node import policy as P

if TYPE_CHECKING:
    from launchkit.core.request import LaunchRequest

TASK_RETRIED = (P.FAILURE, P.NEVER_STARTED)  # what Beaker's task retries retry (alike)


def parse(values: Iterable[str], where: str = "--retry-on") -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(causes, exit codes) of repeated and comma-separated values (`exit:29,75` names codes), in the
    policy's order; one line for a bad one."""
    try:
        return P.parse_retry_on(list(values))
    except P.ExitCodeError as e:
        raise UsageError(f"{where}: {e}", hint="e.g. --retry-on exit:29,75") from None
    except P.PolicyError as e:
        raise UsageError(
            f"{where} {str(e)!r}: unknown cause",
            hint="use one of: " + ", ".join(c if c != P.EXIT else "exit:CODES" for c in P.CAUSES),
        ) from None


def cap(request: LaunchRequest) -> int:
    """How many retries `--retry-on` allows: --retries, else the policy's DEFAULT_CAP."""
    return P.DEFAULT_CAP if request.retries is None else request.retries


def policy(request: LaunchRequest) -> P.Policy:
    """The run's policy (runtime/node/policy.py): what core/spec.py encodes into the spec, once."""
    return P.Policy(
        retry_on=request.retry_on,
        retry_cap=cap(request) if request.retry_on else 0,
        stall_timeout=request.stall_timeout,
        stall_auto=request.stall_auto,
        stall_grace=request.stall_grace,
        inactive_timeout=request.inactive_timeout,
        inactive_soft_timeout=request.inactive_soft_timeout,
        progress_patterns=request.progress_patterns,
        webhook_secret=request.slack_webhook_secret,
        notify_url=request.notify_url,
        notify_secret=request.notify_secret,
        sweep=bool(request.sweep),
        require_resume=request.require_resume,
        retry_exit_codes=request.retry_exit_codes,
    )


def check(request: LaunchRequest) -> None:
    """Refuse, with one line each, what `--retry-on` cannot honour on any backend."""
    causes = request.retry_on
    problem = policy(request).problems(replicas=request.replicas, task_retries=request.retries or 0)
    if problem is not None:
        raise UsageError(problem[0], hint=problem[1])
    if not causes:
        return
    if P.PREEMPTION in causes and request.no_auto_resume:
        raise UsageError(
            "--retry-on preemption and --no-auto-resume contradict each other", hint="drop one of them"
        )
    if request.preemptible is not None and P.PREEMPTION not in causes:
        raise UsageError(
            "--preemptible/--not-preemptible cannot be combined with a --retry-on that leaves out"
            " preemption (Beaker refuses it beside autoResume: false)",
            hint="use --min-runtime (0 = preemptible at any time) instead",
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
    if request.no_auto_resume or (request.retry_on and P.PREEMPTION not in request.retry_on):
        return False
    return None
