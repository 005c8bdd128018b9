"""A sweep as one (issue 44 item 5): how its tasks (`--sweep`: one experiment's tasks) or its runs
(`--sweep-experiments`: one run each) stand, in one line, and the ones that need attention.

    states = tasks_of(view)                          # from the run model (core/runs.py), or
    states = [TaskState.of_run(r) for r in runs]     # one run per combination
    digest_line(states) -> "980 succeeded · 12 failed (exit 1) · 5 retried after preemption · 3 running"
    attention(states)   -> the failed ones (name, their `why` line), first the newest failures' order

The digest is what a sweep's follower posts (launchkit/notify.py: SweepDigest) and what `why` of a
sweep prints. No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from launchkit.core.status import RunStatus
from launchkit.runtime.node import policy as P

if TYPE_CHECKING:
    from launchkit.core import runs

SEP = " · "
ATTENTION_MAX = 10  # failed tasks named with their why line (the rest counted)


class TaskState(BaseModel):
    """One member of a sweep: a task of its experiment, or a run of its own."""

    model_config = ConfigDict(frozen=True)

    name: str
    status: RunStatus
    exit_code: int | None = None
    line: str | None = None  # how it ended, as `why` says it (finished members)
    retried: str | None = None  # going again after an earlier attempt: its cause (policy.PREEMPTION, FAILURE)

    @classmethod
    def of_run(cls, run: Any) -> TaskState:
        """A run of a `--sweep-experiments` sweep (a RunInfo: status, exit code, end, retry; core does
        not import the backends' types)."""
        status: RunStatus = run.status
        end = run.end
        retry = run.retry or ""
        retried = None
        if retry and not status.finished:
            retried = P.PREEMPTION if "preempt" in retry else P.FAILURE
        return cls(
            name=str(run.name or run.id),
            status=status,
            exit_code=run.exit_code,
            line=end.line if end is not None else None,
            retried=retried,
        )


def tasks_of(
    view: runs.RunView,
    *,
    now: float | None = None,
    grace: float | None = None,
    only: Iterable[str] | None = None,
) -> list[TaskState]:
    """Each task of a run of several, as its own parts tell it (core/runs.py: one outcome per task);
    `only`: these tasks (those whose jobs were read)."""
    from launchkit.core import runs

    out = []
    wanted = None if only is None else set(only)
    for name in view.tasks:
        if wanted is not None and name not in wanted:
            continue
        parts = tuple(p for p in view.parts if p.task == name)
        one = runs.RunView(parts=parts, allowed_retries=view.allowed_retries, canceled=view.canceled)
        o = runs.outcome(one, now=now, grace=grace)
        state = RunStatus.running if o.going and o.state.finished else o.state
        retried = None
        newest = [p.attempts for p in parts if len(p.attempts) > 1]
        if newest and not state.finished:
            before = newest[0][-2]
            retried = P.PREEMPTION if before.stop is not None and before.stop.resumes else P.FAILURE
        line = None if o.going else o.text()
        out.append(TaskState(name=name, status=state, exit_code=o.exit_code, line=line, retried=retried))
    return out


def _failed_parts(states: Sequence[TaskState]) -> list[str]:
    codes: dict[int | None, int] = {}
    for s in states:
        codes[s.exit_code] = codes.get(s.exit_code, 0) + 1
    parts = []
    for code, n in sorted(codes.items(), key=lambda kv: (-kv[1], kv[0] is None, kv[0] or 0)):
        parts.append(f"{n} failed" + (f" (exit {code})" if code is not None else ""))
    return parts


def digest_line(states: Iterable[TaskState]) -> str:
    """`980 succeeded · 12 failed (exit 1) · 5 retried after preemption · 3 running` (counts of none
    left out; a member going again after an earlier attempt counts as retried, not running)."""
    got = list(states)
    if not got:
        return "no tasks"
    by: dict[str, list[TaskState]] = {}
    for s in got:
        if s.retried is not None and not s.status.finished:
            key = f"retried after {s.retried}"
        elif s.status in (RunStatus.failed, RunStatus.lost):
            key = RunStatus.failed.value
        elif s.status in (RunStatus.starting, RunStatus.queued):
            key = RunStatus.queued.value
        elif s.status in (RunStatus.stopping, RunStatus.uploading):
            key = RunStatus.running.value
        else:
            key = s.status.value
        by.setdefault(key, []).append(s)
    order = [RunStatus.succeeded.value, RunStatus.failed.value, "retried after preemption"]
    order += ["retried after failure", RunStatus.running.value, RunStatus.queued.value]
    order += sorted(set(by) - set(order))
    parts: list[str] = []
    for key in order:
        if key == RunStatus.failed.value and key in by:
            parts += _failed_parts(by[key])
        elif key in by:
            parts.append(f"{len(by[key])} {key}")
    return SEP.join(parts)


def finished(states: Iterable[TaskState]) -> bool:
    return all(s.status.finished for s in states)


def attention(states: Iterable[TaskState]) -> list[TaskState]:
    """The members that need attention: failed (or lost) ones, with their why line."""
    return [s for s in states if s.status in (RunStatus.failed, RunStatus.lost)]


def attention_lines(states: Iterable[TaskState], limit: int = ATTENTION_MAX) -> list[str]:
    """`task lr=3e-4: failed with exit code 1`, at most `limit` of them, then how many more."""
    need = attention(states)
    lines = [f"{s.name}: {s.line or s.status.value}" for s in need[:limit]]
    if len(need) > limit:
        lines.append(f"... and {len(need) - limit} more failed")
    return lines


__all__ = ["TaskState", "attention", "attention_lines", "digest_line", "finished", "tasks_of"]
