"""Why a Beaker job ended, from Beaker's own fields: cancelation code and text, exit code (optional:
a FAILED job may have none, fact sheet 4.8), status message and scheduling events."""

from __future__ import annotations

import re
from typing import Any

from beaker import beaker_pb2 as pb2

from launchkit.backends.ending import from_exit_code
from launchkit.backends.protocol import Cause, EndReason

C = pb2.CancelationCode
_NODE = {
    C.CANCELATION_CODE_NODE_UNAVAILABLE,
    C.CANCELATION_CODE_NODE_UNHEALTHY,
    C.CANCELATION_CODE_HEALTHCHECK_FAILED,
}
_PREEMPTED = {C.CANCELATION_CODE_SYSTEM_PREEMPTION, C.CANCELATION_CODE_USER_PREEMPTION}
_OOM_WORDS = ("oom", "out of memory", "memory limit")
_PULL_WORDS = ("pull", "image")


def memory_limit(job: Any) -> str | None:
    """The job's memory request as the user would write it (e.g. 64GiB), if it had one."""
    try:
        n = int(job.container_spec.resource_request.memory_bytes)
    except AttributeError:
        return None
    if n <= 0:
        return None
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:g}{unit}"
    return f"{n}B"


def _scheduling(events: list[str]) -> tuple[str, str]:
    """(why it never got a node, the fix) from the job's summarized events."""
    text = " ".join(events).lower()
    if "slot limit" in text:
        msg = next(e for e in events if "slot limit" in e.lower())
        return (
            f"the workspace's slot limit ({msg})",
            "wait for your other jobs, ask for fewer GPUs, or use another --workspace",
        )
    if "do not have enough slots" in text or "no nodes" in text or "no matching" in text:
        msg = next(e for e in events if "slot" in e.lower() or "node" in e.lower() or "match" in e.lower())
        return (
            f"no node of its clusters could take it ({msg})",
            "ask for fewer GPUs, or try another --cluster",
        )
    return (
        "no cluster can ever fit it",
        "ask for fewer GPUs or less memory, or choose --cluster with `launchkit find-gpus`",
    )


# A job's message naming a secret it could not get (fact 10.12: the wording is not public; this reads
# `secret "NAME" not found ...`, `secret NAME does not exist`, `missing secret "NAME"`)
_SECRET_MESSAGE = re.compile(
    r"""secret\s+["']?([A-Za-z0-9_.-]+)["']?\s+(?:was\s+)?(?:not found|does not exist|is missing|missing)"""
    r"""|missing secret\s+["']?([A-Za-z0-9_.-]+)""",
    re.IGNORECASE,
)


def _missing_secret(message: str) -> str | None:
    m = _SECRET_MESSAGE.search(message)
    return (m.group(1) or m.group(2)) if m else None


def job_end(
    job: Any,
    run_id: str,
    *,
    events: list[str] | None = None,
    resumed: bool = False,
    started: bool | None = False,
    stopped: str | None = None,
) -> EndReason | None:
    """The reason a finalized (or canceled) job ended; None while it runs. `resumed`: a newer job of the
    same task exists (Beaker retries it). `events`: its summarized event messages (never scheduled).
    `started`: whether the user's command had started (its log says so: backend.py), which tells a
    setup code (100-109) from the command's own; `stopped`: why the runtime's watchdog ended it."""
    s = job.status
    code = s.exit_code if s.HasField("exit_code") else None
    by = s.canceled_for or None
    if s.HasField("canceled"):
        cc = s.canceled_code
        if cc in _PREEMPTED:
            who = (
                "a user" if cc == C.CANCELATION_CODE_USER_PREEMPTION else "Beaker, for a higher-priority job"
            )
            retry = "; Beaker runs it again as a new job" if resumed else "; it will not be retried"
            return EndReason(
                kind=Cause.preempted,
                line=f"was preempted by {who}{retry}" + (f" ({by})" if by else ""),
                # what `run` accepts with auto-resume off (--not-preemptible is refused with
                # --no-auto-resume and with a --retry-on that leaves preemption out)
                fix=None
                if resumed
                else "launch it again with `--priority high` or `--min-runtime 1h` (not preempted before "
                "then); auto-resume was off for it (--no-auto-resume, or a --retry-on without preemption)",
                by=by,
                will_retry=resumed,
            )
        if cc == C.CANCELATION_CODE_TIMEOUT:
            return EndReason(
                kind=Cause.timeout,
                line="was canceled by Beaker: it ran past its task timeout" + (f" ({by})" if by else ""),
                fix="raise --task-timeout (or drop it)",
                by="task timeout",
            )
        if cc in _NODE:
            why = {C.CANCELATION_CODE_HEALTHCHECK_FAILED: "its node failed a health check"}.get(
                cc, "its node was lost"
            )
            return EndReason(
                kind=Cause.node_lost,
                line=f"was canceled by Beaker: {why}" + (f" ({by})" if by else ""),
                fix="launch it again (not your code's fault); --retries N makes Beaker retry by itself",
                by="Beaker",
            )
        if cc == C.CANCELATION_CODE_IMPOSSIBLE_TO_SCHEDULE or (
            not s.HasField("scheduled") and cc != C.CANCELATION_CODE_MANUAL
        ):
            why, fix = _scheduling(events or [])
            if s.failed_scheduling_message:
                why = s.failed_scheduling_message
            return EndReason(
                kind=Cause.unschedulable, line=f"was never scheduled: {why}", fix=fix, by="Beaker"
            )
        if cc in (C.CANCELATION_CODE_SIBLING_TASK_FAILED, C.CANCELATION_CODE_SIBLING_TASK_PREEMPTION):
            what = "failed" if cc == C.CANCELATION_CODE_SIBLING_TASK_FAILED else "was preempted"
            return EndReason(
                kind=Cause.canceled,
                line=f"was canceled because another task of the run {what}",
                fix=f"see why: `launchkit logs {run_id} --all`",
                by="Beaker",
            )
        if cc == C.CANCELATION_CODE_IDLE:
            return EndReason(kind=Cause.canceled, line="was canceled by Beaker for being idle", by="Beaker")
        return EndReason(
            kind=Cause.canceled, line="was canceled" + (f" ({by})" if by else " (by a user)"), by=by
        )
    if not (s.HasField("finalized") or s.HasField("exited") or s.HasField("failed")):
        return None
    message = s.message or ""
    low = message.lower()
    if code is None or (s.HasField("failed") and code == 0):
        if any(w in low for w in _PULL_WORDS):
            return EndReason(
                kind=Cause.image_pull,
                line=f"failed before it started: its image could not be pulled ({message})",
                fix="check the image name and that the workspace may read it (--beaker-image/--docker-image)",
            )
        if any(w in low for w in _OOM_WORDS):
            return from_exit_code(137, run_id, memory=memory_limit(job), oom=True).model_copy(
                update={"exit_code": None}
            )
        if secret := _missing_secret(message):
            return EndReason(
                kind=Cause.failed,
                line=f"failed before it started: its secret {secret} is not in the workspace ({message})",
                fix=f"set it with `launchkit secret set {secret}` (it reads stdin), then launch again",
            )
        return EndReason(
            kind=Cause.failed,
            line="failed without an exit code" + (f": {message}" if message else ""),
            fix=f"see `launchkit logs {run_id}` and the job's events on its Beaker page",
        )
    oom = any(w in low for w in _OOM_WORDS)
    return from_exit_code(code, run_id, started=started, memory=memory_limit(job), oom=oom, stopped=stopped)
