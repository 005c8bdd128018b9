"""One interpreter per job (issue 45, item 2): chosen once at launch (--python-version, else the commit's
.python-version, else its requires-python, else the image's), said with where it came from, used by
every step; one uv can neither find nor download refused at launch, naming its source."""

from __future__ import annotations

import platform
import shutil
import subprocess

import pytest
import yaml

from conftest import run_cli
from inproc import run_main
from launchkit.pyenv import (
    committed_files,
    python_obtainable,
    python_request_in,
    released_python_allows,
    requires_python_in,
    requires_python_request,
)
from lk_helpers import FAST_ENV, launched_id, wait_finished

CMD = ["--", "python", "-c", "import platform; print('python', platform.python_version())"]


def _spec_env(stdout: str) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in yaml.safe_load(stdout)["tasks"][0]["envVars"]}


def test_uv_says_which_requests_it_can_satisfy():
    assert python_obtainable("3.12") is True  # a download uv knows (no network asked)
    assert python_obtainable(platform.python_version()) is True  # this one, installed
    assert python_obtainable("3.99") is False
    assert python_obtainable("pypy@3.99") is False
    assert python_obtainable("my-pyenv-virtualenv") is False  # a name uv looks for as an executable


def test_a_python_version_file_uv_cannot_obtain_is_refused_at_launch(repo):
    repo.commit({".python-version": "3.99\n"})
    for args in (("run", "--local", *CMD), ("run", "--dry-run", "--offline", *CMD)):
        r = run_main(*args, cwd=repo.path)
        assert r.code == 3 and r.stderr.count("\n") == 1, r.stderr
        assert ".python-version asks for Python 3.99, which uv can neither find here nor download" in r.stderr
    r = run_main("run", "--local", "--python-version", "3.98", *CMD, cwd=repo.path)
    assert r.code == 3 and "--python-version asks for Python 3.98" in r.stderr, r.stderr


def test_the_committed_python_version_is_said_and_set_for_every_step(repo):
    repo.commit({".python-version": "3.12\n"})
    r = run_main("run", "--dry-run", "--offline", *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert "Python 3.12 (from .python-version): the job's interpreter for every step" in r.stderr
    assert _spec_env(r.stdout)["LAUNCHKIT_PYTHON_VERSION"] == "3.12"
    r = run_main("run", "--dry-run", "--offline", "--python-version", "3.13", *CMD, cwd=repo.path)
    assert _spec_env(r.stdout)["LAUNCHKIT_PYTHON_VERSION"] == "3.13" and ".python-version" not in r.stderr


def test_an_uncommitted_python_version_file_is_not_the_jobs(repo):
    (repo.path / ".python-version").write_text("3.99\n")  # pyenv local: untracked, never in the clone
    assert (
        python_request_in(committed_files(str(repo.path), "HEAD", [".python-version"])[".python-version"])
        is None
    )
    r = run_main("-v", "run", "--dry-run", "--offline", "--allow-dirty", *CMD, cwd=repo.path)
    assert r.code == 0 and "LAUNCHKIT_PYTHON_VERSION" not in r.stdout, r.stderr
    assert "Python: the image's (no --python-version, no committed .python-version, no requires-python)" in (
        r.stderr
    )


def _other_python() -> str | None:
    """An installed CPython of another patch release than this one (uv finds both), or None."""
    for path in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if shutil.which(path):
            out = subprocess.run([path, "-c", "import platform; print(platform.python_version())"],
                                 capture_output=True, text=True, timeout=60).stdout.strip()  # fmt: skip
            if out and out != platform.python_version() and out.startswith("3."):
                return out
    return None


@pytest.mark.slow
def test_a_local_run_uses_the_commits_python_version(repo):
    """Before: the venv was made with the first Python on PATH and .python-version was read by nothing
    (or, with a uv.lock, by `uv sync`: a second interpreter)."""
    other = _other_python()
    if other is None:
        pytest.skip("needs a second installed CPython release to tell them apart")
    repo.commit({".python-version": other + "\n"})
    r = run_cli("run", "--local", *CMD, cwd=repo.path, env=FAST_ENV)
    assert r.code == 0, r.stderr
    assert f"Python {other} (from .python-version)" in r.stderr
    run_id = launched_id(r.stderr)
    assert wait_finished(run_id, FAST_ENV)["status"] == "succeeded"
    out = run_cli("logs", run_id, env=FAST_ENV).stdout
    assert f"python {other}\n" in out, out


# A PEP 517 backend of the project's own, for an offline build: a wheel with nothing but its metadata.
BACKEND = """import os, zipfile
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = "demo-0-py3-none-any.whl"
    meta = "Metadata-Version: 2.1\\nName: demo\\nVersion: 0\\n"
    wheel = "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        z.writestr("demo-0.dist-info/METADATA", meta)
        z.writestr("demo-0.dist-info/WHEEL", wheel)
        z.writestr("demo-0.dist-info/RECORD", "")
    return name
"""


def _project(requires: str) -> dict[str, str]:
    return {"pyproject.toml": f'[project]\nname = "demo"\nversion = "0"\nrequires-python = "{requires}"\n'}


def test_requires_python_is_said_and_set_for_every_step(repo):
    """Before: nothing at launch; the job's venv was made with the image's first Python even when
    requires-python excluded it, and `uv sync` made a second one (or the project went on the wrong one)."""
    repo.commit(_project(">=3.12"))
    r = run_main("run", "--dry-run", "--offline", *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    said = (
        "Python >=3.12 (from requires-python in pyproject.toml): the image's if it is one, "
        "else the newest CPython uv downloads for it; the job's interpreter for every step"
    )
    assert said in r.stderr, r.stderr
    assert _spec_env(r.stdout)["LAUNCHKIT_PYTHON_VERSION"] == ">=3.12"
    r = run_main("run", "--local", "--dry-run", *CMD, cwd=repo.path)
    assert "(from requires-python in pyproject.toml): this machine's if it is one" in r.stderr, r.stderr
    # the sources before it win: --python-version, the committed .python-version
    r = run_main("run", "--dry-run", "--offline", "--python-version", "3.13", *CMD, cwd=repo.path)
    assert _spec_env(r.stdout)["LAUNCHKIT_PYTHON_VERSION"] == "3.13" and "requires-python" not in r.stderr
    repo.commit({".python-version": "3.12\n"})
    r = run_main("run", "--dry-run", "--offline", *CMD, cwd=repo.path)
    assert _spec_env(r.stdout)["LAUNCHKIT_PYTHON_VERSION"] == "3.12" and "requires-python" not in r.stderr


def test_several_committed_files_are_read_by_one_git_call_each_as_committed(repo):
    both = {".python-version": "3.12\n", "pyproject.toml": "[project]\nname = 'x'\n\nmissing = 1"}
    sha = repo.commit({**both, "sub/a.txt": "a\n"})
    (repo.path / ".python-version").write_text("3.13\n")  # not committed
    paths = [".python-version", "nothing-here", "sub", "pyproject.toml", "sub/a.txt"]
    got = committed_files(str(repo.path), sha, paths)
    assert got == {**both, "nothing-here": None, "sub": None, "sub/a.txt": "a\n"}  # a directory: no file
    assert committed_files(str(repo.path / "no-repo"), sha, ["pyproject.toml"]) == {"pyproject.toml": None}


def test_requires_python_is_read_at_the_commit_as_the_planner_reads_it(repo):
    sha = repo.commit({"pyproject.toml": '[tool.poetry.dependencies]\npython = "^3.10"\n'})  # poetry's
    assert (
        requires_python_in(committed_files(str(repo.path), sha, ["pyproject.toml"])["pyproject.toml"])
        == ">=3.10,<4"
    )
    (repo.path / "pyproject.toml").write_text(_project(">=3.99")["pyproject.toml"])  # not committed
    assert (
        requires_python_in(committed_files(str(repo.path), "HEAD", ["pyproject.toml"])["pyproject.toml"])
        == ">=3.10,<4"
    )
    r = run_main("run", "--dry-run", "--offline", "--allow-dirty", *CMD, cwd=repo.path)
    assert r.code == 0 and _spec_env(r.stdout)["LAUNCHKIT_PYTHON_VERSION"] == ">=3.10,<4", r.stderr
    assert requires_python_request(">=3.6") == ">=3.6,>=3.8"  # never below the runtime's floor
    assert requires_python_request("") is None  # any
    assert released_python_allows(">=3.10,>=3.8") and released_python_allows("==3.11.2")
    assert not released_python_allows(">=3.99") and not released_python_allows("<3.0")
    with pytest.raises(ValueError):
        requires_python_request("not a range")


@pytest.mark.parametrize(
    ("requires", "said"),
    [
        (">=3.99", "requires-python >=3.99 in pyproject.toml allows no Python uv can find here or download"),
        ("<3.0", "requires-python <3.0 in pyproject.toml allows no Python uv can find here or download"),
        ("<3.8", "allows no Python uv can find here or download (launchkit's runtime needs 3.8 or newer)"),
        # before: launched, and the job failed in `uv sync` (exit 106) with a hint at uv.lock
        ("bogus", "requires-python 'bogus' in pyproject.toml is not a version range (uv and pip refuse it)"),
    ],
)
def test_a_requires_python_no_python_satisfies_is_refused_at_launch(repo, requires, said):
    repo.commit(_project(requires))
    for args in (("run", "--local", *CMD), ("run", "--dry-run", "--offline", *CMD)):
        r = run_main(*args, cwd=repo.path)
        assert r.code == 3 and r.stderr.count("\n") == 1 and said in r.stderr, r.stderr
        assert "fix requires-python" in r.stderr or "e.g. >=3.10" in r.stderr


@pytest.mark.slow
def test_a_local_run_uses_a_python_requires_python_allows(repo):
    """Before: the venv was made with the first Python uv found on this machine, outside the range, and
    the project was installed on it anyway (uv pip warns only): `python 3.11.7` for `==3.11.2`."""
    other = _other_python()
    if other is None:
        pytest.skip("needs a second installed CPython release to tell them apart")
    files = _project(f"=={other}")
    files["pyproject.toml"] += (
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
    )
    files["backend.py"] = BACKEND  # builds offline (no setuptools to fetch)
    repo.commit(files)
    r = run_cli("run", "--local", *CMD, cwd=repo.path, env=FAST_ENV)
    assert r.code == 0, r.stderr
    assert f"Python =={other} (from requires-python in pyproject.toml): this machine's" in r.stderr
    run_id = launched_id(r.stderr)
    status = wait_finished(run_id, FAST_ENV)["status"]
    out = run_cli("logs", run_id, env=FAST_ENV).stdout
    assert status == "succeeded" and f"python {other}\n" in out, out
