"""`launchkit stop`'s body (cli/stop_cmd.py declares it): end runs (their whole process trees) and
record them canceled."""

from __future__ import annotations

import sys

import typer

from launchkit.cli.backend_choice import (
    choose,
    resolve_run,
)
from launchkit.cli.context import get_app
from launchkit.cli.options import confirm
from launchkit.errors import UsageError


def stop(
    ctx: typer.Context,
    run_ids: list[str] | None,
    latest: bool,
    yes: bool,
    dry_run: bool,
    as_json: bool,
    workspace: str | None,
    backend: str | None,
    local: bool,
) -> None:
    """`launchkit stop` (cli/stop_cmd.py declares its options)."""
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
