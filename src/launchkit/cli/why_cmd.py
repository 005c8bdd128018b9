"""`launchkit why [ID | --latest]`: why a run ended (or where it stands), in one line with the fix."""

from __future__ import annotations

import sys

import typer

from launchkit.application import OutputFormat
from launchkit.backends.ending import describe
from launchkit.cli.backend_choice import backend_option, local_option, local_run_ids, resolve_run
from launchkit.cli.context import get_app
from launchkit.cli.options import latest_option


def why(
    ctx: typer.Context,
    run_id: str | None = typer.Argument(None, metavar="[ID]", autocompletion=local_run_ids, help="Run id."),
    latest: bool = latest_option(),
    as_json: bool = typer.Option(False, "--json", help="JSON: the run, with its `end` reason."),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Why a run ended, from the backend's own record: exit code, out of memory, preempted, canceled
    (by whom, or by which timeout), node lost, never scheduled, image pull failure, or a setup step
    that failed; with what to do about it. Prints where a run still going stands."""
    app = get_app(ctx)
    if as_json:
        app.output_format = OutputFormat.json
    _, run = resolve_run(app, backend, local, run_id, latest)
    if app.json:
        app.print_json(run.model_dump(mode="json"))
        return
    sys.stdout.write(f"{run.id} {describe(run)}\n")
