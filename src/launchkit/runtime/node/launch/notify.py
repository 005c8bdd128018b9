"""Slack messages: the one vocabulary (`message`, shared with launchkit.notify) and the job's own
poster (docs/notifications.md).

With a webhook in the job (LAUNCHKIT_SLACK_WEBHOOK: `--slack-webhook-secret NAME` on Beaker, a local
run's webhook from its supervisor), the runtime stays the command's parent and posts what it knows
where the job runs: started (replica 0), the watchdog's warning and stops, failed with the exit code
(the replica that failed), succeeded (replica 0). A replica ended by SIGTERM posts nothing for itself:
a cancelation, a preemption or a sibling's failure, which it cannot tell apart (whoever ended it
posts that). The webhook is a credential: removed from the command's environment, shown only as
scheme and host, and a failed post is one warning line on the job's stderr, never fatal.

Posting fails open: a URL is checked once (`url_problem`: http or https, a host, a port in 1-65535,
no spaces); every post has an overall deadline (connect, send and read: a server that trickles its
answer is cut off), follows no redirect (a 3xx is a failed post, told by host), and a crash in a
posting thread is one line in the log. The job's end waits for its posts at most END_WAIT seconds.
"""

from __future__ import annotations

import os
import re
import threading
import time
from urllib.parse import urlsplit

from .. import policy

TYPE_CHECKING = False  # (typing costs the local supervisor's start, which imports this module)
if TYPE_CHECKING:
    from typing import Callable, Sequence

ENV = policy.ENV_WEBHOOK  # the webhook, in the runtime's environment only
MASK_MIN = 4  # characters of the shortest value masked (launchkit/masking.py: MIN_LENGTH)
_NOT_SECRET = re.compile(r"TOKENIZ|TOKENS$", re.IGNORECASE)  # tokenizer settings, token counts
_PLAIN = re.compile(r"(\d+(\.\d+)?|true|false|yes|no|on|off|none)$", re.IGNORECASE)
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|WEBHOOK|(KEY|KEYS|PAT|_PWD)$", re.IGNORECASE)
TIMEOUT = 5.0  # seconds per post, all in: connect, send, read
END_WAIT = 2.0  # seconds the job's end waits for the posts under way before its own
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


def url_problem(url: str) -> str | None:
    """Why `url` cannot be posted to (never quoting it), or None: the one check of a webhook URL,
    at launch (core/parse.py) and where the job runs."""
    if not url.strip():
        return "it is empty"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return "it has a space or a control character"
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:  # an unclosed [ of an IPv6 host, a port that is no number or out of range
        return "its host or port is not valid"
    if parts.scheme.lower() not in ("http", "https"):
        return f"it is not an http(s) URL (scheme {parts.scheme or 'missing'!r})"
    if not host or not all(c.isalnum() or c in ".-_:" or ord(c) > 127 for c in host):
        return "its host is not valid"
    if port == 0:
        return "its port is not in 1-65535"
    return None


def post(url: str, text: str, timeout: float = TIMEOUT) -> str | None:
    """POST {"text": text} to url, all within `timeout` seconds; None when it went, else why not (never
    the URL). Redirects are not followed."""
    problem = url_problem(url)
    if problem is not None:
        return problem
    box: list[str | None] = ["no answer"]
    conns: list[object] = []
    worker = threading.Thread(target=_post, args=(url, text, timeout, box, conns), daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():  # a server that trickles: cut it off (the thread ends with its socket)
        for conn in conns:
            _cut(conn)
        return f"no answer within {timeout:g}s"
    return box[0]


def _post(url: str, text: str, timeout: float, box: list[str | None], conns: list[object]) -> None:
    """post's worker: the answer (None, or why not) in box[0]."""
    import http.client
    import json

    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme.lower() == "https" else http.client.HTTPConnection
    try:
        conn = kind(parts.hostname or "", parts.port, timeout=timeout + 1)  # (the overall deadline tells it)
        conns.append(conn)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        body = json.dumps({"text": text}).encode()
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read(65536)
        conn.close()
        if 300 <= resp.status < 400:
            box[0] = f"HTTP {resp.status}: a redirect, which is not followed"
        elif resp.status >= 400:
            box[0] = f"HTTP {resp.status}"
        else:
            box[0] = None
    except OSError as e:  # refused, unreachable, a name not found, a timeout, TLS
        box[0] = str(getattr(e, "strerror", None) or getattr(e, "reason", None) or type(e).__name__)
    except Exception as e:  # noqa: BLE001 - http.client's own (a bad status line): by kind, never the URL
        box[0] = type(e).__name__


def _cut(conn: object) -> None:
    sock = getattr(conn, "sock", None)
    try:
        if sock is not None:
            sock.shutdown(2)  # socket.SHUT_RDWR: the worker's read ends now
    except OSError:
        pass


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
        secrets: Sequence[str] = (),
    ) -> None:
        self._url = url
        self._send = send
        self._warn = warn
        self._threads: list[threading.Thread] = []
        self._secrets = sorted({v for v in secrets if len(v) >= MASK_MIN}, key=len, reverse=True)

    def __repr__(self) -> str:
        return f"Poster({host_only(self._url)})"

    def _post(self, text: str) -> None:
        for value in self._secrets:  # a progress line quoted in a message may hold one (masking.py)
            text = text.replace(value, "***")
        try:
            why = self._send(self._url, text)
        except Exception as e:  # noqa: BLE001 - a helper's crash is one line, never the job's
            why = f"{type(e).__name__} in launchkit's poster"
        if why is not None:
            self._warn(f"[launchkit] warning: Slack notification to {host_only(self._url)} failed ({why})\n")

    def soon(self, text: str) -> None:
        t = threading.Thread(target=self._post, args=(text,), daemon=True)
        t.start()
        self._threads.append(t)

    def finish(
        self, text: str | None, wait: float = END_WAIT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Wait for the posts under way (at most `wait` seconds in all), then post `text` (if any,
        within TIMEOUT): the job's end is held up by at most wait + TIMEOUT seconds."""
        deadline = clock() + wait
        for t in self._threads:
            t.join(max(0.0, deadline - clock()))
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
        self.told_start = False  # its start was told (restart.py starts it again in place)

    def _where_replica(self) -> str:
        return f" (replica {self.rank} of {self.count})" if self.count != "1" else ""

    def _where(self) -> str:
        parts = [f"replica {self.rank} of {self.count}"] if self.count != "1" else []
        if self.attempt > 1:
            parts.append(f"attempt {self.attempt}")
        return f" ({', '.join(parts)})" if parts else ""

    def tell(self, what: str, text: str) -> None:
        """The watchdog's news (watchdog.run's `tell`); a signal is only noted (a handler may not post)."""
        if what == "started":
            self.started()
        elif what == "signal":
            self.signalled = self.signalled or text == "SIGTERM"
        elif what == "warning":
            self.warning(text)
        elif what == "resume" and _ours("not_resuming"):  # a start below the step before (watchdog.py)
            self.poster.soon(message("not_resuming", self.label, text + self._where_replica()))
        elif what == "stopped":
            self.stopped = text

    def started(self) -> None:
        """The command was started (its first start: one in place after it is no new one), in the
        background: the command never waits for it."""
        if self.told_start:
            return
        self.told_start = True
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


def read_handed(fd: int) -> str:
    """A secret bash handed over on a pipe (or a here-string's removed file): read once, then closed,
    so that no environment (/proc/PID/environ) and no child ever holds it."""
    data = b""
    try:
        while len(data) < 65536:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    return data.decode("utf-8", "replace").strip()


def from_env(env: dict[str, str], url: str | None = None) -> Job | None:
    """The job's poster when the runtime has a webhook (`url`, handed over by bash, else ENV); the
    webhook is taken out of `env` (the command's environment) either way. A webhook that cannot be
    posted to is one warning line, and nothing is posted."""
    url = url or env.pop(ENV, "")
    env.pop(ENV, None)
    if not url:
        return None
    problem = url_problem(url)
    if problem is not None:
        _write_err(
            f"[launchkit] warning: the Slack webhook ({ENV}) cannot be used: {problem}; nothing is posted\n"
        )
        return None
    return Job(env, Poster(url, secrets=secret_values(env)))


def secret_values(env: dict[str, str]) -> list[str]:
    """The values of the job's variables named like credentials (its secrets, as --env-secret gives
    them: *TOKEN*, *SECRET*, *_KEY, *PASSW*, ...): masked in every message, as `launchkit logs` masks them."""
    return [
        v
        for n, v in env.items()
        if _SECRET_NAME.search(n)
        and not _NOT_SECRET.search(n)
        and not _PLAIN.match(v)
        and not n.startswith("LAUNCHKIT_")
    ]
