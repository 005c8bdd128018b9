"""`launchkit results`'s body (cli/results_cmd.py declares it): download a run's results (each
replica's result dataset)."""

from __future__ import annotations

import sys

import typer

from launchkit.cli.backend_choice import resolve_run
from launchkit.cli.context import get_app


def results(
    ctx: typer.Context,
    run_id: str | None,
    latest: bool,
    output: str | None,
    author: str | None,
    backend: str | None,
    local: bool,
) -> None:
    """`launchkit results` (cli/results_cmd.py declares its options)."""
    app = get_app(ctx)
    b, run = resolve_run(app, backend, local, run_id, latest, author)
    folders = b.download_results(run, output)
    for folder in folders:  # once each, on stdout
        sys.stdout.write(folder + "\n")
    app.info(
        f"downloaded the results of {run.id} ({len(folders)} director{'y' if len(folders) == 1 else 'ies'})"
    )
