"""`launchkit list`: runs, newest first, with status, exit code, why they ended or wait, and a running
run's last progress line (`--json`: `end`, `waiting`, `progress`).

The declaration (cli/declared.py); the body is cli/list_body.py."""

from __future__ import annotations

import typer

from launchkit.cli import completing
from launchkit.cli.options import backend_option, local_option, workspace_option
from launchkit.core.status import RunStatus
from launchkit.core.units import MAX_COUNT

STATUSES = ", ".join(s.value for s in RunStatus)


def list_runs(
    ctx: typer.Context,
    status: list[str] | None = typer.Option(
        None,
        "--status",
        "-s",
        help=f"Only runs with this status (repeatable): {STATUSES}; "
        "on Beaker also its own names (uploading_results...).",
        autocompletion=completing.statuses,
    ),
    limit: int = typer.Option(20, "--limit", "-l", "-n", min=1, max=MAX_COUNT, help="At most N runs."),
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
    author: str | None = typer.Option(None, "--author", "-a", help="Only runs by this user."),
    me: bool = typer.Option(False, "--me", help="Beaker: only your runs."),
    text: str | None = typer.Option(None, "--text", "-t", help="Name or description contains TEXT."),
    max_age: str | None = typer.Option(
        None, "--max-age", help="Only runs younger than this (7 = 7 days; 12h, 30m)."
    ),
    show_all: bool = typer.Option(False, "--all", help="Beaker: also experiments not launched by launchkit."),
    workspace: str | None = workspace_option(),
    group: str | None = typer.Option(None, "--group", "-g", help="Beaker: only runs in this group."),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """List runs, newest first."""
