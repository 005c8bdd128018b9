"""`launchkit why [ID | --latest]`: why a run ended (or where it stands), in one line with the fix.

The declaration (cli/declared.py); the body is cli/why_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.options import backend_option, latest_option, local_option, run_ids


def why(
    ctx: typer.Context,
    run_id: str | None = typer.Argument(None, metavar="[ID]", autocompletion=run_ids, help="Run id."),
    latest: bool = latest_option(),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="JSON: the run, with its `end` reason, every attempt (`attempts_detail`), `phases` (seconds; "
        "each job's in `phases_detail`), `gpu_hours`, and a queued run's start estimate (`phase_notes`).",
    ),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Why a run ended, from the backend's own record: exit code, out of memory, preempted, canceled
    (by whom, or by which timeout), node lost, never scheduled, image pull failure, or a setup step
    that failed; with what to do about it. Prints where a run still going stands (running: its last
    progress line), then where its time went: queued (each waiting reason and how long it held),
    starting, setup, first output, running, GPU-hours."""
