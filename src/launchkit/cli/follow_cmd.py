"""`launchkit follow [ID | --latest]`: stream a run's output live; exit with the job's exit code.

The declaration (cli/declared.py); the body is cli/follow_body.py."""

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


def follow(
    ctx: typer.Context,
    run_id: str | None = typer.Argument(None, metavar="[ID]", autocompletion=run_ids, help="Run to follow."),
    latest: bool = latest_option("Follow your newest run."),
    replica: int | None = replica_option(),
    all_replicas: bool = typer.Option(
        False, "--all-replicas", help="Beaker: all replicas, lines prefixed [N]."
    ),
    author: str | None = typer.Option(
        None, "--author", "-a", help="Beaker: with --latest, this user's newest run."
    ),
    tail: bool = typer.Option(False, "--tail", "-t", help="Start with the last 10 lines, not the whole log."),
    task: str | None = typer.Option(
        None, "--task", help="Beaker: only this task (a run of many tasks is otherwise summarised)."
    ),
    no_mask: bool = typer.Option(False, "--no-mask", help="Show the run's secret values (default: ***)."),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Its events as JSON lines (kind, time, line, fix, ...), not its output.",
    ),
    workspace: str | None = workspace_option(),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Stream a run's output live (its secrets' values as ***). Exits with the job's exit code; Ctrl-C
    detaches."""
