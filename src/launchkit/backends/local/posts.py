"""What a local run's supervisor posts to Slack and as JSON events (docs/notifications.md): what the
job's own runtime cannot know. The runtime (runtime/node/launch/notify.py) posts the start, the
watchdog's warning and stops, a command's failure and success; the supervisor posts the run's end
when it ended the run (`launchkit stop`, --task-timeout, a log it could not write) or when the job
failed before its command started (a setup step: the runtime never got to post), and a retry's new
attempt (an event only). Standard library only, as the supervisor (the run model only to word an
event, when it posts one).
"""

from __future__ import annotations

import os

from launchkit.backends.local import logs, outcome
from launchkit.core.specview import TaskView
from launchkit.runtime.node import policy
from launchkit.runtime.node.launch import notify

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HANDED = policy.ENV_WEBHOOK  # (an older launchkit handed the webhook in the supervisor's environment)
HANDED_FD = "LAUNCHKIT_HOOKS_FD"  # the pipe the hooks are handed over on (spawn.py: hand_over)


def hooks(task: TaskView, environ: Any = os.environ) -> tuple[str | None, str | None]:
    """The run's Slack webhook and events URL, taken out of the supervisor's environment (so that no
    replica inherits them): as handed over on a pipe (spawn.py), read once; else the value of
    --slack-webhook-secret's and --notify-secret's secret from the environment (as every secret of a
    local run); the events URL else --notify-url's, from the spec."""
    url, events = environ.pop(HANDED, None), None
    fd = environ.pop(HANDED_FD, None)
    if fd is not None and str(fd).isdigit():
        handed = notify.read_hooks(int(fd))
        url, events = handed[0] or url, handed[1] or None
    for var in task.env:
        if var.name == policy.ENV_WEBHOOK and var.secret:
            url = url or environ.pop(var.secret, None)
        if var.name == policy.ENV_NOTIFY and var.secret:
            events = events or environ.pop(var.secret, None)
    events = events or task.policy().notify_url
    return (str(url) if url else None), (str(events) if events else None)


def label(run_id: str) -> str:
    """As the runtime labels it (its BEAKER_EXPERIMENT_ID is the run's id: supervisor.replica_env)."""
    return f"launchkit run *{run_id}*"


def _before_command(rdir: str, job: dict[str, Any]) -> str | None:
    """The setup step a failed job died in, before its command started; None otherwise."""
    from launchkit.backends import ending

    code = job.get("exit_code")
    if job.get("status") != "failed" or code not in ending.SETUP_STEPS:
        return None
    path = logs.log_file(rdir, job["replica"], job["attempt"])
    if ending.command_started(logs.lines(path)):
        return None
    return f"failed with exit code {code}: {ending.SETUP_STEPS[code][0]}"


def end_event(
    rdir: str, rec: dict[str, Any], timed_out: str | None, storage_error: str | None
) -> tuple[str, str] | None:
    """(event, Slack's line) of the run's end when the supervisor tells it (its record written), or
    None (the job's runtime posted it)."""
    run_id, status = rec["id"], rec.get("status")
    if storage_error is not None:
        return "failed", f"was stopped because it {storage_error}"
    if status == "canceled":
        if timed_out is not None:
            return "timeout", f"was stopped by a timeout: {timed_out}"
        said = rec.get("message") or "stopped by user"
        by = "by you (`launchkit stop`)" if said == "stopped by user" else f"({said})"
        return "canceled", f"was canceled {by}"
    if status != "failed":
        return None
    if (rec.get("message") or "").startswith("supervisor error"):
        return "failed", rec["message"]
    newest: dict[int, dict[str, Any]] = {}
    for job in outcome.jobs(rec):
        newest[job["replica"]] = job
    for job in newest.values():
        line = _before_command(rdir, job)
        if line is not None:
            where = f" (replica {job['replica']})" if len(newest) > 1 else ""
            return "failed", f"{line}{where}; see why: `launchkit why {run_id}`"
    return None


def end_message(
    rdir: str, rec: dict[str, Any], timed_out: str | None, storage_error: str | None
) -> str | None:
    """The supervisor's message for the run's end (its record written), or None (the job posted it)."""
    told = end_event(rdir, rec, timed_out, storage_error)
    return None if told is None else _message(told[0], label(rec["id"]), told[1])


def _message(event: str, label: str, line: str) -> str | None:
    """The supervisor's message for `event`, when the policy gives it the supervisor to post."""
    ours = policy.slack_posts(policy.SUPERVISOR, policy.RUN, event)
    return policy.message(event, label, line) if ours else None


def end_json(rdir: str, rec: dict[str, Any], event: str) -> str | None:
    """The run's end as a JSON event (`follow --json`'s: the line and fix `launchkit why` gives), when
    the policy gives the supervisor `event` to post."""
    if not policy.posts(policy.SUPERVISOR, policy.RUN, event):
        return None
    from pathlib import Path

    from launchkit.backends.local.ended import run_end

    end = run_end(rec, Path(rdir))
    line, fix = (end.line, end.fix) if end is not None else (str(rec.get("status")), None)
    fix = fix or None
    return notify.event_json(rec["id"], None, event, line, fix=fix)


def attempt_json(rec: dict[str, Any], attempt: int) -> str | None:
    """A retry's new attempt as a JSON event (`attempt 2 of 4; last: exit code 1`, as `follow --json`)."""
    if not policy.posts(policy.SUPERVISOR, policy.RUN, "attempt"):
        return None
    from launchkit.core.runs import attempt_text

    line = attempt_text(outcome.view(rec)) or f"attempt {attempt}"
    return notify.event_json(rec["id"], None, "attempt", line, attempt=attempt)


def post(url: str, text: str | None) -> None:
    """Post (bounded; a failure is one warning line on the supervisor's log)."""
    notify.Poster(url).finish(text)


def post_event(url: str, body: str | None) -> None:
    """Post one JSON event, as `post`."""
    notify.Poster(url, notify.post_event, what="event post").finish(body)
