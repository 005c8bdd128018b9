#!/usr/bin/env python3
"""A job's start by the features it uses (issue 46 item 3: no feature paid by jobs that do not use
it), this tree against baselines, interleaved in one run: each tree's runtime (its entrypoint.sh and
launchkit_node, as a job gets them) runs a job as a node runs it (clone, `--no-python`) whose command
prints the wall clock at its start. An unwatched job's command is exec'd by bash; a watched one's is
started by the Python runtime, which stays its parent.

Settings: unwatched; watched (--stall-timeout 10m: the default patterns, matched in the watchdog);
watched auto (--stall-timeout auto); own pattern (a pattern of the user's: matched in a matcher
process); webhook (a Slack webhook: a receiver on 127.0.0.1 that answers at once); watched + webhook;
with --no-answer also webhook, no answer (a receiver that accepts and never answers: its posts time
out, the job's end waits for them: 7 s a run). cc8c626 has no watchdog and no webhook: each of its rows
is an unwatched job.

Usage (from the repository root):
    uv run python bench/bench_watched_start.py [-n 15] [--baseline REF ...] [--no-answer]

Reports, per setting and tree, the median and min of: ms from starting the job to its command's start
(what the job waits for), that over the same tree's unwatched job, and ms to the job's exit; the
median CPU time of the job's processes (steadier than wall time on a busy machine) and that over the
unwatched job's; with the load average. Target (issue 46): watched, watched auto and the webhook rows at most +50 ms over an
unwatched job, in this tree. Exit 1 if missed.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_startup import ROOT, baseline_src, no_python_job_env, small_repo

sys.path.insert(0, str(ROOT / "tests"))
from webhook import Receiver  # a webhook on 127.0.0.1 that answers every post at once

WATCHED = '{"parent":true,"stall_timeout":600}'
# Each setting's variables: the run's policy (runtime/node/policy.py) as the spec gives it, the webhook
# as Beaker gives it ("{hook}": the receiver's URL, "{silent}": one that never answers).
SETTINGS: dict[str, dict[str, str]] = {
    "unwatched": {},
    "watched": {"LAUNCHKIT_POLICY": WATCHED},
    "watched auto": {"LAUNCHKIT_POLICY": '{"parent":true,"stall_auto":[300,7200]}'},
    "own pattern": {
        "LAUNCHKIT_POLICY": '{"parent":true,"stall_timeout":600,"progress_patterns":["iter \\\\d+"]}'
    },
    "webhook": {"LAUNCHKIT_SLACK_WEBHOOK": "{hook}"},
    "watched + webhook": {"LAUNCHKIT_POLICY": WATCHED, "LAUNCHKIT_SLACK_WEBHOOK": "{hook}"},
}
NO_ANSWER = {"webhook, no answer": {"LAUNCHKIT_SLACK_WEBHOOK": "{silent}"}}
TARGET = ("watched", "watched auto", "webhook", "watched + webhook")  # each <= +50 ms over unwatched
TARGET_MS = 50.0
THIS = "this tree"
# A tree's runtime files written where a job gets them (runtime.runtime_files(), or an older tree's
# entrypoint script alone); run with PYTHONPATH at that tree's src/.
WRITE_RUNTIME = """
import sys
from pathlib import Path
import launchkit.runtime as runtime
dest = Path(sys.argv[1])
files = getattr(runtime, "runtime_files", None)
found = files() if files else {"entrypoint.sh": runtime.entrypoint_script().encode()}
for name, data in found.items():
    (dest / name).parent.mkdir(parents=True, exist_ok=True)
    (dest / name).write_bytes(data)
"""


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


def job_env(repo: Path, where: Path, runtime: Path) -> dict[str, str]:
    """A `--no-python` job of `repo`'s HEAD under `where` (its checkout reused between runs, as a
    checkout that is already there costs git no less than a fresh one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_", "GANTRY_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a node: the runtime's bytecode is written once
    env.pop("VIRTUAL_ENV", None)
    return no_python_job_env(repo, where, env)


def runtime_of(src: Path, dest: Path) -> Path:
    subprocess.run(
        [sys.executable, "-c", WRITE_RUNTIME, str(dest)],
        env={**os.environ, "PYTHONPATH": str(src)},
        check=True,
        timeout=120,
    )
    return dest / "entrypoint.sh"


def once(entry: Path, env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    """(ms to the command's start, ms to the job's exit, CPU ms of the job: every process of it)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time_ns()
    start = time.perf_counter()
    out = subprocess.run(
        ["bash", str(entry), "date", "+%s%N"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    done = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"the job failed ({out.returncode}): {out.stderr}")
    line = [w for w in out.stdout.split() if w.isdigit()][-1]
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return (int(line) - t0) / 1e6, done * 1000, cpu * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15)
    ap.add_argument(
        "--baseline",
        action="append",
        help="a git ref, or a checkout's directory (repeatable; default cc8c626 and 04f37a3)",
    )
    ap.add_argument("--no-answer", action="store_true", help="also a webhook that never answers")
    args = ap.parse_args()
    refs = args.baseline or ["cc8c626", "04f37a3"]
    hook, silent = Receiver(), Silent()
    settings = {
        name: {k: v.replace("{hook}", hook.url).replace("{silent}", silent.url) for k, v in extra.items()}
        for name, extra in {**SETTINGS, **(NO_ANSWER if args.no_answer else {})}.items()
    }
    with tempfile.TemporaryDirectory() as tmp:
        repo = small_repo(Path(tmp))
        sources = {**{ref: baseline_src(ref) for ref in refs}, THIS: ROOT / "src"}
        jobs = {}
        for i, (tree, src) in enumerate(sources.items()):
            where = Path(tmp, f"job{i}")
            jobs[tree] = (runtime_of(src, where / "lk-runtime"), job_env(repo, where, where / "lk-runtime"))
        for entry, env in jobs.values():  # the runtime's bytecode written, the page cache warm
            for extra in settings.values():
                once(entry, {**env, **extra}, Path(tmp))
        times: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for _ in range(args.n):  # interleaved: drift in the machine's speed hits all alike
            for setting, extra in settings.items():
                for tree, (entry, env) in jobs.items():
                    times.setdefault((setting, tree), []).append(once(entry, {**env, **extra}, Path(tmp)))
    load = os.getloadavg()
    print(
        f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores; {args.n} runs each"
    )
    print(
        f"{'setting':<19} {'tree':<10} {'to command start ms':>22} {'over unwatched':>15} {'to exit ms':>18}"
        f" {'job CPU ms':>11} {'over':>7}"
    )
    start_of = {key: statistics.median(g[0] for g in got) for key, got in times.items()}
    cpu_of = {key: statistics.median(g[2] for g in got) for key, got in times.items()}
    missed = []
    for (setting, tree), got in times.items():
        starts, exits = [g[0] for g in got], [g[1] for g in got]
        over = start_of[(setting, tree)] - start_of[("unwatched", tree)]
        if tree == THIS and setting in TARGET and over > TARGET_MS:
            missed.append(setting)
        print(
            f"{setting:<19} {tree:<10} {start_of[(setting, tree)]:>12.1f} (min {min(starts):5.1f})"
            f" {over:>+13.1f}  {statistics.median(exits):>8.1f} (min {min(exits):5.1f})"
            f" {cpu_of[(setting, tree)]:>11.1f} {cpu_of[(setting, tree)] - cpu_of[('unwatched', tree)]:>+7.1f}"
        )
    print(
        f"target: {', '.join(TARGET)} start at most +{TARGET_MS:.0f} ms over unwatched ({THIS}): "
        + ("ok" if not missed else "MISSED by " + ", ".join(missed))
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
