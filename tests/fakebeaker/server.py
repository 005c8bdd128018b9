"""FakeBeaker: gRPC (TLS) + HTTPS servers over one `State`, with call counts, faults, env and clients."""

from __future__ import annotations

import asyncio
import collections
import os
import shutil
import tempfile
import threading
from concurrent import futures
from pathlib import Path
from typing import Any, Self

from timescale import scaled

from .faults import Faults
from .state import Options, State, User
from .tls import TLS, tls_material

NO_PROXY = "127.0.0.1,localhost"


class FakeBeaker:
    """A fake Beaker service the unmodified beaker-py client talks to over its real protocol.

    >>> with FakeBeaker(scenario="basic") as fake:
    ...     beaker = fake.client()                 # in-process client (see README: why it is safe)
    ...     subprocess.run([...], env={**os.environ, **fake.env})   # another process
    """

    def __init__(
        self,
        state: State | None = None,
        *,
        scenario: str | None = "basic",
        workers: int = 64,
        directory: str | os.PathLike | None = None,
        default_user: str | None = None,
        default_workspace: str | None = None,
        options: Options | dict[str, Any] | None = None,
    ) -> None:
        from . import scenarios

        self.state = state if state is not None else State()
        if options is not None:  # see state.Options: the switches for behaviour real Beaker may have
            self.state.options = options if isinstance(options, Options) else Options.parse(options)
        if state is None and scenario:
            scenarios.build(scenario, self.state)
        self.faults = Faults()
        self.calls: collections.Counter[str] = collections.Counter()
        self.uploads: dict[str, bytes] = {}  # dataset uploads in progress (id or digest -> bytes)
        self._calls_lock = threading.Lock()
        self.workers = workers
        self._own_dir = directory is None
        self.dir = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="fakebeaker-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.default_user = default_user
        self.default_workspace = default_workspace
        self.tls: TLS = tls_material()
        self._grpc = None
        self._https = None
        self._github_proxy = None
        self._github_api = None
        self.rpc_port = 0
        self.http_port = 0

    # ------------------------------------------------------------ lifecycle
    def start(self) -> FakeBeaker:
        from .httpapi import start_https

        ready = threading.Event()
        errors: list[BaseException] = []
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(
            target=self._serve_grpc, args=(ready, errors), name="fakebeaker-grpc", daemon=True
        )
        self._loop_thread.start()
        ready.wait(scaled(30))
        if errors or not self.rpc_port:
            raise RuntimeError(f"fakebeaker: gRPC server failed to start: {errors}")
        self._https, _ = start_https(self, str(self.tls.cert_file), str(self.tls.key_file))
        self.http_port = self._https.server_address[1]
        self.write_config()
        return self

    def _serve_grpc(self, ready: threading.Event, errors: list) -> None:
        import grpc
        from beaker import beaker_pb2_grpc

        from .servicer import FakeServicer

        loop = self._loop
        asyncio.set_event_loop(loop)

        async def main() -> None:
            pool = futures.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="fakebeaker-rpc")
            server = grpc.aio.server(
                migration_thread_pool=pool,
                maximum_concurrent_rpcs=None,
                options=[
                    ("grpc.max_send_message_length", 64 << 20),
                    ("grpc.max_receive_message_length", 64 << 20),
                    ("grpc.so_reuseport", 0),
                ],
            )
            beaker_pb2_grpc.add_BeakerServicer_to_server(FakeServicer(self), server)
            creds = grpc.ssl_server_credentials([(self.tls.key_pem, self.tls.cert_pem)])
            self.rpc_port = server.add_secure_port("127.0.0.1:0", creds)
            await server.start()
            self._grpc = server
            self._stopped = asyncio.Event()
            ready.set()
            await self._stopped.wait()
            await server.stop(0.1)
            pool.shutdown(wait=False, cancel_futures=True)
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        try:
            loop.run_until_complete(main())
        except BaseException as e:
            errors.append(e)
            ready.set()
        finally:
            loop.close()

    def stop(self) -> None:
        self.state.stop_timers()
        with self.state.changed:
            self.state.changed.notify_all()
        if self._grpc is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._loop_thread.join(scaled(10))
            self._grpc = None
        for server in (self._github_proxy, self._github_api):
            if server is not None:
                server.shutdown()
                server.server_close()
        self._github_proxy = self._github_api = None
        if self._https is not None:
            self._https.shutdown()
            self._https.server_close()
            self._https = None
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ addresses
    @property
    def rpc_address(self) -> str:
        return f"127.0.0.1:{self.rpc_port}"

    @property
    def agent_address(self) -> str:
        return f"https://127.0.0.1:{self.http_port}"

    @property
    def github_proxy(self) -> str:
        """`http://127.0.0.1:PORT`: as HTTPS_PROXY, github.com answers from the fake (see httpapi)."""
        return f"http://127.0.0.1:{self._github_proxy.server_address[1]}"

    @property
    def github_api(self) -> str:
        """`http://127.0.0.1:PORT`: GitHub's REST API for launchkit (LAUNCHKIT_GITHUB_API; see httpapi)."""
        return f"http://127.0.0.1:{self._github_api.server_address[1]}"

    @property
    def admin_url(self) -> str:
        return f"{self.agent_address}/__fake__"

    # ------------------------------------------------------------ calls
    def _record_call(self, name: str) -> None:
        with self._calls_lock:
            self.calls[name] += 1

    def reset_calls(self) -> None:
        with self._calls_lock:
            self.calls.clear()

    @property
    def total_calls(self) -> int:
        with self._calls_lock:
            return sum(self.calls.values())

    # ------------------------------------------------------------ identities
    def user(self, user: str | User | None = None) -> User:
        if isinstance(user, User):
            return user
        if user is None:
            user = self.default_user or next(iter(self.state.users.values())).name
        return self.state.find_user(user)

    def workspace_name(self, workspace: str | None = None) -> str | None:
        ref = workspace or self.default_workspace
        if ref is None:
            if not self.state.workspaces:
                return None
            ref = next(iter(self.state.workspaces))
        return self.state.workspace_full_name(self.state.find_workspace(ref))

    def config(self, user: str | User | None = None, workspace: str | None = None) -> dict[str, Any]:
        """The beaker-py config (`~/.beaker/config.yml` contents) for `user`."""
        u = self.user(user)
        return {
            "user_token": u.token,
            "agent_address": self.agent_address,
            "rpc_address": self.rpc_address,
            "default_org": self.state.org_name(u.org_id),
            "default_workspace": self.workspace_name(workspace),
        }

    def write_config(
        self,
        path: str | os.PathLike | None = None,
        *,
        user: str | User | None = None,
        workspace: str | None = None,
    ) -> Path:
        import yaml

        p = Path(path) if path is not None else self.dir / f"beaker-config-{self.user(user).name}.yml"
        cfg = {k: v for k, v in self.config(user, workspace).items() if v is not None}
        p.write_text(yaml.safe_dump(cfg))
        return p

    def env_for(
        self,
        user: str | User | None = None,
        *,
        workspace: str | None = None,
        config_path: str | os.PathLike | None = None,
    ) -> dict[str, str]:
        """Environment variables that point a beaker-py process (launchkit, gantry) at this fake."""
        u = self.user(user)
        cfg = self.write_config(config_path, user=u, workspace=workspace)
        return {
            "BEAKER_CONFIG": str(cfg),
            "BEAKER_TOKEN": u.token,
            "BEAKER_ADDR": self.agent_address,
            "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(self.tls.ca_file),
            "REQUESTS_CA_BUNDLE": str(self.tls.ca_file),
            "LAUNCHKIT_GITHUB_API": self.github_api,  # launchkit asks whether a repository is private
            "NO_PROXY": NO_PROXY,
            "no_proxy": NO_PROXY,
            "no_grpc_proxy": NO_PROXY,
        }

    @property
    def env(self) -> dict[str, str]:
        """`env_for()` of the default user."""
        return self.env_for()

    def client(
        self,
        user: str | User | None = None,
        *,
        workspace: str | None = None,
        max_retries: int = 2,
        backoff: float = 0.01,
    ):
        """A `beaker.Beaker` for this fake, for in-process use. Needs no environment variables: it trusts the
        fake's CA explicitly (gRPC root certificates, requests `verify`) and ignores proxies. Retries are
        bounded and fast (`max_retries`, `backoff` seconds) - but beaker-py still retries UNAVAILABLE and
        stream cuts without limit, by design."""
        from beaker.config import Config

        cfg = self.config(user, workspace)
        config = Config(
            user_token=cfg["user_token"],
            agent_address=cfg["agent_address"],
            rpc_address=cfg["rpc_address"],
            default_org=cfg["default_org"],
            default_workspace=cfg["default_workspace"],
        )
        client = _client_class()(config, check_for_upgrades=False)
        client._fake_ca_pem = self.tls.ca_pem
        client._fake_ca_file = str(self.tls.ca_file)
        client.MAX_RETRIES = max_retries
        client.BACKOFF_FACTOR = backoff
        client.BACKOFF_MAX = max(backoff * 8, backoff)
        return client


_CLIENT_CLASS = None


def _client_class():
    """beaker.Beaker with the TLS trust for the fake passed explicitly instead of through env vars."""
    global _CLIENT_CLASS
    if _CLIENT_CLASS is not None:
        return _CLIENT_CLASS
    import grpc
    import requests
    from beaker import Beaker, beaker_pb2_grpc

    class FakeBeakerClient(Beaker):
        _fake_ca_pem: bytes = b""
        _fake_ca_file: str = ""

        @property
        def service(self) -> beaker_pb2_grpc.BeakerStub:
            if self._service is None:
                self._channel = grpc.secure_channel(
                    self.config.rpc_address,
                    grpc.ssl_channel_credentials(root_certificates=self._fake_ca_pem),
                    options=[
                        ("grpc.max_send_message_length", self.RPC_MAX_SEND_MESSAGE_LENGTH),
                        ("grpc.max_receive_message_length", self.RPC_MAX_RECEIVE_MESSAGE_LENGTH),
                        ("grpc.enable_http_proxy", 0),
                    ],
                )
                self._service = beaker_pb2_grpc.BeakerStub(self._channel)
            return self._service

        def _init_http_session(self) -> requests.Session:
            session = super()._init_http_session()
            session.trust_env = False  # no proxies, no REQUESTS_CA_BUNDLE from the environment
            session.verify = self._fake_ca_file
            return session

    _CLIENT_CLASS = FakeBeakerClient
    return _CLIENT_CLASS
