"""`launchkit prune`'s body (cli/prune_cmd.py declares it): remove old local runs that have ended."""

from __future__ import annotations

import datetime as dt
import sys

import typer

from launchkit.backends import Capability, pruning
from launchkit.cli.backend_choice import backend_with
from launchkit.cli.context import get_app
from launchkit.cli.options import confirm
from launchkit.core.units import parse_duration
from launchkit.errors import UsageError


def prune(
    ctx: typer.Context,
    older_than: str,
    dry_run: bool,
    yes: bool,
) -> None:
    """`launchkit prune` (cli/prune_cmd.py declares its options)."""
    app = get_app(ctx)
    try:
        age = dt.timedelta(seconds=parse_duration(older_than))
    except (ValueError, OverflowError):
        raise UsageError(
            f"--older-than {older_than!r} is not a duration", hint="use e.g. 7d, 12h, 30m"
        ) from None
    backend = pruning(backend_with(app, Capability.pruning))
    runs = backend.prunable(age)
    if not runs:
        app.info(f"no local run ended more than {older_than} ago")
        return
    sizes = {run.id: backend.size(run) for run in runs}
    total = f"{sum(sizes.values()) / 2**20:.1f} MiB"
    if dry_run:
        for run in runs:
            sys.stdout.write(f"{run.id}  {run.status.value}  {sizes[run.id] / 2**20:.1f} MiB\n")
        app.info(f"would remove {len(runs)} runs ({total})")
        return
    if not yes:
        confirm(f"Remove {len(runs)} local runs ({total})?", command="prune")
    for run in runs:
        backend.remove(run)
    app.info(f"removed {len(runs)} runs ({total})")
