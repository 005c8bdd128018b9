"""`launchkit stop ID... | --latest`: end runs (their whole process trees) and record them canceled."""

from __future__ import annotations

import sys

import typer

from launchkit.cli.backend_choice import backend_option, choose, local_option, resolve_run
from launchkit.cli.context import get_app


def stop(
    ctx: typer.Context,
    run_ids: list[str] | None = typer.Argument(None, metavar="[ID]...", help="Runs to stop."),
    latest: bool = typer.Option(False, "--latest", "-l", help="Stop your newest run."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Don't ask for confirmation."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only show what would be stopped."),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Stop runs. Asks first unless --yes."""
    from launchkit.errors import UsageError

    app = get_app(ctx)
    if run_ids and latest:
        raise UsageError("give run IDs or --latest, not both", hint="drop one of them")
    if run_ids:
        targets = [(choose(app, backend, local, rid), rid) for rid in run_ids]
        runs = [(b, b.get(rid)) for b, rid in targets]
    else:
        runs = [resolve_run(app, backend, local, None, latest)]
    if dry_run:
        for _, run in runs:
            sys.stdout.write(f"would stop {run.id} ({run.name}, {run.status.value})\n")
        return
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("stop needs confirmation, but stdin is not a terminal", hint="pass --yes")
        names = ", ".join(f"{run.id} ({run.status.value})" for _, run in runs)
        if not typer.confirm(f"Stop {names}?", default=False, err=True):
            sys.exit(1)
    for b, run in runs:
        if run.status.finished and run.status.value != "lost":  # a lost run may have processes left
            app.info(f"{run.id} already {run.status.value}")
            continue
        final = b.stop(run)
        why = f" ({final.message})" if final.message else ""
        app.info(f"{run.id} {final.status.value}{why}")
