#!/usr/bin/env python3
"""Watched-job benchmark (issue 44): what `--stall-timeout auto` and event posting cost a watched job,
against today's watched job (a fixed `--stall-timeout`) on a baseline tree, interleaved in one run.

    uv run python bench/bench_watch.py [-n 5] [--lines 200000] [--baseline c45e488] [--load 2]

Each case is `launchkit run --local --no-python --follow ... -- python job.py`, a job that prints
`--lines` progress lines as fast as it can (the worst case for a watchdog: it reads and matches every
line) with a checkpoint line every 1,000 steps (given with `python -c`); each tree runs through the same interpreter with
PYTHONPATH at its src/ (the supervisor and the job's runtime inherit it), its own LAUNCHKIT_LOCAL_HOME.
The job's part is read from the run's record (its replica's start to its end, as its supervisor saw it):
the watchdog's cost is in it. `--load N` keeps N busy processes running throughout (the machine's
other work), and the load average is printed.

Cases: baseline `--stall-timeout 30m`; this tree `--stall-timeout 30m`; this tree `--stall-timeout
auto`; this tree `--stall-timeout auto` with a Slack webhook in the job (the runtime posts its events
to a local HTTP server on 127.0.0.1); and the JSON event stream (issue 44 item 4, `notify_cases`): this
tree `--stall-timeout 30m` with `--notify-url` (the runtime posts every event as JSON: its start, the
first progress line and one every 30 s, its end), and `--notify-url` alone (no watchdog: the runtime
reads the output for progress events only). Results also go to bench/results/watch.json.
"""

from __future__ import annotations

import argparse
import http.server
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from bench_startup import RESULTS, ROOT, baseline_src, compile_all, site_packages, small_repo, time_once

JOB = """
import sys
n = int(sys.argv[1])
w = sys.stdout.write
for i in range(n):
    w("[step=%d/%d] loss=%.4f tokens/s=51234\\n" % (i, n, 1.0 / (i + 1)))
    if i % 1000 == 999:
        w("Saving checkpoint to /tmp/ckpt/step%d\\n" % i)
sys.stdout.flush()
"""


def burn(stop: Any) -> None:
    """A busy process, until told to stop."""
    while not stop.is_set():
        sum(i * i for i in range(10_000))


class _Hook(http.server.BaseHTTPRequestHandler):
    posts = 0
    events = 0  # of them, JSON events (--notify-url)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).posts += 1
        type(self).events += b'"kind"' in body
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_: object) -> None:
        pass


def notify_cases(hook: str) -> dict[str, tuple[str, list[str]]]:
    """The event stream's rows (--notify-url: JSON events posted from where the job runs), beside
    today's watched job: the same watchdog with the events posted, and the events without a watchdog."""
    return {
        "current 30m + JSON events": ("current", ["--stall-timeout", "30m", "--notify-url", hook]),
        "current JSON events alone": ("current", ["--notify-url", hook]),
    }


def job_ms(env: dict[str, str]) -> float | None:
    """The newest run's job part (ms): its replica's start to its end, from the run's record."""
    runs = Path(env["LAUNCHKIT_LOCAL_HOME"]) / "runs"
    newest = max(runs.iterdir(), key=lambda d: d.stat().st_mtime)
    rec = json.loads((newest / "status.json").read_text())
    rank = (rec.get("ranks") or {}).get("0") or {}
    if rec.get("status") != "succeeded" or not (rank.get("started") and rank.get("finished")):
        return None
    return (rank["finished"] - rank["started"]) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5, help="runs per case (default 5)")
    ap.add_argument("--lines", type=int, default=200_000, help="progress lines the job prints")
    ap.add_argument("--baseline", default="c45e488", help="git ref or tree of today's watched job")
    ap.add_argument("--load", type=int, default=2, help="busy processes running throughout (default 2)")
    args = ap.parse_args()

    python = Path(sys.executable)
    trees = {"baseline": baseline_src(args.baseline), "current": ROOT / "src"}
    compile_all(python, site_packages(python), *trees.values())
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    hook = f"http://127.0.0.1:{server.server_address[1]}/hook"
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_"))}
    base_env["NO_COLOR"] = "1"
    stop = multiprocessing.Event()
    burners = [multiprocessing.Process(target=burn, args=(stop,), daemon=True) for _ in range(args.load)]
    for b in burners:
        b.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            repo = small_repo(Path(tmp))
            base_env["HOME"] = tmp
            lk = [str(python), "-m", "launchkit", "run", "--local", "--no-python", "--follow"]
            job = ["--", "python", "-c", JOB, str(args.lines)]
            cases = {
                "baseline --stall-timeout 30m": ("baseline", ["--stall-timeout", "30m"]),
                "current --stall-timeout 30m": ("current", ["--stall-timeout", "30m"]),
                "current --stall-timeout auto": ("current", ["--stall-timeout", "auto"]),
                "current auto + Slack posts": (
                    "current",
                    ["--stall-timeout", "auto", "--slack-webhook-url", hook],
                ),
                **notify_cases(hook),
            }
            envs = {
                name: {
                    **base_env,
                    "PYTHONPATH": str(trees[tree]),
                    "LAUNCHKIT_LOCAL_HOME": str(Path(tmp) / f"state-{name.replace(' ', '_')}"),
                }
                for name, (tree, _) in cases.items()
            }
            samples: dict[str, list[float]] = {name: [] for name in cases}
            cpus: dict[str, list[float]] = {name: [] for name in cases}
            for round_ in range(args.n + 1):  # the first round warms the caches and is not counted
                for name, (_, flags) in cases.items():
                    _, cpu = time_once([*lk, *flags, *job], repo, envs[name])
                    ms = job_ms(envs[name])
                    if ms is None:
                        print(f"{name}: the run did not succeed", file=sys.stderr)
                        return 1
                    if round_:
                        samples[name].append(ms)
                        cpus[name].append(cpu)
    finally:
        stop.set()
        for b in burners:
            b.join(timeout=10)
        server.shutdown()
    print(
        f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
        f"  (n={args.n}, {args.lines:,} progress lines a job, {args.load} busy processes; baseline {args.baseline})"
    )
    print(f"{'case':<32} {'job median':>11} {'min':>8} {'max':>8} {'per line':>9}")
    out = {}
    for name, ms in samples.items():
        med = statistics.median(ms)
        out[name] = {"median_ms": med, "min_ms": min(ms), "max_ms": max(ms)}
        print(f"{name:<32} {med:9.0f}ms {min(ms):6.0f}ms {max(ms):6.0f}ms {med * 1000 / args.lines:7.2f}us")
    base = statistics.median(samples["baseline --stall-timeout 30m"])
    for name in list(samples)[1:]:
        print(f"{name}: {statistics.median(samples[name]) / base:.2f} x the baseline's watched job")
    print(f"posts received: {_Hook.posts - _Hook.events} Slack, {_Hook.events} JSON events")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "watch.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
