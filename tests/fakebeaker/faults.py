"""Fault injection: UNAVAILABLE, rate limits (RESOURCE_EXHAUSTED / HTTP 429), latency, stream cuts
(RST_STREAM), early stream ends, ambiguous creates."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from timescale import scaled


@dataclass
class _Counted:
    remaining: int | None  # None = forever
    method: str | None = None

    def matches(self, method: str) -> bool:
        return self.method is None or self.method == method

    def take(self) -> bool:
        if self.remaining is None:
            return True
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True


@dataclass
class StreamFault:
    kind: str  # "cut" (INTERNAL "RST_STREAM"), "unavailable" (UNAVAILABLE) or "end" (clean close early)
    after_lines: int | None = None  # trigger after sending this many lines
    after_seconds: float | None = None  # or after this long (also while a follow stream is idle)


class Faults:
    """Per-server fault plan. Methods are gRPC method names (GetJob, StreamJobLogs, ...) or the HTTP
    route names CreateExperiment, PutSecretValue, GetSecretValue, DeleteSecret."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._unavailable: list[_Counted] = []
            self._latency: dict[str | None, float] = {}
            self._streams: list[tuple[_Counted, StreamFault]] = []
            self._create_failures: list[tuple[_Counted, str]] = []
            self._retryable: list[_Counted] = []
            self._rate_limits: list[tuple[_Counted, float]] = []
            self._together: dict[str, threading.Barrier] = {}
            self.met: dict[str, int] = {}  # method -> how many calls were answered n at a time

    # ---- arrange
    def unavailable(self, n: int = 1, method: str | None = None) -> None:
        """The next `n` calls (of `method`, or of any method) fail with UNAVAILABLE (HTTP 503)."""
        with self._lock:
            self._unavailable.append(_Counted(n, method))

    def rate_limit(self, n: int | None = 1, method: str | None = None, *, retry_after: float = 0.0) -> None:
        """The next `n` calls (None: every call) of `method` (or of anything) are rate limited: gRPC
        RESOURCE_EXHAUSTED with trailing metadata `retry-after` (seconds) / HTTP 429 with a Retry-After
        header (fact 9.2: "The HTTP 429 answer is recoverable"). Nothing is done. beaker-py 2.8.1 raises
        a raw grpc.RpcError for RESOURCE_EXHAUSTED and BeakerError("[code=429] ...") for the 429."""
        with self._lock:
            self._rate_limits.append((_Counted(n, method), retry_after))

    def take_rate_limit(self, method: str) -> float | None:
        """Seconds to put in Retry-After when this call is rate limited, else None."""
        with self._lock:
            for counted, after in self._rate_limits:
                if counted.matches(method) and counted.take():
                    return after
            return None

    def together(self, method: str | tuple[str, ...], n: int, *, wait: float = 30.0) -> None:
        """Hold each call of `method` (or of any of several methods) until `n` are in flight at once
        (at most `wait` seconds; then it is answered anyway, uncounted): `met[method]` counts the calls
        answered together."""
        barrier = threading.Barrier(n, timeout=scaled(wait))
        with self._lock:
            for name in (method,) if isinstance(method, str) else method:
                self._together[name] = barrier
                self.met[name] = 0

    def held(self, method: str) -> int:
        """How many calls of `method` `together` holds now (they are not recorded until answered)."""
        with self._lock:
            barrier = self._together.get(method)
        return 0 if barrier is None else barrier.n_waiting

    def release(self) -> None:
        """Answer at once every call `together` holds (uncounted), and hold no more."""
        with self._lock:
            barriers, self._together = list(self._together.values()), {}
        for barrier in barriers:
            barrier.abort()

    def meet(self, method: str) -> None:
        with self._lock:
            barrier = self._together.get(method)
        if barrier is None:
            return
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            barrier.reset()
            return
        with self._lock:
            self.met[method] += 1

    def latency(self, seconds: float, method: str | None = None) -> None:
        """Add `seconds` to every call (of `method`, or of all methods; 0 removes it)."""
        with self._lock:
            if seconds:
                self._latency[method] = seconds
            else:
                self._latency.pop(method, None)

    def cut_streams(
        self, after_lines: int | None = None, count: int | None = 1, *, after_seconds: float | None = None
    ) -> None:
        """The next `count` StreamJobLogs calls (None: all) fail with gRPC INTERNAL "RST_STREAM" after
        sending `after_lines` lines or after `after_seconds`, whichever comes first: beaker-py raises
        BeakerStreamConnectionClosedError and resumes from the last timestamp + 1 ns."""
        self._add_stream_fault("cut", after_lines, after_seconds, count)

    def unavailable_streams(
        self, after_lines: int | None = None, count: int | None = 1, *, after_seconds: float | None = None
    ) -> None:
        """Like `cut_streams`, but the stream fails with gRPC UNAVAILABLE (a reset connection):
        beaker-py raises BeakerServerUnavailableError and, in `job.logs`, retries forever."""
        self._add_stream_fault("unavailable", after_lines, after_seconds, count)

    def retryable_conflicts(self, n: int = 1, method: str = "CreateExperiment") -> None:
        """The next `n` calls of an HTTP route answer the transient 409 "a retryable database conflict
        occurred" (fact 3.1) without doing anything; beaker-py 2.8.1 retries it as a server error."""
        with self._lock:
            self._retryable.append(_Counted(n, method))

    def end_streams(
        self, after_lines: int | None = None, count: int | None = 1, *, after_seconds: float | None = None
    ) -> None:
        """The next `count` StreamJobLogs calls (None: all) end cleanly after `after_lines` lines or
        `after_seconds` even though the job still runs (Beaker's follow streams do that); beaker-py then
        asks GetJob and re-requests from the last timestamp + 1 ns."""
        self._add_stream_fault("end", after_lines, after_seconds, count)

    def _add_stream_fault(
        self, kind: str, lines: int | None, seconds: float | None, count: int | None
    ) -> None:
        if lines is None and seconds is None:
            raise ValueError("give after_lines and/or after_seconds")
        with self._lock:
            self._streams.append((_Counted(count), StreamFault(kind, lines, seconds)))

    def fail_create_after_record(self, count: int = 1, mode: str = "503") -> None:
        """The next `count` experiment creates record the experiment, then fail: mode "503" answers
        HTTP 503, "500" HTTP 500, "drop" closes the connection without an answer (ambiguous failures)."""
        if mode not in ("503", "500", "drop"):
            raise ValueError("mode must be '503', '500' or 'drop'")
        with self._lock:
            self._create_failures.append((_Counted(count), mode))

    # ---- consult (server side)
    def take_unavailable(self, method: str) -> bool:
        with self._lock:
            for f in self._unavailable:
                if f.matches(method) and f.take():
                    return True
            self._unavailable = [f for f in self._unavailable if f.remaining != 0]
            return False

    def delay_for(self, method: str) -> float:
        with self._lock:
            return self._latency.get(method, 0.0) + self._latency.get(None, 0.0)

    def take_stream_fault(self, follow: bool = True) -> StreamFault | None:
        """The next fault for a stream; clean early ends happen to follow streams only (fact 5.3)."""
        with self._lock:
            for counted, fault in self._streams:
                if fault.kind == "end" and not follow:
                    continue
                if counted.take():
                    return fault
            return None

    def take_retryable_conflict(self, method: str) -> bool:
        with self._lock:
            return any(f.matches(method) and f.take() for f in self._retryable)

    def take_create_failure(self) -> str | None:
        with self._lock:
            for counted, mode in self._create_failures:
                if counted.take():
                    return mode
            return None
