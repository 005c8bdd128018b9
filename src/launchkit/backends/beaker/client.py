"""A beaker-py client with bounded retries and an overall deadline.

beaker-py retries UNAVAILABLE/RST_STREAM without limit (1-2 s apart) and has no per-call timeout, so
an unreachable server hangs forever. We keep beaker-py's client and wrap its gRPC stub so that each call
(1) refuses to start a call once the current operation's deadline has passed, (2) gives each unary
call a timeout no longer than what is left. HTTP calls get a bounded urllib3 retry budget and a
per-request timeout.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental
from beaker import Beaker
from beaker import exceptions as bx

from launchkit.backends import NoCredentials
from launchkit.errors import BackendError, LaunchkitError, NotFoundError, PreconditionError, UsageError

DEFAULT_TIMEOUT = 60.0  # seconds without an answer before a command gives up


class BeakerUnreachable(BackendError):
    """The deadline passed while Beaker did not answer."""


def configured_timeout(explicit: float | None = None) -> float:
    """--beaker-timeout, else `beaker_timeout` from launchkit's config layers (LAUNCHKIT_BEAKER_TIMEOUT,
    [tool.launchkit] in pyproject.toml, the user config file), else 60 s."""
    from launchkit.core.units import UnitError, positive_seconds

    if explicit is not None:
        try:
            return positive_seconds(explicit)
        except UnitError as e:
            raise UsageError(f"--beaker-timeout {explicit!r}: {e.problem}", hint=e.hint) from None
    from launchkit.config import merge, read_layers

    config = merge(read_layers())
    raw = config.get("beaker_timeout")
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        return positive_seconds(raw)
    except UnitError as e:
        where = config.values["beaker_timeout"][1].where("beaker_timeout")
        raise UsageError(f"{where} {raw!r}: {e.problem}", hint=e.hint) from None


class _Guarded:
    """One stub method: count the call, refuse it after the deadline, bound a unary call's time."""

    def __init__(self, conn: Connection, inner: Any, name: str):
        self._conn = conn
        self._inner = inner
        self._method = inner._method  # beaker-py reads it for log messages
        self._name = name
        self._stream = isinstance(inner, grpc.UnaryStreamMultiCallable)

    def __call__(self, request: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        conn = self._conn
        left = conn.deadline - time.monotonic()
        if left <= 0:
            raise conn.unreachable()
        if not self._stream:
            timeout = min(timeout or left, left, conn.call_timeout)
        return self._inner(request, timeout=timeout, **kwargs)


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

    @property
    def service(self) -> Any:  # a _GuardedStub in place of beaker-py's BeakerStub
        if self._service is None:
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


class Connection:
    """One Beaker client plus the deadline bookkeeping. Use `renew()` when progress was made."""

    def __init__(self, timeout: float | None = None):
        self.timeout = configured_timeout(timeout)
        self.call_timeout = min(30.0, self.timeout)
        self.deadline = time.monotonic() + self.timeout
        from beaker.config import Config

        try:
            config = Config.from_env()
        except bx.BeakerConfigurationError:
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
        """Names for author ids: one GetUser per id never seen before (memory + on-disk cache)."""
        cache = self._user_cache()
        for uid in dict.fromkeys(user_ids):
            if uid and uid not in cache:
                try:
                    cache[uid] = self.beaker.user.get(uid).name
                    self._users_dirty = True
                except bx.BeakerUserNotFound:
                    cache[uid] = uid
        self._save_user_cache()
        return {uid: cache.get(uid, uid) for uid in user_ids}

    def _user_cache(self) -> dict[str, str]:
        if self._users_loaded:
            return self._users
        self._users_loaded = True
        import json

        try:
            data = json.loads(self._user_cache_path().read_text())
            self._users.update({k: v for k, v in data.get(self.address, {}).items() if isinstance(v, str)})
        except (OSError, ValueError, AttributeError):
            pass
        return self._users

    def _user_cache_path(self) -> Path:
        import platformdirs

        return Path(platformdirs.user_cache_dir("launchkit")) / "beaker-users.json"

    def _save_user_cache(self) -> None:
        if not self._users_dirty:
            return
        import json

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
        self.deadline = time.monotonic() + self.timeout

    def unreachable(self) -> BeakerUnreachable:
        return BeakerUnreachable(
            f"Beaker at {self.beaker.config.rpc_address} did not answer within {self.timeout:g}s",
            hint="check your network/VPN and https://status.beaker.org, or raise --beaker-timeout",
        )

    def close(self) -> None:
        self.beaker.close()  # type: ignore[no-untyped-call]

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
        if http is not None and 400 <= http < 500:  # the server's own message, final (never retried)
            return UsageError(f"Beaker refused the request: {server_message(e)}", hint=_hint_for(http))
        if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE):
            return self.unreachable()
        if code is not None:
            details = e.details() if isinstance(e, grpc.Call) else str(e)
            return BackendError(f"Beaker error ({code.name}): {details}")
        if isinstance(e, bx.BeakerError):
            return BackendError(f"Beaker error: {_what(e)}")
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
