"""Following a run until it finishes: shared by `follow` and `run --follow`."""

from __future__ import annotations

import sys

from launchkit.application import Application
from launchkit.backends import Backend, RunInfo, RunStatus
from launchkit.cli.backend_choice import stdout_closed
from launchkit.errors import EXIT_INTERRUPTED


def follow_run(
    app: Application,
    backend: Backend,
    run: RunInfo,
    *,
    replica: int | None = None,
    all_replicas: bool = False,
) -> int:
    """Follow until the run finishes. Ctrl-C detaches (the job keeps running) and says how to resume."""
    app.info(f"following {run.id} (Ctrl-C detaches; the job keeps running)")
    try:
        code = backend.follow(run, sys.stdout.buffer, replica=replica, all_replicas=all_replicas)
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
    return code
