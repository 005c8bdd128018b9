"""Every lock the project has is honoured or named: pylock.toml and hashed requirements pin the job's
versions; a poetry.lock or pdm.lock the job does not install from is named at launch with the fix."""

from __future__ import annotations

import base64
import hashlib

import pytest

from inproc import run_main
from lk_helpers import entrypoint, make_wheel
from test_envdef_groups import BACKEND

PROBE = ["python", "-c", "import tinydep; print('tinydep', tinydep.VALUE)"]
PROJECT = (
    '[project]\nname = "demo"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = ["tinydep"]\n'
    '[build-system]\nrequires = []\nbuild-backend = "lkbackend"\nbackend-path = ["_build"]\n'
)


@pytest.fixture
def links(tmp_path):
    """A flat index with tinydep 0.1.0 (VALUE '1') and 0.2.0 (VALUE '2'): unpinned, the job gets 0.2.0."""
    folder = tmp_path / "links"
    old = make_wheel(folder, version="0.1.0", value="1")
    make_wheel(folder, version="0.2.0", value="2")
    return folder, old


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _job(tmp, repo, sha, links):
    return entrypoint(tmp, str(repo.remote), sha, PROBE, {"UV_FIND_LINKS": str(links)}, timeout=240)


@pytest.mark.slow
def test_unpinned_project_gets_the_newest(repo, tmp_path, links):
    sha = repo.commit({"pyproject.toml": PROJECT, "_build/lkbackend.py": BACKEND}, "project")
    r = _job(tmp_path / "j", repo, sha, links[0])
    assert r.returncode == 0 and "tinydep 2" in r.stdout, r.stderr


@pytest.mark.slow
def test_pylock_pins_the_project_dependencies(repo, tmp_path, links):
    folder, old = links
    pylock = (
        'lock-version = "1.0"\ncreated-by = "test"\nrequires-python = ">=3.11"\n\n[[packages]]\n'
        'name = "tinydep"\nversion = "0.1.0"\n'
        f'archive = {{ path = "{old}", hashes = {{ sha256 = "{_sha256(old)}" }} }}\n'
    )
    files = {"pyproject.toml": PROJECT, "_build/lkbackend.py": BACKEND, "pylock.toml": pylock}
    sha = repo.commit(files, "pylock")
    r = _job(tmp_path / "j", repo, sha, folder)
    assert r.returncode == 0, r.stderr
    assert "tinydep 1" in r.stdout and "install[project+pylock.toml]" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("project", [True, False], ids=["project", "requirements-only"])
def test_hashed_requirements_are_installed_as_pinned(repo, tmp_path, links, project):
    folder, old = links
    files = {"pyproject.toml": PROJECT, "_build/lkbackend.py": BACKEND} if project else {}
    good = f"tinydep==0.1.0 \\\n    --hash=sha256:{_sha256(old)}\n"
    sha = repo.commit({**files, "requirements.txt": good}, "hashed")
    r = _job(tmp_path / "a", repo, sha, folder)
    assert r.returncode == 0, r.stderr
    assert "tinydep 1" in r.stdout and "requirements.txt]" in r.stderr
    # a hash that does not match is refused by uv: the hashes are checked, not just the versions
    bad = "tinydep==0.1.0 --hash=sha256:" + base64.b16encode(b"x" * 32).decode().lower() + "\n"
    sha = repo.commit({"requirements.txt": bad}, "bad hash")
    r = _job(tmp_path / "b", repo, sha, folder)
    assert r.returncode == 106 and "hash" in r.stderr.lower(), r.stderr


@pytest.mark.parametrize("lock", ["poetry.lock", "pdm.lock"])
def test_a_lock_launchkit_does_not_install_is_named_at_launch(repo, lock):
    repo.commit({"pyproject.toml": PROJECT, lock: "# a lock\n"}, "foreign lock")
    r = run_main("run", "--local", "--dry-run", "--", "python", "x.py", cwd=repo.path)
    assert r.code == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if lock in line]
    assert len(lines) == 1 and "is not installed from" in lines[0] and "export" in lines[0]
    # with a lock the job installs (hashed requirements here), nothing is said
    repo.commit({"requirements.txt": "tinydep==0.1.0 --hash=sha256:" + "0" * 64 + "\n"}, "pins")
    r = run_main("run", "--local", "--dry-run", "--", "python", "x.py", cwd=repo.path)
    assert r.code == 0 and lock not in r.stderr, r.stderr
