"""The one place this API meets launchkit's launch: launchkit's own Python API (launchkit.api) with
`run`'s option names, so a Recipe means what the same `launchkit run` line means (one launch path),
with two differences gantry's API has from its CLI: no configuration is read (gantry's API ignores
`[tool.gantry]`; launchkit's config files and LAUNCHKIT_* variables are not applied either), and the
repository state a caller passed (`git_repo`) is the one launched."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launchkit import api
from launchkit.application import Application
from launchkit.config import merge
from launchkit.core.run_options import RUN_OPTIONS
from launchkit.errors import LaunchkitError
from launchkit.gantry.exceptions import ConfigurationError, from_launchkit
from launchkit.launch import Launch, plan, ready

if TYPE_CHECKING:
    from launchkit.core.gitstate import GitState


def run_values(**given: Any) -> dict[str, Any]:
    """`given`, checked to be `run` options (core/run_options.py): a wrong name is a bug here."""
    unknown = set(given) - {opt.name for opt in RUN_OPTIONS}
    if unknown:
        raise AssertionError(f"not run options: {sorted(unknown)}")
    return given


@dataclass
class PythonApplication(Application):
    """An Application for a Python caller: no configuration layers (gantry's API applies none), and each
    message worded for the caller (`wording`: `run`'s flags as the caller's keywords)."""

    wording: Callable[[str], str] = str

    def __post_init__(self) -> None:
        self.config = merge([])

    def _emit(self, prefix: str, style: str, msg: str) -> None:
        super()._emit(prefix, style, self.wording(msg))


def launch(
    given: dict[str, Any],
    command: list[str],
    git: GitState | None = None,
    wording: Callable[[str], str] = str,
) -> tuple[Launch, str | None]:
    """Launch `command` with `run`'s option values, or with `dry_run` print the spec `run --dry-run`
    prints (resolved by Beaker when there are credentials) and submit nothing. `save_spec` writes the
    spec either way, as gantry does. `git`: the commit, remote and branch to launch (a GitRepoState the
    caller passed); None reads the checkout as `run` does. Returns the planned launch and the run id
    (None for a dry run). launchkit's errors are raised as gantry's classes (exceptions.from_launchkit),
    their text through `wording` (the caller's names for `run`'s flags)."""
    app = PythonApplication(wording=wording)
    try:
        request = api.request_from_options(app, run_values(**given), command, python=True)
        planned = plan(app, request.launch_request, git=git)
        if path := planned.request.save_spec:
            ready(planned)  # a launch: the spec saved is the one sent
            try:
                Path(path).write_text(planned.spec_yaml, encoding="utf-8")
            except OSError as e:
                raise ConfigurationError(f"save_spec {path!r}: {e.strerror}") from None
            sys.stdout.write(f"Experiment spec saved to {path}\n")
        if planned.printed:
            sys.stdout.write(planned.spec_yaml)
            sys.stdout.flush()
            for note in planned.notes:
                app.info(note)
            return planned, None
        run = api.launched(app, planned)
    except LaunchkitError as e:
        raise from_launchkit(e, wording) from None
    return planned, run.id
