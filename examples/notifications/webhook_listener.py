"""A stand-in for a Slack incoming webhook and a --notify-url receiver: prints every message and
every JSON event posted to it.

uv run python examples/notifications/webhook_listener.py        # prints the URLs to use
"""

from __future__ import annotations

import http.server
import json


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        got = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if "text" in got:  # Slack's {"text": ...}
            print("slack:", got["text"], flush=True)
        else:  # an event of --notify-url (docs/notifications.md: "Events as JSON")
            print("event:", json.dumps(got), flush=True)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    print(f"export LAUNCHKIT_SLACK_WEBHOOK_URL=http://127.0.0.1:{port}/services/T0/B0/x", flush=True)
    print(f"# events as JSON: launchkit run --notify-url http://127.0.0.1:{port}/events ...", flush=True)
    server.serve_forever()
