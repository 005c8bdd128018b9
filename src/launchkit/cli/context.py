"""How a command gets the `Application` (`main()` puts it on the click context as `obj`), and what
becomes of stdout when its reader has gone."""

from __future__ import annotations

import os
import sys

import typer

from launchkit.application import Application, OutputFormat


def get_app(ctx: typer.Context, as_json: bool = False) -> Application:
    """The invocation's Application (a default one when a command is invoked without `main()`);
    `as_json`: the command's --json, which makes its output JSON."""
    app = ctx.ensure_object(Application)
    if as_json:
        app.output_format = OutputFormat.json
    return app


def stdout_closed() -> int:
    """After a BrokenPipeError (e.g. `launchkit logs ID | head`) or a failed write: point stdout at
    /dev/null so nothing buffered is written (or fails) again at exit; return 141 (SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a real file (tests capture stdout in memory)
        pass
    return 141
