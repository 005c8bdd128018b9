"""What a local run's supervisor posts to Slack (docs/notifications.md): what the job's own runtime
cannot know. The runtime (runtime/node/launch/notify.py) posts the start, the watchdog's warning and stops,
a command's failure and success; the supervisor posts the run's end when it ended the run (`launchkit
stop`, --task-timeout, a log it could not write) or when the job failed before its command started
(a setup step: the runtime never got to post). Standard library only, as the supervisor.
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
HANDED_FD = "LAUNCHKIT_SLACK_WEBHOOK_FD"  # the pipe it is handed over on now (spawn.py: hand_over)


def webhook(task: TaskView, environ: Any = os.environ) -> str | None:
    """The run's webhook, taken out of the supervisor's environment (so that no replica inherits
    it): as handed over on a pipe (spawn.py), read once; else --slack-webhook-secret's value from
    the environment (as every secret of a local run)."""
    url = environ.pop(HANDED, None)
    fd = environ.pop(HANDED_FD, None)
    if fd is not None and str(fd).isdigit():
        url = notify.read_handed(int(fd)) or url
    for var in task.env:
        if var.name == policy.ENV_WEBHOOK and var.secret:
            url = url or environ.pop(var.secret, None)
    return str(url) if url else None


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


def end_message(
    rdir: str, rec: dict[str, Any], timed_out: str | None, storage_error: str | None
) -> str | None:
    """The supervisor's message for the run's end (its record written), or None (the job posted it)."""
    run_id, status = rec["id"], rec.get("status")
    text = label(run_id)
    if storage_error is not None:
        return _message("failed", text, f"was stopped because it {storage_error}")
    if status == "canceled":
        if timed_out is not None:
            return _message("timeout", text, f"was stopped by a timeout: {timed_out}")
        said = rec.get("message") or "stopped by user"
        by = "by you (`launchkit stop`)" if said == "stopped by user" else f"({said})"
        return _message("canceled", text, f"was canceled {by}")
    if status != "failed":
        return None
    if (rec.get("message") or "").startswith("supervisor error"):
        return _message("failed", text, rec["message"])
    newest: dict[int, dict[str, Any]] = {}
    for job in outcome.jobs(rec):
        newest[job["replica"]] = job
    for job in newest.values():
        line = _before_command(rdir, job)
        if line is not None:
            where = f" (replica {job['replica']})" if len(newest) > 1 else ""
            return _message("failed", text, f"{line}{where}; see why: `launchkit why {run_id}`")
    return None


def _message(event: str, label: str, line: str) -> str | None:
    """The supervisor's message for `event`, when the policy gives it the supervisor to post."""
    return policy.message(event, label, line) if policy.posts(policy.SUPERVISOR, policy.RUN, event) else None


def post(url: str, text: str | None) -> None:
    """Post (bounded; a failure is one warning line on the supervisor's log)."""
    notify.Poster(url).finish(text)
