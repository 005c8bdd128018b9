"""examples/notifications/webhook_listener.py as its README uses it: the URLs it prints take Slack's
messages and the JSON events of --notify-url, and it prints each (an event was printed as `slack: None`)."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
import urllib.request

from conftest import ROOT
from timescale import scaled

LISTENER = ROOT / "examples" / "notifications" / "webhook_listener.py"


def _post(url: str, body: dict) -> None:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=scaled(30)) as answer:
        assert answer.status == 200


def _lines(proc: subprocess.Popen) -> queue.Queue[str]:
    """Its lines of output, as they come (read by a thread: a line that never comes is no hang)."""
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    return lines


def _line(lines: queue.Queue[str]) -> str:
    """The next line ("" when none comes: the deadline only ends a hang)."""
    try:
        return lines.get(timeout=scaled(30))
    except queue.Empty:
        return ""


def test_the_listener_prints_slack_messages_and_json_events():
    proc = subprocess.Popen([sys.executable, str(LISTENER)], stdout=subprocess.PIPE, text=True)
    try:
        out = _lines(proc)
        slack = re.fullmatch(r"export LAUNCHKIT_SLACK_WEBHOOK_URL=(\S+)\n", _line(out))
        events = re.fullmatch(r"# events as JSON: launchkit run --notify-url (\S+) \.\.\.\n", _line(out))
        assert slack and events
        _post(slack[1], {"text": ":rocket: launchkit run *r* started"})
        event = {"kind": "started", "replica": 0, "attempt": 1, "line": "started", "run": "r", "task": None}
        _post(events[1], event)
        assert _line(out) == "slack: :rocket: launchkit run *r* started\n"
        kind, _, shown = _line(out).partition(" ")
        assert kind == "event:" and json.loads(shown) == event
    finally:
        proc.kill()
        proc.wait(timeout=60)
