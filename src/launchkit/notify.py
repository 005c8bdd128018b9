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
import time
from collections.abc import Callable, Sequence
from typing import Any

from launchkit.application import Application
from launchkit.backends.protocol import Backend, Cause, EndReason, Posting, RunInfo
from launchkit.core.contract import SLACK_WEBHOOK_ENV
from launchkit.core.digest import TaskState, attention, attention_lines, digest_line, finished
from launchkit.core.redact import url_host_only
from launchkit.core.status import RunStatus
from launchkit.events import end_kind
from launchkit.masking import mask_text
from launchkit.runtime.node import policy
from launchkit.runtime.node.launch.notify import TIMEOUT, event_json, message, post


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

    @property
    def url(self) -> str:
        """The webhook (a credential: never shown), for a sweep's digest (SweepDigest)."""
        return self._url

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


class EventsNotifier:
    """`follow`'s part of a run's JSON events (--notify-url, --notify-secret: docs/notifications.md):
    what the job cannot know (policy.POSTERS' follow row: a preemption, Beaker's cancelation, a job
    that never started, follow's own stop), as `follow --json` tells the run's end."""

    def __init__(self, app: Application, url: str, posting: Posting) -> None:
        self.app, self._url, self.posting = app, url, posting

    def __repr__(self) -> str:  # never the URL itself
        return f"EventsNotifier({url_host_only(self._url)})"

    def on_end(self, run: RunInfo) -> None:
        """`run`: the final RunInfo."""
        end, event = run.end, end_kind(run)
        if self.posting == Posting.job and posted_by_job(end):
            return  # (the job's runtime posted its command's end)
        if not policy.posts(policy.FOLLOW, self.posting.value, event):
            return
        line, fix = (end.line, end.fix) if end is not None else (run.status.value, None)
        why = post(self._url, event_json(run.id, None, event, line, fix=fix), TIMEOUT, raw=True)
        if why is not None:
            self.app.warn(f"event post to {url_host_only(self._url)} failed ({why})")


def events_notifier(app: Application, backend: Backend, run: RunInfo) -> EventsNotifier | None:
    """`follow`'s events poster for `run`: its --notify-url (the spec's), or --notify-secret's value
    (read as `follow` reads it to mask it); None when it has neither or `follow` posts none of its
    events (a local run posts them all itself)."""
    posting = backend.events_posting(run)
    if not policy.posts_any(policy.FOLLOW, posting.value):
        return None
    pol = backend.run_policy(run)
    url = pol.notify_url
    if url is None and pol.notify_secret is not None:
        url = backend.secret_values(run).get(pol.notify_secret)
    return EventsNotifier(app, url, posting) if url else None


DIGEST_EVERY = 60.0  # seconds: a sweep's digest is posted at most this often (its end always)


class SweepDigest:
    """A sweep's one message per change of the whole (docs/notifications.md, "Sweeps"): `980 succeeded ·
    12 failed (exit 1) · 5 retried after preemption · 3 running`, to Slack and as a JSON event (kind
    `digest`, with the tasks that need attention), by the process that follows the sweep (`launchkit
    follow ID`, `api.wait(runs, ...)`): no task of a sweep posts for itself (policy.POSTERS: SWEEP).
    A change is posted at most every `every` seconds (the newest then), the end always."""

    def __init__(
        self,
        app: Application,
        label: str,
        run_id: str,
        slack_url: str | None = None,
        events_url: str | None = None,
        every: float = DIGEST_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app, self.label, self.run_id = app, label, run_id
        self._slack, self._events = slack_url, events_url
        self.every, self._clock = every, clock
        self.posted: str | None = None  # the last line posted
        self._at: float | None = None  # when

    def __repr__(self) -> str:  # never a URL itself
        shown = [url_host_only(u) for u in (self._slack, self._events) if u]
        return f"SweepDigest({', '.join(shown)})"

    def update(self, states: Sequence[TaskState], final: bool = False) -> bool:
        """Post the digest of `states` if it changed (and `every` seconds passed since the last, or the
        sweep ended: `final`, or every member finished); whether it posted."""
        line = digest_line(states)
        end = final or finished(states)
        now = self._clock()
        if line == self.posted or (not end and self._at is not None and now - self._at < self.every):
            return False
        self.posted, self._at = line, now
        need = attention_lines(states) if end else []
        if self._slack:
            text = message("digest", self.label, line + "".join(f"\n• {n}" for n in need))
            self._post(self._slack, text, "Slack notification", raw=False)
        if self._events:
            told = [{"task": s.name, "line": s.line} for s in attention(states)]
            body = event_json(self.run_id, None, "digest", line, attention=told, done=end)
            self._post(self._events, body, "event post", raw=True)
        return True

    def _post(self, url: str, text: str, what: str, *, raw: bool) -> None:
        why = post(url, text, TIMEOUT, raw=raw)
        if why is not None:
            self.app.warn(f"{what} to {url_host_only(url)} failed ({why})")


def sweep_digest(
    app: Application,
    backend: Backend,
    run: RunInfo,
    slack_url: str | None = None,
    *,
    label: str | None = None,
    every: float = DIGEST_EVERY,
) -> SweepDigest | None:
    """The digest poster of the sweep `run` belongs to (its policy says it is a sweep's), with
    `slack_url` (follow's own) or the run's own hooks: --slack-webhook-secret's and --notify-secret's
    values (read as `follow` reads them to mask them), --notify-url; None when it is no sweep's or
    nothing is to be posted."""
    pol = backend.run_policy(run)
    if not pol.sweep:
        return None
    names = [n for n in (pol.webhook_secret, pol.notify_secret) if n]
    values = backend.secret_values(run) if names else {}
    slack = slack_url or (values.get(pol.webhook_secret) if pol.webhook_secret else None)
    events = pol.notify_url or (values.get(pol.notify_secret) if pol.notify_secret else None)
    if not slack and not events:
        return None
    name = label or f"launchkit sweep *{run.name}*" + (f" <{run.url}|{run.id}>" if run.url else f" {run.id}")
    return SweepDigest(app, name, run.id, slack, events, every)
