"""The application object: one per invocation, given to every command and every backend.

It owns what used to be process-wide CLI state: the reporter (messages for people on stderr, colour
only on a TTY without NO_COLOR), the verbosity, the output format and the Beaker settings. Data
(YAML, tables, JSON, logs) goes to stdout and is written by the commands themselves.

The CLI builds it in `launchkit.cli.app.main`; tests and library callers may build their own.
Import-free on purpose: `launchkit --help` loads it (the config layers, tomllib and platformdirs, are
read on first use of `config`; the redaction of URLs, for a message that has one).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TextIO


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
    json_errors: bool = False  # --json was given: the error boundary also writes a failure as JSON
    _config: Any = field(default=None, repr=False)  # launchkit.config.Config, loaded on first use

    # -- configuration --------------------------------------------------------------------------
    @property
    def config(self) -> Any:
        """The merged, validated config layers (launchkit.config.load_config), read once per invocation."""
        if self._config is None:
            from launchkit.config import load_config

            self._config = load_config()
        return self._config

    @config.setter
    def config(self, value: Any) -> None:
        self._config = value

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

    # -- progress (stderr) ----------------------------------------------------------------------
    def progress(self, label: str, total: int, *, unit: str = "bytes") -> Progress:
        """A progress bar for `total` units: rich's bar on a terminal (stderr), otherwise one plain line
        at the start and one at the end. Hidden by --quiet. Use as a context manager; `advance(n)` may be
        called from several threads."""
        return Progress(self, label, total, unit)


class Progress:
    """See `Application.progress`."""

    def __init__(self, app: Application, label: str, total: int, unit: str) -> None:
        self.app, self.label, self.total, self.unit = app, label, total, unit
        self.done = 0
        self._lock = threading.Lock()
        self._bar: object | None = None
        self._task: object | None = None

    def _fmt(self, n: int) -> str:
        if self.unit != "bytes":
            return f"{n} {self.unit}"
        size = float(n)
        for suffix in ("B", "KB", "MB", "GB"):
            if size < 1000 or suffix == "GB":
                return f"{size:.0f} {suffix}" if suffix == "B" else f"{size:.1f} {suffix}"
            size /= 1000
        return f"{n} B"

    def __enter__(self) -> Progress:
        if self.app.verbosity < 0:
            return self
        out = self.app.stderr or sys.stderr
        if out.isatty():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )
            from rich.progress import Progress as RichProgress

            amount = (
                [DownloadColumn(), TransferSpeedColumn()] if self.unit == "bytes" else [MofNCompleteColumn()]
            )
            bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=20),
                *amount,
                TimeRemainingColumn(),
                console=Console(file=out, no_color=not self.app.color),
                transient=False,
            )
            bar.start()
            self._task = bar.add_task(self.label, total=self.total)
            self._bar = bar
        else:
            self.app.info(f"{self.label}: {self._fmt(self.total)}")
        return self

    def advance(self, n: int) -> None:
        with self._lock:
            self.done += n
            if self._bar is not None:
                self._bar.update(self._task, advance=n)  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()  # type: ignore[attr-defined]
        elif self.app.verbosity >= 0 and exc[0] is None:
            self.app.info(f"{self.label}: done ({self._fmt(self.done)})")
