"""`launchkit logs ID`: a run's output as raw bytes (never wrapped or re-decoded).

The declaration (cli/declared.py); the body is cli/logs_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.options import (
    backend_option,
    latest_option,
    local_option,
    replica_option,
    run_ids,
    workspace_option,
)
from launchkit.core.units import MAX_COUNT


def logs(
    ctx: typer.Context,
    run_id: str | None = typer.Argument(
        None, metavar="[ID]", autocompletion=run_ids, help="Run whose logs to show."
    ),
    latest: bool = latest_option(),
    tail: int | None = typer.Option(
        None, "--tail", "-t", help="Only the last N lines.", min=0, max=MAX_COUNT
    ),
    head: int | None = typer.Option(
        None, "--head", "-n", help="Only the first N lines.", min=0, max=MAX_COUNT
    ),
    since: str | None = typer.Option(
        None, "--since", "-s", help="Lines since a duration ago (10m) or a time."
    ),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep streaming until the run ends."),
    run_number: int | None = typer.Option(
        None,
        "--attempt",
        "--run",
        min=1,
        max=MAX_COUNT,
        help="The Nth attempt of each replica (1 = first; a retry or a resume after a "
        "preemption is a new attempt; default: the newest).",
    ),
    replica: int | None = replica_option(),
    task: str | None = typer.Option(None, "--task", help="Beaker: only this task."),
    all_tasks: bool = typer.Option(False, "--all", "-a", help="Beaker: every task of the experiment."),
    timestamps: bool = typer.Option(False, "--timestamps", help="Prefix each line with its time."),
    output: str | None = typer.Option(
        None, "--output", "-o", help="Write to FILE, or to DIR/ with one file per replica."
    ),
    no_mask: bool = typer.Option(False, "--no-mask", help="Show the run's secret values (default: ***)."),
    workspace: str | None = workspace_option(),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Print a run's logs: raw bytes, exactly as the job wrote them (its secrets' values as ***)."""
