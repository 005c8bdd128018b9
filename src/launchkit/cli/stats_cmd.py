"""`launchkit stats [--last N]`: where your recent runs' time went, p50/p90 of each phase per cluster.

The declaration (cli/declared.py); the body is cli/stats_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.options import (
    backend_option,
    local_option,
    workspace_option,
)


def stats(
    ctx: typer.Context,
    last: int = typer.Option(20, "--last", "-n", min=1, max=200, help="Your newest N runs."),
    as_json: bool = typer.Option(
        False, "--json", help="JSON: per cluster, runs, GPU-hours, each phase's n/p50/p90."
    ),
    workspace: str | None = workspace_option(),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Where your recent runs' time went, per cluster.

    p50 and p90 of each phase (queued, starting, setup, first output, running) over your newest runs,
    and the slowest phase before the command runs. Each run's phases
    as `launchkit why` tells them (on Beaker about four requests a run, and the org's nodes listed
    once to name the cluster each ran on)."""
