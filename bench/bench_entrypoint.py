"""Time from launch to the user command's first line: launchkit's entrypoint vs gantry 3.7.0's.

Both scripts run here, side by side in one run, on the same repository (a package with a uv.lock
and 5 direct registry dependencies), with the same uv cache, the same interpreter and the same
command. gantry's GitHub clone is redirected to the local repository with `url.<path>.insteadOf`.

    uv run python bench/bench_entrypoint.py [--rounds 5] [--cold 2]

Needs network access to PyPI once (locking, warming the cache, cold runs) and `pip download`
for beaker-gantry==3.7.0. Results are also written to bench/results/entrypoint.json.
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
sys.path.insert(0, str(HERE.parent / "src"))

from launchkit.runtime import ENTRYPOINT_NAME, entrypoint_script  # noqa: E402

DEPS = ["requests", "attrs", "packaging", "six", "tomli"]
MARK = "FIRST-LINE"
COMMAND = ["python", "-c", f"import requests, attrs, benchpkg; print('{MARK}', flush=True)"]


def sh(*args: str, cwd: Path | None = None, env: dict | None = None) -> str:
    return subprocess.run(
        args, cwd=cwd, env=env, check=True, capture_output=True, text=True, timeout=600
    ).stdout


def make_repo(root: Path, env: dict) -> tuple[Path, str]:
    repo = root / "gh" / "bench-org" / "bench"  # gantry sees it as https://github.com/bench-org/bench
    (repo / "src/benchpkg").mkdir(parents=True)
    (repo / "src/benchpkg/__init__.py").write_text("VERSION = '0.1.0'\n")
    (repo / "train.py").write_text("import benchpkg\nprint('training')\n")
    deps = ", ".join(f'"{d}"' for d in DEPS)
    (repo / "pyproject.toml").write_text(
        f'[project]\nname = "benchpkg"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = [{deps}]\n\n'
        '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n'
    )
    sh("uv", "lock", "-q", cwd=repo, env=env)
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    sh("git", "add", "-A", cwd=repo)
    sh("git", "-c", "user.name=bench", "-c", "user.email=b@b", "commit", "-q", "-m", "bench", cwd=repo)
    return repo, sh("git", "rev-parse", "HEAD", cwd=repo).strip()


def gantry_entrypoint(root: Path) -> Path:
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


def timed(argv: list[str], env: dict, log: Path) -> tuple[float, float, str]:
    """(seconds to the first line of the command, seconds to exit, output)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    (log.parent / "start").write_text(repr(time.time()))
    t0 = time.perf_counter()
    p = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    first, out = None, []
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


class Runner:
    def __init__(self, root: Path, repo: Path, sha: str, gantry: Path, base_env: dict):
        self.root, self.repo, self.sha, self.gantry, self.base = root, repo, sha, gantry, base_env
        self.n = 0

    def _dirs(self, tag: str) -> tuple[Path, Path]:
        self.n += 1
        d = self.root / "runs" / f"{self.n:03d}-{tag}"
        return d / "results", d / "runtime"

    def launchkit(self, cache: Path) -> tuple[float, float, str]:
        results, runtime = self._dirs("launchkit")
        env = {
            **self.base,
            "UV_CACHE_DIR": str(cache),
            "LAUNCHKIT_GIT_REMOTE": str(self.repo),
            "LAUNCHKIT_GIT_COMMIT": self.sha,
            "RESULTS_DIR": str(results),
            "LAUNCHKIT_RUNTIME_DIR": str(runtime),
            "LAUNCHKIT_PYTHON_VERSION": "3.11",
            "LAUNCHKIT_EXEC_METHOD": "exec",
        }
        return timed(
            ["bash", "-c", entrypoint_script(), ENTRYPOINT_NAME, *COMMAND], env, results.parent / "out.log"
        )

    def gantry_run(self, cache: Path) -> tuple[float, float, str]:
        results, runtime = self._dirs("gantry")
        gitconfig = results.parent / "gitconfig"
        results.parent.mkdir(parents=True, exist_ok=True)
        gitconfig.write_text(f'[url "{self.root}/gh/"]\n\tinsteadOf = https://github.com/\n')
        env = {
            **self.base,
            "UV_CACHE_DIR": str(cache),
            "GIT_CONFIG_GLOBAL": str(gitconfig),
            "GITHUB_REPO": "bench-org/bench",
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
        }
        return timed(["bash", str(self.gantry), *COMMAND], env, results.parent / "out.log")


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cold", type=int, default=2, help="cold-cache runs of each (needs the registry)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="lk-bench-"))
    uv_dir = os.path.dirname(shutil.which("uv") or "")
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p != os.path.join(sys.prefix, "bin")]
    base = {
        k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "GANTRY_", "BEAKER_", "GIT_"))
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
    try:
        warm = root / "uv-cache"
        repo, sha = make_repo(root, {**base, "UV_CACHE_DIR": str(warm)})
        r = Runner(root, repo, sha, gantry_entrypoint(root), base)
        r.launchkit(warm)
        r.gantry_run(warm)  # both warm the same cache (and build the project once)
        lk, gy, lk_total, gy_total = [], [], [], []
        lk_detail = gy_detail = ""
        for _ in range(args.rounds):  # interleaved: drift on the machine hits both equally
            first, total, out = r.launchkit(warm)
            lk.append(first)
            lk_total.append(total)
            lk_detail = breakdown(out)
            first, total, _ = r.gantry_run(warm)
            gy.append(first)
            gy_total.append(total)
            gy_detail = gantry_breakdown(r.root / "runs" / f"{r.n:03d}-gantry")
        cold_lk, cold_gy, cold_detail = [], [], ""
        for i in range(args.cold):
            first, _, out = r.launchkit(root / f"cold-lk-{i}")
            cold_lk.append(first)
            cold_detail = breakdown(out)
            cold_gy.append(r.gantry_run(root / f"cold-gy-{i}")[0])
        med = statistics.median
        result = {
            "deps": DEPS,
            "rounds": args.rounds,
            "warm_first_line_s": {
                "launchkit": round(med(lk), 3),
                "gantry": round(med(gy), 3),
                "ratio": round(med(lk) / med(gy), 3),
            },
            "warm_all_s": {"launchkit": [round(x, 3) for x in lk], "gantry": [round(x, 3) for x in gy]},
            "launchkit_breakdown_warm": lk_detail,
            "gantry_steps_warm": gy_detail,
        }
        if args.cold:
            result["cold_first_line_s"] = {
                "launchkit": round(med(cold_lk), 3),
                "gantry": round(med(cold_gy), 3),
                "ratio": round(med(cold_lk) / med(cold_gy), 3),
            }
            result["launchkit_breakdown_cold"] = cold_detail
        print(json.dumps(result, indent=2))
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "entrypoint.json").write_text(json.dumps(result, indent=2) + "\n")
        target = "PASS" if result["warm_first_line_s"]["ratio"] <= 0.5 else "FAIL"
        print(f"target launchkit <= 0.5x gantry (warm cache): {target}", file=sys.stderr)
    finally:
        if args.keep:
            print(f"work dir kept: {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
