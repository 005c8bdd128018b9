"""`launchkit logs ID`: a run's output as raw bytes (never wrapped or re-decoded)."""

from __future__ import annotations

import sys

import typer

from launchkit.cli.backend_choice import backend_option, local_option, resolve_run, stdout_closed


def _since(value: str):  # -> datetime
    import datetime as dt

    from launchkit.core.units import parse_duration
    from launchkit.errors import UsageError

    try:
        return dt.datetime.now(dt.UTC) - dt.timedelta(seconds=parse_duration(value))
    except Exception:  # noqa: BLE001 - not a duration: try a timestamp
        pass
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(
            f"--since {value!r} is neither a duration nor a timestamp",
            hint="use e.g. --since 10m or --since 2026-01-31T12:00:00",
        ) from None
    return t if t.tzinfo else t.astimezone()


def register(app: typer.Typer) -> None:
    @app.command("logs")
    def _cmd(
        run_id: str | None = typer.Argument(None, metavar="[ID]", help="Run whose logs to show."),
        latest: bool = typer.Option(False, "--latest", "-l", help="Your newest run."),
        tail: int | None = typer.Option(None, "--tail", help="Only the last N lines.", min=0),
        head: int | None = typer.Option(None, "--head", help="Only the first N lines.", min=0),
        since: str | None = typer.Option(
            None, "--since", help="Lines since a duration ago (10m) or a time."
        ),
        replica: int | None = typer.Option(None, "--replica", "-r", help="Only this replica (rank)."),
        task: str | None = typer.Option(None, "--task", help="Beaker: only this task."),
        all_tasks: bool = typer.Option(False, "--all", help="Beaker: every task of the experiment."),
        timestamps: bool = typer.Option(False, "--timestamps", help="Prefix each line with its time."),
        output: str | None = typer.Option(
            None, "--output", "-o", help="Write to FILE, or to DIR/ with one file per replica."
        ),
        backend: str | None = backend_option(),
        local: bool = local_option(),
    ) -> None:
        """Print a run's logs: raw bytes, exactly as the job wrote them."""
        import os

        from launchkit.backends import LogQuery
        from launchkit.errors import UsageError

        if head is not None and tail is not None:
            raise UsageError("--head and --tail cannot be combined", hint="pick one")
        from launchkit.cli.beaker_options import beaker_options

        b, run = resolve_run(backend, local, run_id, latest)
        if task and all_tasks:
            raise UsageError("--task and --all cannot be combined", hint="pick one")
        extra = beaker_options(b, all_tasks=all_tasks, task=task)
        extra.pop("task", None)
        query = dict(
            tail=tail, head=head, since=_since(since) if since else None, timestamps=timestamps, task=task
        )
        if output is None:
            try:
                b.write_logs(run, LogQuery(replica=replica, **query), sys.stdout.buffer, **extra)
            except BrokenPipeError:
                sys.exit(stdout_closed())
            return
        if os.path.isdir(output) or output.endswith(os.sep):
            os.makedirs(output, exist_ok=True)
            ranks = [replica] if replica is not None else range(run.replicas)
            for rank in ranks:
                with open(os.path.join(output, f"{run.id}-replica-{rank}.log"), "wb") as f:
                    b.write_logs(run, LogQuery(replica=rank, **query), f, **extra)
            return
        with open(output, "wb") as f:
            b.write_logs(run, LogQuery(replica=replica, **query), f, **extra)
