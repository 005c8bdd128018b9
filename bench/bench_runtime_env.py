#!/usr/bin/env python3
"""The job's Python environment step, bash (baseline) against the node runtime (this tree), on a warm
uv cache, interleaved in one run (issue 24: the move must not make a launch slower).

Usage (from the repository root):  uv run python bench/bench_runtime_env.py [-n 9] [--baseline main]

A small project with a `uv.lock` (one dependency from a local wheel, an in-tree build backend, so
nothing needs an index) and, for each tree:
- `launchkit run --local --follow -- python -c pass` (the CLI, the local backend and the job);
- the entrypoint alone, as a Beaker job runs it (a fresh checkout at the same path every time, so
  the project's stored build is used), wall and CPU time (CPU time is less sensitive to load).
Reports median and min in ms, with the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_startup import ROOT, baseline_src, sh, time_once

BACKEND = """
import os, zipfile

def get_requires_for_build_editable(config_settings=None):
    return []

def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    dist = "demo-0.1.0.dist-info"
    files = {
        "demo.pth": os.path.abspath("src") + "\\n",
        dist + "/METADATA": "Metadata-Version: 2.1\\nName: demo\\nVersion: 0.1.0\\nRequires-Dist: tinydep\\n",
        dist + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: bench\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    files[dist + "/RECORD"] = "".join(p + ",,\\n" for p in files) + dist + "/RECORD,,\\n"
    name = "demo-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return name
"""
PYPROJECT = """[project]
name = "demo"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["tinydep"]

[build-system]
requires = []
build-backend = "backend"
backend-path = ["_build"]

[tool.uv.sources]
tinydep = { path = "wheels/tinydep-0.1.0-py3-none-any.whl" }
"""


def project_repo(tmp: Path, env: dict[str, str]) -> tuple[Path, str]:
    sys.path.insert(0, str(ROOT / "tests"))
    from lk_helpers import make_wheel

    remote, work = tmp / "remote.git", tmp / "work"
    sh("git", "init", "-q", "--bare", "-b", "main", str(remote))
    sh("git", "init", "-q", "-b", "main", str(work))
    make_wheel(work / "wheels")
    (work / "_build").mkdir()
    (work / "_build/backend.py").write_text(BACKEND)
    (work / "src/demo").mkdir(parents=True)
    (work / "src/demo/__init__.py").write_text("VALUE = 1\n")
    (work / "pyproject.toml").write_text(PYPROJECT)
    sh("uv", "lock", "-q", cwd=work, env=env)
    sh("git", "add", "-A", cwd=work, env=env)
    sh("git", "commit", "-q", "-m", "init", cwd=work, env=env)
    sh("git", "remote", "add", "origin", remote.as_uri(), cwd=work)
    sh("git", "push", "-q", "-u", "origin", "main", cwd=work, env=env)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    return work, sha


def entry_of(src: Path, env: dict[str, str], dest: Path) -> str:
    """The runtime's files of the launchkit in `src` written under `dest`; returns the entrypoint's path."""
    code = (
        "import sys, pathlib, launchkit.runtime as r; d = pathlib.Path(sys.argv[1]);\n"
        "f = r.runtime_files() if hasattr(r, 'runtime_files') else {'entrypoint.sh': r.entrypoint_script().encode()}\n"
        "for n, b in f.items(): (d / n).parent.mkdir(parents=True, exist_ok=True); (d / n).write_bytes(b)"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(dest)],
        env={**env, "PYTHONPATH": str(src)},
        check=True,
        timeout=60,
    )
    return str(dest / "entrypoint.sh")


def timed(cmd: list[str], cwd: Path, env: dict[str, str], fresh: Path | None = None) -> tuple[float, float]:
    """time_once (wall ms, CPU ms), `fresh` removed first (not timed): a new checkout every job."""
    if fresh is not None:
        shutil.rmtree(fresh, ignore_errors=True)
    return time_once(cmd, cwd, env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=9, help="runs per command (default 9)")
    ap.add_argument("--baseline", default="main", help="git ref of the bash runtime (default main)")
    args = ap.parse_args()

    trees = {"baseline": baseline_src(args.baseline), "current": ROOT / "src"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_", "VIRTUAL_ENV"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env |= {"NO_COLOR": "1", "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com", "UV_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        env |= {"HOME": str(tmp), "UV_CACHE_DIR": str(tmp / "uv-cache")}  # warmed below, then shared
        repo, sha = project_repo(tmp, env)
        commands: dict[str, tuple[list[str], dict[str, str], Path | None]] = {}
        for name, src in trees.items():
            local = {**env, "PYTHONPATH": str(src), "LAUNCHKIT_LOCAL_HOME": str(tmp / f"state-{name}")}
            run = [
                sys.executable,
                "-m",
                "launchkit",
                "run",
                "--local",
                "--follow",
                "--",
                "python",
                "-c",
                "pass",
            ]
            commands[f"{name}: run --local --follow"] = (run, local, None)
            job = tmp / f"job-{name}"
            job_env = {
                **env,
                "LAUNCHKIT_GIT_REMOTE": str(repo),
                "LAUNCHKIT_GIT_COMMIT": sha,
                "RESULTS_DIR": str(job / "results"),
                "LAUNCHKIT_RUNTIME_DIR": str(job / "runtime"),
                "LAUNCHKIT_TOOLS_DIR": str(tmp / f"tools-{name}"),
                "LAUNCHKIT_BYTECODE_CACHE": "0",  # (its first job fills it in the background)
            }
            entry = ["bash", entry_of(src, env, tmp / f"rt-{name}"), "python", "-c", "pass"]
            commands[f"{name}: the job alone"] = (entry, job_env, job)
        for cmd, cenv, fresh in commands.values():  # warm uv's cache, the stored build, the page cache
            timed(cmd, repo, cenv, fresh)
            timed(cmd, repo, cenv, fresh)
        walls: dict[str, list[float]] = {k: [] for k in commands}
        cpus: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(args.n):
            for key, (cmd, cenv, fresh) in commands.items():
                wall, cpu = timed(cmd, repo, cenv, fresh)
                walls[key].append(wall)
                cpus[key].append(cpu)
        log = next((tmp / "job-current/results/.launchkit/logs").glob("*_install.log")).read_text()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average: {load} on {os.cpu_count()} CPUs  (n={args.n}, baseline {args.baseline})")
    print(f"{'command':<34} {'wall median':>11} {'min':>7} {'CPU median':>11} {'min':>7}")
    for key in commands:
        w, c = walls[key], cpus[key]
        print(
            f"{key:<34} {statistics.median(w):9.0f}ms {min(w):5.0f}ms "
            f"{statistics.median(c):9.0f}ms {min(c):5.0f}ms"
        )
    print("the current job's install:", "stored build used" if "installed its stored build" in log else log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
