"""`progress LABEL LOG`: long setup steps are not silent. While a step works into its log (its output goes
there), one line on stderr every LAUNCHKIT_PROGRESS_SECONDS (default 10; 0: none) with the time so far
and the log's last line: `[launchkit] install: 20s so far (running uv sync --frozen)`.

Bash starts it in the background as the process itself (entrypoint.sh: lk_progress_start), so that a
plain `kill` ends it at once; it also ends by itself when bash is gone, or stderr is.
"""

from __future__ import annotations

import os
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Mapping, TextIO

DEFAULT_SECONDS = 10
WIDTH = 120  # of the log's line shown
TAIL_BYTES = 8192  # the end of the log read for its last line


def every_seconds(environ: Mapping[str, str]) -> int:
    """LAUNCHKIT_PROGRESS_SECONDS as a whole number of seconds; 0 (none) when it is not one."""
    text = environ.get("LAUNCHKIT_PROGRESS_SECONDS", "").strip() or str(DEFAULT_SECONDS)
    return int(text) if text.isdigit() else 0


def last_line(path: str) -> str:
    """The log's last line (an unfinished one included), carriage returns dropped, its first WIDTH
    characters; a command line the log records (`$ uv sync`) as `running uv sync`. "" if unreadable."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            data = f.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", "replace").split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    line = lines[-1].replace("\r", "")[:WIDTH]
    return "running " + line[2:] if line.startswith("$ ") else line


def line(label: str, seconds: float, last: str) -> str:
    return "[launchkit] %s: %ds so far%s\n" % (label, int(seconds), " (%s)" % last if last else "")  # noqa: UP031


def tick(
    label: str,
    log: str,
    every: int,
    out: TextIO,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    parent_alive: Callable[[], bool] = lambda: True,
) -> None:
    """A line every `every` seconds from now (on the clock's schedule, not drifting with the writes),
    until the parent is gone or `out` is closed."""
    start = clock()
    n = 1
    while True:
        sleep(max(0.0, start + n * every - clock()))
        if not parent_alive():
            return
        try:
            out.write(line(label, clock() - start, last_line(log)))
            out.flush()
        except (OSError, ValueError):  # stderr closed: nobody reads the lines
            return
        n += 1


def progress(argv: list[str]) -> int:
    if len(argv) != 2:
        print("[launchkit] error: usage: progress LABEL LOG", file=sys.stderr)
        return 100
    every = every_seconds(os.environ)
    if every <= 0:
        return 0
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # ended by a signal as bash's own loop was
    parent = os.getppid()
    tick(argv[0], argv[1], every, sys.stderr, parent_alive=lambda: os.getppid() == parent)
    return 0
