"""The HTTPS side: the REST routes beaker-py still uses (experiment create, secret values) and a small
admin API (`/__fake__/...`) for driving a fake that runs in another process."""

from __future__ import annotations

import email.utils
import hashlib
import json
import math
import re
import socketserver
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from .state import Conflict, Denied, Invalid, NotFound

if TYPE_CHECKING:
    from .server import FakeBeaker

ROUTES = [
    ("POST", re.compile(r"^/api/v3/workspaces/([^/]+)/experiments$"), "CreateExperiment"),
    ("PUT", re.compile(r"^/api/v3/workspaces/([^/]+)/secrets/([^/]+)/value$"), "PutSecretValue"),
    ("GET", re.compile(r"^/api/v3/workspaces/([^/]+)/secrets/([^/]+)/value$"), "GetSecretValue"),
    ("DELETE", re.compile(r"^/api/v3/workspaces/([^/]+)/secrets/([^/]+)$"), "DeleteSecret"),
    # datasets (fact sheet 7): create, storage info, commit, download on the main API ...
    ("POST", re.compile(r"^/api/v3/datasets$"), "CreateDataset"),
    ("GET", re.compile(r"^/api/v3/datasets/([^/]+)$"), "GetDatasetStorage"),
    ("PATCH", re.compile(r"^/api/v3/datasets/([^/]+)$"), "CommitDataset"),
    ("GET", re.compile(r"^/api/v3/datasets/([^/]+)/files/(.+)$"), "DownloadDatasetFile"),
    # ... uploads on the storage backend ("fh"), authenticated with the dataset's storage token
    ("PUT", re.compile(r"^/fh/datasets/([^/]+)/files/(.+)$"), "UploadDatasetFile"),
    ("POST", re.compile(r"^/fh/uploads$"), "StartUpload"),
    ("PATCH", re.compile(r"^/fh/uploads/([^/]+)$"), "UploadChunk"),
]
STORAGE_ROUTES = {"UploadDatasetFile", "StartUpload", "UploadChunk"}
RETRYABLE_CONFLICT = "a retryable database conflict occurred"  # fact 3.1: beaker-py 2.8 retries it


class _DropConnection(Exception):
    pass


def make_handler(fake: FakeBeaker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "fakebeaker"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def date_time_string(self, timestamp: float | None = None) -> str:
            """The `Date` header by the server's clock (Options.clock_skew), as every stamp it makes."""
            now = time.time() + fake.state.options.clock_skew if timestamp is None else timestamp
            return email.utils.formatdate(now, usegmt=True)

        def _send(
            self,
            code: int,
            body: bytes | dict | list,
            content_type: str = "application/json",
            headers: dict[str, str] | None = None,
        ) -> None:
            data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
            self.send_response(code)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, message: str, headers: dict[str, str] | None = None) -> None:
            self._send(code, {"code": code, "message": message}, headers=headers)

        def _body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n else b""

        def _dispatch(self, method: str) -> None:
            if (self.headers.get("Host") or "").split(":")[0] == "github.com":
                return self._github(method)
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
            self._error(501, f"fakebeaker does not implement {method} {path}")

        def _route(self, name: str, args: list[str], query: dict, body: bytes) -> None:
            fake._record_call(name)
            delay = fake.faults.delay_for(name)
            if delay:
                time.sleep(delay)
            if fake.faults.take_unavailable(name):
                return self._error(503, "fakebeaker: injected UNAVAILABLE")
            after = fake.faults.take_rate_limit(name)
            if after is not None:
                return self._error(429, "too many requests", headers={"Retry-After": str(math.ceil(after))})
            token = self.headers.get("Authorization", "").split(" ", 1)[-1]
            if name in STORAGE_ROUTES:
                user = next((d for d in fake.state.datasets.values() if d.storage_token == token), None)
            else:
                user = fake.state.user_for_token(token)
            if user is None:  # HTTP answers 401 for a bad token (fact 3.2)
                return self._error(401, "invalid authentication token")
            if fake.faults.take_retryable_conflict(name):
                return self._error(409, RETRYABLE_CONFLICT)
            try:
                getattr(self, "_" + name)(user, args, query, body)
            except _DropConnection:
                self.close_connection = True
                self.connection.close()
            except NotFound as e:
                self._error(404, str(e))
            except Conflict as e:
                if fake.state.options.name_conflict == "400":  # beaker-py: "HACK: sometimes Beaker
                    self._error(400, str(e))  # doesn't use the right error code"
                else:
                    self._error(409, str(e))
            except Denied as e:
                self._error(403, str(e))
            except Exception as e:
                self._error(400, str(e) if isinstance(e, Invalid) else f"fakebeaker: {type(e).__name__}: {e}")

        # ---- Beaker routes
        def _CreateExperiment(self, user, args, query, body) -> None:
            try:
                spec = json.loads(body or b"{}")
            except json.JSONDecodeError as e:
                raise Invalid(f"spec is not JSON: {e}") from e
            # Jobs are created synchronously: the answer takes longer with each job (fact 9.1). The work
            # finishes even when the client has given up, so a timed-out create may still record.
            jobs = sum(int(t.get("replicas") or 1) for t in spec.get("tasks") or [] if isinstance(t, dict))
            per_job = fake.state.options.create_latency_per_job
            if jobs > 1 and per_job > 0:
                time.sleep(per_job * (jobs - 1))
            ws = self._workspace(args[0])
            ws.check_write(user.id, "create experiment")
            exp = fake.state.create_experiment(ws.id, spec, name=query.get("name"), author=user.id)
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
            ws = self._workspace(args[0])
            ws.check_write(user.id, "write secret")
            old = ws.secret(args[1], exact=False)
            s = fake.state.put_secret(ws.id, old.name if old else args[1], body, author_id=user.id)
            self._send(200, {"name": s.name})

        # The HTTP secret routes match names case-insensitively (fact 2, OLMo-core "verified empirically").
        def _GetSecretValue(self, user, args, query, body) -> None:
            ws = self._workspace(args[0])
            ws.check_write(user.id, "read secret")
            sec = ws.secret(args[1], exact=False)
            if sec is None:
                raise NotFound(f"secret {args[1]!r} not found")
            self._send(200, sec.value, "application/octet-stream")

        def _DeleteSecret(self, user, args, query, body) -> None:
            ws = self._workspace(args[0])
            ws.check_write(user.id, "delete secret")
            with fake.state.lock:
                sec = ws.secret(args[1], exact=False)
                if sec is None:
                    raise NotFound(f"secret {args[1]!r} not found")
                del ws.secrets[sec.name]
            self._send(204, b"")

        def _workspace(self, ref: str):
            s = fake.state
            if ref in s.workspaces:
                return s.workspaces[ref]
            if s.options.strict_ids:  # routes take IDs (beaker-py v2 always sends them)
                raise NotFound(f"workspace {ref!r} not found")
            return s.find_workspace(ref)

        def _dataset(self, ref: str):
            s = fake.state
            if ref in s.datasets:
                return s.datasets[ref]
            raise NotFound(f"dataset {ref!r} not found")

        def _storage(self, d) -> dict:
            with fake.state.lock:  # other requests upload into d.files concurrently
                sizes = [len(v) for v in d.files.values()]
            return {
                "id": d.storage_id,
                "token": d.storage_token,
                "tokenExpires": "2099-01-01T00:00:00Z",
                "address": f"{fake.agent_address}/fh",
                "totalSize": sum(sizes),
                "numFiles": len(sizes),
            }

        # ---- datasets
        def _CreateDataset(self, user, args, query, body) -> None:
            data = json.loads(body or b"{}")
            ws = self._workspace(data.get("workspace") or "")
            ws.check_write(user.id, "create dataset")
            d = fake.state.create_dataset(
                ws.id,
                query.get("name"),
                author=user.id,
                description=data.get("description") or "",
                budget=data.get("budget") or ws.budget_id or "",
            )
            self._send(200, {"id": d.id, "storage": self._storage(d)})

        def _GetDatasetStorage(self, user, args, query, body) -> None:
            d = self._dataset(args[0])
            self._send(200, {"id": d.id, "storage": self._storage(d)})

        def _CommitDataset(self, user, args, query, body) -> None:
            d = self._dataset(args[0])
            if json.loads(body or b"{}").get("commit") and d.committed is None:
                d.committed = fake.state.now()
            self._send(200, {"id": d.id})

        def _DownloadDatasetFile(self, user, args, query, body) -> None:
            d = self._dataset(args[0])
            path = args[1]  # decoded once, in _dispatch (as an HTTP server does)
            if path not in d.files:
                raise NotFound(f"file {path!r} not found in dataset {d.id}")
            data = d.files[path]
            rng = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
            if rng:
                end = int(rng.group(2)) + 1 if rng.group(2) else len(data)
                return self._send(206, data[int(rng.group(1)) : end], "application/octet-stream")
            self._send(200, data, "application/octet-stream")

        def _UploadDatasetFile(self, dataset, args, query, body) -> None:
            if dataset.committed is not None:
                return self._error(403, "dataset is committed")
            path = args[1]  # decoded once, in _dispatch (as an HTTP server does)
            digest = self.headers.get("Digest")
            if digest and not body:
                body = fake.uploads.pop(digest, b"")
            with fake.state.lock:
                dataset.files[path] = body
            self._send(200, b"")

        def _StartUpload(self, dataset, args, query, body) -> None:
            upload_id = fake.state.new_id()
            fake.uploads[upload_id] = b""
            self.send_response(201)
            self.send_header("Upload-ID", upload_id)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _UploadChunk(self, dataset, args, query, body) -> None:
            if args[0] not in fake.uploads:
                raise NotFound(f"upload {args[0]!r} not found")
            data = fake.uploads[args[0]] + body
            fake.uploads[args[0]] = data
            self.send_response(200)
            if len(data) >= int(self.headers.get("Upload-Length") or 0):
                digest = f"SHA256 {hashlib.sha256(data).hexdigest()}"
                fake.uploads[digest] = fake.uploads.pop(args[0])
                self.send_header("Digest", digest)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _github(self, method: str) -> None:
            """github.com as gantry sees it (through `github_proxy`): GET /owner/repo answers 200 for a
            public repository and 404 for one in `state.private_repos`."""
            fake._record_call(f"github.com {method}")
            repo = self.path.strip("/").removesuffix(".git")
            if method == "GET" and repo.count("/") == 1:
                code = 404 if repo in fake.state.private_repos else 200
                return self._send(code, b"<html></html>", "text/html")
            self._error(404, "not found")

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


def start_github_proxy(fake: FakeBeaker, context: ssl.SSLContext) -> socketserver.ThreadingTCPServer:
    """A plain HTTP proxy that takes `CONNECT github.com:443` only, and serves github.com itself over
    TLS with the fake's certificate (which names github.com). For gantry's `is_public` check, which
    does `requests.get("https://github.com/owner/repo")`; set HTTPS_PROXY to `fake.github_proxy`."""
    handler_class = make_handler(fake)

    class Tunnel(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = self.request.recv(4096)
                if not chunk:
                    return
                head += chunk
            line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            if len(line) < 2 or line[0] != "CONNECT" or line[1] != "github.com:443":
                self.request.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            try:
                tls = context.wrap_socket(self.request, server_side=True)
            except (ssl.SSLError, OSError):
                return
            try:
                handler_class(tls, self.client_address, self.server)
            finally:
                try:
                    tls.close()
                except OSError:
                    pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Tunnel)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fakebeaker-github", daemon=True
    ).start()
    return server


def start_github_api(fake: FakeBeaker) -> ThreadingHTTPServer:
    """GitHub's REST API as launchkit asks it (`GET /repos/OWNER/REPO`, unauthenticated), in plain HTTP
    on 127.0.0.1: 200 `{"private": false}` for a public repository, 404 for one in `state.private_repos`
    (as GitHub answers for private or missing ones). launchkit reads its base URL from
    LAUNCHKIT_GITHUB_API (`FakeBeaker.env`)."""

    class API(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fake._record_call("api.github.com GET")
            parts = self.path.strip("/").split("/")
            if len(parts) == 3 and parts[0] == "repos":
                repo = f"{parts[1]}/{parts[2]}"
                private = repo in fake.state.private_repos
                body = b'{"message": "Not Found"}' if private else json.dumps({"private": False}).encode()
                self.send_response(404 if private else 200)
            else:
                body = b'{"message": "Not Found"}'
                self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), API)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fakebeaker-github-api", daemon=True
    ).start()
    return server


def start_https(fake: FakeBeaker, cert_file: str, key_file: str) -> tuple[_TLSServer, threading.Thread]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_file, key_file)
    server = _TLSServer(("127.0.0.1", 0), make_handler(fake), ctx)
    fake._github_proxy = start_github_proxy(fake, ctx)
    fake._github_api = start_github_api(fake)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fakebeaker-https", daemon=True
    )
    thread.start()
    return server, thread
