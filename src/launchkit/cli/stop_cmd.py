"""`launchkit stop ID... | --latest`: end runs (their whole process trees) and record them canceled."""

from __future__ import annotations

import sys

import typer

from launchkit.cli.backend_choice import (
    backend_option,
    choose,
    local_option,
    resolve_run,
    run_ids,
    workspace_option,
)
from launchkit.cli.context import get_app
from launchkit.cli.options import confirm, latest_option, yes_option
from launchkit.errors import UsageError


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
    app = get_app(ctx)
    if run_ids and latest:
        raise UsageError("give run IDs or --latest, not both", hint="drop one of them")
    if run_ids and workspace:
        raise UsageError("--workspace only applies with --latest", hint="drop it, or use --latest")
    if run_ids:
        targets = [(choose(app, backend, local, rid), rid) for rid in run_ids]
        runs = [(b, b.get(rid)) for b, rid in targets]
    else:
        runs = [resolve_run(app, backend, local, None, latest, workspace=workspace)]
    if as_json and not dry_run:
        raise UsageError("--json only applies with --dry-run", hint="add --dry-run")
    if dry_run and as_json:
        app.print_json([run.model_dump(mode="json") for _, run in runs])
        return
    if dry_run:
        for _, run in runs:
            sys.stdout.write(f"would stop {run.id} ({run.name}, {run.status.value})\n")
        return
    if not yes:
        names = ", ".join(f"{run.id} ({run.status.value})" for _, run in runs)
        confirm(f"Stop {names}?", command="stop")
    for b, run in runs:
        if run.status.finished and run.status.value != "lost":  # a lost run may have processes left
            app.info(f"{run.id} already {run.status.value}")
            continue
        final = b.stop(run)
        why = f" ({final.message})" if final.message else ""
        app.info(f"{run.id} {final.status.value}{why}")
