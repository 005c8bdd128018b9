#!/usr/bin/env python3
"""A job's start under the node runtime, by the features it uses (issue 46 item 3: no feature paid by
jobs that do not use it; issue 40 item 3: progress matching with a budget), this tree against
baselines, interleaved in one run: the node runtime as the entrypoint execs it (`python -s -S -m
launchkit_node launch`, the package copied out as on the node) running a command that prints the wall
clock at its start.

Settings: unwatched (the command exec'd), watched (--stall-timeout 10m: the default patterns, matched
in the watchdog), watched auto (--stall-timeout auto), own pattern (a pattern of the user's: matched in
a matcher process), webhook (a Slack webhook: a receiver on 127.0.0.1 that answers at once), watched +
webhook, and webhook, no answer (a receiver that accepts and never answers: its posts time out).

Usage (from the repository root):  uv run python bench/bench_watched_start.py [-n 15] [--baseline REF ...]

Reports, per setting and tree, the median and min of: ms from starting the runtime to the command's
start (what the job waits for), and ms to the runtime's exit; each setting's start over the same
tree's unwatched one; with the load average. Target (issue 46): a watched job's start (watched,
watched auto, the webhook) at most +50 ms over an unwatched one, in this tree. Exit 1 if missed.
"""

from __future__ import annotations

import argparse
import http.server
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_startup import ROOT, baseline_src

WATCHED = '{"parent":true,"stall_timeout":600}'
# Each setting for both kinds of tree: the run's policy in one variable (runtime/node/policy.py) and
# the variables a tree before it read (a baseline may be either). "{hook}": the receiver's URL.
SETTINGS: dict[str, dict[str, str]] = {
    "unwatched": {},
    "watched": {"LAUNCHKIT_POLICY": WATCHED, "LAUNCHKIT_STALL_TIMEOUT": "600"},
    "watched auto": {
        "LAUNCHKIT_POLICY": '{"parent":true,"stall_auto":[300,7200]}',
        "LAUNCHKIT_STALL_TIMEOUT": "auto",
    },
    "own pattern": {
        "LAUNCHKIT_POLICY": '{"parent":true,"stall_timeout":600,"progress_patterns":["iter \\\\d+"]}',
        "LAUNCHKIT_STALL_TIMEOUT": "600",
        "LAUNCHKIT_PROGRESS_PATTERNS": r"iter \d+",
    },
    "webhook": {"LAUNCHKIT_SLACK_WEBHOOK": "{hook}"},
    "watched + webhook": {
        "LAUNCHKIT_POLICY": WATCHED,
        "LAUNCHKIT_STALL_TIMEOUT": "600",
        "LAUNCHKIT_SLACK_WEBHOOK": "{hook}",
    },
    "webhook, no answer": {"LAUNCHKIT_SLACK_WEBHOOK": "{silent}"},
}
TARGET = ("watched", "watched auto", "webhook", "watched + webhook")  # each <= +50 ms over unwatched
TARGET_MS = 50.0
THIS = "this tree"


class Receiver:
    """A webhook on 127.0.0.1 that answers every post at once."""

    def __init__(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T0/B0/bench"


class Silent:
    """A webhook on 127.0.0.1 that accepts every connection and never answers (the posts time out)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/services/T0/B0/bench"

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            self.held.append(conn)


def node_copy(src: Path, into: Path) -> Path:
    """src's node package as the node has it: `launchkit_node` in a directory of its own."""
    shutil.copytree(src / "launchkit" / "runtime" / "node", into / "launchkit_node")
    return into


def once(node_dir: Path, extra: dict[str, str]) -> tuple[float, float]:
    """(ms to the command's start, ms to the runtime's exit)."""
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(node_dir),
        "LAUNCHKIT_LAUNCHER": "none",
        **extra,
    }
    cmd = [sys.executable, "-s", "-S", "-m", "launchkit_node", "launch", "--cwd", str(node_dir), "--"]
    t0 = time.time_ns()
    start = time.perf_counter()
    out = subprocess.run(
        [*cmd, "date", "+%s%N"],
        cwd=node_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    done = time.perf_counter() - start
    return (int(out.strip()) - t0) / 1e6, done * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument(
        "--baseline",
        action="append",
        help="a git ref, or a checkout's directory (repeatable; default cc8c626 and 04f37a3)",
    )
    args = ap.parse_args()
    refs = args.baseline or ["cc8c626", "04f37a3"]
    hook, silent = Receiver(), Silent()
    settings = {
        name: {k: v.replace("{hook}", hook.url).replace("{silent}", silent.url) for k, v in extra.items()}
        for name, extra in SETTINGS.items()
    }
    with tempfile.TemporaryDirectory() as tmp:
        trees = {ref: node_copy(baseline_src(ref), Path(tmp, f"b{i}")) for i, ref in enumerate(refs)}
        trees[THIS] = node_copy(ROOT / "src", Path(tmp, "this"))
        for node_dir in trees.values():  # byte-compiled (as the runtime is on the node), the cache warm
            once(node_dir, {})
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.n):  # interleaved: drift in the machine's speed hits all alike
            for setting, extra in settings.items():
                for tree, node_dir in trees.items():
                    times.setdefault((setting, tree), []).append(once(node_dir, extra))
    load = os.getloadavg()
    print(
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores; {args.n} runs each"
    )
    print(
        f"{'setting':<19} {'tree':<10} {'to command start ms':>22} {'over unwatched':>15} {'to exit ms':>18}"
    )
    start_of = {key: statistics.median(g[0] for g in got) for key, got in times.items()}
    missed = []
    for (setting, tree), got in times.items():
        starts, exits = [g[0] for g in got], [g[1] for g in got]
        over = start_of[(setting, tree)] - start_of[("unwatched", tree)]
        if tree == THIS and setting in TARGET and over > TARGET_MS:
            missed.append(setting)
        print(
            f"{setting:<19} {tree:<10} {start_of[(setting, tree)]:>12.1f} (min {min(starts):5.1f})"
            f" {over:>+13.1f}  {statistics.median(exits):>8.1f} (min {min(exits):5.1f})"
        )
    print(
        f"target: {', '.join(TARGET)} start at most +{TARGET_MS:.0f} ms over unwatched ({THIS}): "
        + ("ok" if not missed else "MISSED by " + ", ".join(missed))
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
