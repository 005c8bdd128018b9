"""`progress LABEL LOG [PARENT]`: long setup steps are not silent. While a step works into its log (its
output goes there), one line on stderr every LAUNCHKIT_PROGRESS_SECONDS (default 10; 0: none) with the
time so far and the log's last line: `[launchkit] install: 20s so far (running uv sync --frozen)`.

Bash starts it in the background as the process itself (entrypoint.sh: lk_progress_start) and ends it
with SIGKILL: a SIGTERM that came between bash's fork and the exec of this Python met bash's own TERM
trap in the child and was lost (the flaky test_custom_install_failure_fails_too: the ticker outlived
the job and held its stderr open). It also ends by itself, within PARENT_POLL seconds, when bash is
gone (PARENT: bash's pid, $$; a ticker that starts after bash has exited ends at once), or when
stderr is.
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
PARENT_POLL = 0.25  # seconds between two looks at whether bash is still there


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
    until the parent is gone (looked at every PARENT_POLL seconds) or `out` is closed."""
    start = clock()
    n = 1
    while True:
        due = start + n * every
        while True:
            if not parent_alive():
                return
            left = due - clock()
            if left <= 0:
                break
            sleep(min(left, PARENT_POLL))
        try:
            out.write(line(label, clock() - start, last_line(log)))
            out.flush()
        except (OSError, ValueError):  # stderr closed: nobody reads the lines
            return
        n += 1


def progress(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or (len(argv) == 3 and not argv[2].isdigit()):
        print("[launchkit] error: usage: progress LABEL LOG [PARENT]", file=sys.stderr)
        return 100
    every = every_seconds(os.environ)
    if every <= 0:
        return 0
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # ended by a signal as bash's own loop was
    parent = int(argv[2]) if len(argv) == 3 else os.getppid()  # (bash gone already: 1, or a subreaper)
    tick(argv[0], argv[1], every, sys.stderr, parent_alive=lambda: os.getppid() == parent)
    return 0
