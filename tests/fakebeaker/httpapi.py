"""The HTTPS side: the REST routes beaker-py still uses (experiment create, secret values) and a small
admin API (`/__fake__/...`) for driving a fake that runs in another process."""

from __future__ import annotations

import json
import re
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from .state import Conflict, Invalid, NotFound

if TYPE_CHECKING:
    from .server import FakeBeaker

ROUTES = [
    ("POST", re.compile(r"^/api/v3/workspaces/([^/]+)/experiments$"), "CreateExperiment"),
    ("PUT", re.compile(r"^/api/v3/workspaces/([^/]+)/secrets/([^/]+)/value$"), "PutSecretValue"),
    ("GET", re.compile(r"^/api/v3/workspaces/([^/]+)/secrets/([^/]+)/value$"), "GetSecretValue"),
    ("DELETE", re.compile(r"^/api/v3/workspaces/([^/]+)/secrets/([^/]+)$"), "DeleteSecret"),
]


class _DropConnection(Exception):
    pass


def make_handler(fake: FakeBeaker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "fakebeaker"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, body: bytes | dict | list, content_type: str = "application/json") -> None:
            data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, message: str) -> None:
            self._send(code, {"message": message})

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _dispatch(self, method: str) -> None:
            url = urllib.parse.urlsplit(self.path)
            path = urllib.parse.unquote(url.path) if url.path.startswith("/__fake__/") else url.path
            query = dict(urllib.parse.parse_qsl(url.query))
            body = self._body()
            if path.startswith("/__fake__/"):
                return self._admin(method, path, body)
            for m, rx, name in ROUTES:
                match = rx.match(path)
                if m == method and match:
                    args = [urllib.parse.unquote(g) for g in match.groups()]
                    return self._route(name, args, query, body)
            fake._record_call(f"HTTP {method} {path}")
            self._error(400, f"fakebeaker does not implement {method} {path}")

        def _route(self, name: str, args: list[str], query: dict, body: bytes) -> None:
            fake._record_call(name)
            delay = fake.faults.delay_for(name)
            if delay:
                time.sleep(delay)
            if fake.faults.take_unavailable(name):
                return self._error(503, "fakebeaker: injected UNAVAILABLE")
            auth = self.headers.get("Authorization", "")
            user = fake.state.user_for_token(auth.split(" ", 1)[-1])
            if user is None:
                return self._error(403, "invalid or missing Beaker token")
            try:
                getattr(self, "_" + name)(user, args, query, body)
            except _DropConnection:
                self.close_connection = True
                self.connection.close()
            except NotFound as e:
                self._error(404, str(e))
            except Conflict as e:
                self._error(409, str(e))
            except Exception as e:
                self._error(400, str(e) if isinstance(e, Invalid) else f"fakebeaker: {type(e).__name__}: {e}")

        # ---- Beaker routes
        def _CreateExperiment(self, user, args, query, body) -> None:
            try:
                spec = json.loads(body or b"{}")
            except json.JSONDecodeError as e:
                raise Invalid(f"spec is not JSON: {e}") from e
            exp = fake.state.create_experiment(args[0], spec, name=query.get("name"), author=user.id)
            failure = fake.faults.take_create_failure()
            if failure == "drop":
                raise _DropConnection()
            if failure is not None:
                return self._error(
                    int(failure), "fakebeaker: injected failure after the experiment was recorded"
                )
            s = fake.state
            self._send(
                200,
                {
                    "id": exp.id,
                    "name": exp.name,
                    "fullName": f"{user.name}/{exp.name}",
                    "author": {"id": user.id, "name": user.name},
                    "workspaceRef": {
                        "id": exp.workspace_id,
                        "fullName": s.workspace_full_name(s.workspaces[exp.workspace_id]),
                    },
                    "jobs": [{"id": j.id} for j in exp.jobs],
                },
            )

        def _PutSecretValue(self, user, args, query, body) -> None:
            s = fake.state.put_secret(args[0], args[1], body, author_id=user.id)
            self._send(200, {"name": s.name})

        def _GetSecretValue(self, user, args, query, body) -> None:
            ws = fake.state.find_workspace(args[0])
            if args[1] not in ws.secrets:
                raise NotFound(f"secret {args[1]!r} not found")
            self._send(200, ws.secrets[args[1]].value, "application/octet-stream")

        def _DeleteSecret(self, user, args, query, body) -> None:
            ws = fake.state.find_workspace(args[0])
            with fake.state.lock:
                if ws.secrets.pop(args[1], None) is None:
                    raise NotFound(f"secret {args[1]!r} not found")
            self._send(204, b"")

        # ---- admin
        def _admin(self, method: str, path: str, body: bytes) -> None:
            from .remote import handle_admin

            try:
                code, out = handle_admin(fake, method, path, json.loads(body) if body else {})
            except Exception as e:
                code, out = 400, {"message": f"{type(e).__name__}: {e}"}
            self._send(code, out)

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_PUT(self) -> None:
            self._dispatch("PUT")

        def do_DELETE(self) -> None:
            self._dispatch("DELETE")

        def do_PATCH(self) -> None:
            self._dispatch("PATCH")

    return Handler


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr, handler, context: ssl.SSLContext) -> None:
        super().__init__(addr, handler)
        self.context = context

    def get_request(self):
        sock, addr = self.socket.accept()
        return sock, addr

    def finish_request(self, request, client_address) -> None:
        # TLS handshake in the per-connection thread, so a slow client never blocks accept().
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            try:
                tls.close()
            except OSError:
                pass


def start_https(fake: FakeBeaker, cert_file: str, key_file: str) -> tuple[_TLSServer, threading.Thread]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_file, key_file)
    server = _TLSServer(("127.0.0.1", 0), make_handler(fake), ctx)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fakebeaker-https", daemon=True
    )
    thread.start()
    return server, thread
