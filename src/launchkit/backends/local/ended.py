"""Why a finished local run ended: its record (jobs, exit code, stop, lost supervisor) read with the
run model (core/runs.py) and, for the runtime's own exit codes, the log of the job whose code it is.

The backend shows it (`RunInfo.end`) and the supervisor's posts (posts.py) tell it when a run ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from launchkit.backends import ending
from launchkit.backends.local import logs, outcome, record
from launchkit.backends.protocol import Cause, EndReason, RunStatus
from launchkit.core.runs import Where, logs_args


def run_end(rec: dict[str, Any], rdir: Path) -> EndReason | None:
    """Why a finished local run ended, from its record (its jobs, exit code, stop, lost supervisor)
    and, for the runtime's setup codes, from the log of the job whose code it is (whether the command
    had started)."""
    status, code, message = rec["status"], rec.get("exit_code"), rec.get("message") or ""
    if status == "lost":
        return EndReason(
            kind=Cause.lost,
            line=f"is lost: {message}",
            fix=f"`launchkit stop {rec['id']}` ends what it left",
        )
    if status == "canceled":
        if message.startswith(ending.LAUNCHKIT_STOP):
            return ending.launchkit_stopped(message[len(ending.LAUNCHKIT_STOP) :].split(" after its ")[0])
        if "timeout" in message:
            return ending.timed_out(message, "raise the timeout, or drop it")
        return ending.canceled("you (`launchkit stop`)" if record.STOPPED_BY_USER in message else None)
    if status not in ("succeeded", "failed"):
        return None
    if code is None:
        return EndReason(kind=Cause.failed, line="failed" + (f": {message}" if message else ""))
    if any(j.get("stop") == Cause.preempted for j in outcome.jobs(rec)):  # --retry-on: local/retry.py
        result = outcome.of(rec)
        if result.state == RunStatus.preempted:
            return EndReason(
                kind=Cause.preempted,
                line=result.text() + " (a SIGTERM from outside launchkit)",
                fix="launch it again (not your code's fault)",
                exit_code=result.exit_code,
                will_retry=False,
            )
    oom = message.startswith(record.OOM_MESSAGE)  # the supervisor read the kernel's OOM-kill count
    memory = message.removeprefix(record.OOM_MESSAGE) if oom else None
    if len(outcome.jobs(rec)) <= 1:  # one job (or none recorded): its own end, as the run model tells
        started = _command_started(rdir, code, 0, 1)  # it, without building it
        stopped = _watchdog_stop(rdir, code, 0, 1)
        return ending.from_exit_code(
            code, rec["id"], memory=memory, oom=oom, started=started, stopped=stopped
        )
    return _jobs_end(rec, rdir, memory)


def _command_started(rdir: Path, code: int, rank: int, attempt: int) -> bool:
    """For the runtime's setup codes (100-109): whether replica `rank`'s `attempt` had started the
    user's command (its log says so). Other codes: False, unread."""
    return code in ending.SETUP_STEPS and ending.command_started(
        logs.lines(logs.log_file(rdir, rank, attempt))
    )


def _watchdog_stop(rdir: Path, code: int, rank: int, attempt: int) -> str | None:
    """For the watchdog's exit code: why it stopped replica `rank`'s `attempt` (its log's last lines)."""
    if code != ending.WATCHDOG_EXIT:
        return None
    return ending.watchdog_stop(logs.last_lines(logs.log_file(rdir, rank, attempt)))


def _jobs_end(rec: dict[str, Any], rdir: Path, memory: str | None) -> EndReason:
    """A run's end from the run model (core/runs.py): which replica failed, on which attempt, who was
    stopped for it, what failed before a success; the fix shows that replica's and attempt's log."""
    run_id, run_view = rec["id"], outcome.view(rec)
    result = outcome.of(rec)
    if result.state == RunStatus.succeeded:
        fix = None
        failed = [j for j in outcome.jobs(rec) if j.get("status") == "failed"]
        if failed:  # retried: the log of the last attempt that failed
            last = Where(task=outcome.TASK, replica=failed[-1]["replica"], attempt=failed[-1]["attempt"])
            ref = " ".join([run_id, *logs_args(run_view, last)])
            fix = f"attempt {last.attempt}'s log: `launchkit logs {ref}`"
        return EndReason(kind=Cause.succeeded, line=result.text(), fix=fix, exit_code=0)
    if result.exit_code is None:
        return EndReason(kind=Cause.failed, line=result.text())
    job = outcome.recorded(rec, result.where) or {}
    where_job = result.where
    rank, attempt = (where_job.replica, where_job.attempt or 1) if where_job else (0, 1)
    started = _command_started(rdir, result.exit_code, rank, attempt)
    stopped = _watchdog_stop(rdir, result.exit_code, rank, attempt)
    reason = ending.from_exit_code(
        result.exit_code, run_id, memory=memory, oom=bool(job.get("oom")), started=started, stopped=stopped
    )
    fix = reason.fix
    where = " ".join(logs_args(run_view, result.where))
    if fix and where:  # its own log, not every replica's or its last attempt's
        fix = fix.replace(f"launchkit logs {run_id}", f"launchkit logs {run_id} {where}")
    return reason.model_copy(update={"line": result.text(reason.line), "fix": fix})
