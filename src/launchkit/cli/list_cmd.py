"""`launchkit list`: runs, newest first, with status and exit code."""

from __future__ import annotations

import datetime as dt

import typer

from launchkit.application import OutputFormat
from launchkit.cli import completing
from launchkit.cli.backend_choice import backend_option, choose, local_option, workspace_option
from launchkit.cli.context import get_app

# gantry's (Beaker workload) status names -> launchkit's
GANTRY_STATUSES = {
    "submitted": "queued",
    "ready_to_start": "queued",
    "initializing": "starting",
    "stopping": "running",
    "uploading_results": "running",
}


def _age(created: dt.datetime) -> str:
    s = int((dt.datetime.now(dt.UTC) - created).total_seconds())
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit} ago"
    return f"{s}s ago"


def list_runs(
    ctx: typer.Context,
    status: list[str] | None = typer.Option(
        None,
        "--status",
        "-s",
        help="Only runs with this status (repeatable).",
        autocompletion=completing.statuses,
    ),
    limit: int = typer.Option(20, "--limit", "-l", "-n", min=1, help="At most N runs."),
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
    author: str | None = typer.Option(None, "--author", "-a", help="Only runs by this user."),
    me: bool = typer.Option(False, "--me", help="Beaker: only your runs."),
    text: str | None = typer.Option(None, "--text", "-t", help="Name or description contains TEXT."),
    max_age: str | None = typer.Option(
        None, "--max-age", help="Only runs younger than this (7d, 12h; a bare number is days)."
    ),
    show_all: bool = typer.Option(False, "--all", help="Beaker: also experiments not launched by launchkit."),
    workspace: str | None = workspace_option(),
    group: str | None = typer.Option(None, "--group", "-g", help="Beaker: only runs in this group."),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """List runs, newest first."""
    from launchkit.backends import Capability, RunStatus, require
    from launchkit.errors import UsageError

    try:
        statuses = list(dict.fromkeys(RunStatus(GANTRY_STATUSES.get(s, s)) for s in status or []))
    except ValueError as e:
        raise UsageError(str(e), hint="statuses: " + ", ".join(s.value for s in RunStatus)) from None
    if me and author:
        raise UsageError("--me and --author cannot be combined", hint="drop one")
    age = None
    if max_age is not None:
        from launchkit.core.units import parse_duration

        try:
            # gantry: a bare integer is days
            age = (
                dt.timedelta(days=int(max_age))
                if max_age.isdigit()
                else dt.timedelta(seconds=parse_duration(max_age))
            )
        except Exception:  # noqa: BLE001 - any parse failure is a usage error
            raise UsageError(f"invalid --max-age {max_age!r}", hint="use e.g. 7d, 12h, 30m") from None
    app = get_app(ctx)
    if as_json:
        app.output_format = OutputFormat.json
    b = choose(app, backend, local, workspace=workspace)
    require(b, Capability.others_runs, me=me, all=show_all)
    require(b, Capability.workspaces, group=group)
    scope = {"group": group} if group else {}
    runs = b.list_runs(
        limit=limit,
        statuses=statuses or None,
        author=author,
        text=text,
        max_age=age,
        include_all=show_all,
        mine=me,
        **scope,
    )
    if app.json:
        app.print_json([r.model_dump(mode="json") for r in runs])
        return
    from launchkit.cli.table import print_table

    header = ["ID", "NAME", "STATUS", "EXIT", "CREATED"]
    rows = [
        [r.id, r.name, r.status.value, "" if r.exit_code is None else str(r.exit_code), _age(r.created)]
        for r in runs
    ]
    if any(r.author for r in runs):
        header.append("AUTHOR")
        for row, r in zip(rows, runs, strict=True):
            row.append(r.author or "")
    print_table(header, rows, status_column="STATUS")
