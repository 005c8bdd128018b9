"""`launchkit results [ID | --latest] [-o DIR]`: download a run's results (each replica's result dataset)."""

from __future__ import annotations

import sys

import typer

from launchkit.cli.backend_choice import backend_option, local_option, resolve_run
from launchkit.cli.context import get_app
from launchkit.cli.options import latest_option


def results(
    ctx: typer.Context,
    run_id: str | None = typer.Argument(None, metavar="[ID]", help="Run whose results to fetch."),
    latest: bool = latest_option(),
    output: str | None = typer.Option(
        None, "--output", "-o", metavar="DIR", help="Where to put them [default: ./results/ID on Beaker]."
    ),
    author: str | None = typer.Option(
        None, "--author", help="Beaker: with --latest, this user's newest run."
    ),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Download a run's results, one directory per task and replica when there are several.

    Beaker: the jobs' result datasets (what the job wrote to $RESULTS_DIR). Local runs: their results
    directories (copied to -o DIR when given). Prints the directories on stdout."""
    app = get_app(ctx)
    b, run = resolve_run(app, backend, local, run_id, latest, author)
    folders = b.download_results(run, output)
    for folder in folders:  # once each, on stdout
        sys.stdout.write(folder + "\n")
    app.info(
        f"downloaded the results of {run.id} ({len(folders)} director{'y' if len(folders) == 1 else 'ies'})"
    )
