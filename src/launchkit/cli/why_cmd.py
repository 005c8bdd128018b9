"""`launchkit why [ID | --latest]`: why a run ended (or where it stands), in one line with the fix."""

from __future__ import annotations

import datetime as dt
import sys

import typer

from launchkit.application import OutputFormat
from launchkit.backends import RunInfo, RunStatus
from launchkit.backends.ending import WATCHDOG_STOP, describe
from launchkit.backends.progress import first_stalled, resume_note
from launchkit.cli.backend_choice import backend_option, local_option, resolve_run, run_ids
from launchkit.cli.context import get_app
from launchkit.cli.options import latest_option
from launchkit.masking import masked_run


def why(
    ctx: typer.Context,
    run_id: str | None = typer.Argument(None, metavar="[ID]", autocompletion=run_ids, help="Run id."),
    latest: bool = latest_option(),
    as_json: bool = typer.Option(
        False, "--json", help="JSON: the run, with its `end` reason and every attempt (`attempts_detail`)."
    ),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Why a run ended, from the backend's own record: exit code, out of memory, preempted, canceled
    (by whom, or by which timeout), node lost, never scheduled, image pull failure, or a setup step
    that failed; with what to do about it. Prints where a run still going stands (running: its last
    progress line)."""
    app = get_app(ctx)
    if as_json:
        app.output_format = OutputFormat.json
    b, run = resolve_run(app, backend, local, run_id, latest, full=True)  # --latest: as `why ID` reads it
    if run.status == RunStatus.running:
        run = run.model_copy(update={"progress": b.progress(run)})
    stalled = run.end is not None and run.end.by == "launchkit" and WATCHDOG_STOP in run.end.line
    if app.json or run.attempts > 1 or (stalled and run.replicas > 1):  # every attempt's log, both ends
        details = b.attempts_detail(run)
        culprit = first_stalled(details, run.replicas) if stalled else None  # who stopped first
        run = run.model_copy(
            update={"attempts_detail": details, "resume": resume_note(details), "culprit": culprit}
        )
    run = masked_run(app, b, run)  # the job's own text it quotes: secret values masked
    if app.json:
        app.print_json(run.model_dump(mode="json"))
        return
    sys.stdout.write(f"{run.id} {describe(run)}{_progress(run)}\n")


def _progress(run: RunInfo) -> str:
    """A running run's last progress line (the watchdog's patterns, matched at the end of its log)."""
    if run.status != RunStatus.running:
        return ""
    if run.progress is None:
        return "; no progress line at the end of its log"
    return "; " + run.progress.line(dt.datetime.now(dt.UTC))
