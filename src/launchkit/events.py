"""One stream of a run's events (docs/api.md, "Events"): what `follow` and Slack tell, typed, for
scripts: `Run.events()` in the Python API, `launchkit follow --json` (one JSON object a line).

    for ev in run.events():            # Event(kind, time, replica, attempt, line, fix, progress)
        if ev.kind == "not_resuming":
            run.stop()

Kinds, in the Slack vocabulary (runtime/node/launch/notify.py: EMOJI) plus what only a stream has:
`waiting` (queued: why, with the fix), `started`, `progress` (a progress line, at most one every
`progress_every` seconds, and the first), `attempt` (a retry or resume began: `attempt 2 of 4; last:
exit code 1`), `restarted` (the runtime restarted the command in place), `not_resuming` (an attempt
started below the step the one before reached), `inactive_soft` (the runtime's warning), and the end:
`succeeded`, `failed`, `canceled`, `preempted`, `timeout`, `stalled`, `inactive` (stopped by
launchkit), with the run's one `why` line and its fix.

The events come from what `follow` reads: the run's output (the backend's follow, in a thread: the
runtime's `[launchkit] ...` lines and progress lines) and the run's state (`Backend.get`, every `poll`
seconds: waiting, started, a new attempt, the end). Clocks and sleeps are parameters.
"""

from __future__ import annotations

import datetime as dt
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any, cast

from pydantic import BaseModel, ConfigDict

from launchkit.application import Application
from launchkit.backends.protocol import Backend, Cause, RunInfo, RunStatus
from launchkit.masking import masked
from launchkit.runtime.node import policy
from launchkit.runtime.node.launch import watchdog

POLL = 2.0  # seconds between looks at the run's state
PROGRESS_EVERY = 30.0  # seconds between two progress events (the first is always told)
OWN = "[launchkit] "

# a finished run's end -> the event (the Slack vocabulary)
END_KINDS = {
    Cause.succeeded: "succeeded",
    Cause.preempted: "preempted",
    Cause.canceled: "canceled",
}


class Event(BaseModel):
    """One thing that happened to a run, as `follow` or Slack tells it. `time`: when launchkit saw it
    (UTC); `replica`/`attempt`: whose, when known; `line`: one sentence (no run id); `fix`: what to do
    (None: nothing); `progress`: a progress event's text (`step=1200/5000`)."""

    model_config = ConfigDict(frozen=True)

    kind: str
    time: dt.datetime
    replica: int | None = None
    attempt: int | None = None
    line: str
    fix: str | None = None
    progress: str | None = None

    def same(self) -> tuple[Any, ...]:
        """Everything but the time (two readings of one run compare equal)."""
        return (self.kind, self.replica, self.attempt, self.line, self.fix, self.progress)


def end_kind(run: RunInfo) -> str:
    """The event of a finished run's end."""
    end = run.end
    if end is None:
        return {RunStatus.succeeded: "succeeded", RunStatus.canceled: "canceled"}.get(run.status, "failed")
    if end.by == "launchkit":
        return policy.stop_event(end.line)
    if end.kind == Cause.timeout:
        return "timeout"
    return END_KINDS.get(end.kind, "failed")


def own_line(text: str) -> tuple[str, str, str | None] | None:
    """(kind, line, fix) of a line of the runtime's own (`[launchkit] ...`) that is an event, else None."""
    body = text[len(OWN) :]
    if body.startswith(watchdog.STOPPED):
        return None  # the end: told from the run's state, with its fix
    if body.startswith("warning: no output"):
        return "inactive_soft", body.removeprefix("warning: "), None
    if "it is not resuming from its checkpoint" in body and not body.startswith("stopping the command"):
        return "not_resuming", body, policy.NOT_RESUMING_FIX
    if body.startswith("restarting the command in place"):
        return "restarted", body, None
    return None


class _Lines:
    """The backend's follow writes here: whole lines (decoded) to a queue."""

    def __init__(self, out: queue.Queue[Any]) -> None:
        self._out, self._buf = out, b""

    def write(self, data: Any) -> int:
        self._buf += bytes(data)
        *whole, self._buf = self._buf.split(b"\n")
        for line in whole:
            self._out.put(line.decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if self._buf:  # an unterminated last line
            self._out.put(self._buf.decode("utf-8", "replace"))
            self._buf = b""


def stream(
    app: Application,
    backend: Backend,
    run: RunInfo,
    *,
    poll: float = POLL,
    progress_every: float = PROGRESS_EVERY,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Event]:
    """The run's events until it ends (the end is the last one); secrets in lines masked."""
    lines: queue.Queue[Any] = queue.Queue()
    done = object()
    codes: list[int] = []

    def read() -> None:
        sink = _Lines(lines)
        shown = masked(app, backend, run, cast("IO[bytes]", sink))
        try:
            codes.append(backend.follow(run, cast("IO[bytes]", shown)))
            shown.end()
            sink.close()
        except Exception as e:  # noqa: BLE001 - the state polls go on; the reader's failure is said once
            app.debug(f"reading the output of {run.id} failed: {e}")
        lines.put(done)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    patterns = watchdog.progress_patterns(())
    info, started, waiting, retry = run, False, None, None
    last_progress: float | None = None
    looked = clock()
    reading = True
    while True:
        if info.status == RunStatus.queued and info.waiting is not None and info.waiting.line != waiting:
            waiting = info.waiting.line
            yield Event(kind="waiting", time=now(), line=waiting, fix=info.waiting.fix)
        if not started and info.status not in (RunStatus.queued, RunStatus.starting):
            started = True
            yield Event(kind="started", time=now(), replica=0, attempt=info.attempts, line="started")
        if info.retry and info.retry != retry:
            retry = info.retry
            yield Event(kind="attempt", time=now(), attempt=info.attempts, line=retry)
        if info.status.finished and not reading:  # its output all read: the end is the last event
            yield Event(kind=end_kind(info), time=now(), line=_end_line(info), fix=_fix(info))
            return
        if not reading:  # its output has ended (or could not be read): the state alone, every `poll`
            sleep(poll)
        try:
            item = lines.get(timeout=max(0.0, poll - (clock() - looked))) if reading else None
        except queue.Empty:
            item = None
        if item is done:
            reading = False
        elif isinstance(item, str):
            if not started:
                started = True
                yield Event(kind="started", time=now(), replica=0, attempt=info.attempts, line="started")
            if item.startswith(OWN):
                told = own_line(item)
                if told is not None:
                    yield Event(kind=told[0], time=now(), attempt=info.attempts, line=told[1], fix=told[2])
            else:
                hit = watchdog.progress_in(item, patterns)
                t = clock()
                if hit is not None and (last_progress is None or t - last_progress >= progress_every):
                    last_progress = t
                    yield Event(
                        kind="progress", time=now(), attempt=info.attempts, line=item.strip(), progress=hit
                    )
        if clock() - looked >= poll or not reading:
            looked = clock()
            info = backend.get(run.id)


def _end_line(run: RunInfo) -> str:
    return run.end.line if run.end is not None else run.status.value


def _fix(run: RunInfo) -> str | None:
    return run.end.fix if run.end is not None else None


def exit_code(run: RunInfo) -> int:
    """The exit code `follow` gives a finished run (RunStatus.shell_code)."""
    return run.status.shell_code(run.exit_code)


__all__ = ["Event", "end_kind", "exit_code", "stream"]
