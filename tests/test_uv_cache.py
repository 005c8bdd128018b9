"""uv caches across jobs (issue 13): the user's project is not rebuilt when its packaging is unchanged,
and many jobs can share one uv cache directory. Real bash, git, uv and a local package index."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from launchkit.runtime.node.environment import bytecode
from lk_helpers import LocalIndex, entrypoint, processes_with
from timescale import scaled

# A PEP 517/660 build backend inside the repository, so builds need no registry. Every editable
# build appends a line to $LK_TEST_BUILDS: the count of builds is the evidence, not timing.
BACKEND = """
import base64, hashlib, os, tomllib, zipfile

def _meta():
    with open("pyproject.toml", "rb") as f:
        p = tomllib.load(f)["project"]
    return p["name"], p["version"], p.get("dependencies", [])

def _wheel(directory, files):
    name, version, _ = _meta()
    dist = f"{name}-{version}.dist-info"
    files = dict(files)
    files[f"{dist}/WHEEL"] = "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    files[f"{dist}/entry_points.txt"] = f"[console_scripts]\\n{name}-hello = {name}:hello\\n"
    record = []
    for path, text in files.items():
        d = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={d},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\\n".join(record + [f"{dist}/RECORD,,"]) + "\\n"
    wheel = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, wheel), "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel

def _metadata():
    name, version, deps = _meta()
    return "".join([f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n"] + [f"Requires-Dist: {d}\\n" for d in deps])

def get_requires_for_build_wheel(config_settings=None):
    return []

def get_requires_for_build_editable(config_settings=None):
    return []

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise RuntimeError("this test backend only builds editables")

def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    with open(os.environ["LK_TEST_BUILDS"], "a") as f:
        f.write(os.getcwd() + "\\n")
    name, version, _ = _meta()
    return _wheel(wheel_directory, {
        f"{name}.pth": os.path.abspath("src") + "\\n",
        f"{name}-{version}.dist-info/METADATA": _metadata(),
    })
"""

PROBE = [
    "bash",
    "-c",
    "python -c 'import demo, importlib.metadata as m; print(demo.VALUE, m.version(\"demo\"))' && demo-hello",
]


def pyproject(version: str = "0.1.0", deps: list[str] | None = None, index: str = "") -> str:
    listed = ", ".join(f'"{d}"' for d in deps or [])
    text = (
        f'[project]\nname = "demo"\nversion = "{version}"\nrequires-python = ">=3.11"\n'
        f"dependencies = [{listed}]\n\n"
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["_build"]\n'
    )
    if index:
        text += f'\n[[tool.uv.index]]\nurl = "{index}"\ndefault = true\n'
    return text


def commit_locked(repo, files: dict[str, str], message: str, env: Mapping[str, str | None]) -> str:
    """Commit `files`, lock the project (uv lock, local only) and commit the lock; returns the SHA."""
    repo.commit(files, message)
    given = {k: v for k, v in env.items() if v is not None}
    subprocess.run(["uv", "lock", "-q"], cwd=repo.path, check=True, timeout=120, env={**os.environ, **given})
    return repo.commit({}, f"{message}: lock")


def project_files(value: str = "1", **kw) -> dict[str, str]:
    return {
        "pyproject.toml": pyproject(**kw),
        "_build/backend.py": BACKEND,
        "src/demo/__init__.py": f"VALUE = {value}\ndef hello():\n    print('hello', VALUE)\n",
    }


def builds(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def run_job(
    tmp: Path,
    name: str,
    repo,
    sha: str,
    env: Mapping[str, str | None],
    argv=PROBE,
    runtime: Path | None = None,
):
    """One job as on Beaker: a fresh checkout at the same runtime path every time."""
    runtime = runtime or tmp / "runtime"
    shutil.rmtree(runtime, ignore_errors=True)
    return entrypoint(tmp / name, str(repo.remote), sha, argv, {**env, "LAUNCHKIT_RUNTIME_DIR": str(runtime)})


def install_log(tmp: Path, name: str) -> str:
    return next((tmp / name / "results/.launchkit/logs").glob("*_install.log")).read_text()


@pytest.mark.slow
def test_unchanged_project_is_not_rebuilt_across_jobs(repo, tmp_path):
    counter = tmp_path / "builds.txt"
    env = {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_OFFLINE": "1", "LK_TEST_BUILDS": str(counter)}
    first = commit_locked(repo, project_files(), "project", env)

    r = run_job(tmp_path, "job1", repo, first, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0.1.0", "hello", "1"]
    assert builds(counter) == 1

    # the same commit again, in a fresh clone: the build is reused
    r = run_job(tmp_path, "job2", repo, first, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "0.1.0", "hello", "1"]
    assert builds(counter) == 1, install_log(tmp_path, "job2")
    assert "installed its stored build" in install_log(tmp_path, "job2")

    # a later commit that changes only code: still no build, and the new code runs (editable)
    code_only = repo.commit(
        {"src/demo/__init__.py": "VALUE = 2\ndef hello():\n    print('hello', VALUE)\n"}, "code"
    )
    r = run_job(tmp_path, "job3", repo, code_only, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "0.1.0", "hello", "2"]
    assert builds(counter) == 1, install_log(tmp_path, "job3")

    # a commit that changes pyproject.toml: rebuilt, and the new metadata is installed
    packaging = commit_locked(repo, {"pyproject.toml": pyproject(version="0.2.0")}, "bump", env)
    r = run_job(tmp_path, "job4", repo, packaging, env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "0.2.0", "hello", "2"]
    assert builds(counter) == 2

    # a new package under src/: editable installs may list the packages they found, so rebuilt
    added = repo.commit({"src/extra/__init__.py": "X = 1\n"}, "new package")
    r = run_job(tmp_path, "job5", repo, added, env)
    assert r.returncode == 0, r.stderr
    assert builds(counter) == 3


@pytest.mark.slow
def test_dynamic_metadata_is_rebuilt_for_each_commit(repo, tmp_path):
    """Dynamic metadata (a version from git, say) may change with any commit: reused only for the same one."""
    counter = tmp_path / "builds.txt"
    env = {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_OFFLINE": "1", "LK_TEST_BUILDS": str(counter)}
    files = project_files()
    files["pyproject.toml"] = files["pyproject.toml"].replace(
        "dependencies", 'dynamic = ["description"]\ndependencies'
    )
    first = commit_locked(repo, files, "project", env)
    for name in ("job1", "job2"):
        r = run_job(tmp_path, name, repo, first, env)
        assert r.returncode == 0, r.stderr
    assert builds(counter) == 1
    later = repo.commit({"src/demo/__init__.py": "VALUE = 3\ndef hello():\n    pass\n"}, "code only")
    r = run_job(tmp_path, "job3", repo, later, env)
    assert r.returncode == 0, r.stderr
    assert builds(counter) == 2


@pytest.mark.slow
def test_jobs_share_one_uv_cache_concurrently(repo, tmp_path):
    """8 jobs at once on an empty shared cache (as replicas on Weka): all correct, every wheel
    downloaded once (uv's per-entry locks), the cache complete and the project's build kept."""
    names = [f"dep{i:02d}" for i in range(12)]
    counter = tmp_path / "builds.txt"
    with LocalIndex(tmp_path / "index", names) as index:
        lock_env = {"UV_CACHE_DIR": str(tmp_path / "lock-cache"), "LK_TEST_BUILDS": str(counter)}
        sha = commit_locked(
            repo, project_files(deps=names, index=index.url), "project", {**lock_env, "UV_OFFLINE": "false"}
        )
        index.log.write_text("")
        shared = tmp_path / "shared-cache"
        env = {
            "UV_CACHE_DIR": str(shared),
            "UV_LINK_MODE": "copy",
            "UV_OFFLINE": "false",
            "LK_TEST_BUILDS": str(counter),
            "LAUNCHKIT_ENVSTORE": "0",  # uv's own sharing (the env store's: tests/test_envstore.py)
        }
        check = [
            "python",
            "-c",
            "import importlib, demo; print(sum(len(importlib.import_module(f'dep{i:02d}').VALUE) for i in range(12)), demo.VALUE)",
        ]

        def job(i: int):
            return entrypoint(tmp_path / f"job{i}", str(repo.remote), sha, check, env, timeout=300)

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(job, range(8)))
        for r in results:
            assert r.returncode == 0, r.stderr
            assert r.stdout.split() == ["60", "1"]
        assert index.downloads() == {f"{n}-1.0.0-py3-none-any.whl": 1 for n in names}
        # copy mode: the jobs' files are their own, not links into the shared cache
        dep = next((tmp_path / "job0/runtime/.venv/lib").glob("python*/site-packages/dep00/__init__.py"))
        assert dep.stat().st_nlink == 1 and not dep.is_symlink()

    # the index is gone: a next job (at a path a job used before) installs from the shared cache
    # alone, without a build
    before = builds(counter)
    r = run_job(tmp_path, "after", repo, sha, {**env, "UV_OFFLINE": "1"}, check, tmp_path / "job0/runtime")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["60", "1"]
    assert builds(counter) == before


@pytest.mark.slow
def test_unusable_uv_cache_dir_falls_back_to_the_default(repo, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    sha = repo.commit({"requirements.txt": ""}, "empty reqs")
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        sha,
        ["bash", "-c", 'echo "cache=${UV_CACHE_DIR-unset}"'],
        {"UV_CACHE_DIR": str(blocker / "uv")},
    )
    assert r.returncode == 0, r.stderr
    assert "cache=unset" in r.stdout
    assert f"UV_CACHE_DIR={blocker / 'uv'} is not a writable directory" in r.stderr


# the developer's or CI's own setting would turn the bytecode cache off
NO_BYTECODE_OPT_OUT: dict[str, str | None] = {
    "PYTHONDONTWRITEBYTECODE": None,
    "PYTHONPYCACHEPREFIX": None,
    "LAUNCHKIT_BYTECODE_SEED_DELAY": "0",
    "LAUNCHKIT_BYTECODE_SEED_NICE": "0",  # niced, the fill would starve on a busy machine
    "LAUNCHKIT_BYTECODE_CACHE": "1",  # FAST_ENV turns it off for the other tests
}


def bytecode_tree(cache: Path) -> Path:
    trees = list((cache / "launchkit-bytecode-v1" / f"u{os.geteuid()}").iterdir())  # this user's own
    assert len(trees) == 1, trees
    return trees[0]


def wait_filled(where: Path, timeout: float = 600) -> None:
    """Until the background bytecode-fill for a tree under `where` has ended: the event a test waits on
    (on a busy machine compiling the standard library takes minutes). The timeout is a hang guard."""
    deadline = time.monotonic() + scaled(timeout)
    while processes_with(str(where)):
        assert time.monotonic() < deadline, (
            f"the bytecode fill under {where} still runs after {scaled(timeout):.0f}s"
        )
        time.sleep(0.1)


def wait_seeded(tree: Path) -> None:
    """The first job seeds site-packages in the background, after its command started."""
    wait_filled(tree)
    assert (tree / ".seeded").exists(), f"the bytecode fill of {tree} ended without seeding it"


@pytest.mark.slow
def test_bytecode_is_shared_between_jobs_on_a_shared_cache(repo, tmp_path):
    """The first job fills the package set's tree (in the background); later jobs read their .pyc
    there although copy mode gives their files new times (python -v says "matches"), and a changed
    file of the same size is not mistaken for the old one."""
    names = ["dep00", "dep01"]
    with LocalIndex(tmp_path / "index", names) as index:
        env: dict[str, str | None] = {
            "UV_CACHE_DIR": str(tmp_path / "shared"),
            "UV_LINK_MODE": "copy",
            "UV_OFFLINE": "false",
            "LK_TEST_BUILDS": str(tmp_path / "builds.txt"),
        }
        sha = commit_locked(repo, project_files(deps=names, index=index.url), "project", env)
        env |= NO_BYTECODE_OPT_OUT
        env["LAUNCHKIT_ENVSTORE"] = "0"  # a venv of its own (with the store, dep00 is in the store)
        probe = ["python", "-v", "-c", "import json, dep00, dep01, demo; print('value', demo.VALUE)"]
        r = run_job(tmp_path, "job1", repo, sha, env, probe)
        assert r.returncode == 0, r.stderr
        assert "launchkit-bytecode-v1" not in r.stderr  # as before: a first job compiles for itself
        tree = bytecode_tree(tmp_path / "shared")
        log = next((tmp_path / "job1/results/.launchkit/logs").glob("*_bytecode.log"))
        assert f"filling {tree}" in log.read_text()
        wait_seeded(tree)

        r = run_job(tmp_path, "job2", repo, sha, env, probe)
        assert r.returncode == 0, r.stderr
        assert "value 1" in r.stdout
        runtime = tmp_path / "runtime"
        from_tree = rf"# {re.escape(str(tree))}/\S+\.pyc matches "
        for src in (
            next(runtime.glob(".venv/lib/python3*/site-packages/dep00/__init__.py")),
            runtime / "src/demo/__init__.py",
        ):
            assert re.search(from_tree + re.escape(str(src)) + "\n", r.stderr), f"{src} was compiled again"
        assert re.search(from_tree + r"\S+/json/__init__\.py\n", r.stderr), (
            "the standard library was compiled"
        )
        assert ", bytecode " in r.stderr  # the checkout's check has its own entry in the timing line

        # same size, same path: the hash tells them apart
        same_size = repo.commit(
            {"src/demo/__init__.py": project_files(value="2")["src/demo/__init__.py"]}, "v2"
        )
        r = run_job(tmp_path, "job3", repo, same_size, env, probe)
        assert r.returncode == 0, r.stderr
        assert "value 2" in r.stdout


def test_hash_checked_bytecode_is_not_fooled_by_equal_size_and_time(tmp_path):
    """Why the checkout is seeded before the command: a time-checked .pyc of another commit's file
    (same path, size and second) would be used; the seeded hash-checked one is not."""
    mod = tmp_path / "src" / "mod.py"
    mod.parent.mkdir()
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "prefix")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    read = [sys.executable, "-c", "import mod; print(mod.VALUE)"]

    def swap(seed: bool) -> str:
        mod.write_text("VALUE = 1\n")
        os.utime(mod, (1_700_000_000, 1_700_000_000))
        if seed:  # as the job does (runtime/node/environment/bytecode.py), here with this Python
            bytecode.seed([str(mod.parent)], env["PYTHONPYCACHEPREFIX"])
        subprocess.run(read, cwd=mod.parent, env=env, check=True, timeout=60, capture_output=True)
        mod.write_text("VALUE = 2\n")
        os.utime(mod, (1_700_000_000, 1_700_000_000))
        return subprocess.run(
            read, cwd=mod.parent, env=env, check=True, timeout=60, capture_output=True, text=True
        ).stdout

    assert swap(seed=False) == "1\n"  # the hazard: Python's own time-checked .pyc
    shutil.rmtree(tmp_path / "prefix")
    assert swap(seed=True) == "2\n"


@pytest.mark.slow
def test_bytecode_cache_stays_off_when_it_cannot_help(repo, tmp_path):
    sha = repo.commit({"requirements.txt": ""}, "empty reqs")
    show = ["bash", "-c", 'echo "prefix=${PYTHONPYCACHEPREFIX-unset}"']
    cache = tmp_path / "uv"
    env: dict[str, str | None] = {"UV_CACHE_DIR": str(cache), **NO_BYTECODE_OPT_OUT}
    assert run_job(tmp_path, "fill", repo, sha, env, show).stdout.strip() == "prefix=unset"
    wait_seeded(bytecode_tree(cache))
    for name, extra, want in (
        ("on", {}, f"prefix={cache}/launchkit-bytecode-v1/"),
        ("default-cache", {"UV_CACHE_DIR": None}, "prefix=unset"),  # no shared cache: nothing to share
        ("off", {"LAUNCHKIT_BYTECODE_CACHE": "0"}, "prefix=unset"),
        ("local-run", {"LAUNCHKIT_LOCAL_RUN": "x"}, "prefix=unset"),  # a new venv path every run
        ("no-writes", {"PYTHONDONTWRITEBYTECODE": "1"}, "prefix=unset"),
        ("users", {"PYTHONPYCACHEPREFIX": "/mine"}, "prefix=/mine"),
    ):
        r = run_job(tmp_path, name, repo, sha, {**env, **extra}, show)
        assert r.returncode == 0, r.stderr
        assert want in r.stdout, (name, r.stdout)
