"""A Slack webhook stand-in for tests: an HTTP server on 127.0.0.1 that records what it is posted."""

from __future__ import annotations

import http.server
import json
import threading
import time

from timescale import scaled

HOOK_PATH = "/services/T000/B000/lk-never-shown"  # the part of a webhook that must never be shown


class Receiver:
    """An HTTP server on 127.0.0.1 that records every text posted to it."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.paths: list[str] = []
        texts, paths = self.texts, self.paths

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                paths.append(self.path)
                texts.append(json.loads(body)["text"])
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{HOOK_PATH}"

    def wait_for(self, n: int, timeout: float = 60) -> list[str]:
        """Until `n` posts arrived (the timeout only ends a hang)."""
        deadline = time.monotonic() + scaled(timeout)
        while len(self.texts) < n:
            assert time.monotonic() < deadline, f"only {self.texts}"
            time.sleep(0.02)
        return list(self.texts)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
