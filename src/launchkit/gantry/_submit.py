"""The one place this API meets launchkit's launch: `run`'s own path (cli/launching.launch) with `run`'s
option names, so a Recipe means what the same `launchkit run` line means (one path, not a second one).

Until launchkit has a Python API of its own (issue 35 item 1), this calls the CLI's launch function: it
prints the run id on stdout (the CLI's contract, docs/from-gantry.md), which is read back here, and the
spec for a dry run, which is passed on."""

from __future__ import annotations

import contextlib
import io
import sys
from typing import Any

from launchkit.gantry.exceptions import GantryError, from_launchkit


def run_values(**given: Any) -> dict[str, Any]:
    """Every `run` option at its "not given" value (core/run_options.py), then `given`."""
    from launchkit.core.run_options import RUN_OPTIONS, Kind

    values: dict[str, Any] = {opt.name: False if opt.kind is Kind.FLAG else None for opt in RUN_OPTIONS}
    unknown = set(given) - set(values)
    if unknown:
        raise AssertionError(f"not run options: {sorted(unknown)}")  # a bug in the mapping, not the user's
    values.update(given)
    return values


def launch(given: dict[str, Any], command: list[str]) -> str | None:
    """Launch (or with `dry_run`, print the spec of) `command` with `run`'s option values. Returns the run
    id, None for a dry run. launchkit's errors are raised as gantry's classes (exceptions.from_launchkit)."""
    from launchkit.application import Application
    from launchkit.cli.launching import launch as run
    from launchkit.errors import LaunchkitError

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            run(Application(), run_values(**given), extra=[], command=command)
    except LaunchkitError as e:
        raise from_launchkit(e) from None
    if given.get("dry_run"):
        sys.stdout.write(out.getvalue())
        sys.stdout.flush()
        return None
    lines = out.getvalue().split()
    if not lines:
        raise GantryError("launchkit run printed no run id")
    return lines[-1]
