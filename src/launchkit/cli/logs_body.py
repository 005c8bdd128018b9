"""`launchkit logs`'s body (cli/logs_cmd.py declares it): a run's output as raw bytes (never wrapped
or re-decoded)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sys
from typing import IO, cast

import typer

from launchkit.backends import Capability, LogQuery, require
from launchkit.cli.backend_choice import resolve_run
from launchkit.cli.context import get_app, stdout_closed
from launchkit.cli.following import follow_run
from launchkit.core.units import parse_duration
from launchkit.errors import PreconditionError, UsageError, from_exception
from launchkit.masking import masked


def _since(value: str) -> dt.datetime | float:
    """A time, or a duration (seconds) the backend measures back from its own now (Beaker's: the server
    stamps the lines, and its clock may differ from this machine's)."""
    with contextlib.suppress(ValueError, TypeError):  # not a duration: try a timestamp
        return float(parse_duration(value))
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(
            f"--since {value!r} is neither a duration nor a timestamp",
            hint="use e.g. --since 10m or --since 2026-01-31T12:00:00",
        ) from None
    return t if t.tzinfo else t.astimezone()


def logs(
    ctx: typer.Context,
    run_id: str | None,
    latest: bool,
    tail: int | None,
    head: int | None,
    since: str | None,
    follow: bool,
    run_number: int | None,
    replica: int | None,
    task: str | None,
    all_tasks: bool,
    timestamps: bool,
    output: str | None,
    no_mask: bool,
    workspace: str | None,
    backend: str | None,
    local: bool,
) -> None:
    """`launchkit logs` (cli/logs_cmd.py declares its options)."""
    if head is not None and tail is not None:
        raise UsageError("--head and --tail cannot be combined", hint="pick one")
    app = get_app(ctx)
    b, run = resolve_run(app, backend, local, run_id, latest, workspace=workspace)
    if task and all_tasks:
        raise UsageError("--task and --all cannot be combined", hint="pick one")
    require(b, Capability.tasks, all_tasks=all_tasks, task=task)  # --attempt: local runs retry too
    if follow:
        for given, opt in (
            (all_tasks, "--all"),
            (head, "--head"),
            (since, "--since"),
            (output, "--output"),
            (task, "--task"),
            (run_number, "--attempt"),
        ):
            if given not in (None, False):
                raise UsageError(f"--follow cannot be combined with {opt}", hint="drop one")

        sys.exit(follow_run(app, b, run, replica=replica, tail=tail, mask=not no_mask))
    query = LogQuery(
        replica=replica,
        task=task,
        all_tasks=all_tasks,
        tail=tail,
        head=head,
        since=when if isinstance(when := _since(since) if since else None, dt.datetime) else None,
        since_ago=when if isinstance(when, float) else None,
        timestamps=timestamps,
        run=run_number,
    )

    def write_logs(query: LogQuery, out: IO[bytes]) -> None:
        shown = masked(app, b, run, out, mask=not no_mask)
        b.write_logs(run, query, cast("IO[bytes]", shown))
        shown.end()

    if output is None:
        try:
            write_logs(query, sys.stdout.buffer)
        except BrokenPipeError:
            sys.exit(stdout_closed())
        return
    try:
        if os.path.isdir(output) or output.endswith(os.sep):
            os.makedirs(output, exist_ok=True)
            ranks = [replica] if replica is not None else range(run.replicas)
            for rank in ranks:
                with open(os.path.join(output, f"{run.id}-replica-{rank}.log"), "wb") as f:
                    write_logs(query.model_copy(update={"replica": rank}), f)
            return
        with open(output, "wb") as f:
            write_logs(query, f)
    except OSError as e:
        hint = from_exception(e).hint
        raise PreconditionError(f"--output {output!r}: {e.strerror or e}", hint=hint) from None
