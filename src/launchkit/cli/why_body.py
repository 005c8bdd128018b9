"""`launchkit why`'s body (cli/why_cmd.py declares it): why a run ended (or where it stands), in one
line with the fix, and where its time went."""

from __future__ import annotations

import datetime as dt
import sys

import typer

from launchkit.backends import RunInfo, RunStatus
from launchkit.backends.ending import WATCHDOG_STOP, describe
from launchkit.backends.progress import first_stalled, resume_note
from launchkit.cli.backend_choice import resolve_run
from launchkit.cli.context import get_app
from launchkit.core import digest
from launchkit.core import phases as ph
from launchkit.core.units import span
from launchkit.masking import masked_run


def why(
    ctx: typer.Context, run_id: str | None, latest: bool, as_json: bool, backend: str | None, local: bool
) -> None:
    """`launchkit why` (cli/why_cmd.py declares its options)."""
    app = get_app(ctx, as_json)
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
    run = b.phases(run, detail=True)
    run = masked_run(app, b, run)  # the job's own text it quotes: secret values masked
    if app.json:
        # `phases_detail`: why's alone (list --json keeps its shape)
        detail = [d.model_dump(mode="json", exclude={"env_cache"}) for d in run.phases_detail]
        app.print_json({**run.model_dump(mode="json"), "phases_detail": detail})
        return
    sys.stdout.write(f"{run.id} {describe(run)}{_progress(run)}\n")
    for line in sweep_lines(run):
        sys.stdout.write(line + "\n")
    for line in time_lines(run):
        sys.stdout.write(line + "\n")


def sweep_lines(run: RunInfo) -> list[str]:
    """A run of several tasks (a sweep): its digest, as its follower posts it, and the tasks that need
    attention, each with its why line (core/digest.py)."""
    if not run.tasks_detail:
        return []
    out = [f"tasks: {digest.digest_line(run.tasks_detail)}"]
    need = digest.attention_lines(run.tasks_detail)
    if need:
        out.append("need attention:")
        out += [f"  task {line}" for line in need]
    return out


def time_lines(run: RunInfo) -> list[str]:
    """Where its time went: `phases: queued 3m12s (slot limit 64/64, then ...) · starting 41s · ...`
    once it has started, and the waiting history (`waited 9h32m: slot limit 64/64 (08:01-17:33), then
    no node with 8 free GPUs (17:33-17:39)`, UTC) when it waited for a reason."""
    out = []
    p, notes = run.phases, run.phase_notes
    if p is not None and (p.starting is not None or p.running is not None or p.setup is not None):
        if said := ph.line(p, notes, gpu_hours=run.gpu_hours):
            out.append(f"phases: {said}")
        if ph.differ(run.phases_detail):  # replicas or attempts whose phases differ: each job's
            for d in run.phases_detail:
                each = ph.line(d.phases, ph.PhaseNotes(env_cache=d.env_cache))
                out.append(f"  {ph.detail_label(d, run.phases_detail)}: {each}")
    if notes is not None and notes.waits and p is not None and p.queued is not None:
        verb = "waited" if run.status != RunStatus.queued else "waiting"
        out.append(f"{verb} {span(p.queued)}: {ph.history(notes.waits)}")
    if notes is not None and notes.ahead is not None:
        at_least = "" if notes.read_all else "at least "
        jobs = "job waits" if notes.ahead == 1 else "jobs wait"
        out.append(
            f"position: {at_least}{notes.ahead} {jobs} ahead of it for the same kind of node at the same or "
            f"higher priority (of {notes.queue_read} queued jobs Beaker lists)"
        )
    if notes is not None and (estimate := estimate_line(notes)):
        out.append(estimate)
    if notes is not None and notes.elsewhere:
        out.append(f"instead: it {notes.elsewhere}")
    return out


def estimate_line(notes: ph.PhaseNotes) -> str | None:
    """`estimate: it starts by ~14:40 UTC at the latest (BASIS); ...` or `no estimate: REASON`."""
    e = notes.estimate
    if e is not None:
        line = (
            f"estimate: it starts by ~{e.at_utc} at the latest ({e.basis}); an upper bound from what Beaker "
            "lists: jobs may end sooner, and a higher-priority job arriving would go first"
        )
        return line + (f"; {e.sooner}" if e.sooner else "")
    if notes.no_estimate_reason:
        return f"no estimate: {notes.no_estimate_reason}"
    return None


def _progress(run: RunInfo) -> str:
    """A running run's last progress line (the watchdog's patterns, matched at the end of its log)."""
    if run.status != RunStatus.running:
        return ""
    if run.progress is None:
        return "; no progress line at the end of its log"
    return "; " + run.progress.line(dt.datetime.now(dt.UTC))
