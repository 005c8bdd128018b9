"""Slack messages: the one vocabulary (`message`, shared with launchkit.notify) and the job's own
poster (docs/notifications.md).

With a webhook in the job (LAUNCHKIT_SLACK_WEBHOOK: `--slack-webhook-secret NAME` on Beaker, a local
run's webhook from its supervisor), the runtime stays the command's parent and posts what it knows
where the job runs: started (replica 0), the watchdog's warning and stops, failed with the exit code
(the replica that failed), succeeded (replica 0). A replica ended by SIGTERM posts nothing for itself:
a cancelation, a preemption or a sibling's failure, which it cannot tell apart (whoever ended it
posts that). The webhook is a credential: removed from the command's environment, shown only as
scheme and host, and a failed post is one warning line on the job's stderr, never fatal.

Posting fails open: a URL is checked once (`url_problem`: https, or http to this machine's loopback;
a host, a port in 1-65535, no spaces); every post has an overall deadline (connect, send and read: a
server that trickles its answer is cut off), follows no redirect (a 3xx is a failed post, told by
host), and a crash in a posting thread is one line in the log. The job's end waits for its posts at
most END_WAIT seconds.

The same events go, as JSON, to `--notify-url URL` (in the spec: policy.notify_url) or `--notify-secret
NAME` (its value in ENV_NOTIFY, or handed over on the pipe after the webhook): one object per event,
launchkit/events.py's Event (kind, time, replica, attempt, line, fix, progress) with the run's id and
task (docs/notifications.md, "Events as JSON"), posted by the same posters with the same deadlines;
the stream's own kinds too (policy.STREAM_ONLY: the first progress line and one every PROGRESS_EVERY
seconds, a restart in place).
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
ENV_NOTIFY = policy.ENV_NOTIFY  # --notify-secret's URL, in the runtime's environment only
PROGRESS_EVERY = 30.0  # seconds between two progress events (the first is always posted: events.py's)
MASK_MIN = 4  # characters of the shortest value masked (launchkit/masking.py: MIN_LENGTH)
_NOT_SECRET = re.compile(r"TOKENIZ|TOKENS$", re.IGNORECASE)  # tokenizer settings, token counts
_PLAIN = re.compile(r"(\d+(\.\d+)?|true|false|yes|no|on|off|none)$", re.IGNORECASE)
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|WEBHOOK|(KEY|KEYS|PAT|_PWD)$", re.IGNORECASE)
TIMEOUT = 5.0  # seconds per post, all in: connect, send, read
END_WAIT = 2.0  # seconds the job's end waits for the posts under way before its own
EMOJI = policy.EVENTS  # every event a message is sent for (the policy says who sends each)
message = policy.message  # the text for an event: its emoji, the run's label, one line


def _ours(event: str) -> bool:
    """Whether the job's runtime posts `event` to Slack (policy.POSTERS: the same with and without a
    supervisor)."""
    return policy.slack_posts(policy.JOB, policy.JOB, event)


def utc_now(t: float | None = None) -> str:
    """An event's time as launchkit/events.py's Event prints it (ISO 8601, UTC, microseconds)."""
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def event_json(run: str, task: str | None, kind: str, line: str, **fields: object) -> str:
    """One event as posted to --notify-url: Event's fields (launchkit/events.py), the run and task."""
    import json

    body: dict[str, object] = {"kind": kind, "time": utc_now(), "replica": None, "attempt": None}
    body["line"] = line
    body.update({"fix": None, "progress": None})
    body.update(fields)
    body.update({"run": run, "task": task})
    return json.dumps(body, separators=(",", ":"))


def host_only(url: str) -> str:
    """What may be shown of a webhook: its scheme and host (as launchkit.core.redact.url_host_only)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # not a parseable URL (e.g. a bad port)
        return "(value not shown)"
    return f"{parts.scheme}://{host}/…" if host else "(value not shown)"


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
    if parts.scheme.lower() != "https" and not (host.lower() in LOOPBACK or host.startswith("127.")):
        return "plain http is only for 127.0.0.1 or localhost (it would cross the network unencrypted)"
    return None


LOOPBACK = ("localhost", "::1")  # and 127.0.0.0/8: where a hook's URL may be plain http


def post(url: str, text: str, timeout: float = TIMEOUT, raw: bool = False) -> str | None:
    """POST {"text": text} (raw: `text` is the JSON body itself, an event) to url, all within `timeout`
    seconds; None when it went, else why not (never the URL). Redirects are not followed."""
    problem = url_problem(url)
    if problem is not None:
        return problem
    box: list[str | None] = ["no answer"]
    conns: list[object] = []
    worker = threading.Thread(target=_post, args=(url, text, timeout, box, conns, raw), daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():  # a server that trickles: cut it off (the thread ends with its socket)
        for conn in conns:
            _cut(conn)
        return f"no answer within {timeout:g}s"
    return box[0]


def post_event(url: str, body: str, timeout: float = TIMEOUT) -> str | None:
    """POST one event's JSON (`body`) to url: as `post`."""
    return post(url, body, timeout, raw=True)


def _post(
    url: str, text: str, timeout: float, box: list[str | None], conns: list[object], raw: bool = False
) -> None:
    """post's worker: the answer (None, or why not) in box[0]."""
    import http.client
    import json

    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme.lower() == "https" else http.client.HTTPConnection
    try:
        conn = kind(parts.hostname or "", parts.port, timeout=timeout + 1)  # (the overall deadline tells it)
        conns.append(conn)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        body = (text if raw else json.dumps({"text": text})).encode()
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
        what: str = "Slack notification",
    ) -> None:
        self._url = url
        self._send = send
        self._warn = warn
        self._what = what  # in the warning line: "Slack notification", "event post"
        self._lock = threading.Lock()
        self._pending: list[str] = []  # posted in turn by one thread (`_drain`), while there are any
        self._worker: threading.Thread | None = None
        self._secrets = sorted({v for v in secrets if len(v) >= MASK_MIN}, key=len, reverse=True)

    def __repr__(self) -> str:
        return f"Poster({host_only(self._url)})"

    def mask(self, text: str) -> str:
        """`text` with the job's secret values as `***` (a progress line quoted may hold one: masking.py)."""
        for value in self._secrets:
            text = text.replace(value, "***")
        return text

    def _post(self, text: str) -> None:
        text = self.mask(text)
        try:
            why = self._send(self._url, text)
        except Exception as e:  # noqa: BLE001 - a helper's crash is one line, never the job's
            why = f"{type(e).__name__} in launchkit's poster"
        if why is not None:
            self._warn(f"[launchkit] warning: {self._what} to {host_only(self._url)} failed ({why})\n")

    def soon(self, text: str) -> None:
        """Post `text` in the background, after the posts before it (one poster thread: in order)."""
        with self._lock:
            self._pending.append(text)
            if self._worker is None:
                self._worker = threading.Thread(target=self._drain, daemon=True)
                self._worker.start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._worker = None
                    return
                text = self._pending.pop(0)
            self._post(text)

    def finish(
        self, text: str | None, wait: float = END_WAIT, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Wait for the posts under way (at most `wait` seconds in all), then post `text` (if any,
        within TIMEOUT): the job's end is held up by at most wait + TIMEOUT seconds."""
        deadline = clock() + wait
        while True:
            with self._lock:
                worker = self._worker
            left = deadline - clock()
            if worker is None or left <= 0:
                break
            worker.join(left)
        if text is not None:
            self._post(text)


def finish_together(ends: Sequence[tuple[Poster | None, str | None]]) -> None:
    """Each poster's `finish` (its posts under way, then its last) at once: the job's end is held up
    by the slowest of them (END_WAIT + TIMEOUT at most), never by their sum."""
    given = [(p, text) for p, text in ends if p is not None]
    others = [threading.Thread(target=p.finish, args=(text,), daemon=True) for p, text in given[1:]]
    for t in others:
        t.start()
    if given:
        given[0][0].finish(given[0][1])
    for t in others:
        t.join(END_WAIT + TIMEOUT + 1)  # (each finish keeps its own deadlines: a guard)


class Job:
    """What the job itself posts, from its environment (BEAKER_* as Beaker or the local backend sets
    them; LAUNCHKIT_ATTEMPT, when given, for a retried attempt): to Slack (`poster`) and as JSON events
    (`events`: --notify-url / --notify-secret), each when given."""

    def __init__(
        self,
        env: dict[str, str],
        poster: Poster | None,
        events: Poster | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.poster = poster
        self.events = events
        self.rank = env.get("BEAKER_REPLICA_RANK") or "0"
        self.count = env.get("BEAKER_REPLICA_COUNT") or "1"
        run = env.get("BEAKER_EXPERIMENT_ID") or env.get("LAUNCHKIT_RUN_ID") or "?"
        task = env.get("LAUNCHKIT_TASK_NAME") or ""
        self.label = f"launchkit run *{run}*" + (f" (task {task})" if task and task != "main" else "")
        self.run = run
        self.task = task if task and task != "main" else None
        attempt = env.get("LAUNCHKIT_ATTEMPT") or ""
        self.attempt = int(attempt) if attempt.isdigit() else 1
        self.signalled = False  # the job was sent SIGTERM: its end is told by whoever sent it
        self.stopped: str | None = None  # why the watchdog ended the command
        self._clock = clock
        self._progress_at: float | None = None  # when the last progress event was posted
        self.told_start = False  # its start was told (restart.py starts it again in place)

    def _where_replica(self) -> str:
        return f" (replica {self.rank} of {self.count})" if self.count != "1" else ""

    def _where(self) -> str:
        parts = [f"replica {self.rank} of {self.count}"] if self.count != "1" else []
        if self.attempt > 1:
            parts.append(f"attempt {self.attempt}")
        return f" ({', '.join(parts)})" if parts else ""

    def _replica(self) -> int | None:
        """The replica an event names: None in a run of one (as `follow --json` tells it)."""
        return int(self.rank) if self.count != "1" and self.rank.isdigit() else None

    def _say(self, kind: str, slack: str | None, line: str, end: bool = False, **fields: object) -> None:
        """Post `kind`: to Slack with the line `slack` (None: not Slack's), as a JSON event with `line`
        and `fields`; `end`: the job's end, posted after the posts under way (Poster.finish)."""
        text = message(kind, self.label, slack) if slack is not None and _ours(kind) else None
        body = None
        stream = self.events
        if stream is not None and policy.posts(policy.JOB, policy.JOB, kind):
            masked = {k: stream.mask(v) if isinstance(v, str) else v for k, v in fields.items()}
            body = event_json(self.run, self.task, kind, stream.mask(line), **masked)
        if end:
            finish_together([(self.poster, text), (stream, body)])
            return
        if self.poster is not None and text is not None:
            self.poster.soon(text)
        if stream is not None and body is not None:
            stream.soon(body)

    def tell(self, what: str, text: str) -> None:
        """The watchdog's news (watchdog.run's `tell`); a signal is only noted (a handler may not post)."""
        if what == "started":
            self.started()
        elif what == "signal":
            self.signalled = self.signalled or text == "SIGTERM"
        elif what == "warning":
            self.warning(text)
        elif what == "resume":  # a start below the step before (watchdog.py)
            self._say(
                "not_resuming", text + self._where_replica(), text,
                replica=self._replica(), attempt=self.attempt, fix=policy.NOT_RESUMING_FIX,
            )  # fmt: skip
        elif what == "stopped":
            self.stopped = text
        elif what == "restarted":  # restart.py: the command again, in place (its stop is not the end)
            self.stopped = None
            self._say("restarted", None, text, replica=self._replica(), attempt=self.attempt)
        elif what == "progress":  # the first progress line, then one every PROGRESS_EVERY seconds
            now = self._clock()
            last = self._progress_at
            if self.rank != "0" or (last is not None and now - last < PROGRESS_EVERY):
                return
            self._progress_at = now
            found, _, line = text.partition("\n")
            self._say("progress", None, line.strip() or found, attempt=self.attempt, progress=found)

    @property
    def progress_every(self) -> float:
        """Seconds between two progress lines posted (as JSON events; the first at once), 0 for none:
        the watchdog reads them (watchdog.Settings.report)."""
        return PROGRESS_EVERY if self.events is not None and self.rank == "0" else 0.0

    def started(self) -> None:
        """The command was started (its first start: one in place after it is no new one), in the
        background: the command never waits for it."""
        if self.told_start:
            return
        self.told_start = True
        if self.rank == "0":
            self._say("started", "started" + self._where(), "started", replica=0, attempt=self.attempt)

    def warning(self, text: str) -> None:
        """The watchdog's soft warning (`warning: no output for ...`)."""
        line = text.replace("warning: ", "", 1)
        self._say("inactive_soft", line + self._where(), line, replica=self._replica(), attempt=self.attempt)

    def ended(self, code: int) -> None:
        """The command ended with `code` (post the end, in turn after the posts under way)."""
        stopped, event, line = self.stopped, None, ""
        told, fix = "", None  # the JSON event's line and fix: as `launchkit why` says them
        if stopped is not None:
            event = policy.stop_event(stopped)
            told, fix = policy.stop_line(stopped, self.run)
            line = f"{told}{self._where()}"
        elif self.signalled or code == 128 + 15:
            pass  # canceled, preempted or stopped for a sibling: told by whoever ended it
        elif code == 0:
            if self.rank == "0":
                event, line, told = "succeeded", "succeeded", "succeeded"
        else:
            event = "failed"
            told, fix = policy.exit_line(code, self.run)
            line = f"{failed_line(code)}{self._where()}; see why: `launchkit why {self.run}`"
        if event is None:
            finish_together([(self.poster, None), (self.events, None)])
            return
        self._say(event, line, told, end=True, replica=self._replica(), fix=fix)


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
    return _read_once(fd).strip()


def read_hooks(fd: int) -> tuple[str, str]:
    """The run's two hooks handed over on one pipe, a line each (either may be empty): the Slack
    webhook, then the events URL (--notify-url / --notify-secret); read once, as `read_handed`."""
    lines = _read_once(fd).split("\n") + ["", ""]
    return lines[0].strip(), lines[1].strip()


def hooks_text(slack: str | None, events: str | None) -> str:
    """What `read_hooks` reads: the two hooks, a line each (a URL holds no newline: url_problem)."""
    return f"{slack or ''}\n{events or ''}\n"


def _read_once(fd: int) -> str:
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
    return data.decode("utf-8", "replace")


def from_env(
    env: dict[str, str],
    url: str | None = None,
    notify: str | None = None,
    notify_url: str | None = None,
    mode: str = policy.JOB,
) -> Job | None:
    """The job's poster when the runtime has a webhook (`url`, handed over by bash, else ENV) or an
    events URL (`notify`, handed over after it, else ENV_NOTIFY: --notify-secret's; else the policy's
    plain `notify_url`); both are taken out of `env` (the command's environment) either way. One that
    cannot be posted to is one warning line, and nothing is posted to it. `mode`: how the run posts
    (the policy's `slack_mode`: a sweep's task posts nothing)."""
    url = url or env.pop(ENV, "")
    notify = notify or env.pop(ENV_NOTIFY, "") or notify_url or ""
    env.pop(ENV, None)
    env.pop(ENV_NOTIFY, None)
    if not policy.posts_any(policy.JOB, mode):  # a sweep's task: its follower posts the digest
        return None
    secrets = secret_values(env)
    slack = _usable(url, f"the Slack webhook ({ENV})")
    events = _usable(notify, "the events URL (--notify-url, --notify-secret)")
    if slack is None and events is None:
        return None
    poster = None if slack is None else Poster(slack, secrets=secrets)
    stream = None if events is None else Poster(events, post_event, secrets=secrets, what="event post")
    return Job(env, poster, stream)


def _usable(url: str, what: str) -> str | None:
    if not url:
        return None
    problem = url_problem(url)
    if problem is not None:
        _write_err(f"[launchkit] warning: {what} cannot be used: {problem}; nothing is posted to it\n")
        return None
    return url


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
