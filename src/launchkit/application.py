"""The application object: one per invocation, given to every command and every backend.

It owns what used to be process-wide CLI state: the reporter (messages for people on stderr, colour
only on a TTY without NO_COLOR), the verbosity, the output format and the Beaker settings. Data
(YAML, tables, JSON, logs) goes to stdout and is written by the commands themselves.

The CLI builds it in `launchkit.cli.app.main`; tests and library callers may build their own.
Import-free on purpose: `launchkit --help` loads it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import TextIO


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


def _color_default() -> bool:
    return sys.stderr.isatty() and "NO_COLOR" not in os.environ


@dataclass
class Application:
    """Reporter + settings for one launchkit invocation.

    Backends report through `info` (progress, notes), `warn` and `debug`; they never print to
    stderr themselves and never raise SystemExit: errors are raised as `launchkit.errors` types
    and reported once by the CLI's error boundary.
    """

    verbosity: int = 0  # -1 quiet, 0 normal, 1+ verbose
    output_format: OutputFormat = OutputFormat.text
    beaker_timeout: float | None = None  # --beaker-timeout (seconds); None: config, else default
    user_command: list[str] | None = None  # argv after the first `--`, verbatim
    color: bool = field(default_factory=_color_default)
    stderr: TextIO | None = None  # None: sys.stderr at the time of writing (tests swap it)
    # The command finished and holds no resources: main() may skip interpreter teardown.
    fast_exit: bool = False

    # -- messages for people (stderr) -----------------------------------------------------------
    def _emit(self, prefix: str, style: str, msg: str) -> None:
        if "://" in msg:  # no credentials from a URL in any message
            from launchkit.core.redact import redact_text

            msg = redact_text(msg)
        if self.color and prefix:
            prefix = f"\x1b[{style}m{prefix}\x1b[0m"
        out = self.stderr or sys.stderr
        try:
            out.write(f"{prefix}{msg}\n")
            out.flush()
        except OSError:  # stderr itself is gone or full: nowhere left to report to
            pass

    def error(self, msg: str) -> None:
        """Always shown. Only the CLI's error boundary and commands reporting a failed job use it."""
        self._emit("error: ", "1;31", msg)

    def warn(self, msg: str) -> None:
        if self.verbosity >= 0:
            self._emit("warning: ", "1;33", msg)

    def info(self, msg: str) -> None:
        """Progress and notes (hidden by --quiet)."""
        if self.verbosity >= 0:
            self._emit("", "", msg)

    def debug(self, msg: str) -> None:
        """Detail for -v."""
        if self.verbosity > 0:
            self._emit("debug: ", "2", msg)

    @property
    def verbose(self) -> bool:
        return self.verbosity > 0

    # -- data (stdout) --------------------------------------------------------------------------
    @property
    def json(self) -> bool:
        return self.output_format is OutputFormat.json

    def print_json(self, data: object) -> None:
        """Data for programs: JSON on stdout (commands with --json)."""
        import json

        sys.stdout.write(json.dumps(data, indent=2) + "\n")
