"""Following a run until it finishes: shared by `follow` and `run --follow`."""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, cast

from launchkit.application import Application
from launchkit.backends import Backend, RunInfo, RunStatus
from launchkit.cli.backend_choice import stdout_closed
from launchkit.errors import EXIT_INTERRUPTED

if TYPE_CHECKING:
    from launchkit.notify import SlackNotifier


def follow_run(
    app: Application,
    backend: Backend,
    run: RunInfo,
    *,
    replica: int | None = None,
    all_replicas: bool = False,
    notifier: SlackNotifier | None = None,
) -> int:
    """Follow until the run finishes. Ctrl-C detaches (the job keeps running) and says how to resume.
    With a `notifier`, Slack hears when the job's first output arrives and how it ended."""
    app.info(f"following {run.id} (Ctrl-C detaches; the job keeps running)")
    out: IO[bytes] = sys.stdout.buffer
    if notifier is not None:
        from launchkit.notify import FirstOutput

        out = cast("IO[bytes]", FirstOutput(out, lambda: notifier.on_start(run)))
    try:
        code = backend.follow(run, out, replica=replica, all_replicas=all_replicas)
    except BrokenPipeError:
        return stdout_closed()
    except KeyboardInterrupt:
        sys.stdout.flush()
        app.info(
            f"\ndetached from {run.id}; it keeps running. Resume with: launchkit follow {run.id}"
            + (f" --replica {replica}" if replica is not None else "")
            + (" --all-replicas" if all_replicas else "")
        )
        return EXIT_INTERRUPTED
    final = backend.get(run.id)
    if notifier is not None:
        notifier.on_end(final)
    if final.status == RunStatus.succeeded:
        app.info(f"{run.id} succeeded")
    elif final.status == RunStatus.canceled:
        app.info(f"{run.id} was canceled")
    else:
        app.error(
            f"{run.id} failed with exit code {final.exit_code if final.exit_code is not None else '?'}"
            + (f": {final.message}" if final.message else "")
            + f" (full logs: launchkit logs {run.id})"
        )
    app.info(backend.results_location(final))
    return code
