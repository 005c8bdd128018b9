#!/usr/bin/env python3
"""Per-task spec sizes of real command lines (issue 24): every line of the gantry corpus
(tests/data/gantry_corpus, `launchkit run --dry-run` against the fake, online) and of the mason
reference (tests/data/mason, `launchkit mason`, submitted to the fake), as launchkit makes them.

Usage (from the repository root):  uv run python bench/bench_corpus_sizes.py [--baseline REF]

For each spec task: the bytes it adds to the YAML (what each further task of a sweep of that line
would add: the task's own entry), and the same without its `arguments` (the user's own command line,
which no launcher can shorten). Prints the count, median and largest, the lines over 2 KB, and the
five largest. `--baseline REF` (default 443c789; '' for none) runs the same for that commit's src/ in
the same run (a subprocess each). Exit 1 if a task of this tree exceeds 2 KB without its arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PER_TASK_MAX = 2 * 1024


def task_bytes(task: dict) -> list[int]:
    """What one more such task adds to the spec's YAML: [all of it, all but its arguments]."""
    from launchkit.core.spec import spec_json_to_yaml
    from launchkit.core.specview import SpecView

    out = []
    for t in (task, {k: v for k, v in task.items() if k != "arguments"}):
        one = spec_json_to_yaml(SpecView({"tasks": [t]}))
        two = spec_json_to_yaml(SpecView({"tasks": [t, t]}))
        out.append(len(two.encode()) - len(one.encode()))
    return out


def gantry_lines(tmp: Path) -> list[tuple[str, int]]:
    import yaml

    import gantry_corpus as gc
    from fakebeaker import FakeBeaker
    from inproc import run_main

    lines = gc.load_lines()
    records = gc.load_records()
    repo = gc.make_repo(tmp / "repo", gc.corpus_files(lines))
    out = []
    with FakeBeaker(gc.build_state(lines), directory=tmp / "fb") as fake:
        os.environ.update({**fake.env, "HOME": str(tmp / "home"), "NO_COLOR": "1"})
        (tmp / "home").mkdir()
        for ln in lines:
            rec = records.get(ln["id"])
            if rec is None or rec["exit"] != 0:
                continue
            r = run_main(*gc.launchkit_argv(ln["argv"]), cwd=repo)
            if r.code != 0:
                continue
            for task in yaml.safe_load(r.stdout)["tasks"]:
                out.append((f"gantry {ln['id']}", task_bytes(task)))
    return out


def mason_lines(tmp: Path) -> list[tuple[str, int]]:
    import mason_reference as mr
    from fakebeaker import FakeBeaker
    from inproc import run_main

    lines = mr.load_lines()
    results = mr.load_results()
    repo = tmp / "mrepo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, timeout=60)
    (repo / "train.py").write_text("print(1)\n")
    env = {
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@e",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@e",
    }
    git_env = {**os.environ, **env}
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, timeout=60, env=git_env)
    subprocess.run(["git", "commit", "-qm", "x"], cwd=repo, check=True, timeout=60, env=git_env)
    remote = tmp / "mremote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True, timeout=60)
    subprocess.run(["git", "remote", "add", "origin", remote.as_uri()], cwd=repo, check=True, timeout=60)
    subprocess.run(
        ["git", "push", "-q", "-u", "origin", "main"], cwd=repo, check=True, timeout=60, env=git_env
    )
    out = []
    fake = FakeBeaker(
        mr.build_fake_state(lines),
        directory=tmp / "mfb",
        default_user=mr.WHOAMI,
        default_workspace=mr.DEFAULT_WORKSPACE,
    ).start()
    try:
        os.environ.update(fake.env_for(mr.WHOAMI))
        for line in lines:
            if not results.get(line.id, {}).get("accepted"):
                continue
            saved = dict(os.environ)
            os.environ.update(line.launch_env)
            try:
                r = run_main("mason", *line.argv, cwd=repo)
            finally:
                os.environ.clear()
                os.environ.update(saved)
            if r.code != 0:
                continue
            exp_id = r.stdout.strip().splitlines()[-1]
            exp = next((e for e in fake.state.experiments.values() if e.id == exp_id), None)
            for task in exp.spec["tasks"] if exp else []:
                out.append((f"mason {line.id}", task_bytes(task)))
    finally:
        fake.stop()
    return out


def measure() -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        os.environ["XDG_CACHE_HOME"] = str(tmp / "cache")
        rows = gantry_lines(tmp) + mason_lines(tmp)
    return {"rows": rows}


def report(label: str, rows: list[tuple[str, list[int]]]) -> bool:
    ok = True
    for i, what in enumerate(("whole task", "without its arguments")):
        sizes = [n[i] for _, n in rows]
        over = sorted({name for name, n in rows if n[i] > PER_TASK_MAX})
        top = sorted(rows, key=lambda r: -r[1][i])[:5]
        print(
            f"{label}, {what}: {len(rows)} tasks of {len({n for n, _ in rows})} lines; per task median "
            f"{statistics.median(sizes):,.0f} B, largest {max(sizes):,} B; over 2 KB: {len(over)} line(s)"
        )
        print("  largest: " + ", ".join(f"{name} {n[i]:,} B" for name, n in top))
        ok &= not over or i == 0  # a long command line of the user's own is not launchkit's to shorten
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", action="append", help="git ref measured too (default 443c789)")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one tree, JSON out
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure()))
        return 0
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_startup import baseline_src

    trees = {"this tree": ROOT / "src"} | {r: baseline_src(r) for r in args.baseline or ["443c789"] if r}
    ok = True
    for label, src in trees.items():
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAUNCHKIT_", "BEAKER_"))}
        env["PYTHONPATH"] = str(src)
        proc = subprocess.run(
            [sys.executable, __file__, "--measure"], env=env, capture_output=True, text=True, timeout=3600
        )
        if proc.returncode != 0:
            raise SystemExit(f"{label}: failed\n{proc.stderr[-3000:]}")
        rows = [tuple(r) for r in json.loads(proc.stdout.splitlines()[-1])["rows"]]
        fine = report(label, rows)  # type: ignore[arg-type]
        ok &= fine or label != "this tree"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
