"""`launchkit stop ID... | --latest`: end runs (their whole process trees) and record them canceled.

The declaration (cli/declared.py); the body is cli/stop_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.options import (
    backend_option,
    latest_option,
    local_option,
    run_ids,
    workspace_option,
    yes_option,
)


def stop(
    ctx: typer.Context,
    run_ids: list[str] | None = typer.Argument(
        None, metavar="[ID]...", autocompletion=run_ids, help="Runs to stop."
    ),
    latest: bool = latest_option("Stop your newest run."),
    yes: bool = yes_option(),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be stopped."),
    as_json: bool = typer.Option(False, "--json", help="With --dry-run: JSON output."),
    workspace: str | None = workspace_option(),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Stop runs. Asks first unless --yes."""
