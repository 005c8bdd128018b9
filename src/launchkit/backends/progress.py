"""A running run's last progress (`launchkit list`'s PROGRESS column, `why`): the newest line of its
log's tail that the run's own progress patterns match, with the watchdog's one matcher
(runtime/node/launch/watchdog.py: `progress_in`; the patterns are the run's policy's, runtime/node/policy.py,
else the watchdog's DEFAULT_PATTERNS). Both backends read the tail and hand the lines here."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence

from launchkit.backends.protocol import Progress
from launchkit.runtime.node.launch.watchdog import progress_in, progress_patterns

__all__ = ["TAIL_BYTES", "TAIL_LINES", "last_progress"]

TAIL_LINES = 200  # Beaker: the log lines read per run (one StreamJobLogs with tail_lines)
TAIL_BYTES = 64 * 1024  # local: the bytes of the log file read per run


def last_progress(records: Iterable[tuple[int | None, bytes]], patterns: Sequence[str]) -> Progress | None:
    """The newest progress in a log's tail: `records` are (when logged in ns since the epoch or None,
    the line's raw bytes), oldest first; `patterns` the run's policy's (none: the defaults). None when
    no line matches or the patterns are not valid (the job refused them itself)."""
    try:
        compiled = progress_patterns(patterns)
    except ValueError:
        return None
    for ns, raw in reversed(list(records)):
        for part in reversed(raw.replace(b"\r", b"\n").split(b"\n")):  # a progress bar's redraws
            text = progress_in(part.decode("utf-8", "replace"), compiled)
            if text is not None:
                at = dt.datetime.fromtimestamp(ns / 1e9, dt.UTC) if ns else None
                return Progress(text=_plain(text), at=at)
    return None


def _plain(text: str) -> str:
    """The text without control characters (a terminal escape in the job's output stays out of a table)."""
    return "".join(c for c in text if c.isprintable()).strip() or "?"
