"""Shared caches can't be poisoned (issue 21 item 3): a `.pyc` planted in the bytecode tree of a
shared uv cache, for the standard library's `json` with the real source's hash in its header, never
runs in a job, unless the tree is this user's own private directory. Real bash, uv and Python."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from test_uv_cache import NO_BYTECODE_OPT_OUT, run_job, wait_filled

LIB = Path(__file__).parents[1] / "src/launchkit/runtime"
PROBE = ["python", "-c", "import json; print('json ok')"]
EVIL = "print('PWNED: planted bytecode ran')\n"
OTHER_UID = 54321


def seeded_tree(cache: Path) -> Path:
    """The one tree the first job seeded (in the background), whatever the layout under the cache."""
    wait_filled(cache)
    trees = [p.parent for p in cache.rglob(".seeded")]
    assert len(trees) == 1, f"seeded trees under {cache}: {trees}"
    return trees[0]


def plant_json(tree: Path, python: Path) -> Path:
    """Replace the tree's json/__init__ .pyc: same 16-byte header (the real source's hash), evil code."""
    pyc = next(p for p in tree.rglob("__init__.*.pyc") if p.parent.name == "json")
    code = subprocess.run(
        [
            str(python),
            "-c",
            f"import marshal, sys; sys.stdout.buffer.write(marshal.dumps(compile({EVIL!r}, 'x', 'exec')))",
        ],
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout
    pyc.write_bytes(pyc.read_bytes()[:16] + code)
    return pyc


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the tree to another uid")
def test_planted_bytecode_in_a_shared_cache_never_runs(repo, tmp_path):
    cache = tmp_path / "shared"
    env: dict[str, str | None] = {"UV_CACHE_DIR": str(cache), **NO_BYTECODE_OPT_OUT}
    sha = repo.commit({"requirements.txt": ""}, "no deps")
    r = run_job(tmp_path, "fill", repo, sha, env, PROBE)
    assert r.returncode == 0, r.stderr
    tree = seeded_tree(cache)
    python = next((tmp_path / "runtime/.venv/bin").glob("python"))
    plant_json(tree, python)

    # the control: in this user's own tree the plant works (so the attack below is a real one)
    r = run_job(tmp_path, "own", repo, sha, env, PROBE)
    assert r.returncode == 0, r.stderr
    assert "PWNED" in r.stdout, "the planted .pyc was not picked up: the test plants nothing"
    plant_json(tree, python)  # (a job that ran it may have rewritten nothing; plant again to be sure)

    # written by someone else: another uid owns the tree (as on a shared Weka cache)
    top = tree.parent if tree.parent.name != "launchkit-bytecode-v1" else tree
    for p in [top, *top.rglob("*")]:
        os.lchown(p, OTHER_UID, OTHER_UID)
    r = run_job(tmp_path, "other-uid", repo, sha, env, PROBE)
    assert r.returncode == 0, r.stderr
    assert "PWNED" not in r.stdout and "json ok" in r.stdout

    # ours again, but writable (and readable) by others: anyone may have changed it
    for p in [top, *top.rglob("*")]:
        os.lchown(p, 0, 0)
    top.chmod(0o777)
    r = run_job(tmp_path, "world-writable", repo, sha, env, PROBE)
    assert r.returncode == 0, r.stderr
    assert "PWNED" not in r.stdout and "json ok" in r.stdout
    log = "\n".join(
        p.read_text() for p in (tmp_path / "world-writable/results/.launchkit/logs").glob("*_bytecode.log")
    )
    assert "not used" in log

    # a tree planted where the old layout kept them (launchkit-bytecode-v1/KEY) is never looked at
    shutil.rmtree(cache / "launchkit-bytecode-v1")
    r = run_job(tmp_path, "refill", repo, sha, env, PROBE)
    assert r.returncode == 0, r.stderr
    fresh = seeded_tree(cache)
    assert fresh.parent.name == "u0" and (fresh.parent.stat().st_mode & 0o077) == 0
