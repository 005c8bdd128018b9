"""Job log streaming: raw bytes, exactly once, across dropped streams.

beaker-py's `job.logs()` resumes after a drop with `since = last timestamp + 1 ns`; lines that share
that timestamp but had not arrived yet are lost. We resume with `since = last timestamp` (inclusive)
and skip the lines at that timestamp we already wrote, and any line older than it (a server that
honours `since` only to the second, or restarts the stream, re-sends them: fact sheet 10.13), so
every line arrives exactly once.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import IO, Any, Self

import grpc
from beaker import beaker_pb2 as pb2
from beaker import exceptions as bx

from launchkit.backends.beaker import unwrapped
from launchkit.backends.beaker.client import Connection, transient
from launchkit.backends.ending import COMMAND_STARTED

_RECONNECTABLE = (bx.BeakerStreamConnectionClosedError, bx.BeakerServerUnavailableError, bx.BeakerServerError)


class Flusher:
    """Flushes `out` every `interval` seconds from a daemon thread, so writers never flush per line."""

    def __init__(self, out: IO[bytes], interval: float = 0.2):
        self.out = out
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.out.flush()
            except (OSError, ValueError):
                return

    def close(self) -> None:
        self._stop.set()
        try:
            self.out.flush()
        except (OSError, ValueError):
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stream_job(
    conn: Connection,
    job_id: str,
    write: Callable[[bytes], Any],
    *,
    prefix: bytes = b"",
    tail: int | None = None,
    since_ns: int | None = None,
    head: int | None = None,
    follow: bool = False,
    is_finalized: Callable[[], bool] | None = None,
    timestamps: bool = False,
) -> int:
    """Write the job's log lines (`prefix + message + \\n`) and return how many were written.

    With `follow`, keeps re-requesting until `is_finalized()` says the job is done (Beaker's follow
    streams end early), then reads once more without following, so the lines the last stream had not
    sent yet arrive too. Drops are retried with backoff until the connection's deadline passes
    without progress.
    """
    if head == 0 or tail == 0:
        return 0
    client = conn.beaker.job
    not_found: dict[Any, Exception] = {grpc.StatusCode.NOT_FOUND: bx.BeakerJobNotFound(job_id)}
    last_ts: int | None = None
    at_last = 0  # lines written with timestamp == last_ts
    written = 0
    failures = 0
    live = follow  # False for the final drain after the job is finalized
    while True:
        request = pb2.StreamJobLogsRequest(job_id=job_id, follow=live)
        skip = 0
        floor = since_ns  # lines before it are dropped, whatever the server re-sends (fact 10.13)
        if last_ts is not None:
            request.since.FromNanoseconds(last_ts)
            skip = at_last
            floor = last_ts
        else:
            if tail is not None:
                request.tail_lines = tail
            if since_ns is not None:
                request.since.FromNanoseconds(since_ns)
        limit = -1 if head is None else head - written
        got = 0
        call = client.service.StreamJobLogs(request, metadata=client._rpc_call_metadata)
        try:
            for log in call:
                stamp = log.timestamp
                ts = stamp.seconds * 1_000_000_000 + stamp.nanos
                if floor is not None and ts < floor:
                    continue  # re-sent from before where this request asked to start
                if skip:
                    if ts == last_ts:
                        skip -= 1
                        continue
                    skip = 0
                if ts == last_ts:
                    at_last += 1
                else:
                    last_ts = ts
                    at_last = 1
                if timestamps:
                    write(prefix + _iso(ts) + log.message + b"\n")
                else:
                    write(prefix + log.message + b"\n")
                got += 1
                if got == limit:
                    return written + got
                if not got & 4095:
                    conn.renew()
        except grpc.RpcError as e:
            err = unwrapped.coerce_rpc_error(e, not_found)
            written += got
            if not (isinstance(err, _RECONNECTABLE) or transient(e)):
                raise err from None
            if got:  # the stream made progress before it dropped: resume at once
                conn.renew()
                failures = 0
                continue
            conn.backoff(failures, e, what="StreamJobLogs")  # the one retry policy; raises at the deadline
            failures += 1
            continue
        finally:
            call.cancel()  # ends the RPC when we stop early (--head); a no-op after the end
        written += got
        if got:
            conn.renew()
        if not live or is_finalized is None:
            return written
        if is_finalized():
            live = False  # drain: everything logged up to the end, from where this stream stopped
        elif not got:
            time.sleep(0.2)
        failures = 0


class _Seen(Exception):
    """The line looked for arrived: the stream stops there."""


def command_started(conn: Connection, job_id: str) -> bool:
    """Whether the job's log says the runtime started the user's command (backends/ending.py): its
    lines from the start, read up to that line, which comes before any of the command's output (a
    setup failure's log is short), so the read stops there."""

    def look(line: bytes) -> None:
        if line.startswith(COMMAND_STARTED):
            raise _Seen

    try:
        stream_job(conn, job_id, look)
    except _Seen:
        return True
    return False


def head_records(
    conn: Connection, job_id: str, lines: int, last: Callable[[bytes], bool] | None = None
) -> list[tuple[int, bytes]]:
    """The job's first `lines` log lines as (ns since the epoch, message), oldest first, up to the one
    `last` says is the last wanted: one read, which stops there."""
    out: list[tuple[int, bytes]] = []

    def take(line: bytes) -> None:
        out.append(_stamped(line))
        if last is not None and last(out[-1][1]):
            raise _Seen

    try:
        stream_job(conn, job_id, take, head=lines, timestamps=True)
    except _Seen:
        pass
    return out


def tail_records(conn: Connection, job_id: str, lines: int) -> list[tuple[int, bytes]]:
    """The job's last `lines` log lines as (ns since the epoch, message), oldest first: one read."""
    out: list[bytes] = []
    stream_job(conn, job_id, out.append, tail=lines, timestamps=True)
    return [_stamped(line) for line in out]


def _stamped(line: bytes) -> tuple[int, bytes]:
    """(ns, message) of a line `_iso(ns) + message + \\n`."""
    stamp, _, message = line.partition(b" ")
    secs = dt.datetime.strptime(stamp[:19].decode(), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)
    return int(secs.timestamp()) * 1_000_000_000 + int(stamp[20:29]), message[:-1]


def _iso(ns: int) -> bytes:
    """`2026-01-31T12:00:00.123456789Z ` (UTC, nanoseconds)."""
    secs, frac = divmod(ns, 1_000_000_000)
    return dt.datetime.fromtimestamp(secs, dt.UTC).strftime(f"%Y-%m-%dT%H:%M:%S.{frac:09d}Z ").encode()
