"""Process-wide CLI state and the output layer: data goes to stdout, messages to stderr."""

from __future__ import annotations

import os
import sys
from functools import lru_cache

verbosity: int = 0  # -1 quiet, 0 normal, 1+ verbose
user_command: list[str] | None = None  # argv after the first `--`, verbatim
beaker_timeout: float | None = None  # --beaker-timeout (seconds)
fast_exit: bool = False  # the command finished and holds no resources: main() may skip teardown


class Console:
    """Messages for people (stderr). Plain lines; colour only on a TTY and without NO_COLOR."""

    def __init__(self) -> None:
        self.color = sys.stderr.isatty() and "NO_COLOR" not in os.environ

    def _emit(self, prefix: str, style: str, msg: str) -> None:
        if self.color and prefix:
            prefix = f"\x1b[{style}m{prefix}\x1b[0m"
        sys.stderr.write(f"{prefix}{msg}\n")
        sys.stderr.flush()

    def error(self, msg: str) -> None:
        self._emit("error: ", "1;31", msg)

    def warn(self, msg: str) -> None:
        if verbosity >= 0:
            self._emit("warning: ", "1;33", msg)

    def info(self, msg: str) -> None:
        if verbosity >= 0:
            self._emit("", "", msg)

    def debug(self, msg: str) -> None:
        if verbosity > 0:
            self._emit("debug: ", "2", msg)


@lru_cache(maxsize=1)
def console() -> Console:
    return Console()
