"""A running run's last progress (`launchkit list`'s PROGRESS column, `why`): the newest line of its
log's tail that the run's own progress patterns match, with the watchdog's one matcher
(runtime/node/launch/matching.py; the patterns are the job's LAUNCHKIT_PROGRESS_PATTERNS, else its
DEFAULT_PATTERNS). Both backends read the tail and hand the lines here.

Bounded as the watchdog's: each line's first `matching.SLICE` characters; the defaults matched here,
the user's own patterns in a matcher process given BUDGET seconds for the whole tail (a pattern that
backtracks for ever shows no progress instead of hanging `list`)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Iterable

from launchkit.backends.protocol import Progress
from launchkit.core.contract import ENV_PROGRESS_PATTERNS
from launchkit.runtime.node.launch import matching

__all__ = ["BUDGET", "ENV_PROGRESS_PATTERNS", "TAIL_BYTES", "TAIL_LINES", "last_progress"]

TAIL_LINES = 200  # Beaker: the log lines read per run (one StreamJobLogs with tail_lines)
TAIL_BYTES = 64 * 1024  # local: the bytes of the log file read per run
BUDGET = 5.0  # seconds the user's patterns may take over one run's tail


def last_progress(
    records: Iterable[tuple[int | None, bytes]], patterns: str | None, budget: float = BUDGET
) -> Progress | None:
    """The newest progress in a log's tail: `records` are (when logged in ns since the epoch or None,
    the line's raw bytes), oldest first; `patterns` the job's LAUNCHKIT_PROGRESS_PATTERNS (None: the
    defaults). None when no line matches, the patterns are not valid (the job refused them itself)
    or their matching took over `budget` seconds."""
    texts = matching.pattern_texts(patterns)
    try:
        compiled = matching.compile_all(texts)
    except ValueError:
        return None
    lines = [
        (ns, part.decode("utf-8", "replace"))
        for ns, raw in records
        for part in raw.replace(b"\r", b"\n").split(b"\n")  # a progress bar's redraws
    ]
    if matching.is_default(texts):
        for ns, line in reversed(lines):
            text = matching.progress_in(line, compiled)
            if text is not None:
                return _progress(text, ns)
        return None
    found = _matched_apart(texts, [line for _, line in lines], budget)
    return None if found is None else _progress(found[1], lines[found[0]][0])


def _matched_apart(texts: list[str], lines: list[str], budget: float) -> tuple[int, str] | None:
    """(index, progress) of the newest line the patterns match, matched in a matcher process."""
    data = b"".join(matching.request(i, line) for i, line in enumerate(lines))
    try:
        done = subprocess.run(
            matching.argv(sys.executable, texts), input=data, capture_output=True, timeout=budget, check=False
        )
    except (OSError, subprocess.SubprocessError):  # it took too long (killed), or could not start
        return None
    found = [(m, text) for _, m, text in matching.replies(done.stdout) if m is not None]
    return max(found) if found and done.returncode == 0 else None


def _progress(text: str, ns: int | None) -> Progress:
    at = dt.datetime.fromtimestamp(ns / 1e9, dt.UTC) if ns else None
    return Progress(text=_plain(text), at=at)


def _plain(text: str) -> str:
    """The text without control characters (a terminal escape in the job's output stays out of a table)."""
    return "".join(c for c in text if c.isprintable()).strip() or "?"
