"""The env store (issue 25 item 1): jobs on a shared uv cache in copy mode, against gantry 3.7.0 and
against launchkit's code at a baseline commit (main), side by side in one run.

All three entrypoints run here on one repository (~40 registry dependencies, a uv.lock), one shared
uv cache that every job uses (`UV_LINK_MODE=copy`, the ai2-weka profile's mode), one interpreter and
one command, the same way bench/bench_entrypoint.py runs them (fresh checkout at the same runtime
path per job). The cache is warm (every wheel downloaded) before anything is timed. Per round,
interleaved so that drift on the machine hits all alike:

- first job: this tree's entrypoint with no store entry for its key yet, so it builds one, against
  the same entrypoint with the store off (target: <= 1.2x) and the baseline's first job, all on the
  same warm cache; none has compiled bytecode for the new package set (as for a new lock). The store
  is built in copy mode (a file shared with uv's cache would carry a job's write to every later
  install), so a first job pays the copy a job without the store pays: a store built with hard links
  from the cache (main before issue 31) was faster here and is reported for the record;
- second job: this tree's entrypoint with the entry built, against gantry on the same warm cache
  (target: <= 0.15x gantry), and the baseline's second job for reference; within it, the check of
  every file of the entry before the link (`store_check`, from the job's install log: a store module
  a root job changed is never imported, issue 40);
- what each of the runtime's caches in uv's cache directory pays (a cache stays only while it pays):
  the second job with one of them missing, each in turn: the env store off (`LAUNCHKIT_ENVSTORE=0`),
  the bytecode trees off (`LAUNCHKIT_BYTECODE_CACHE=0`; and with the env store off too, against the
  store off alone: a job the store does not serve), no stored project build (removed before the job,
  which stores it again).

Time is launch -> the command's first line. The load average and core count are recorded. Jobs get a
PATH as on a node (`node_path`): uv's own binary, no pyenv shims (each uv call, and uv's interpreter
discovery, would run bash scripts: 0.1-0.8 s a call under load, for gantry and launchkit alike);
`--path-as-is` keeps the PATH as given.

    uv run python bench/bench_envstore.py [--rounds 5] [--baseline main] [--path-as-is]

Needs PyPI (locking and filling the cache) and gantry's entrypoint (see bench_entrypoint.py).
Results go to bench/results/envstore.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from bench_entrypoint import (
    COMMAND40,
    DEPS40,
    HERE,
    Runner,
    breakdown,
    gantry_entrypoint,
    job_env,
    make_repo,
    runtime_entry,
    setup_seconds,
    timed,
    wait_seeded,
)

from launchkit.runtime.node.environment.projectbuild import PROJECTS

# the runtime's caches in uv's cache directory, and how a job goes without each (docs/runtime.md)
CACHES: dict[str, dict[str, str]] = {
    "env_store": {"LAUNCHKIT_ENVSTORE": "0"},
    "bytecode": {"LAUNCHKIT_BYTECODE_CACHE": "0"},
    # a job the env store does not serve (no uv.lock, say) gets a fresh venv: the bytecode trees there
    "bytecode_no_store": {"LAUNCHKIT_BYTECODE_CACHE": "0", "LAUNCHKIT_ENVSTORE": "0"},
    "project_build": {},  # no switch: its stored builds are removed before the job
}
AGAINST = {"bytecode_no_store": "env_store"}  # timed against the second job with that cache off


def baseline_script(ref: str, work: Path) -> str:
    """The runtime's entrypoint (its path) as launchkit at `ref` makes it."""
    top = subprocess.run(
        ["git", "-C", str(HERE), "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True
    ).stdout.strip()
    dest = work / "baseline"
    dest.mkdir()
    archive = subprocess.run(
        ["git", "-C", top, "archive", ref, "src/launchkit/runtime"],
        check=True,
        capture_output=True,
        timeout=60,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True, timeout=60)
    init = dest / "src/launchkit/runtime/__init__.py"
    spec = importlib.util.spec_from_file_location("baseline_runtime", init)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return runtime_entry(work / "baseline-runtime", module)


def node_path(root: Path, base: dict[str, str]) -> str:
    """The jobs' PATH as on a node: uv's own binary first, and no version-manager shims. A developer's
    PATH may reach uv and python3.11 through pyenv's shims: 0.1-0.8 s of bash a call under load, for
    gantry (uv, and uv's interpreter discovery) and launchkit alike, which no node has. Returns uv's
    path."""
    uv = shutil.which("uv", path=base["PATH"]) or "uv"
    if os.sep + "shims" + os.sep in uv and shutil.which("pyenv"):  # the binary the shim runs
        uv = subprocess.run(
            ["pyenv", "which", "uv"], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    uv = os.path.realpath(uv)
    (root / "uv-bin").mkdir()
    os.symlink(uv, root / "uv-bin" / "uv")
    kept = [p for p in base["PATH"].split(os.pathsep) if not p.rstrip(os.sep).endswith(os.sep + "shims")]
    base["PATH"] = os.pathsep.join([str(root / "uv-bin"), *kept])
    return uv


def run_with(r: Runner, script: str, cache: Path, **extra: str) -> tuple[float, str]:
    argv, env, log = r.launchkit_argv(cache, **extra)
    argv[1] = script  # the entrypoint's path
    first, _, out = timed(argv, env, log)
    return first, out


def med(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", default="main", help="git ref of launchkit to compare with (default main)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument(
        "--path-as-is",
        action="store_true",
        help="jobs find uv on PATH as given (a shim, say), not the binary",
    )
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="lk-bench-envstore-"))
    base = job_env(root)
    uv = shutil.which("uv", path=base["PATH"]) if args.path_as_is else node_path(root, base)
    load = {"cores": os.cpu_count(), "loadavg_before": [round(x, 2) for x in os.getloadavg()]}
    try:
        ours, theirs = runtime_entry(root / "runtime"), baseline_script(args.baseline, root)
        gantry = gantry_entrypoint(root)
        repo, sha = make_repo(root, {**base, "UV_CACHE_DIR": str(root / "lock-cache")}, "bench40", DEPS40)
        r = Runner(root, repo, sha, gantry, base, COMMAND40)
        shared = root / "shared"
        copy = {"UV_LINK_MODE": "copy"}
        store = shared / "launchkit-envs-v1"
        # warm: every wheel in the shared cache, the project's build stored, bytecode trees seeded
        # (also a plain venv's, as a job the store does not serve has), a store entry built and
        # imported once (its bytecode written)
        run_with(r, theirs, shared, **copy)
        r.gantry_run(shared, **copy)
        run_with(r, ours, shared, **copy)
        run_with(r, ours, shared, **copy)
        run_with(r, ours, shared, **copy, **CACHES["env_store"])
        wait_seeded(shared)
        run_with(r, theirs, shared, **copy)
        run_with(r, ours, shared, **copy)

        def first_job(script: str, i: int, **extra: str) -> tuple[float, str]:
            # a package set with no entry yet: a UV_* setting uv does not know is in the key and
            # changes nothing else; no bytecode tree for either (a new package set has none). The
            # entry it builds goes (a baseline with the store builds the same key)
            before = {p for p in store.glob("u*/*") if p.is_dir()}
            t, out = run_with(r, script, shared, **first_env(i), **extra)
            for p in {p for p in store.glob("u*/*") if p.is_dir()} - before:
                shutil.rmtree(p)
            return t, out

        def first_ours(i: int) -> None:
            t, out = first_job(ours, i)
            logs = r.root / "runs" / f"{r.n:03d}-launchkit/results/.launchkit/logs"
            assert "env store: built" in next(logs.glob("*_install.log")).read_text(), out
            times["first_launchkit"].append(t)
            detail["first_ours"] = breakdown(out)

        def first_off(i: int) -> None:
            t, out = first_job(ours, i, LAUNCHKIT_ENVSTORE="0")
            times["first_store_off"].append(t)
            detail["first_store_off"] = breakdown(out)

        def first_base(i: int) -> None:
            t, out = first_job(theirs, i)
            times["first_baseline"].append(t)
            detail["first_baseline"] = breakdown(out)

        def second_ours(i: int) -> None:
            t, out = run_with(r, ours, shared, **copy)
            times["second_launchkit"].append(t)
            times["second_launchkit_setup_only"].append(setup_seconds(out))
            detail["second_ours"] = breakdown(out)
            # the entry's files checked before the link (issue 40): the job's install log says how long
            logs = r.root / "runs" / f"{r.n:03d}-launchkit/results/.launchkit/logs"
            m = re.search(
                r"its (\d+) files checked in (\d+) ms", next(logs.glob("*_install.log")).read_text()
            )
            assert m, out
            times["second_launchkit_store_check"].append(int(m.group(2)) / 1000)
            detail["store_files"] = m.group(1)

        def second_base(i: int) -> None:
            t, out = run_with(r, theirs, shared, **copy)
            times["second_baseline"].append(t)
            detail["second_baseline"] = breakdown(out)

        def second_without(cache: str, switch: dict[str, str]) -> Callable[[int], None]:
            def step(i: int) -> None:
                if cache == "project_build":  # the stored builds go: this job builds the project, stores it
                    shutil.rmtree(shared / PROJECTS)
                t, out = run_with(r, ours, shared, **copy, **switch)
                times[f"second_{cache}_off"].append(t)
                detail[f"second_{cache}_off"] = breakdown(out)

            return step

        def with_it(cache: str) -> str:
            return f"second_{AGAINST[cache]}_off" if cache in AGAINST else "second_launchkit"

        def second_gantry(i: int) -> None:
            times["second_gantry"].append(r.gantry_run(shared, **copy)[0])

        def first_env(i: int) -> dict[str, str]:
            return {**copy, "UV_LK_BENCH_ROUND": str(i), "LAUNCHKIT_BYTECODE_CACHE": "0"}

        times: dict[str, list[float]] = {
            k: []
            for k in (
                "first_launchkit",
                "first_store_off",
                "first_baseline",
                "second_launchkit",
                "second_launchkit_setup_only",
                "second_launchkit_store_check",
                "second_baseline",
                "second_gantry",
                *(f"second_{cache}_off" for cache in CACHES),
            )
        }
        detail: dict[str, str] = {}
        steps: list[Callable[[int], None]] = [
            first_ours,
            first_off,
            first_base,
            second_ours,
            second_base,
            second_gantry,
        ]
        steps += [second_without(cache, switch) for cache, switch in CACHES.items()]
        for i in range(args.rounds):
            for step in steps if i % 2 == 0 else steps[::-1]:  # every other round reversed: no order bias
                step(i)
        first_ours_s, first_base_s = times["first_launchkit"], times["first_baseline"]
        second_ours_s, second_base_s, gy = (
            times["second_launchkit"],
            times["second_baseline"],
            times["second_gantry"],
        )
        load["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
        packages = sum(
            1 for line in (repo / "uv.lock").read_text().splitlines() if line.startswith("name = ")
        )
        result = {
            "rounds": args.rounds,
            "baseline": args.baseline,
            "deps": len(DEPS40),
            "uv": uv,
            "path": "as given" if args.path_as_is else "as on a node (uv binary, no shims)",
            "packages_in_lock": packages,
            "load": load,
            "first_job_s": {
                "launchkit": med(first_ours_s),
                "store_off": med(times["first_store_off"]),
                "ratio_store_off": round(med(first_ours_s) / med(times["first_store_off"]), 3),
                "baseline": med(first_base_s),
                "ratio": round(med(first_ours_s) / med(first_base_s), 3),
            },
            "second_job_copy_s": {
                "launchkit": med(second_ours_s),
                "gantry": med(gy),
                "ratio": round(med(second_ours_s) / med(gy), 3),
                "baseline": med(second_base_s),
                "baseline_ratio": round(med(second_base_s) / med(gy), 3),
                # every file of the entry checked before the link (issue 40), within `launchkit`
                "store_check": med(times["second_launchkit_store_check"]),
                "store_files": int(detail.get("store_files") or 0),
            },
            "second_job_without_each_cache_s": {
                cache: {
                    "without": med(times[f"second_{cache}_off"]),
                    "with": med(times[with_it(cache)]),
                    "ratio_with": round(med(times[with_it(cache)]) / med(times[f"second_{cache}_off"]), 3),
                }
                for cache in CACHES
            },
            "all_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
            "breakdown": detail,
        }
        print(json.dumps(result, indent=2))
        (HERE / "results").mkdir(exist_ok=True)
        (HERE / "results" / "envstore.json").write_text(json.dumps(result, indent=2) + "\n")
        checks = [
            (
                "second job, copy mode, <= 0.15x gantry on the same warm cache",
                result["second_job_copy_s"]["ratio"] <= 0.15,
            ),
            (
                "first job (builds the entry) <= 1.2x the store off, both copy mode",
                result["first_job_s"]["ratio_store_off"] <= 1.2,
            ),
        ]
        for label, ok in checks:
            print(f"target {label}: {'PASS' if ok else 'FAIL'}", file=sys.stderr)
        for cache, row in result["second_job_without_each_cache_s"].items():
            pays = "pays" if row["ratio_with"] < 1 else "DOES NOT PAY"
            print(
                f"cache {cache}: second job {row['with']}s with it, {row['without']}s without: {pays}",
                file=sys.stderr,
            )
    finally:
        if args.keep:
            print(f"work dir kept: {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
