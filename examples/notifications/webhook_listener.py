"""A stand-in for a Slack incoming webhook: prints every message posted to it.

uv run python examples/notifications/webhook_listener.py        # prints the URL to use
"""

from __future__ import annotations

import http.server
import json


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        print("slack:", json.loads(body or b"{}").get("text"), flush=True)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(
        f"export LAUNCHKIT_SLACK_WEBHOOK_URL=http://127.0.0.1:{server.server_address[1]}/services/T0/B0/x",
        flush=True,
    )
    server.serve_forever()
