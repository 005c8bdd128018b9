"""`launchkit list`'s body (cli/list_cmd.py declares it): runs, newest first, with status, exit code,
why they ended or wait, and a running run's last progress line (`--json`: `end`, `waiting`,
`progress`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import typer

from launchkit.backends import Capability, require
from launchkit.cli.backend_choice import choose_listing
from launchkit.cli.context import get_app
from launchkit.cli.list_cmd import STATUSES
from launchkit.cli.table import print_table
from launchkit.core.status import RunStatus, task_summary
from launchkit.core.units import ago, parse_duration
from launchkit.errors import UsageError
from launchkit.masking import masked_run


def _age(created: dt.datetime) -> str:
    return ago((dt.datetime.now(dt.UTC) - created).total_seconds())


def _reason(run: Any) -> str:
    """Why it ended, or why it waits (the line without its fix; `launchkit why ID` gives it)."""
    reason = run.end if run.end is not None else run.waiting
    if reason is None or reason.kind == "succeeded":
        if run.end is not None:
            return ""
        return "; ".join(n for n in (run.retry, run.resume) if n)  # still going: its attempt, if retried
    return str(reason.line)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def list_runs(
    ctx: typer.Context,
    status: list[str] | None,
    limit: int,
    as_json: bool,
    author: str | None,
    me: bool,
    text: str | None,
    max_age: str | None,
    show_all: bool,
    workspace: str | None,
    group: str | None,
    backend: str | None,
    local: bool,
) -> None:
    """`launchkit list` (cli/list_cmd.py declares its options)."""
    # launchkit's words, or on Beaker also Beaker's own (gantry's vocabulary): the backend checks them
    statuses: list[Any] = [s.lower() for s in status or []]
    if me and author:
        raise UsageError("--me and --author cannot be combined", hint="drop one")
    age = None
    if max_age is not None:
        try:  # a bare number is days, as in gantry
            age = (
                dt.timedelta(days=float(max_age))
                if _is_number(max_age)
                else dt.timedelta(seconds=parse_duration(max_age))
            )
        except Exception:  # noqa: BLE001 - any parse failure is a usage error
            raise UsageError(f"invalid --max-age {max_age!r}", hint="use e.g. 7d, 12h, 30m") from None
    app = get_app(ctx, as_json)
    b = choose_listing(app, backend, local, workspace)
    if Capability.service_statuses not in b.capabilities:  # Beaker's own names too (gantry's)
        try:
            statuses = [RunStatus(s) for s in statuses]
        except ValueError as e:
            raise UsageError(str(e), hint="statuses: " + STATUSES) from None
    require(b, Capability.others_runs, me=me, all=show_all)
    require(b, Capability.workspaces, group=group)
    scope = {"group": group} if group else {}
    runs = b.list_runs(
        limit=limit,
        statuses=statuses or None,
        author=author,
        text=text,
        max_age=age,
        include_all=show_all,
        mine=me,
        progress=True,
        **scope,
    )
    runs = [masked_run(app, b, r) for r in runs]  # progress tokens: the job's text, secret values masked
    if app.json:
        app.print_json([r.model_dump(mode="json") for r in runs])
        return

    header = ["ID", "NAME", "STATUS", "EXIT", "CREATED", "REASON"]
    rows = [
        [
            r.id,
            r.name,
            r.status.value,
            "" if r.exit_code is None else str(r.exit_code),  # Beaker's own: none after an image pull failure
            _age(r.created),
            _reason(r),
        ]
        for r in runs
    ]
    if any(r.tasks > 1 for r in runs):
        header.insert(2, "TASKS")
        for row, r in zip(rows, runs, strict=True):  # a many-task run: how many are in each state
            row.insert(2, task_summary(r.task_statuses) if r.task_statuses else str(r.tasks))
    if any(r.progress for r in runs):  # before REASON: a running run has none
        now = dt.datetime.now(dt.UTC)
        header.insert(header.index("REASON"), "PROGRESS")
        for row, r in zip(rows, runs, strict=True):
            row.insert(header.index("PROGRESS"), _progress(r.progress, now))
    if any(r.author for r in runs):
        header.append("AUTHOR")
        for row, r in zip(rows, runs, strict=True):
            row.append(r.author or "")
    print_table(header, rows, status_column="STATUS", optional="PROGRESS")


def _progress(progress: Any, now: dt.datetime) -> str:
    """`step=1200 (4m ago)`: the last progress line of a running run (`launchkit why ID` says more)."""
    if progress is None:
        return ""
    when = progress.ago(now)
    return f"{progress.text} ({when})" if when else str(progress.text)
