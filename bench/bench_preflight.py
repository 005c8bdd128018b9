#!/usr/bin/env python3
"""What the environment preflight adds to a warm Beaker launch (issue 23: at most 1 s).

Usage (from the repository root):  uv run python bench/bench_preflight.py [-n 7] [--baseline-src ../main/src]

- Two real git repositories, each with one pushed commit and a local bare `origin` (file://), holding
  a small uv project (pyproject.toml with `tinydep>=0.1` and a `test` dependency group,
  .python-version 3.12): `no lock` (the preflight resolves it with `uv pip compile` for Linux x86_64,
  python 3.12) and `uv.lock` (the same project locked: the preflight exports the lock as the job
  installs it and installs that as a dry run for Linux x86_64, python 3.12).
  `--python-version ''` leaves .python-version out (uv then resolves for the first python on PATH).
- Their requirements resolve without the network: two wheels built locally (tests/lk_helpers.make_wheel)
  in a flat folder (UV_FIND_LINKS, UV_NO_INDEX), uv's cache in the run's temporary directory.
- The fake Beaker (tests/fakebeaker, in this process, loopback only) takes the submits.
- `launchkit run --yes -- python train.py` (this tree's src/, a subprocess like a user's) in each
  repository: one warm-up each, with the preflight (verbose, to check it ran and passed) and with
  `--no-preflight`; with `--baseline-src DIR` also another tree's launchkit (e.g. main's) with its
  preflight; then n launches of each interleaved (A B C A B C ...), each timed from process start to exit.
- Prints the medians (and min/max), the difference per repository and `uptime`'s load. Exit 1 if a
  median difference exceeds 1.0 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
TARGET = 1.0  # seconds the preflight may add to a warm launch (issue 23)
TIMEOUT = 120  # seconds, for every subprocess
PYPROJECT = """\
[project]
name = "small"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["tinydep>=0.1"]

[dependency-groups]
test = ["tinydep"]
"""


def sh(*cmd: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        check=True,
        timeout=TIMEOUT,
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )


def small_project(tmp: Path, env: dict[str, str], python_version: str, *, lock: bool) -> Path:
    """A uv project (with a uv.lock or without) with one pushed commit and a local bare origin."""
    name = "locked" if lock else "nolock"
    remote, work = tmp / f"{name}-remote.git", tmp / name
    sh("git", "init", "-q", "--bare", "-b", "main", str(remote), env=env)
    sh("git", "init", "-q", "-b", "main", str(work), env=env)
    (work / "train.py").write_text("import tinydep\nprint('value', tinydep.VALUE)\n")
    (work / "pyproject.toml").write_text(PYPROJECT)
    if python_version:
        (work / ".python-version").write_text(python_version + "\n")
    if lock:
        from uv import find_uv_bin

        sh(
            find_uv_bin(),
            "lock",
            "-q",
            "--offline",
            "--no-index",
            "--python",
            sys.executable,
            cwd=work,
            env=env,
        )
    sh("git", "add", "-A", cwd=work, env=env)
    sh("git", "commit", "-q", "-m", "init", cwd=work, env=env)
    sh("git", "remote", "add", "origin", remote.as_uri(), cwd=work, env=env)
    sh("git", "push", "-q", "-u", "origin", "main", cwd=work, env=env)
    return work


def launch(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """(wall seconds, stderr) of one launch; stop the bench if it fails."""
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0 or "launched" not in proc.stderr:
        raise SystemExit(f"{' '.join(cmd[2:])} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall, proc.stderr


def uptime() -> str:
    try:
        return subprocess.run(
            ["uptime"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=7, help="timed launches of each kind (default 7)")
    ap.add_argument("--python-version", default="3.12", help="the project's .python-version ('' for none)")
    ap.add_argument("--baseline-src", help="another tree's src/ timed alongside (e.g. ../main/src)")
    args = ap.parse_args()
    from fakebeaker import FakeBeaker, State, scenarios
    from lk_helpers import make_wheel

    load_before = uptime()
    with tempfile.TemporaryDirectory(prefix="lk-bench-preflight-") as tmp_s:
        tmp = Path(tmp_s)
        wheels = tmp / "wheels"
        make_wheel(wheels, version="0.1.0")
        make_wheel(wheels, version="0.2.0")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_", "UV_"))}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("VIRTUAL_ENV", None)
        env.update(
            HOME=str(tmp / "home"),
            XDG_CONFIG_HOME=str(tmp / "home" / ".config"),
            XDG_STATE_HOME=str(tmp / "home" / ".local" / "state"),
            XDG_DATA_HOME=str(tmp / "home" / ".local" / "share"),
            NO_COLOR="1",
            COLUMNS="100",
            GIT_CONFIG_NOSYSTEM="1",
            GIT_AUTHOR_NAME="b",
            GIT_AUTHOR_EMAIL="b@example.com",
            GIT_COMMITTER_NAME="b",
            GIT_COMMITTER_EMAIL="b@example.com",
            PYTHONPATH=str(ROOT / "src"),
            UV_FIND_LINKS=str(wheels),
            UV_NO_INDEX="1",
            UV_CACHE_DIR=str(tmp / "uv-cache"),
        )
        (tmp / "home").mkdir()
        repos = {"no lock": small_project(tmp, env, args.python_version, lock=False)}
        repos["uv.lock"] = small_project(tmp, env, args.python_version, lock=True)
        run = ["run", "--yes", "--", "python", "train.py"]
        kinds: dict[str, tuple[list[str], dict[str, str]]] = {
            "with preflight": ([*run], {}),
            "--no-preflight": ([*run[:2], "--no-preflight", *run[2:]], {}),
        }
        if args.baseline_src:
            kinds["baseline"] = ([*run], {"PYTHONPATH": str(Path(args.baseline_src).resolve())})
        lk = [sys.executable, "-m", "launchkit"]
        said = {"no lock": "preflight: the environment resolves", "uv.lock": "preflight: uv.lock installs"}
        samples: dict[tuple[str, str], list[float]] = {}
        with FakeBeaker(scenarios.basic(State()), directory=tmp / "fb") as fake:
            env.update(fake.env)
            for project, repo in repos.items():
                # warm-up of each (page cache, uv cache, launchkit's caches); the first shows the preflight ran
                _, err = launch([*lk, "-v", *run], repo, env)
                if said[project] not in err:
                    raise SystemExit(f"{project}: the preflight did not run or did not pass:\n{err[-2000:]}")
                for cmd, extra in list(kinds.values())[1:]:
                    launch([*lk, *cmd], repo, {**env, **extra})
            for _ in range(args.n):
                for project, repo in repos.items():
                    for name, (cmd, extra) in kinds.items():  # A B C A B C ...
                        wall = launch([*lk, *cmd], repo, {**env, **extra})[0]
                        samples.setdefault((project, name), []).append(wall)
            # every launch submitted, each one create call of the fake
            submits = sum(n for k, n in fake.calls.items() if "create" in k.lower())

    launches = len(repos) * len(kinds) * (args.n + 1)
    medians = {key: statistics.median(walls) for key, walls in samples.items()}
    print(
        f"launchkit run --yes -- python train.py against the fake Beaker, n={args.n} each, interleaved;"
        f" .python-version {args.python_version or '-'}"
        + (f"; baseline: {args.baseline_src}" if args.baseline_src else "")
    )
    print(f"{'project':<9} {'launch':<16} {'median':>8} {'min':>8} {'max':>8}")
    for (project, name), walls in samples.items():
        print(f"{project:<9} {name:<16} {medians[project, name]:7.3f}s {min(walls):7.3f}s {max(walls):7.3f}s")
    ok = True
    for project in repos:
        diff = medians[project, "with preflight"] - medians[project, "--no-preflight"]
        ok = ok and diff <= TARGET
        line = f"{project}: preflight adds (median) {diff:+.3f}s  target <= {TARGET:.1f}s"
        if args.baseline_src:
            line += f"; vs baseline {medians[project, 'with preflight'] - medians[project, 'baseline']:+.3f}s"
        print(f"{line}  {'ok' if diff <= TARGET else 'MISSED'}")
    print(f"create calls the fake saw: {submits} (launches: {launches})")
    print(f"before: {load_before}")
    print(f"after:  {uptime()}  ({os.cpu_count()} CPUs)")
    return 0 if ok else 1


if __name__ == "__main__":
    if shutil.which("git") is None:
        raise SystemExit("git is required")
    sys.exit(main())
