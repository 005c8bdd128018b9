"""`launchkit run --dry-run`: the spec and its notes printed, nothing submitted; `--save-spec` writes it.

cli/run_cmd.py runs this module's `run` for a dry run and cli/launching.py's for a launch: what only a
launch needs (the last-run record, --follow, Slack) is not imported to print a spec.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from launchkit.application import Application
from launchkit.cli.context import get_app
from launchkit.errors import UsageError
from launchkit.launch import Launch, plan, ready
from launchkit.run_request import request_from_options


def run(ctx: typer.Context, extra: list[str], **given: Any) -> None:
    """`launchkit run --dry-run` (cli/run_cmd.py declares its options)."""
    app = get_app(ctx)
    launch = plan(app, request_from_options(app, given, app.user_command, extra))
    assert launch.printed
    write_spec(app, launch)


def write_spec(app: Application, launch: Launch) -> bool:
    """The plan line first (stderr), before anything is created; then a launch creates what its spec
    needs (`ready`) and --save-spec writes the spec; a dry run prints it (--json: the plan and the spec
    as one JSON object), then its notes. True: a dry run, done."""
    request = launch.request
    plan = launch.plan
    app.info(plan.line())
    ready(launch)  # a launch: the spec --save-spec writes is the one sent
    text = launch.spec_yaml if (launch.printed and not request.json_output) or request.save_spec else ""
    if request.save_spec:
        save_spec(app, request.save_spec, text)
    if not launch.printed:
        return False
    if request.json_output:
        app.print_json({"plan": plan.to_json(), "spec": launch.submission.spec.printable()})
    else:
        sys.stdout.write(text)
    sys.stdout.flush()
    for note in launch.notes:
        app.info(note)
    app.fast_exit = True
    return True


def save_spec(app: Application, path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"--save-spec {path!r}: {e.strerror}", hint="give a writable file path") from None
    app.info(f"spec saved to {path}")
