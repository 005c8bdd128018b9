"""Time from launch to the user command's first line: launchkit's entrypoint vs gantry 3.7.0's.

Both scripts run here, side by side in one run, on the same repository, uv cache, interpreter and
command. gantry's GitHub clone is redirected to the local repository with `url.<path>.insteadOf`.
As on Beaker, every job gets a fresh checkout at the same runtime path (`/launchkit-runtime`,
`/gantry-runtime` there), wiped between jobs.

Cases (targets from issue 13):
- warm: a package with a uv.lock and 5 registry dependencies, warm uv cache (<= 0.35 x gantry);
- shared: ~40 registry dependencies; launchkit's second job on a shared cache that a first job
  filled, against gantry's cold time for the same project (<= 0.25 x), with the venv copied from
  the cache (the ai2-weka profile's UV_LINK_MODE=copy) and hard-linked (uv's default);
- replicas: 4 replicas at once on an empty shared cache, 40 small wheels from a local index on
  127.0.0.1 whose access log counts the downloads (each wheel once).

    uv run python bench/bench_entrypoint.py [--rounds 5] [--cold 2] [--skip-shared] [--skip-replicas]

Needs network access to PyPI (locking, filling caches, cold runs). gantry's entrypoint comes from
the venv in $GANTRY_VENV (default /tmp/gantry-venv: `uv venv -p 3.11 /tmp/gantry-venv &&
VIRTUAL_ENV=/tmp/gantry-venv uv pip install beaker-gantry==3.7.0`), else from `pip download`.
Results are also written to bench/results/entrypoint.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "src"), str(HERE.parent / "tests")]

import launchkit.runtime  # noqa: E402
from lk_helpers import LocalIndex  # noqa: E402

DEPS = ["requests", "attrs", "packaging", "six", "tomli"]
DEPS40 = [
    *DEPS,
    *("click", "rich", "pydantic", "jinja2", "pyyaml", "httpx", "tqdm", "typer", "python-dateutil"),
    *("pytz", "filelock", "fsspec", "platformdirs", "tenacity", "cachetools", "wrapt", "decorator"),
    *("toolz", "tabulate", "termcolor", "colorama", "docutils", "pygments", "markdown", "idna"),
    *("certifi", "charset-normalizer", "urllib3", "anyio", "jsonschema", "more-itertools"),
    *("networkx", "numpy", "psutil", "regex"),
]
LOCAL40 = [f"lkdep{i:02d}" for i in range(40)]
MARK = "FIRST-LINE"
COMMAND = ["python", "-c", f"import requests, attrs, benchpkg; print('{MARK}', flush=True)"]
COMMAND40 = ["python", "-c", f"import requests, numpy, pydantic, benchpkg; print('{MARK}', flush=True)"]
COMMAND_LOCAL = ["python", "-c", f"import lkdep00, lkdep39, benchpkg; print('{MARK}', flush=True)"]
GANTRY_VENV = Path(os.environ.get("GANTRY_VENV", "/tmp/gantry-venv"))


def sh(*args: str, cwd: Path | None = None, env: dict | None = None) -> str:
    return subprocess.run(
        args, cwd=cwd, env=env, check=True, capture_output=True, text=True, timeout=600
    ).stdout


def make_repo(root: Path, env: dict, name: str, deps: list[str]) -> tuple[Path, str]:
    repo = root / "gh" / "bench-org" / name  # gantry sees it as https://github.com/bench-org/<name>
    (repo / "src/benchpkg").mkdir(parents=True)
    (repo / "src/benchpkg/__init__.py").write_text("VERSION = '0.1.0'\n")
    (repo / "train.py").write_text("import benchpkg\nprint('training')\n")
    listed = ", ".join(f'"{d}"' for d in deps)
    (repo / "pyproject.toml").write_text(
        f'[project]\nname = "benchpkg"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = [{listed}]\n\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
    )
    sh("uv", "lock", "-q", cwd=repo, env=env)
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    sh("git", "add", "-A", cwd=repo)
    sh("git", "-c", "user.name=bench", "-c", "user.email=b@b", "commit", "-q", "-m", "bench", cwd=repo)
    return repo, sh("git", "rev-parse", "HEAD", cwd=repo).strip()


def gantry_entrypoint(root: Path) -> Path:
    installed = next(GANTRY_VENV.glob("lib/python*/site-packages/gantry/entrypoint.sh"), None)
    if installed and any(GANTRY_VENV.glob("lib/python*/site-packages/beaker_gantry-3.7.0.dist-info")):
        return installed
    dest = root / "gantry-dl"
    args = ["download", "-q", "--no-deps", "beaker-gantry==3.7.0", "-d", str(dest)]
    pip = [getattr(sys, "_base_executable", sys.executable), "-m", "pip"]  # the venv itself may lack pip
    if subprocess.run([*pip, "--version"], capture_output=True).returncode != 0:
        pip = ["uvx", "pip"]
    subprocess.run([*pip, *args], check=True, capture_output=True, timeout=300)
    wheel = next(dest.glob("beaker_gantry-3.7.0-*.whl"))
    path = root / "gantry-entrypoint.sh"
    path.write_bytes(zipfile.ZipFile(wheel).read("gantry/entrypoint.sh"))
    return path


def start(argv: list[str], env: dict, log: Path) -> tuple[subprocess.Popen, float]:
    log.parent.mkdir(parents=True, exist_ok=True)
    (log.parent / "start").write_text(repr(time.time()))
    t0 = time.perf_counter()
    p = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    return p, t0


def finish(p: subprocess.Popen, t0: float, argv: list[str], log: Path) -> tuple[float, float, str]:
    """(seconds to the first line of the command, seconds to exit, output)."""
    first, out = None, []
    assert p.stdout
    for raw in p.stdout:
        out.append(raw.decode(errors="replace"))
        if first is None and MARK in out[-1]:
            first = time.perf_counter() - t0
    code = p.wait(timeout=600)
    total = time.perf_counter() - t0
    log.write_text("".join(out))
    if code != 0 or first is None:
        raise SystemExit(f"{argv[0:2]} failed (exit {code}); see {log}")
    return first, total, "".join(out)


def timed(argv: list[str], env: dict, log: Path) -> tuple[float, float, str]:
    return finish(*start(argv, env, log), argv, log)


def runtime_entry(dest: Path, runtime: object = launchkit.runtime) -> str:
    """The runtime's files of `runtime` (launchkit.runtime of this or another version) written under
    `dest` as a job gets them; returns the entrypoint's path (`bash PATH ARGV...` runs the job)."""
    files = getattr(runtime, "runtime_files", None)
    found = files() if files else {"entrypoint.sh": runtime.entrypoint_script().encode()}  # type: ignore[attr-defined]
    for name, data in found.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_bytes(data)
    return str(dest / "entrypoint.sh")


class Runner:
    """Runs either entrypoint on one repository; `runtime` fixes the checkout path (as on a node)."""

    def __init__(self, root: Path, repo: Path, sha: str, gantry: Path, base_env: dict, command: list[str]):
        self.root, self.repo, self.sha, self.gantry, self.base = root, repo, sha, gantry, base_env
        self.command = command
        self.n = 0
        self.entry = runtime_entry(root / "lk-runtime")

    def _dirs(self, tag: str, runtime: Path | None) -> tuple[Path, Path]:
        self.n += 1
        d = self.root / "runs" / f"{self.n:03d}-{tag}"
        if runtime is None:
            runtime = self.root / "node" / f"{tag}-runtime"
            shutil.rmtree(runtime, ignore_errors=True)  # a fresh container: same path, nothing in it
        return d / "results", runtime

    def launchkit_argv(self, cache: Path, runtime: Path | None = None, **extra: str):
        results, runtime = self._dirs("launchkit", runtime)
        env = {
            **self.base,
            "UV_CACHE_DIR": str(cache),
            "LAUNCHKIT_GIT_REMOTE": str(self.repo),
            "LAUNCHKIT_GIT_COMMIT": self.sha,
            "RESULTS_DIR": str(results),
            "LAUNCHKIT_RUNTIME_DIR": str(runtime),
            "LAUNCHKIT_PYTHON_VERSION": "3.11",
            "LAUNCHKIT_EXEC_METHOD": "exec",
            **extra,
        }
        argv = ["bash", self.entry, *self.command]
        return argv, env, results.parent / "out.log"

    def launchkit(self, cache: Path, **extra: str) -> tuple[float, float, str]:
        return timed(*self.launchkit_argv(cache, **extra))

    def gantry_argv(self, cache: Path, runtime: Path | None = None, **extra: str):
        results, runtime = self._dirs("gantry", runtime)
        gitconfig = results.parent / "gitconfig"
        results.parent.mkdir(parents=True, exist_ok=True)
        gitconfig.write_text(f'[url "{self.root}/gh/"]\n\tinsteadOf = https://github.com/\n')
        env = {
            **self.base,
            "UV_CACHE_DIR": str(cache),
            "GIT_CONFIG_GLOBAL": str(gitconfig),
            "GITHUB_REPO": f"bench-org/{self.repo.name}",
            "GIT_REF": self.sha,
            "RESULTS_DIR": str(results),
            "GANTRY_RUNTIME_DIR": str(runtime),
            "GANTRY_EXEC_METHOD": "exec",
            "GANTRY_DEFAULT_PYTHON_VERSION": "3.11",
            "BEAKER_RESULT_DATASET_ID": "bench",
            "BEAKER_NODE_HOSTNAME": "bench-node",
            "BEAKER_NODE_ID": "bench-node",
            "BEAKER_ASSIGNED_GPU_COUNT": "0",
            "BEAKER_REPLICA_COUNT": "1",
            "BEAKER_REPLICA_RANK": "0",
            **extra,
        }
        return ["bash", str(self.gantry), *self.command], env, results.parent / "out.log"

    def gantry_run(self, cache: Path, **extra: str) -> tuple[float, float, str]:
        return timed(*self.gantry_argv(cache, **extra))

    def replicas(self, kind: str, cache: Path, count: int, **extra: str) -> float:
        """`count` replicas at once, each its own node (checkout); seconds until the last first line."""
        make = self.launchkit_argv if kind == "launchkit" else self.gantry_argv
        runs = []
        for rank in range(count):
            runtime = self.root / "node" / f"{kind}-replica-{rank}"
            shutil.rmtree(runtime, ignore_errors=True)
            argv, env, log = make(cache, runtime, **extra)
            env |= {"BEAKER_REPLICA_COUNT": str(count), "BEAKER_REPLICA_RANK": str(rank)}
            runs.append((*start(argv, env, log), argv, log))
        t0 = min(t for _, t, _, _ in runs)
        return max(t - t0 + finish(p, t, argv, log)[0] for p, t, argv, log in runs)


def breakdown(out: str) -> str:
    m = re.search(r"setup done in .*", out)
    return m.group(0) if m else "?"


def gantry_breakdown(run_dir: Path) -> str:
    """gantry logs each step to NNN_<step>.log; the gaps between their mtimes are the step times."""
    last = float((run_dir / "start").read_text())
    parts = []
    for f in sorted((run_dir / "results/.gantry/logs").glob("*.log")):
        t = f.stat().st_mtime
        parts.append(f"{f.stem.split('_', 1)[1]} {t - last:.2f}s")
        last = t
    return ", ".join(parts)


def setup_seconds(out: str) -> float:
    """launchkit's own setup time, from its timing line."""
    m = re.search(r"setup done in ([\d.]+)s", out)
    return float(m.group(1)) if m else float("nan")


def gantry_setup_seconds(run_dir: Path) -> float:
    """From the start to gantry's last setup step log (its install)."""
    logs = list((run_dir / "results/.gantry/logs").glob("*.log"))
    return max(f.stat().st_mtime for f in logs) - float((run_dir / "start").read_text())


def wait_seeded(cache: Path, timeout: float = 300) -> None:
    """A first job seeds its bytecode tree in the background after its command started; on a real
    cluster that job runs for hours, so later jobs find the tree complete: wait for it here too."""
    deadline = time.monotonic() + timeout
    for tree in (cache / "launchkit-bytecode-v1").glob("*/*/"):  # u<uid>/KEY
        while not (tree / ".seeded").exists() and time.monotonic() < deadline:
            time.sleep(0.1)


def ratio(ours: list[float], theirs: list[float]) -> dict:
    med = statistics.median
    return {
        "launchkit": round(med(ours), 3),
        "gantry": round(med(theirs), 3),
        "ratio": round(med(ours) / med(theirs), 3),
    }


def warm_case(root: Path, base: dict, gantry: Path, rounds: int, cold: int) -> dict:
    warm = root / "uv-cache"
    repo, sha = make_repo(root, {**base, "UV_CACHE_DIR": str(warm)}, "bench", DEPS)
    r = Runner(root, repo, sha, gantry, base, COMMAND)
    r.launchkit(warm)
    r.gantry_run(warm)  # both warm the same cache (and build the project once)
    wait_seeded(warm)
    lk, gy, lk_setup, gy_setup = [], [], [], []
    lk_detail = gy_detail = ""
    for _ in range(rounds):  # interleaved: drift on the machine hits both equally
        first, _, out = r.launchkit(warm)
        lk.append(first)
        lk_setup.append(setup_seconds(out))
        lk_detail = breakdown(out)
        gy.append(r.gantry_run(warm)[0])
        gy_setup.append(gantry_setup_seconds(r.root / "runs" / f"{r.n:03d}-gantry"))
        gy_detail = gantry_breakdown(r.root / "runs" / f"{r.n:03d}-gantry")
    result = {
        "deps": DEPS,
        "warm_first_line_s": ratio(lk, gy),
        # the entrypoints alone, without the command's own start (Python imports, the same for both)
        "warm_setup_only_s": ratio(lk_setup, gy_setup),
        "warm_all_s": {"launchkit": [round(x, 3) for x in lk], "gantry": [round(x, 3) for x in gy]},
        "launchkit_breakdown_warm": lk_detail,
        "gantry_steps_warm": gy_detail,
    }
    if cold:
        cold_lk, cold_gy, cold_detail = [], [], ""
        for i in range(cold):
            first, _, out = r.launchkit(root / f"cold-lk-{i}")
            cold_lk.append(first)
            cold_detail = breakdown(out)
            cold_gy.append(r.gantry_run(root / f"cold-gy-{i}")[0])
        result["cold_first_line_s"] = ratio(cold_lk, cold_gy)
        result["launchkit_breakdown_cold"] = cold_detail
    return result


def shared_case(root: Path, base: dict, gantry: Path, rounds: int, cold: int) -> dict:
    """~40 deps: launchkit's later jobs on a shared cache that its first job filled, vs gantry cold.

    Two link modes for the later jobs: `copy` (what the ai2-weka profile sets: its cache is on Weka,
    another file system than the venv) and uv's default (hard links: here the cache and the venv
    share a file system, as with a cache on the node's own disk)."""
    repo, sha = make_repo(root, {**base, "UV_CACHE_DIR": str(root / "lock-cache-40")}, "bench40", DEPS40)
    r = Runner(root, repo, sha, gantry, base, COMMAND40)
    shared = root / "shared-40"
    first_job, _, _ = r.launchkit(shared, UV_LINK_MODE="copy")  # fills the shared cache
    wait_seeded(shared)
    copy, auto, gy = [], [], []
    detail = {}
    for i in range(max(rounds, cold)):
        if i < rounds:
            first, _, out = r.launchkit(shared, UV_LINK_MODE="copy")
            copy.append(first)
            detail["copy"] = breakdown(out)
            first, _, out = r.launchkit(shared)
            auto.append(first)
            detail["hardlink"] = breakdown(out)
        if i < cold:
            gy.append(r.gantry_run(root / f"cold-gy40-{i}")[0])
    packages = len(re.findall(r"^name = ", (repo / "uv.lock").read_text(), re.M))
    return {
        "deps": len(DEPS40),
        "packages_in_lock": packages,
        "launchkit_first_job_s": round(first_job, 3),
        "second_job_copy_vs_gantry_cold_s": ratio(copy, gy),
        "second_job_hardlink_vs_gantry_cold_s": ratio(auto, gy),
        "launchkit_breakdown_second_job": detail,
    }


def replicas_case(root: Path, base: dict, gantry: Path, count: int = 4) -> dict:
    """`count` replicas at once on an empty shared cache; wheels from a local index (downloads counted)."""
    with LocalIndex(root / "index", LOCAL40) as index:
        # the wheels from the local index, the build backend (hatchling) from PyPI
        env = {**base, "UV_INDEX": index.url, "UV_LINK_MODE": "copy"}
        repo, sha = make_repo(
            root, {**env, "UV_CACHE_DIR": str(root / "lock-cache-local")}, "benchlocal", LOCAL40
        )
        r = Runner(root, repo, sha, gantry, env, COMMAND_LOCAL)
        out: dict = {"replicas": count, "wheels": len(LOCAL40)}
        for kind in ("launchkit", "gantry"):
            index.log.write_text("")
            cache = root / f"replicas-{kind}"
            wall = r.replicas(kind, cache, count)
            got = index.downloads()
            out[kind] = {
                "last_first_line_s": round(wall, 3),
                "wheel_downloads": sum(got.values()),
                "max_downloads_of_one_wheel": max(got.values(), default=0),
            }
        return out


def job_env(root: Path) -> dict[str, str]:
    """The environment every entrypoint runs with: this one's, without launchkit's, gantry's, Beaker's,
    git's and uv's settings, with a home of its own under `root`."""
    uv_dir = os.path.dirname(shutil.which("uv") or "")
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p != os.path.join(sys.prefix, "bin")]
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LAUNCHKIT_", "GANTRY_", "BEAKER_", "GIT_", "UV_"))
    }
    base.pop("VIRTUAL_ENV", None)
    base.pop("PYTHONDONTWRITEBYTECODE", None)  # as on a real node: pyc files may be written
    base.update(
        PATH=os.pathsep.join([*path, uv_dir]),
        HOME=str(root / "home"),
        GIT_CONFIG_NOSYSTEM="1",
        UV_PYTHON_DOWNLOADS="never",
        NO_COLOR="1",
    )
    (root / "home").mkdir()
    return base


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cold", type=int, default=2, help="cold-cache runs of each (needs the registry)")
    ap.add_argument("--skip-shared", action="store_true", help="skip the ~40-dependency shared-cache case")
    ap.add_argument("--skip-replicas", action="store_true", help="skip the 4-replica download count")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="lk-bench-"))
    base = job_env(root)
    try:
        gantry = gantry_entrypoint(root)
        result: dict = {"rounds": args.rounds, "gantry_entrypoint": str(gantry)}
        result["warm"] = warm_case(root, base, gantry, args.rounds, args.cold)
        if not args.skip_shared:
            result["shared_40"] = shared_case(root, base, gantry, args.rounds, max(args.cold, 1))
        if not args.skip_replicas:
            result["replicas_local_index"] = replicas_case(root, base, gantry)
        print(json.dumps(result, indent=2))
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "entrypoint.json").write_text(json.dumps(result, indent=2) + "\n")
        checks = [
            (
                "warm, 5 deps + uv.lock: launchkit <= 0.35x gantry",
                result["warm"]["warm_first_line_s"]["ratio"] <= 0.35,
            )
        ]
        if "shared_40" in result:
            for mode in ("copy", "hardlink"):
                checks.append(
                    (
                        f"~40 deps, second job on a shared cache ({mode}) <= 0.25x gantry cold",
                        result["shared_40"][f"second_job_{mode}_vs_gantry_cold_s"]["ratio"] <= 0.25,
                    )
                )
        if "replicas_local_index" in result:
            checks.append(
                (
                    "4 replicas on an empty shared cache download each wheel once",
                    result["replicas_local_index"]["launchkit"]["max_downloads_of_one_wheel"] == 1,
                )
            )
        for label, ok in checks:
            print(f"target {label}: {'PASS' if ok else 'FAIL'}", file=sys.stderr)
    finally:
        if args.keep:
            print(f"work dir kept: {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
