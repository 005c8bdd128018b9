"""Slack messages: the one vocabulary (`message`, shared with launchkit.notify) and the job's own
poster (docs/notifications.md).

With a webhook in the job (LAUNCHKIT_SLACK_WEBHOOK: `--slack-webhook-secret NAME` on Beaker, a local
run's webhook from its supervisor), the runtime stays the command's parent and posts what it knows
where the job runs: started (replica 0), the watchdog's warning and stops, failed with the exit code
(the replica that failed), succeeded (replica 0). A replica ended by SIGTERM posts nothing for itself:
a cancelation, a preemption or a sibling's failure, which it cannot tell apart (whoever ended it
posts that). The webhook is a credential: removed from the command's environment, shown only as
scheme and host, and a failed post is one warning line on the job's stderr, never fatal.
"""

from __future__ import annotations

import os
import threading
from typing import Callable
from urllib.parse import urlsplit

from .. import policy

ENV = policy.ENV_WEBHOOK  # the webhook, in the runtime's environment only
TIMEOUT = 10.0  # seconds per post
EMOJI = policy.EVENTS  # every event a message is sent for (the policy says who sends each)
message = policy.message  # the text for an event: its emoji, the run's label, one line


def _ours(event: str) -> bool:
    """Whether the job's runtime posts `event` (policy.POSTERS: the same with and without a supervisor)."""
    return policy.posts(policy.JOB, policy.JOB, event)


def host_only(url: str) -> str:
    """What may be shown of a webhook: its scheme and host (as launchkit.core.redact.url_host_only)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # not a parseable URL (e.g. a bad port)
        return "(hidden)"
    return f"{parts.scheme}://{host}/…" if host else "(hidden)"


def post(url: str, text: str, timeout: float = TIMEOUT) -> str | None:
    """POST {"text": text} to url; None when it went, else why not (never the URL)."""
    import json
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        url, data=json.dumps({"text": text}).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            resp.read()
        return None
    except urllib.error.HTTPError as e:
        return str(e.code)
    except (urllib.error.URLError, OSError, ValueError) as e:
        return str(getattr(e, "reason", None) or type(e).__name__)


def _write_err(line: str) -> None:
    try:
        os.write(2, line.encode())
    except OSError:
        pass


class Poster:
    """The job's poster: posts in the background (the command is never held up) or, for the job's
    end, in turn after those (`finish`); each failure is one warning line on stderr."""

    def __init__(
        self,
        url: str,
        send: Callable[[str, str], str | None] = post,
        warn: Callable[[str], None] = _write_err,
    ) -> None:
        self._url = url
        self._send = send
        self._warn = warn
        self._threads: list[threading.Thread] = []

    def __repr__(self) -> str:
        return f"Poster({host_only(self._url)})"

    def _post(self, text: str) -> None:
        why = self._send(self._url, text)
        if why is not None:
            self._warn(f"[launchkit] warning: Slack notification to {host_only(self._url)} failed ({why})\n")

    def soon(self, text: str) -> None:
        t = threading.Thread(target=self._post, args=(text,), daemon=True)
        t.start()
        self._threads.append(t)

    def finish(self, text: str | None) -> None:
        """Wait (bounded) for the posts under way, then post `text` (if any)."""
        for t in self._threads:
            t.join(TIMEOUT + 1)
        if text is not None:
            self._post(text)


class Job:
    """What the job itself posts, from its environment (BEAKER_* as Beaker or the local backend sets
    them; LAUNCHKIT_ATTEMPT, when given, for a retried attempt)."""

    def __init__(self, env: dict[str, str], poster: Poster) -> None:
        self.poster = poster
        self.rank = env.get("BEAKER_REPLICA_RANK") or "0"
        self.count = env.get("BEAKER_REPLICA_COUNT") or "1"
        run = env.get("BEAKER_EXPERIMENT_ID") or env.get("LAUNCHKIT_RUN_ID") or "?"
        task = env.get("LAUNCHKIT_TASK_NAME") or ""
        self.label = f"launchkit run *{run}*" + (f" (task {task})" if task and task != "main" else "")
        self.run = run
        attempt = env.get("LAUNCHKIT_ATTEMPT") or ""
        self.attempt = int(attempt) if attempt.isdigit() else 1
        self.signalled = False  # the job was sent SIGTERM: its end is told by whoever sent it
        self.stopped: str | None = None  # why the watchdog ended the command

    def _where_replica(self) -> str:
        return f" (replica {self.rank} of {self.count})" if self.count != "1" else ""

    def _where(self) -> str:
        parts = [f"replica {self.rank} of {self.count}"] if self.count != "1" else []
        if self.attempt > 1:
            parts.append(f"attempt {self.attempt}")
        return f" ({', '.join(parts)})" if parts else ""

    def tell(self, what: str, text: str) -> None:
        """The watchdog's news (watchdog.run's `tell`); a signal is only noted (a handler may not post)."""
        if what == "signal":
            self.signalled = self.signalled or text == "SIGTERM"
        elif what == "warning":
            self.warning(text)
        elif what == "resume" and _ours("not_resuming"):  # a start below the step before (watchdog.py)
            self.poster.soon(message("not_resuming", self.label, text + self._where_replica()))
        elif what == "stopped":
            self.stopped = text

    def started(self) -> None:
        if self.rank == "0" and _ours("started"):
            self.poster.soon(message("started", self.label, "started" + self._where()))

    def warning(self, text: str) -> None:
        """The watchdog's soft warning (`warning: no output for ...`)."""
        if not _ours("inactive_soft"):
            return
        self.poster.soon(
            message("inactive_soft", self.label, text.replace("warning: ", "", 1) + self._where())
        )

    def ended(self, code: int) -> None:
        """The command ended with `code` (post the end, in turn after the posts under way)."""
        stopped, event, line = self.stopped, None, ""
        if stopped is not None:
            event = policy.stop_event(stopped)
            line = f"stopped by launchkit: {stopped}{self._where()}"
        elif self.signalled or code == 128 + 15:
            pass  # canceled, preempted or stopped for a sibling: told by whoever ended it
        elif code == 0:
            event, line = ("succeeded", "succeeded") if self.rank == "0" else (None, "")
        else:
            event = "failed"
            line = f"{failed_line(code)}{self._where()}; see why: `launchkit why {self.run}`"
        text = message(event, self.label, line) if event is not None and _ours(event) else None
        self.poster.finish(text)


def failed_line(code: int) -> str:
    """As `launchkit why` says it (backends/ending.py: from_exit_code) for a command's exit code."""
    if code == 137:
        return "was killed (exit 137, SIGKILL), most likely out of memory"
    if code > 128:
        return f"failed with exit code {code} (signal {code - 128})"
    return f"failed with exit code {code}"


def from_env(env: dict[str, str]) -> Job | None:
    """The job's poster when the runtime has a webhook; the webhook is taken out of `env` (the
    command's environment) either way."""
    url = env.pop(ENV, "")
    return Job(env, Poster(url)) if url else None
