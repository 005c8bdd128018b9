"""Slack notifications while a run is followed (`--slack-webhook-url`, as gantry 3.7.0 has it).

Messages: the job started (its first output arrived), succeeded, failed (with exit code), or was
canceled, each with the run's link. A webhook URL is a credential: it is never printed or logged, only
`url_host_only()`'s scheme and host. A failed post is a warning; it never fails the launch or the follow.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

from launchkit.application import Application
from launchkit.core.contract import SLACK_WEBHOOK_ENV
from launchkit.core.redact import url_host_only

TIMEOUT = 10.0  # seconds per post


def url_from_env(environ: dict[str, str] | Any) -> str | None:
    """LAUNCHKIT_SLACK_WEBHOOK_URL, else gantry's GANTRY_SLACK_WEBHOOK_URL."""
    return next((environ[n] for n in SLACK_WEBHOOK_ENV if environ.get(n)), None)


class SlackNotifier:
    def __init__(self, app: Application, url: str) -> None:
        self.app = app
        self._url = url
        self.started = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the URL itself
        return f"SlackNotifier({url_host_only(self._url)})"

    def post(self, text: str) -> bool:
        body = json.dumps({"text": text}).encode()
        req = urllib.request.Request(
            self._url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
                resp.read()
            self.app.debug(f"slack: posted to {url_host_only(self._url)}")
            return True
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = (
                e.code if isinstance(e, urllib.error.HTTPError) else getattr(e, "reason", type(e).__name__)
            )
            self.app.warn(f"Slack notification to {url_host_only(self._url)} failed ({reason})")
            return False

    # -- run events -------------------------------------------------------------------------------
    @staticmethod
    def _label(run: Any) -> str:
        link = f" <{run.url}|{run.id}>" if run.url else f" {run.id}"
        return f"launchkit run *{run.name}*{link}"

    def on_start(self, run: Any) -> None:
        with self._lock:
            if self.started:
                return
            self.started = True
        self.post(f":rocket: {self._label(run)} started")

    def on_end(self, run: Any) -> None:
        """`run`: the final RunInfo."""
        status = getattr(run.status, "value", str(run.status))
        end = getattr(run, "end", None)
        line = end.line if end is not None else None  # the run's one outcome (core/runs.py), no fix
        if status == "succeeded":
            self.post(f":white_check_mark: {self._label(run)} {line or 'succeeded'}")
        elif status == "canceled":
            self.post(f":octagonal_sign: {self._label(run)} {line or 'was canceled'}")
        else:
            code = run.exit_code if run.exit_code is not None else "?"
            self.post(f":x: {self._label(run)} {line or f'failed with exit code {code}'}")
