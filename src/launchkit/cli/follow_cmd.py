"""`launchkit follow [ID | --latest]`: stream a run's output live; exit with the job's exit code."""

from __future__ import annotations

import sys
from typing import Any

import typer

from launchkit.cli.backend_choice import backend_option, local_option, resolve_run, stdout_closed
from launchkit.cli.state import console


def follow_run(backend: Any, run: Any, *, replica: int | None = None, **options: Any) -> int:
    """Follow until the run finishes. Ctrl-C detaches (the job keeps running) and says how to resume."""
    from launchkit.errors import EXIT_INTERRUPTED

    con = console()
    con.info(f"following {run.id} (Ctrl-C detaches; the job keeps running)")
    try:
        code = backend.follow(run, sys.stdout.buffer, replica=replica, **options)
    except BrokenPipeError:
        return stdout_closed()
    except KeyboardInterrupt:
        sys.stdout.flush()
        con.info(
            f"\ndetached from {run.id}; it keeps running. Resume with: launchkit follow {run.id}"
            + (f" --replica {replica}" if replica is not None else "")
            + (" --all-replicas" if options.get("all_replicas") else "")
        )
        return EXIT_INTERRUPTED
    final = backend.get(run.id)
    if final.status.value == "succeeded":
        con.info(f"{run.id} succeeded")
    elif final.status.value == "canceled":
        con.info(f"{run.id} was canceled")
    else:
        con.error(
            f"{run.id} failed with exit code {final.exit_code if final.exit_code is not None else '?'}"
            + (f": {final.message}" if final.message else "")
            + f" (full logs: launchkit logs {run.id})"
        )
    return code


def register(app: typer.Typer) -> None:
    @app.command("follow")
    def _cmd(
        run_id: str | None = typer.Argument(None, metavar="[ID]", help="Run to follow."),
        latest: bool = typer.Option(False, "--latest", "-l", help="Follow your newest run."),
        replica: int | None = typer.Option(None, "--replica", "-r", help="Only this replica (rank)."),
        all_replicas: bool = typer.Option(
            False, "--all-replicas", help="Beaker: all replicas, lines prefixed [N]."
        ),
        author: str | None = typer.Option(
            None, "--author", help="Beaker: with --latest, this user's newest run."
        ),
        backend: str | None = backend_option(),
        local: bool = local_option(),
    ) -> None:
        """Stream a run's output live. Exits with the job's exit code; Ctrl-C detaches."""
        from launchkit.cli.beaker_options import beaker_options

        b, run = resolve_run(backend, local, run_id, latest, author)
        extra = beaker_options(b, all_replicas=all_replicas)
        # SystemExit, not typer.Exit: click returns (drops) Exit codes when standalone_mode=False
        sys.exit(follow_run(b, run, replica=replica, **extra))
