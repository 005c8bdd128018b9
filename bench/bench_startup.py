#!/usr/bin/env python3
"""Start-up benchmark: `launchkit --help`, every command's `--help`, `run --dry-run` and `list --local`
against gantry 3.7.0 and a baseline, with launchkit's own time above the libraries' floor.

Usage (from the repository root):  uv run python bench/bench_startup.py [-n 15] [--baseline REF|DIR]

- Installs beaker-gantry==3.7.0 into its own venv (bench/results/gantry-venv) with uv.
- Byte-compiles both environments and src/ (PYTHONDONTWRITEBYTECODE would otherwise make every
  run compile from source), creates a small git repository with a pushed commit, then runs the
  commands interleaved, n times each, and reports median/min/max wall time in ms.
- `gantry run --dry-run` talks to Beaker (it is not offline): it runs against the fake Beaker
  (tests/fakebeaker) answering every call after 20 ms, github.com served by the fake's proxy.
  `launchkit run --dry-run` runs offline (no Beaker credentials), as a user's dry run does.
- Targets (issue 36): `launchkit --help` <= 0.40x `gantry --help`, `launchkit run --help` <= 0.40x
  `gantry run --help`, the offline `launchkit run --dry-run` <= 0.45x gantry's online one, and no
  command more than 20% slower than at REFERENCE (cc8c626), and no `CMD --help` more than 10% slower
  (issue 46: help costs what printing help costs). Exit 1 if missed.
- Every command's `--help` (cli/app.py: command_words, groups' commands and hidden ones too) gets a row;
  a baseline where the command does not exist yet has no row for it (said so in the table). cc8c626
  paused Python's cyclic GC while it started (cli/entry.py then; a start-up trick tests/test_startup.py
  now refuses): ~5 ms of CPU of its ~60 ms help rows. Its `main()` called in process, GC on in both,
  costs what this tree's does.
- Floors: "typer alone" (the interpreter and `import typer`) under the help rows and `list`, "the
  libraries alone" (LIBRARIES: the interpreter, Typer, one pydantic model, so pydantic's plugin scan,
  and beaker-py's spec types) under the dry run; the `own` column is a command's median above its
  floor: launchkit's own work. "+ GitPython" (the libraries and `import git`, which runs `git version`
  twice) shows how much of the dry run's own time is GitPython's import, the one git reader's.
- --baseline REF or DIR (repeatable; default a88a165, before issue 36, and REFERENCE) also runs that
  commit's src/ (`git archive`; DIR: a checkout, e.g. a `git worktree`) with the same interpreter
  (PYTHONPATH) in the same batches, so before and after are measured side by side; `--baseline ''`
  for none (then nothing is compared with REFERENCE).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from launchkit.cli.app import command_words

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
GANTRY_VENV = Path(os.environ.get("LK_BENCH_GANTRY_VENV") or RESULTS / "gantry-venv")  # or an existing venv
# command -> (target ratio, the gantry command it is compared with)
TARGETS = {
    "launchkit --help": (0.40, "gantry --help"),
    "launchkit run --help": (0.40, "gantry run --help"),
    "launchkit run --dry-run": (0.45, "gantry run --dry-run"),
}
SLOWER_AT_MOST = 1.20  # against REFERENCE, per command
HELP_SLOWER_AT_MOST = 1.10  # a command's --help against REFERENCE (issue 46)
REFERENCE = "cc8c626"  # issue 36: no command more than 20% slower than at this commit
TYPER_ALONE = "typer alone"
LIBRARIES_ALONE = "the libraries alone"
WITH_GITPYTHON = "+ GitPython"
FAKE_LATENCY = 0.02
# What a launch cannot go below with the libraries the developers' guide names for its jobs: the
# interpreter, Typer, one pydantic model built and validated (stock pydantic, as launchkit builds its
# own) and beaker-py's spec types. `launchkit run --dry-run` is measured against it as well as against gantry.
LIBRARIES = (
    "import typer\n"
    "from pydantic import BaseModel\n"
    "class Request(BaseModel):\n"
    "    command: list[str]\n"
    "Request(command=['python', 'train.py'])\n"
    "from launchkit.core.beaker_types import spec_types\n"
    "spec_types()\n"
)


def sh(*cmd: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    subprocess.run(cmd, cwd=cwd, check=True, timeout=900, env=env, stdout=subprocess.DEVNULL)


def gantry_bin() -> Path:
    exe = GANTRY_VENV / "bin" / "gantry"
    if not exe.exists():
        RESULTS.mkdir(parents=True, exist_ok=True)
        sh("uv", "venv", "-q", "--python", sys.executable, str(GANTRY_VENV))
        sh(
            "uv",
            "pip",
            "install",
            "-q",
            "--python",
            str(GANTRY_VENV / "bin" / "python"),
            "beaker-gantry==3.7.0",
        )
    return exe


def compile_all(python: Path, *paths: Path) -> None:
    subprocess.run(
        [str(python), "-m", "compileall", "-q", *map(str, paths)],
        timeout=900,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    return Path(out)


def small_repo(tmp: Path) -> Path:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.com",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.com",
    }
    remote, work = tmp / "remote.git", tmp / "work"
    sh("git", "init", "-q", "--bare", "-b", "main", str(remote))
    sh("git", "init", "-q", "-b", "main", str(work))
    (work / "train.py").write_text("print('hello')\n")
    (work / "pyproject.toml").write_text('[project]\nname = "small"\nversion = "0"\n')
    sh("git", "add", "-A", cwd=work, env=env)
    sh("git", "commit", "-q", "-m", "init", cwd=work, env=env)
    sh("git", "remote", "add", "origin", remote.as_uri(), cwd=work)
    sh("git", "push", "-q", "-u", "origin", "main", cwd=work, env=env)
    # gantry only takes GitHub remotes: the job URL is GitHub's, fetches still go to the local bare repo
    sh("git", "remote", "set-url", "origin", "https://github.com/alice/small.git", cwd=work)
    sh("git", "config", f"url.{remote.as_uri()}.insteadOf", "https://github.com/alice/small.git", cwd=work)
    return work


def no_python_job_env(repo: Path, where: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` with what the entrypoint of a `--no-python` job of `repo`'s HEAD reads: its checkout, and its
    results, runtime and tools directories under `where`."""
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()
    return {
        **env,
        "LAUNCHKIT_GIT_REMOTE": str(repo),
        "LAUNCHKIT_GIT_COMMIT": sha,
        "LAUNCHKIT_NO_PYTHON": "1",
        "RESULTS_DIR": str(where / "results"),
        "LAUNCHKIT_RUNTIME_DIR": str(where / "runtime"),
        "LAUNCHKIT_TOOLS_DIR": str(where / "tools"),
    }


def start_fake(tmp: Path):  # -> fakebeaker.FakeBeaker
    sys.path.insert(0, str(ROOT / "tests"))
    from fakebeaker import FakeBeaker, State, scenarios

    fake = FakeBeaker(scenarios.basic(State()), directory=tmp / "fb").start()
    fake.faults.latency(FAKE_LATENCY)
    return fake


def baseline_src(ref: str) -> Path:
    """`ref`'s src/ extracted (once) into bench/results/baseline-<sha>/; a directory's own src/."""
    if (Path(ref) / "src" / "launchkit").is_dir():
        return Path(ref).resolve() / "src"
    sha = subprocess.run(
        ["git", "rev-parse", "--short=12", ref],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    dest = RESULTS / f"baseline-{sha}"
    if not (dest / "src").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", sha, "src"], cwd=ROOT, capture_output=True, check=True, timeout=120
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True, timeout=120)
    return dest / "src"


def succeeds(cmd: list[str], cwd: Path, env: dict[str, str]) -> bool:
    """Whether `cmd` exits 0 (a baseline's tree may not have a command yet)."""
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120
    )
    return proc.returncode == 0


def time_once(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, CPU ms of the process and its children). CPU time is less sensitive to machine load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return elapsed * 1000, cpu * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=15, help="runs per command (default 15)")
    ap.add_argument(
        "--baseline",
        action="append",
        help=f"git ref or checkout run alongside (repeatable; '' for none; default a88a165 {REFERENCE})",
    )
    args = ap.parse_args()
    refs = [r for r in (args.baseline or ["a88a165", REFERENCE]) if r]
    if refs and REFERENCE not in refs:
        refs.append(REFERENCE)

    launchkit_python = Path(sys.executable)
    gantry = gantry_bin()
    bases = {ref: baseline_src(ref) for ref in refs}
    compile_all(gantry.parent / "python", site_packages(gantry.parent / "python"))
    compile_all(launchkit_python, site_packages(launchkit_python), ROOT / "src", *bases.values())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["NO_COLOR"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        repo = small_repo(Path(tmp))
        env["HOME"] = tmp  # no user config, no Beaker config: launchkit's dry run is offline
        env["LAUNCHKIT_LOCAL_HOME"] = str(Path(tmp) / "local")  # `list --local`: no runs yet
        fake = start_fake(Path(tmp))
        gantry_env = {
            **env,
            **fake.env,
            "HTTPS_PROXY": fake.github_proxy,
            "GANTRY_CHECK_FOR_UPGRADES": "0",
        }
        # `python -m launchkit` for this tree and the baseline alike (the console script adds ~nothing)
        lk = [str(launchkit_python), "-m", "launchkit"]
        env["PYTHONPATH"] = str(ROOT / "src")
        gantry_run = [str(gantry), "run", "--yes", "--budget", "ai2/oe-default", "--dry-run", "--gpus", "1"]
        dry = ["run", "--dry-run", "--gpus", "1", "--", "python", "train.py"]
        rows = {
            "--help": ["--help"],
            "run --help": ["run", "--help"],
            "run --dry-run": dry,
            "list --local": ["list", "--local"],
        }
        for words in command_words():  # every command's help, as the app lists them
            rows.setdefault(" ".join(words) + " --help", [*words, "--help"])
        commands = {
            "gantry --help": ([str(gantry), "--help"], env),
            "gantry run --help": ([str(gantry), "run", "--help"], env),
            "gantry run --dry-run": ([*gantry_run, "--", "python", "train.py"], gantry_env),
            TYPER_ALONE: ([str(launchkit_python), "-c", "import typer"], env),
            LIBRARIES_ALONE: ([str(launchkit_python), "-c", LIBRARIES], env),
            WITH_GITPYTHON: ([str(launchkit_python), "-c", LIBRARIES + "import git\n"], env),
        }
        for tree, tree_env in (
            ("launchkit", env),
            *((ref, {**env, "PYTHONPATH": str(b)}) for ref, b in bases.items()),
        ):
            for label, argv in rows.items():  # the same interpreter and libraries, each tree's src/
                commands[f"{tree} {label}"] = ([*lk, *argv], tree_env)
        load_before = os.getloadavg()
        try:
            for name, (cmd, cmd_env) in list(commands.items()):  # warm the page cache
                if name.startswith(tuple(bases)) and not succeeds(cmd, repo, cmd_env):
                    del commands[name]  # not in that tree yet
                    continue
                time_once(cmd, repo, cmd_env)
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
            for _ in range(args.n):
                for name, (cmd, cmd_env) in commands.items():
                    samples[name].append(time_once(cmd, repo, cmd_env))
        finally:
            fake.stop()

    medians = {name: statistics.median(w for w, _ in pairs) for name, pairs in samples.items()}
    cpu_medians = {name: statistics.median(c for _, c in pairs) for name, pairs in samples.items()}
    ok = True
    load = os.getloadavg()
    print(
        f"load average: {' '.join(f'{x:.2f}' for x in load_before)} before, "
        f"{' '.join(f'{x:.2f}' for x in load)} after on {os.cpu_count()} CPUs;"
        f" baselines {', '.join(refs) or '-'}; wall time is what the targets use (the CPU ratio beside);"
        f" fake Beaker latency {FAKE_LATENCY * 1000:.0f} ms per call"
    )
    if load[0] > (os.cpu_count() or 1):
        print("the machine is busier than its CPUs: wall times wait for a CPU, compare the cpu column too")
    print(f"{'command':<34} {'median':>8} {'min':>7} {'max':>7} {'cpu':>7} {'own':>7}  checks   (n={args.n})")
    for name, pairs in samples.items():
        walls = [w for w, _ in pairs]
        label = name.split(" ", 1)[1] if " " in name else name
        floor = LIBRARIES_ALONE if label == "run --dry-run" else TYPER_ALONE
        floors = (TYPER_ALONE, LIBRARIES_ALONE, WITH_GITPYTHON)
        own = f"{medians[name] - medians[floor]:6.0f}ms" if not name.startswith(("gantry", *floors)) else ""
        line = (
            f"{name:<34} {medians[name]:7.0f}ms {min(walls):6.0f}ms {max(walls):6.0f}ms "
            f"{cpu_medians[name]:6.0f}ms {own:>7}"
        )
        if name in TARGETS:
            target, versus = TARGETS[name]
            ratio = medians[name] / medians[versus]
            ok &= ratio <= target
            line += f"  {ratio:5.2f}x {versus.split()[-1]:<9} <= {target}x " + (
                "ok" if ratio <= target else "MISSED"
            )
            line += f" (cpu {cpu_medians[name] / cpu_medians[versus]:4.2f}x)"
        if name.startswith("launchkit ") and f"{REFERENCE} {label}" in medians:
            before = medians[f"{REFERENCE} {label}"]
            most = HELP_SLOWER_AT_MOST if label.endswith("--help") else SLOWER_AT_MOST
            ok &= medians[name] <= most * before
            line += f"  {medians[name] / before:5.2f}x {REFERENCE} <= {most}x " + (
                "ok" if medians[name] <= most * before else "MISSED"
            )
            line += f" (cpu {cpu_medians[name] / cpu_medians[f'{REFERENCE} {label}']:4.2f}x)"
        elif name.startswith("launchkit ") and REFERENCE in refs:
            line += f"  not in {REFERENCE}"
        print(line)
    floor, versus = medians[LIBRARIES_ALONE], medians["gantry run --dry-run"]
    target = TARGETS["launchkit run --dry-run"][0] * versus
    own = medians["launchkit run --dry-run"] - floor
    print(
        f"floor: the libraries alone take {floor:.0f} ms, {floor / versus:.2f}x gantry's online dry run; "
        f"the {TARGETS['launchkit run --dry-run'][0]}x target ({target:.0f} ms) leaves {target - floor:.0f} ms "
        f"for launchkit's own work (now {own:.0f} ms, of which GitPython's import "
        f"{medians[WITH_GITPYTHON] - floor:.0f} ms)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    if shutil.which("uv") is None:
        raise SystemExit("uv is required (pip install uv)")
    sys.exit(main())
