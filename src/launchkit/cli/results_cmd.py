"""`launchkit results [ID | --latest] [-o DIR]`: download a run's results (each replica's result dataset).

The declaration (cli/declared.py); the body is cli/results_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.options import (
    backend_option,
    latest_option,
    local_option,
)


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
