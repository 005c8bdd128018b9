"""`launchkit follow`'s body (cli/follow_cmd.py declares it): stream a run's output live; exit with
the job's exit code."""

from __future__ import annotations

import os
import sys

import typer

from launchkit import events
from launchkit.application import Application
from launchkit.backends import Backend, Capability, RunInfo, require
from launchkit.cli.backend_choice import resolve_run
from launchkit.cli.context import get_app, stdout_closed
from launchkit.cli.following import follow_run
from launchkit.errors import EXIT_INTERRUPTED
from launchkit.masking import secret_values
from launchkit.notify import SlackNotifier, url_from_env


def follow(
    ctx: typer.Context,
    run_id: str | None,
    latest: bool,
    replica: int | None,
    all_replicas: bool,
    author: str | None,
    tail: bool,
    task: str | None,
    no_mask: bool,
    as_json: bool,
    workspace: str | None,
    backend: str | None,
    local: bool,
) -> None:
    """`launchkit follow` (cli/follow_cmd.py declares its options)."""
    app = get_app(ctx)
    b, run = resolve_run(app, backend, local, run_id, latest, author, workspace)
    require(b, Capability.all_replicas, all_replicas=all_replicas)
    require(b, Capability.tasks, task=task)

    if as_json:
        sys.exit(_events(app, b, run))
    url = url_from_env(os.environ)  # LAUNCHKIT_SLACK_WEBHOOK_URL (or gantry's GANTRY_SLACK_WEBHOOK_URL)
    secrets = lambda: secret_values(app, b, run)  # noqa: E731 - read only if a post quotes the job
    notifier = SlackNotifier(app, url, b.slack_posting(run), secrets) if url else None
    # SystemExit, not typer.Exit: click returns (drops) Exit codes when standalone_mode=False
    sys.exit(
        follow_run(
            app,
            b,
            run,
            replica=replica,
            all_replicas=all_replicas,
            tail=TAIL_LINES if tail else None,
            notifier=notifier,
            task=task,
            mask=not no_mask,
        )
    )


TAIL_LINES = 10  # gantry's `follow --tail`


def _events(app: Application, b: Backend, run: RunInfo) -> int:
    """`follow --json`: the run's events (launchkit/events.py, as `Run.events()` yields them) as JSON
    lines on stdout; the job's exit code once it ends."""
    try:
        for ev in events.stream(app, b, run):
            sys.stdout.write(ev.model_dump_json() + "\n")
            sys.stdout.flush()
    except BrokenPipeError:
        return stdout_closed()
    except KeyboardInterrupt:
        app.info(f"\ndetached from {run.id}; it keeps running. Resume with: launchkit follow {run.id} --json")
        return EXIT_INTERRUPTED
    return events.exit_code(b.get(run.id))
