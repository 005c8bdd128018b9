"""A beaker-py client with one retry policy and an overall deadline.

beaker-py retries UNAVAILABLE/RST_STREAM without limit (1-2 s apart), leaves RESOURCE_EXHAUSTED raw
(not retried), has no per-call timeout, and answers an HTTP 429 on a POST with a plain
BeakerError("[code=429] ..."). We keep beaker-py's client and wrap its gRPC stub and HTTP session so
that every call of every command goes through `RetryPolicy`: transient failures (rate limits, an
unavailable server, a dropped connection) are retried with exponential backoff and jitter, at least
as long as the server's Retry-After asks, and never past the operation's deadline (--beaker-timeout);
final answers (4xx, NOT_FOUND, ...) are never retried. A unary call also gets a timeout no longer than
what is left. Log streams (logs.py) use the same policy between reconnects.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from email.utils import parsedate_to_datetime
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental
import platformdirs
import requests
from beaker import Beaker
from beaker import beaker_pb2 as pb2
from beaker import exceptions as bx
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from launchkit.backends import NoCredentials
from launchkit.backends.beaker_remembered import cache_dir
from launchkit.config import merge, read_layers
from launchkit.core.units import UnitError, positive_seconds
from launchkit.errors import (
    BackendError,
    LaunchkitError,
    NotFoundError,
    PreconditionError,
    UsageError,
    from_exception,
)

DEFAULT_TIMEOUT = 60.0  # seconds without an answer before a command gives up


class BeakerUnreachable(BackendError):
    """The deadline passed while Beaker did not answer."""


def configured_timeout(explicit: float | None = None, config: Any = None) -> float:
    """--beaker-timeout, else `beaker_timeout` from launchkit's config layers (LAUNCHKIT_BEAKER_TIMEOUT,
    [tool.launchkit] in pyproject.toml, the user config file), else 60 s. `config`: the layers already
    read (the Application's); None: read them here."""
    if explicit is not None:
        try:
            return positive_seconds(explicit)
        except UnitError as e:
            raise UsageError(f"--beaker-timeout {explicit!r}: {e.problem}", hint=e.hint) from None
    if config is None:
        config = merge(read_layers())
    raw = config.get("beaker_timeout")
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        return positive_seconds(raw)
    except UnitError as e:
        where = config.values["beaker_timeout"][1].where("beaker_timeout")
        raise UsageError(f"{where} {raw!r}: {e.problem}", hint=e.hint) from None


class RetryPolicy:
    """The one retry policy of every Beaker call: exponential backoff with full jitter (`base` * 2^n,
    at most `cap`), at least the server's Retry-After. The deadline is the Connection's."""

    def __init__(
        self,
        *,
        base: float = 0.25,
        cap: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
    ):
        self.base, self.cap, self.sleep, self.rand = base, cap, sleep, rand

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        wait = float(self.rand()) * min(self.cap, self.base * 2**attempt)
        return float(max(wait, retry_after)) if retry_after is not None else wait


TRANSIENT_CODES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED"})  # maybe done: idempotent calls
TRANSIENT_HTTP = frozenset({502, 503, 504})


def _grpc_code(e: BaseException) -> Any:
    return e.code() if isinstance(e, grpc.RpcError) and isinstance(e, grpc.Call) else None


def rate_limited(e: BaseException) -> bool:
    """The server refused for load, before doing anything (always safe to retry)."""
    return _grpc_code(e) == grpc.StatusCode.RESOURCE_EXHAUSTED or http_status(e) == 429


def refused(e: BaseException) -> bool:
    """The address refused the connection: nothing listens there (a wrong address, a tunnel that is
    down). Told at once, not retried until the deadline as a server that does not answer is."""
    code = _grpc_code(e)
    if code is not None:
        return code == grpc.StatusCode.UNAVAILABLE and "connection refused" in (e.details() or "").lower()  # type: ignore[attr-defined]
    seen: BaseException | None = e
    for _ in range(8):  # requests' ConnectionError wraps urllib3's, which wraps the OSError
        if seen is None or isinstance(seen, ConnectionRefusedError):
            break
        inner = seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None
        seen = inner or seen.__cause__ or seen.__context__ or getattr(seen, "reason", None)
    return isinstance(seen, ConnectionRefusedError)


def transient(e: BaseException, *, idempotent: bool = True) -> bool:
    """Worth retrying: a rate limit (always), or, for calls that may be repeated, an unavailable
    server, a dropped stream or connection, or a per-call timeout; not a refused connection."""
    if rate_limited(e):
        return True
    if refused(e):
        return False
    if not idempotent:
        return False
    code = _grpc_code(e)
    if code is not None:
        return code.name in TRANSIENT_CODES or (
            code == grpc.StatusCode.INTERNAL and "RST_STREAM" in (e.details() or "")  # type: ignore[attr-defined]
        )
    if isinstance(e, (bx.BeakerStreamConnectionClosedError, bx.BeakerServerUnavailableError)):
        return True
    return http_status(e) in TRANSIENT_HTTP or isinstance(e, (requests.ConnectionError, requests.Timeout))


def retry_after(e: BaseException | requests.Response) -> float | None:
    """Seconds the server asked to wait: gRPC trailing metadata `retry-after`, HTTP `Retry-After`."""
    raw: Any = None
    if isinstance(e, requests.Response):
        raw = e.headers.get("Retry-After")
    elif isinstance(e, grpc.Call):
        for k, v in e.trailing_metadata() or ():
            if k.lower() == "retry-after":
                raw = v
    else:
        response = getattr(e, "response", None)
        raw = response.headers.get("Retry-After") if response is not None else None
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except (TypeError, ValueError):
        return None  # an HTTP date: fall back to the backoff


def _idempotent(method: str) -> bool:
    return not method.startswith(("Create", "Update", "Add", "Set"))


class _Guarded:
    """One stub method: refuse it after the deadline, bound a unary call's time, retry it (RetryPolicy)."""

    def __init__(self, conn: Connection, inner: Any, name: str):
        self._conn = conn
        self._inner = inner
        self._method = inner._method  # beaker-py reads it for log messages
        self._name = name
        self._stream = isinstance(inner, grpc.UnaryStreamMultiCallable)
        self._idempotent = _idempotent(name)

    def __call__(self, request: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        conn = self._conn
        attempt = 0
        while True:
            left = conn.deadline - conn.clock()
            if left <= 0:
                raise conn.unreachable()
            if self._stream:  # errors arrive while reading: logs.stream_job retries them
                return self._inner(request, timeout=timeout, **kwargs)
            try:
                return self._inner(request, timeout=min(timeout or left, left, conn.call_timeout), **kwargs)
            except grpc.RpcError as e:
                if refused(e):  # told now, as launchkit's error (beaker-py retries UNAVAILABLE forever)
                    raise conn.translate(e) from None
                if not transient(e, idempotent=self._idempotent):
                    raise
                conn.backoff(attempt, e, what=self._name)
                attempt += 1


class _RetryingSession(requests.Session):
    """beaker-py's HTTP session, retrying through the RetryPolicy: a 429 on any method (nothing was
    done), 502/503/504 and dropped connections on methods that may be repeated. A POST that may have
    been done is not retried here (submit.create_once looks for it first)."""

    conn: Connection

    def request(self, method: str, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
        verb = method.upper()
        idempotent = verb in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS")
        body: Any = kwargs.get("data")
        start = body.tell() if hasattr(body, "seek") and hasattr(body, "tell") else None
        if hasattr(body, "read") and start is None:
            idempotent = False  # a one-shot stream cannot be sent twice
        attempt = 0
        while True:
            if attempt and start is not None:
                body.seek(start)
            try:
                response = super().request(method, url, *args, **kwargs)
            except (requests.ConnectionError, requests.Timeout) as e:
                if refused(e):  # told now, as launchkit's error (beaker-py would retry it)
                    raise self.conn.translate(e) from None
                if not idempotent:
                    raise
                if not self.conn.backoff(attempt, e, what=f"{verb} {url!s}", quiet=True):
                    raise
                attempt += 1
                continue
            status = response.status_code
            if (status == 429 or (idempotent and status in TRANSIENT_HTTP)) and (
                self.conn.backoff(attempt, response, what=f"{verb} {url!s}", quiet=True)
            ):
                response.close()
                attempt += 1
                continue
            return response


class _GuardedStub:
    def __init__(self, conn: Connection, stub: Any):
        self._conn = conn
        self._stub = stub

    def __getattr__(self, name: str) -> Any:
        wrapped = _Guarded(self._conn, getattr(self._stub, name), name)
        setattr(self, name, wrapped)
        return wrapped


class _Beaker(Beaker):
    """beaker-py's client with our interceptor on the channel."""

    conn: Connection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The channel is made once, whichever thread asks first (Connection.soon), and never closed while
        # it is made. Its own lock: making one may collect another client, whose __del__ closes it.
        self._made = threading.RLock()  # (before beaker-py's __init__: its __del__ closes)
        super().__init__(*args, **kwargs)

    @property
    def service(self) -> Any:  # a _GuardedStub in place of beaker-py's BeakerStub
        with self._made:
            return self._make_service() if self._service is None else self._service

    def close(self) -> None:
        """beaker-py's close, never while another thread makes the channel's stub (Connection.abandon
        closes it while look-ups asked ahead are in flight): gRPC crashes the process (SIGSEGV) when a
        channel is closed while methods are being registered on it."""
        with self._made:
            super().close()  # type: ignore[no-untyped-call]

    def _make_service(self) -> Any:
        from beaker import beaker_pb2_grpc

        self._channel = grpc.secure_channel(
            self.config.rpc_address,
            grpc.ssl_channel_credentials(),
            options=[
                ("grpc.max_send_message_length", self.RPC_MAX_SEND_MESSAGE_LENGTH),
                ("grpc.max_receive_message_length", self.RPC_MAX_RECEIVE_MESSAGE_LENGTH),
                # log streams: receive on the reading thread (no hand-off per message)
                (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1),
            ],
        )
        stub = beaker_pb2_grpc.BeakerStub(self._channel)  # type: ignore[no-untyped-call]
        self._service = _GuardedStub(self.conn, stub)  # type: ignore[assignment]
        return self._service

    def _init_http_session(self) -> requests.Session:
        """Our RetryPolicy for status answers; urllib3 only retries connecting (nothing was sent)."""
        session = _RetryingSession()
        session.conn = self.conn
        retries = Retry(total=None, connect=3, read=0, status=0, other=0, backoff_factor=0.2)
        session.mount("https://", HTTPAdapter(max_retries=retries, pool_maxsize=self.POOL_MAXSIZE))
        return session


class Connection:
    """One Beaker client plus the deadline bookkeeping. Use `renew()` when progress was made."""

    def __init__(
        self,
        timeout: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        policy: RetryPolicy | None = None,
        config: Any = None,
    ):
        self.timeout = configured_timeout(timeout, config)
        self.call_timeout = min(30.0, self.timeout)
        self.clock = clock
        self.policy = policy or RetryPolicy()
        self.deadline = clock() + self.timeout
        self.rate_limited = False  # the last retried failure was a rate limit (for the message)
        from beaker.config import Config

        try:
            config = Config.from_env()
        except bx.BeakerConfigurationError:
            named = os.environ.get("BEAKER_CONFIG", "")
            if named and not os.path.isfile(named):
                raise NoCredentials(
                    f"no Beaker credentials: BEAKER_CONFIG={named} names no file",
                    hint="point BEAKER_CONFIG at your Beaker config.yml, which `beaker account login` "
                    "writes to ~/.beaker/config.yml; or unset it",
                ) from None
            raise NoCredentials(
                "no Beaker credentials found",
                hint="run `beaker account login`, or set BEAKER_TOKEN (token from https://beaker.org/user), "
                "or point BEAKER_CONFIG at a config.yml; "
                "to try things without Beaker use --dry-run or --local",
            ) from None
        client = _Beaker(config, check_for_upgrades=False, user_agent="launchkit (beaker-py)")
        client.conn = self
        # Bounded retries (beaker-py's class defaults are 5 retries, 120 s backoff cap).
        client.MAX_RETRIES = 3  # type: ignore[misc]
        client.BACKOFF_FACTOR = 0.5  # type: ignore[misc,assignment]
        client.BACKOFF_MAX = max(1.0, min(8.0, self.timeout / 4))  # type: ignore[misc,assignment]
        client.TIMEOUT = self.call_timeout  # type: ignore[misc]
        self.beaker = client
        self.address = config.agent_address
        self._org: Any = None
        self._me: Any = None
        self._users: dict[str, str] = {}
        self._users_loaded = False
        self._users_dirty = False
        self.placements: dict[tuple[Any, ...], list[str]] = {}  # resolve.resolve_clusters' answers
        self.clusters: list[Any] | None = None  # resolve.org_clusters: the org's clusters, listed once
        self.nodes: dict[str, list[Any]] = {}  # cluster id -> its nodes (scheduling.sizes)
        self._answers: dict[Hashable, Future[Any]] = {}  # soon()/answer(): one answer per question
        self._answering = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None

    def server_now(self) -> float | None:
        """The server's clock (seconds since the epoch, to the second) from the `Date` header of one
        unauthenticated HTTP request to the API, whatever it answers; None when there is no answer or
        no Date (the caller then uses this machine's clock: fail open)."""
        try:
            with self.beaker.http_session() as session:
                response = session.get(f"{self.address}/api/v3/", timeout=self.call_timeout)
            return parsedate_to_datetime(response.headers["Date"]).timestamp()
        except (requests.RequestException, KeyError, TypeError, ValueError):
            return None

    def org(self) -> Any:
        """The default organization as a pb2 object (resolved once), so list calls skip re-resolving it."""
        if self._org is None:
            from beaker import beaker_pb2 as pb2

            self._org = pb2.Organization(id=self.beaker.workspace.resolve_org_id(None))
        return self._org

    def me(self) -> Any:
        if self._me is None:
            self._me = self.beaker.user.get()
            self._users[self._me.id] = self._me.name
        return self._me

    def user_names(self, user_ids: list[str]) -> dict[str, str]:
        """Names for author ids: one GetUser per id never seen before (memory + on-disk cache), asked
        at once (`list` of several authors: one round)."""
        cache = self._user_cache()
        unseen = [uid for uid in dict.fromkeys(user_ids) if uid and uid not in cache]
        for uid in unseen[1:]:  # the first is asked here, while the others are out
            self.soon(("user name", uid), partial(self._user_name, uid))
        for uid in unseen:
            cache[uid] = self.answer(("user name", uid), partial(self._user_name, uid))
            self._users_dirty = self._users_dirty or cache[uid] != uid
        self._save_user_cache()
        return {uid: cache.get(uid, uid) for uid in user_ids}

    def _user_name(self, user_id: str) -> str:
        """A user's name by id: one GetUser (beaker-py takes a pb2.User's id as it is: no
        ResolveUserName); the id itself for a user Beaker does not know."""
        try:
            return str(self.beaker.user.get(pb2.User(id=user_id)).name)
        except bx.BeakerUserNotFound:
            return user_id

    def _user_cache(self) -> dict[str, str]:
        if self._users_loaded:
            return self._users
        self._users_loaded = True

        try:
            data = json.loads(self._user_cache_path().read_text())
            self._users.update({k: v for k, v in data.get(self.address, {}).items() if isinstance(v, str)})
        except (OSError, ValueError, AttributeError):
            pass
        return self._users

    def _user_cache_path(self) -> Path:
        return Path(platformdirs.user_cache_dir("launchkit")) / "beaker-users.json"

    def _save_user_cache(self) -> None:
        if not self._users_dirty:
            return

        path = self._user_cache_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({self.address: self._users}))
            os.replace(tmp, path)
            self._users_dirty = False
        except OSError:
            pass  # a cache only

    def renew(self) -> None:
        self.deadline = self.clock() + self.timeout

    def backoff(
        self, attempt: int, error: BaseException | requests.Response, *, what: str = "", quiet: bool = False
    ) -> bool:
        """Wait before retry number `attempt` + 1 of a transient failure. When the wait would pass the
        deadline: False with `quiet`, else raise (the error, translated)."""
        self.rate_limited = (isinstance(error, requests.Response) and error.status_code == 429) or (
            isinstance(error, BaseException) and rate_limited(error)
        )
        wait = self.policy.delay(attempt, retry_after(error))
        if self.clock() + wait > self.deadline:
            if quiet:
                return False
            if isinstance(error, BaseException):
                raise self.translate(error) from None
            raise self.unreachable()

        name = error.status_code if isinstance(error, requests.Response) else type(error).__name__
        logging.getLogger("launchkit").debug("%s: %s; retrying in %.2fs", what, name, wait)
        self.policy.sleep(wait)
        return True

    def unreachable(self) -> BeakerUnreachable:
        if self.rate_limited:
            return BeakerUnreachable(
                f"Beaker kept rate limiting launchkit's requests for {self.timeout:g}s",
                hint="wait a minute and run the command again, or raise --beaker-timeout",
            )
        return BeakerUnreachable(
            f"Beaker at {self.beaker.config.rpc_address} did not answer within {self.timeout:g}s",
            hint="check your network/VPN and https://status.beaker.org, or raise --beaker-timeout",
        )

    def soon(self, key: Hashable, ask: Callable[[], Any]) -> None:
        """Send `ask()` now, in the background, once per `key`: look-ups that do not depend on each
        other go out together and `answer(key, ...)` takes each where it is needed (a submit's calls in
        series: bench/bench_submit.py). `ask` may take another key's answer (a workspace's secrets need
        the workspace), never its own; its error, if any, is raised where the answer is taken."""
        with self._answering:
            if key in self._answers:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="beaker")
            self._answers[key] = self._pool.submit(ask)

    def answer(self, key: Hashable, ask: Callable[[], Any]) -> Any:
        """`ask()`'s answer, asked once until `forget()`: the one `soon` sent, else asked now."""
        with self._answering:
            mine = key not in self._answers
            if mine:
                self._answers[key] = Future()
            future = self._answers[key]
        if mine:
            try:
                future.set_result(ask())
            except BaseException as e:  # noqa: BLE001 (raised again by result(), for every taker)
                future.set_exception(e)
        try:  # the call itself is bounded by the deadline; so is waiting for another thread's
            return future.result(timeout=max(0.0, self.deadline - self.clock()) + self.call_timeout)
        except FutureTimeout:
            raise self.unreachable() from None

    def forget(self) -> None:
        """Drop the answers `soon`/`answer` keep (a new launch asks afresh)."""
        with self._answering:
            self._answers = {}

    def abandon(self) -> None:
        """Give up the questions `soon` sent (a launch refused before it took their answers): those not
        begun are cancelled and the channel is closed, which ends the calls in flight now, so the
        process exits without waiting for them. The next call opens another channel."""
        with self._answering:
            pool, self._pool, self._answers = self._pool, None, {}
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        try:
            self.beaker.close()
        except Exception as e:  # noqa: BLE001 - giving up must not hide the error that made us give up
            logging.getLogger("launchkit").debug("closing the channel: %s", e)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self.beaker.close()

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Translate every beaker-py, gRPC and HTTP exception into a one-line launchkit error."""
        try:
            yield
        except (LaunchkitError, BrokenPipeError, KeyboardInterrupt):  # a closed stdout: the CLI's business
            raise
        except Exception as e:  # noqa: BLE001 - every exception ends in one line, never a traceback
            raise self.translate(e) from None

    def translate(self, e: BaseException) -> LaunchkitError:
        """The launchkit error for an exception raised by beaker-py, grpc or requests."""
        if isinstance(e, LaunchkitError):
            return e
        code = e.code() if isinstance(e, grpc.RpcError) and isinstance(e, grpc.Call) else None
        http = http_status(e)
        if code == grpc.StatusCode.UNAUTHENTICATED or http == 401 or _is_bad_token(e):
            return self.bad_token()
        if isinstance(e, bx.BeakerNotFoundError) or http == 404:
            return NotFoundError(
                f"not found on Beaker: {_what(e)}",
                hint="check the spelling (names are user/name or org/name)",
            )
        if isinstance(e, bx.BeakerPermissionsError) or http == 403:
            return PreconditionError(
                f"Beaker denied the request: {_what(e)}",
                hint="check that you are a member of the workspace and may do this",
            )
        if isinstance(e, (bx.BeakerOrganizationNotSet, bx.BeakerWorkspaceNotSet)):
            return UsageError(
                str(e),
                hint="pass --workspace org/name or set default_workspace in your "
                "Beaker config (`beaker config set default_workspace org/name`)",
            )
        if isinstance(e, NotImplementedError) or code == grpc.StatusCode.UNIMPLEMENTED:
            return BackendError(
                f"this Beaker server does not support a request launchkit made: {_what(e)}",
                hint="upgrade launchkit, or report it with the command you ran",
            )
        if rate_limited(e):  # retried until the deadline: transient, not the user's request
            self.rate_limited = True
            return self.unreachable()
        if http is not None and 400 <= http < 500:  # the server's own message, final (never retried)
            return UsageError(f"Beaker refused the request: {server_message(e)}", hint=_hint_for(http))
        if refused(e):
            where = self.beaker.config.rpc_address if code is not None else self.address
            return BeakerUnreachable(
                f"Beaker at {where} refused the connection: nothing listens there",
                hint="check BEAKER_ADDR or agent_address in your Beaker config, and your network/VPN",
            )
        if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
            return self.unreachable()
        if code is not None:
            details = e.details() if isinstance(e, grpc.Call) else str(e)
            return BackendError(f"Beaker error ({code.name}): {details}")
        if isinstance(e, bx.BeakerError):
            return BackendError(f"Beaker error: {_what(e)}")
        if isinstance(e, OSError) and e.filename is not None:  # a local file, not the network
            return local_file_error(e)
        if isinstance(e, OSError):  # requests' ConnectionError and friends
            return BackendError(
                f"cannot reach Beaker at {self.address}: {_what(e)}",
                hint="check your network, or raise --beaker-timeout",
            )
        return BackendError(f"unexpected error talking to Beaker: {type(e).__name__}: {_what(e)}")

    def bad_token(self) -> PreconditionError:
        return PreconditionError(
            "Beaker rejected your token (invalid or expired)",
            hint="get a new one at https://beaker.org/user, then `beaker account login` or set BEAKER_TOKEN",
        )


def local_file_error(e: OSError) -> LaunchkitError:
    """A file launchkit could not write or read here, told as such (exit 3): launchkit's cache
    directory (the runtime files a launch uploads) named with the fix, any other file by its path."""
    cache, path = cache_dir(), Path(os.fsdecode(e.filename))
    if path == cache or cache in path.parents or path in cache.parents:
        return PreconditionError(
            f"launchkit's cache directory {cache} is not usable: {e.strerror} ({path})",
            hint="make it a directory you may write to, or set XDG_CACHE_HOME to one",
        )
    return from_exception(e)


HTTP_CODE = re.compile(r"^\[code=(\d{3})\]\s*")


def http_status(e: BaseException) -> int | None:
    """The HTTP status of a failed beaker-py HTTP call: plain BeakerError("[code=400] ...") for 4xx
    answers with a JSON message (fact sheet 3.1), or a requests HTTPError."""
    if isinstance(e, bx.BeakerError):
        m = HTTP_CODE.match(str(e))
        if m:
            return int(m.group(1))
    response = getattr(e, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


def server_message(e: BaseException) -> str:
    return _what(HTTP_CODE.sub("", str(e)))


def _is_bad_token(e: BaseException) -> bool:
    """PERMISSION_DENIED about the token itself (some servers answer a bad token that way)."""
    text = str(e).lower()
    return (
        isinstance(e, bx.BeakerPermissionsError)
        and "token" in text
        and ("invalid" in text or "expired" in text or "missing" in text)
    )


def _hint_for(status: int) -> str:
    if status == 409:
        return "the name is taken; pass another --name"
    return "fix the value the message names and run again (nothing was created)"


def _what(e: BaseException | str) -> str:
    text = str(e)
    return text if len(text) < 200 else text[:200] + "..."
