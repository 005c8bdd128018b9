"""A running run's last progress (`launchkit list`'s PROGRESS column, `why`): the newest line of its
log's tail that the run's own progress patterns match, with the watchdog's one matcher
(runtime/node/launch/matching.py; the patterns are the run's policy's, runtime/node/policy.py, else
matching's DEFAULT_PATTERNS). Both backends read the tail and hand the lines here.

Bounded as the watchdog's (matching.scan): each line's first `matching.SLICE` characters; the
defaults matched here, the user's own patterns in a matcher process given `matching.BUDGET` seconds
per log read (a pattern that backtracks for ever shows no progress instead of hanging `list`)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence

from launchkit.backends.protocol import AttemptDetail, Progress, StepProgress
from launchkit.runtime.node.launch import matching
from launchkit.runtime.node.launch.watchdog import (
    OWN_LINE,
    Resume,
    fmt_secs,
    not_resuming,
    progress_patterns,
)

__all__ = [
    "HEAD_BYTES",
    "HEAD_LINES",
    "TAIL_BYTES",
    "TAIL_LINES",
    "attempt_progress",
    "first_stalled",
    "last_progress",
    "resume_note",
]

TAIL_LINES = 200  # Beaker: the log lines read per run (one StreamJobLogs with tail_lines)
TAIL_BYTES = 64 * 1024  # local: the bytes of the log file read per run
HEAD_LINES = 2000  # Beaker: an attempt's first lines read for its first progress (setup comes first)
HEAD_BYTES = 1 << 20  # local: the same, in bytes of its log file


def last_progress(records: Iterable[tuple[int | None, bytes]], patterns: Sequence[str]) -> Progress | None:
    """The newest progress in a log's tail: `records` are (when logged in ns since the epoch or None,
    the line's raw bytes), oldest first; `patterns` the run's policy's (none: the defaults). None when
    no line matches or the patterns are not valid (the job refused them itself)."""
    try:
        compiled = progress_patterns(patterns)
    except ValueError:
        return None
    got = _step_progress(records, compiled, True)
    return None if got is None else Progress(text=got.text, at=got.at)


def _plain(text: str) -> str:
    """The text without control characters (a terminal escape in the job's output stays out of a table)."""
    return "".join(c for c in text if c.isprintable()).strip() or "?"


Records = Iterable[tuple[int | None, bytes]]  # (when logged, ns since the epoch or None; the raw line)


def attempt_progress(
    head: Records, tail: Records, patterns: Sequence[str]
) -> tuple[StepProgress | None, StepProgress | None]:
    """An attempt's (first, last) progress, each with when it was logged, from its log's first and last
    records, oldest first (the watchdog's matcher and steps); (None, None) when the patterns are not
    valid."""
    try:
        compiled = progress_patterns(patterns)
    except ValueError:
        return None, None
    return _step_progress(head, compiled, False), _step_progress(tail, compiled, True)


def _step_progress(
    records: Records, compiled: Sequence[re.Pattern[str]], newest: bool
) -> StepProgress | None:
    """The first (or `newest`) progress of `records` with its time, as watchdog.progress_of finds it."""
    parts = [
        (ns, part.decode("utf-8", "replace"))
        for ns, raw in records
        if not raw.startswith(OWN_LINE)  # the runtime's own (it may name a step): not the command's progress
        for part in raw.replace(b"\r", b"\n").split(b"\n")  # a progress bar's redraws
    ]
    hit = matching.scan([line for _, line in parts], compiled)[1 if newest else 0]
    if hit is None:
        return None
    ns = parts[hit[0]][0]
    at = dt.datetime.fromtimestamp(ns / 1e9, dt.UTC) if ns else None
    return StepProgress(text=_plain(hit[1]), step=hit[2], at=at)


def first_stalled(details: Iterable[AttemptDetail], replicas: int) -> str | None:
    """In a run of several replicas, the one whose progress stopped first (its newest attempt's last
    progress line is the oldest): `replica 2 of 4 made no progress first (last: step=1200 at 12:03:10
    UTC, 4m10s before the next)`; None with one replica or fewer than two times known."""
    newest: dict[tuple[str, int], AttemptDetail] = {}
    for d in details:
        if d.attempt >= newest.get((d.task, d.replica), d).attempt:
            newest[d.task, d.replica] = d
    timed = sorted(
        (d.last_progress.at, d) for d in newest.values() if d.last_progress is not None and d.last_progress.at
    )
    if replicas < 2 or len(timed) < 2:
        return None
    (at, d), (nxt, _) = timed[0], timed[1]
    assert d.last_progress is not None
    task = f"task {d.task}, " if len({t for t, _ in newest}) > 1 else ""
    gap = fmt_secs((nxt - at).total_seconds())
    return (
        f"{task}replica {d.replica} of {replicas} made no progress first (last: {d.last_progress.text}"
        f" at {at:%H:%M:%S} UTC, {gap} before the next)"
    )


def resume_note(details: Iterable[AttemptDetail]) -> str | None:
    """The newest attempt that started below the step its replica's attempt before had reached, as the
    job's runtime says it (`attempt 2 restarted at step 0; attempt 1 had reached step 12,639: it is not
    resuming from its checkpoint`); None when every retry resumed (or no steps are known)."""
    note = None
    before: dict[tuple[str, int], AttemptDetail] = {}
    for d in sorted(details, key=lambda d: (d.attempt, d.task, d.replica)):
        prev = before.get((d.task, d.replica))
        before[d.task, d.replica] = d
        if prev is None or prev.last_progress is None or d.first_progress is None:
            continue
        last, first = prev.last_progress.step, d.first_progress.step
        if last is not None and first is not None and first < last:
            note = not_resuming(Resume(last, f"attempt {d.attempt}", f"attempt {prev.attempt}", False), first)
    return note
