"""The one retry policy of Beaker calls (issue 22): backoff with jitter, Retry-After, the deadline;
the clock and sleep are injected, so these run in microseconds."""

from __future__ import annotations

from types import SimpleNamespace

import grpc
import pytest

from launchkit.backends.beaker import client as bc
from launchkit.errors import BackendError


class _RpcError(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    def __init__(self, code: grpc.StatusCode, retry_after: str | None = None):
        self._code, self._after = code, retry_after

    def code(self):
        return self._code

    def details(self):
        return f"injected {self._code.name}"

    def trailing_metadata(self):
        return (("retry-after", self._after),) if self._after else ()

    def initial_metadata(self):
        return ()

    def is_active(self):
        return False

    def time_remaining(self):
        return None

    def cancel(self):
        return False

    def add_callback(self, callback):
        return False


class _Clock:
    def __init__(self):
        self.now, self.slept = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def _conn(clock: _Clock, timeout: float = 10.0):
    conn = object.__new__(bc.Connection)
    conn.timeout, conn.call_timeout, conn.clock = timeout, 5.0, clock
    conn.policy = bc.RetryPolicy(sleep=clock.sleep, rand=lambda: 1.0)
    conn.deadline, conn.rate_limited, conn.address = timeout, False, "https://beaker.test"
    conn.beaker = SimpleNamespace(config=SimpleNamespace(rpc_address="beaker.test:443"))
    return conn


def _method(conn, errors: list[Exception], name: str = "GetJob"):
    calls = []

    def inner(request, timeout=None, **kw):
        calls.append(timeout)
        if errors:
            raise errors.pop(0)
        return "ok"

    inner._method = name
    return bc._Guarded(conn, inner, name), calls


def test_backoff_doubles_up_to_the_cap_and_honours_retry_after():
    p = bc.RetryPolicy(base=0.25, cap=2.0, rand=lambda: 1.0)
    assert [p.delay(n) for n in range(5)] == [0.25, 0.5, 1.0, 2.0, 2.0]
    assert p.delay(0, retry_after=3.0) == 3.0
    jittered = bc.RetryPolicy(base=1.0, cap=8.0, rand=lambda: 0.5)
    assert jittered.delay(2) == 2.0


def test_resource_exhausted_is_retried_after_what_the_server_asks():
    clock = _Clock()
    m, calls = _method(_conn(clock), [_RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "1.5")])
    assert m(object()) == "ok"
    assert len(calls) == 2 and clock.slept == [1.5]


def test_transient_errors_stop_at_the_deadline_with_a_rate_limit_message():
    clock = _Clock()
    errors = [_RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "4") for _ in range(10)]
    m, calls = _method(_conn(clock, timeout=10.0), errors)
    with pytest.raises(BackendError, match="rate limiting"):
        m(object())
    assert clock.now <= 10.0 and len(calls) == 3  # waits 4 + 4, then a third 4 would pass the deadline


def test_final_errors_are_never_retried_and_writes_retry_only_rate_limits():
    clock = _Clock()
    m, calls = _method(_conn(clock), [_RpcError(grpc.StatusCode.NOT_FOUND)])
    with pytest.raises(grpc.RpcError):
        m(object())
    assert len(calls) == 1
    m, calls = _method(_conn(clock), [_RpcError(grpc.StatusCode.UNAVAILABLE)], name="CreateGroup")
    with pytest.raises(grpc.RpcError):
        m(object())  # may have been done: not repeated
    m, calls = _method(_conn(clock), [_RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED)], name="CreateGroup")
    assert m(object()) == "ok" and len(calls) == 2


def test_each_unary_call_gets_at_most_what_is_left():
    clock = _Clock()
    conn = _conn(clock, timeout=3.0)
    m, calls = _method(conn, [])
    m(object())
    assert calls == [3.0]
