"""Slack notifications posted by `follow` (`--slack-webhook-url`, as gantry 3.7.0 has it).

Messages, in the words the job's own runtime uses (runtime/node/launch/notify.py: `message`): the job started
(its first output arrived), succeeded, failed (the run's one `why` line), was preempted, canceled (by
whom), or stopped by a timeout, each with the run's link; follow's own stops (--timeout,
--start-timeout). When the job posts for itself (`Posting.job`: --slack-webhook-secret) `follow`
posts only what the job cannot know; when the run posts everything (`Posting.run`: a local run with
a webhook) `follow` posts nothing (docs/notifications.md: who posts each event). A webhook URL is a
credential: it is never printed or logged, only `url_host_only()`'s scheme and host. A failed post is
a warning; it never fails the launch or the follow.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from launchkit.application import Application
from launchkit.backends.protocol import Cause, EndReason, Posting
from launchkit.core.contract import SLACK_WEBHOOK_ENV
from launchkit.core.redact import url_host_only
from launchkit.core.status import RunStatus
from launchkit.masking import mask_text
from launchkit.runtime.node import policy
from launchkit.runtime.node.launch.notify import TIMEOUT, message, post


def url_from_env(environ: dict[str, str] | Any) -> str | None:
    """LAUNCHKIT_SLACK_WEBHOOK_URL, else gantry's GANTRY_SLACK_WEBHOOK_URL."""
    return next((environ[n] for n in SLACK_WEBHOOK_ENV if environ.get(n)), None)


class SlackNotifier:
    def __init__(
        self,
        app: Application,
        url: str,
        posting: Posting = Posting.follower,
        secrets: Callable[[], list[str]] | None = None,
    ) -> None:
        self.app = app
        self._url = url
        self._secrets = secrets  # the run's secret values, read if a line quotes the job (masking.py)
        self.posting = posting  # who else posts (docs/notifications.md)
        self.started = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the URL itself
        return f"SlackNotifier({url_host_only(self._url)})"

    def post(self, text: str) -> bool:
        why = post(self._url, text, TIMEOUT)
        if why is not None:
            self.app.warn(f"Slack notification to {url_host_only(self._url)} failed ({why})")
            return False
        self.app.debug(f"slack: posted to {url_host_only(self._url)}")
        return True

    # -- run events -------------------------------------------------------------------------------
    @staticmethod
    def _label(run: Any) -> str:
        link = f" <{run.url}|{run.id}>" if run.url else f" {run.id}"
        return f"launchkit run *{run.name}*{link}"

    def _ours(self, event: str) -> bool:
        """Whether `follow` posts `event` for this run (the policy's POSTERS, by who else posts)."""
        return policy.posts(policy.FOLLOW, self.posting.value, event)

    def on_start(self, run: Any) -> None:
        with self._lock:
            if self.started or not self._ours("started"):
                return
            self.started = True
        self.post(message("started", self._label(run), "started"))

    def on_stop(self, run: Any, why: str) -> None:
        """`follow` stopped the run (`why`: which of its limits passed)."""
        event = "start_timeout" if "--start-timeout" in why else "timeout"
        if not self._ours(event):
            return  # the run tells its own stop (local: the supervisor)
        self.post(message(event, self._label(run), f"was stopped by launchkit: {why}"))

    def on_end(self, run: Any) -> None:
        """`run`: the final RunInfo."""
        end = getattr(run, "end", None)
        if self.posting == Posting.job and posted_by_job(end):
            return  # (the job's "failed" is its command's exit: follow's, every other failure)
        status = getattr(run.status, "value", str(run.status))
        line = end.line if end is not None else None  # the run's one outcome (core/runs.py), no fix
        if end is not None and end.kind in EVENTS:
            event = EVENTS[end.kind]
            if end.kind == Cause.timeout and end.by == "launchkit":  # the job's watchdog
                event = policy.stop_event(end.line)
        else:
            told = (RunStatus.succeeded, RunStatus.canceled, RunStatus.preempted)
            event = status if status in told else "failed"
        if not self._ours(event):
            return
        code = run.exit_code if run.exit_code is not None else "?"
        default = {"succeeded": "succeeded", "canceled": "was canceled"}.get(
            event, f"failed with exit code {code}"
        )
        if line and end is not None and end.by == "launchkit" and self._secrets is not None:
            line = mask_text(line, self._secrets())  # a stall stop quotes the job's progress line
        self.post(message(event, self._label(run), line or default))


EVENTS = {
    Cause.succeeded: "succeeded",
    Cause.preempted: "preempted",
    Cause.canceled: "canceled",
    Cause.timeout: "timeout",
}
# What the job's runtime posts itself (runtime/node/launch/notify.py); everything else is follow's.
_JOB_KINDS = frozenset({Cause.succeeded, Cause.exit_code, Cause.oom})


def posted_by_job(end: EndReason | None) -> bool:
    """Whether the job's own runtime posted this end (its command's exit, or its watchdog's stop)."""
    if end is None:
        return False
    return end.kind in _JOB_KINDS or (end.kind == Cause.timeout and end.by == "launchkit")
