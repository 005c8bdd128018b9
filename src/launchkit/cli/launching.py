"""`run`'s output: the request is built by `launchkit.api` and launched by `launchkit.launch` (the one
launch path, shared with the Python API); this module only prints what they decide: the spec and its
notes for a dry run or --save-spec, each launched run's id, then --follow and Slack.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from launchkit.application import Application
from launchkit.errors import UsageError

if TYPE_CHECKING:
    from launchkit.backends import Backend, RunInfo
    from launchkit.core.request import LaunchRequest
    from launchkit.launch import Launch


# The modules whose pydantic models a launch builds: imported under building_models, as a model
# first built outside it (the backend's protocol, the git state's) would scan the entry points after all.
_LAUNCH_MODELS = ("launchkit.core.request", "launchkit.core.spec", "launchkit.backends.protocol")


@contextlib.contextmanager
def building_models() -> Iterator[None]:
    """pydantic's documented PYDANTIC_DISABLE_PLUGINS while launchkit's own models are built: otherwise
    the first model scans every installed package's entry points (~10-15 ms). launchkit uses no
    plugins. Only around pure code, so no child process (git, a local job) inherits the setting.
    The cyclic GC is paused meanwhile: the imports and models built here live until exit."""
    was_collecting = gc.isenabled()
    gc.disable()
    try:
        if "PYDANTIC_DISABLE_PLUGINS" in os.environ:
            yield
            return
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
        try:
            for module in _LAUNCH_MODELS:
                importlib.import_module(module)
            yield
        finally:
            del os.environ["PYDANTIC_DISABLE_PLUGINS"]
    finally:
        if was_collecting:
            gc.enable()


def launch(app: Application, given: dict[str, Any], *, extra: list[str], command: list[str] | None) -> None:
    with building_models():
        from launchkit.api import request_from_options

        request = request_from_options(app, given, command, extra).launch_request
    launch_request(app, request)


def launch_request(app: Application, request: LaunchRequest, planned: Launch | None = None) -> None:
    """Plan the launch (`launchkit.launch.plan`, unless `planned`), then print it (a dry run) or submit
    it and say what was launched (`run`, `mason`)."""
    from launchkit.launch import plan, submit

    launch = planned or plan(app, request)
    request = launch.request
    text = launch.spec_yaml if launch.printed or request.save_spec else ""  # not for a launch
    if request.save_spec:
        save_spec(app, request.save_spec, text)
    if launch.printed:
        sys.stdout.write(text)
        sys.stdout.flush()
        for note in launch.notes:
            app.info(note)
        app.fast_exit = True
        return
    assert launch.backend is not None
    b = launch.backend
    run: RunInfo | None = None

    def launched(created: RunInfo) -> None:
        nonlocal run
        run = created
        _launched(app, b, created)

    try:
        submit(app, launch, launched)
        assert run is not None
        _after_launch(app, b, request, run)
    except KeyboardInterrupt:  # once a run exists, Ctrl-C is follow's detach, told (before follow's own)
        if run is None:
            raise
        from launchkit.errors import EXIT_INTERRUPTED

        app.info(f"detached from {run.id}; it keeps running. Resume with: launchkit follow {run.id}")
        raise SystemExit(EXIT_INTERRUPTED) from None


def save_spec(app: Application, path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"--save-spec {path!r}: {e.strerror}", hint="give a writable file path") from None
    app.info(f"spec saved to {path}")


def _launched(app: Application, b: Backend, run: RunInfo) -> None:
    from launchkit.cli.backend_choice import remember_last_run

    remember_last_run(b.name, run.id)
    sys.stdout.write(run.id + "\n")  # for scripts: ID=$(launchkit -q run ...)
    sys.stdout.flush()
    app.info(f"launched {run.id}" + (f" -> {run.url}" if run.url else ""))


def _after_launch(app: Application, b: Backend, request: LaunchRequest, run: RunInfo) -> None:
    """Slack notifications and --follow, once the run is launched."""
    from launchkit.cli.following import Limits, follow_run

    notifier = None
    if request.slack_webhook_url is not None:
        from launchkit.notify import SlackNotifier

        if request.follow:
            notifier = SlackNotifier(app, request.slack_webhook_url.get_secret_value())
        else:
            app.warn(
                f"Slack notifications are sent while a run is followed: add --follow, "
                f"or run `launchkit follow {run.id}` with LAUNCHKIT_SLACK_WEBHOOK_URL set"
            )
    if request.follow:
        import typer

        limits = Limits(
            timeout=request.timeout,
            start=request.start_timeout,
            inactive=request.inactive_timeout,
            inactive_soft=request.inactive_soft_timeout,
        )
        code = follow_run(app, b, run, limits=limits, show_logs=request.show_logs, notifier=notifier)
        app.fast_exit = True  # the job runs detached: nothing to tear down (saves ~50 ms)
        raise typer.Exit(code)
