"""`run`'s output: the request is built by `launchkit.api` and launched by `launchkit.launch` (the one
launch path, shared with the Python API); this module only prints what they decide: each launched
run's id, then --follow and Slack (a dry run's spec and notes, and --save-spec: cli/dry_run.py).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer

from launchkit.application import Application
from launchkit.backends.protocol import Posting
from launchkit.cli.backend_choice import remember_last_run
from launchkit.cli.context import get_app
from launchkit.cli.dry_run import write_spec
from launchkit.cli.following import Limits, follow_run
from launchkit.errors import EXIT_INTERRUPTED, UsageError
from launchkit.launch import plan, submit
from launchkit.masking import secret_values
from launchkit.notify import SlackNotifier
from launchkit.run_request import request_from_options

if TYPE_CHECKING:
    from launchkit.backends import Backend, RunInfo
    from launchkit.core.request import LaunchRequest
    from launchkit.launch import Launch

JSON_DOC = "docs/run.md#json"  # where run --json's forms are described


def run(ctx: typer.Context, extra: list[str], **given: Any) -> None:
    """`launchkit run` (cli/run_cmd.py declares its options)."""
    app = get_app(ctx)
    launch(app, given, extra=extra, command=app.user_command)


def launch(app: Application, given: dict[str, Any], *, extra: list[str], command: list[str] | None) -> None:
    launch_request(app, request_from_options(app, given, command, extra))


def launch_request(app: Application, request: LaunchRequest, planned: Launch | None = None) -> None:
    """Plan the launch (`launchkit.launch.plan`, unless `planned`), then print it (a dry run) or submit
    it and say what was launched (`run`, `mason`)."""
    if request.json_output and request.follow and not request.dry_run:
        raise UsageError(
            "--json cannot be combined with --follow (or --timeout): the run's output would follow the JSON",
            hint=f"launch with --json, then `launchkit follow ID` ({JSON_DOC})",
        )
    launch = planned or plan(app, request)
    request = launch.request
    if write_spec(app, launch):
        return
    assert launch.backend is not None
    b = launch.backend
    last: RunInfo | None = None
    runs: list[RunInfo] = []

    def launched(created: RunInfo) -> None:
        nonlocal last
        last = created
        runs.append(created)
        _launched(app, b, created, quiet_stdout=request.json_output)

    try:
        submit(app, launch, launched)
        assert last is not None
        if request.json_output:
            app.print_json(launched_json(launch, runs))
            app.fast_exit = True  # launched: nothing here is left to tear down (as _after_launch)
            return
        _after_launch(app, b, request, last, several=len(runs) > 1)
    except KeyboardInterrupt:  # once a run exists, Ctrl-C is follow's detach, told (before follow's own)
        if last is None:
            raise

        app.info(f"detached from {last.id}; it keeps running. Resume with: launchkit follow {last.id}")
        raise SystemExit(EXIT_INTERRUPTED) from None


def launched_json(launch: Launch, runs: list[RunInfo]) -> dict[str, Any]:
    """`run --json`: the plan, then the (last) run's id and url; every run of --sweep-experiments."""
    last = runs[-1]
    out: dict[str, Any] = {"plan": launch.plan.to_json(), "id": last.id, "url": last.url}
    if len(runs) > 1:
        out["runs"] = [{"id": r.id, "url": r.url} for r in runs]
    return out


def _launched(app: Application, b: Backend, run: RunInfo, *, quiet_stdout: bool = False) -> None:
    remember_last_run(b.name, run.id)
    if not quiet_stdout:  # --json: one object at the end
        sys.stdout.write(run.id + "\n")  # for scripts: ID=$(launchkit -q run ...)
        sys.stdout.flush()
    app.info(f"launched {run.id}" + (f" -> {run.url}" if run.url else ""))


def sweep_note(run_id: str, several: bool) -> str:
    """Who posts a sweep's notifications, said at its launch when nobody follows it."""
    how = (
        "follow its runs with the Python API: `api.wait(request.launch_all())` posts it"
        if several
        else f"`launchkit follow {run_id}` posts it (to LAUNCHKIT_SLACK_WEBHOOK_URL or the run's own hooks)"
    )
    return (
        "note: a sweep's notifications are one digest per change of the whole (`12 succeeded · 1 failed"
        f" (exit 1) · 3 running`), posted by whoever follows it; no task posts for itself: {how}"
    )


def _after_launch(
    app: Application, b: Backend, request: LaunchRequest, run: RunInfo, *, several: bool = False
) -> None:
    """Slack notifications and --follow (or how to follow it), once the run is launched."""
    notifier = None
    hooks = (
        request.slack_webhook_url,
        request.slack_webhook_secret,
        request.notify_url,
        request.notify_secret,
    )
    if request.sweep and any(h is not None for h in hooks) and not request.follow:
        app.info(sweep_note(run.id, request.sweep_experiments))
    if request.slack_webhook_url is not None and request.sweep and not request.follow:
        pass  # (said above: the sweep's follower posts its digest)
    elif request.slack_webhook_url is not None:
        posting = b.slack_posting(run)  # who else posts (docs/notifications.md)
        if request.follow:
            secrets = lambda: secret_values(app, b, run)  # noqa: E731 - read only if a post quotes the job
            notifier = SlackNotifier(app, request.slack_webhook_url.get_secret_value(), posting, secrets)
        elif posting == Posting.follower:
            app.warn(
                f"--slack-webhook-url posts while a run is followed: add --follow, run `launchkit "
                f"follow {run.id}` with LAUNCHKIT_SLACK_WEBHOOK_URL set, or let the job post with "
                f"--slack-webhook-secret NAME"
            )
    if request.follow:
        limits = Limits(
            timeout=request.timeout,
            start=request.start_timeout,
        )  # --inactive-timeout and --stall-timeout: the job's runtime checks them (node/launch/watchdog.py)
        code = follow_run(app, b, run, limits=limits, show_logs=request.show_logs, notifier=notifier)
        app.fast_exit = True  # the job runs detached: nothing to tear down (saves ~50 ms)
        raise typer.Exit(code)
    app.info(f"follow {'the last one' if several else 'it'} with: launchkit follow {run.id}")
    app.fast_exit = True  # launched: the job runs on its own, nothing here is left to tear down
