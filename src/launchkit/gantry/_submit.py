"""The one place this API meets launchkit's launch: launchkit's own Python API (launchkit.api) with
`run`'s option names, so a Recipe means what the same `launchkit run` line means (one launch path)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from launchkit import api
from launchkit.application import Application
from launchkit.core.run_options import RUN_OPTIONS
from launchkit.errors import LaunchkitError
from launchkit.gantry.exceptions import ConfigurationError, from_launchkit


def run_values(**given: Any) -> dict[str, Any]:
    """`given`, checked to be `run` options (core/run_options.py): a wrong name is a bug here."""
    unknown = set(given) - {opt.name for opt in RUN_OPTIONS}
    if unknown:
        raise AssertionError(f"not run options: {sorted(unknown)}")
    return given


def launch(given: dict[str, Any], command: list[str]) -> str | None:
    """Launch `command` with `run`'s option values, or with `dry_run` print the spec `run --dry-run`
    prints (resolved by Beaker when there are credentials) and submit nothing. `save_spec` writes the
    spec either way, as gantry does. Returns the run id (None for a dry run). launchkit's errors are
    raised as gantry's classes (exceptions.from_launchkit)."""
    app = Application()
    try:
        planned = api.request_from_options(app, run_values(**given), command).resolve()
        if path := planned.request.save_spec:
            try:
                Path(path).write_text(planned.spec_yaml, encoding="utf-8")
            except OSError as e:
                raise ConfigurationError(f"save_spec {path!r}: {e.strerror}") from None
            app.info(f"spec saved to {path}")
        if planned.printed:
            sys.stdout.write(planned.spec_yaml)
            sys.stdout.flush()
            for note in planned.notes:
                app.info(note)
            return None
        run = api.launched(app, planned)
    except LaunchkitError as e:
        raise from_launchkit(e) from None
    app.info(f"launched {run.id}" + (f" -> {run.info.url}" if run.info.url else ""))
    return run.id
