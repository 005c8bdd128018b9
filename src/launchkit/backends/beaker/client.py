"""A beaker-py client with bounded retries and an overall deadline.

beaker-py retries UNAVAILABLE/RST_STREAM without limit (1-2 s apart) and has no per-call timeout, so
an unreachable server hangs forever. We keep beaker-py's client and wrap its gRPC stub so that each call
(1) refuses to start a call once the current operation's deadline has passed, (2) gives each unary
call a timeout no longer than what is left. HTTP calls get a bounded urllib3 retry budget and a per-request timeout.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental
from beaker import Beaker
from beaker import exceptions as bx

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
    def service(self):  # type: ignore[override]
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
            self._service = _GuardedStub(self.conn, beaker_pb2_grpc.BeakerStub(self._channel))
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
            raise PreconditionError(
                "no Beaker credentials found",
                hint="run `beaker account login`, or set BEAKER_TOKEN (token from https://beaker.org/user), "
                "or point BEAKER_CONFIG at a config.yml; to try things without Beaker use --dry-run or --local",
            ) from None
        client = _Beaker(config, check_for_upgrades=False, user_agent="launchkit (beaker-py)")
        client.conn = self
        # Bounded retries (beaker-py's class defaults are 5 retries, 120 s backoff cap).
        client.MAX_RETRIES = 3  # type: ignore[misc]
        client.BACKOFF_FACTOR = 0.5  # type: ignore[misc]
        client.BACKOFF_MAX = max(1.0, min(8.0, self.timeout / 4))  # type: ignore[misc]
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
        self.beaker.close()

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Translate beaker-py and gRPC exceptions into one-line launchkit errors."""
        try:
            yield
        except (LaunchkitError, BrokenPipeError):  # a closed stdout is the CLI's business
            raise
        except bx.BeakerNotFoundError as e:
            raise NotFoundError(
                f"not found on Beaker: {_what(e)}",
                hint="check the spelling (names are user/name or org/name)",
            ) from None
        except bx.BeakerPermissionsError as e:
            raise PreconditionError(
                f"Beaker denied the request: {e}",
                hint="check your token and that you are a member of the workspace",
            ) from None
        except (bx.BeakerOrganizationNotSet, bx.BeakerWorkspaceNotSet) as e:
            raise UsageError(
                str(e),
                hint="pass --workspace org/name or set default_workspace in your "
                "Beaker config (`beaker config set default_workspace org/name`)",
            ) from None
        except bx.BeakerError as e:
            raise BackendError(f"Beaker error: {e}") from None
        except grpc.RpcError as e:
            code = e.code() if isinstance(e, grpc.Call) else None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED or code == grpc.StatusCode.UNAVAILABLE:
                raise self.unreachable() from None
            details = e.details() if isinstance(e, grpc.Call) else str(e)
            raise BackendError(f"Beaker error ({code.name if code else 'rpc'}): {details}") from None
        except OSError as e:  # requests' ConnectionError and friends
            raise BackendError(
                f"cannot reach Beaker at {self.address}: {e}",
                hint="check your network, or raise --beaker-timeout",
            ) from None


def _what(e: Exception) -> str:
    text = str(e)
    return text if len(text) < 200 else text[:200] + "..."
