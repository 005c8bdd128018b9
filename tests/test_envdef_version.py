"""Versions from git tags: the job's shallow clone describes the launched commit as the checkout does
(setuptools-scm, hatch-vcs and versioneer all ask `git describe --tags`)."""

from __future__ import annotations

import pytest

from conftest import git, run_cli
from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.core.spec import build_spec
from launchkit.pyenv import version_tag
from lk_helpers import entrypoint
from test_spec import env_of

# what setuptools-scm runs (hatch-vcs uses setuptools-scm; versioneer adds --always)
DESCRIBE = ["git", "describe", "--dirty", "--tags", "--long", "--match", "*[0-9]*"]


def _tagged(repo, after: int, annotated: bool = True) -> tuple[str, str]:
    tagged = repo.commit({"a.txt": "release\n"}, "release")
    git(repo.path, "tag", *(["-a", "-m", "v26.1.0"] if annotated else []), "v26.1.0")
    git(repo.path, "tag", "latest")  # not a version: setuptools-scm's --match skips it, so do we
    for i in range(after):
        repo.commit({"a.txt": f"change {i}\n"}, f"change {i}")
    return tagged, git(repo.path, "rev-parse", "HEAD")


def test_version_tag_is_found_at_launch(repo):
    sha = git(repo.path, "rev-parse", "HEAD")
    assert version_tag(str(repo.path), sha) is None  # no tags
    tagged, head = _tagged(repo, after=3)
    assert version_tag(str(repo.path), head) == ("v26.1.0", tagged, 3)
    assert version_tag(str(repo.path), tagged) == ("v26.1.0", tagged, 0)


def test_version_tag_reaches_the_spec():
    request = build_request({}, ["python", "x"], environ={})
    state = GitState(remote_url="https://h/o/r.git", commit="a" * 40, version_tag=("v1.2", "b" * 40, 7))
    env = env_of(build_spec(request, state).to_json())
    assert (env["LAUNCHKIT_GIT_TAG"], env["LAUNCHKIT_GIT_TAG_COMMIT"], env["LAUNCHKIT_GIT_TAG_DISTANCE"]) == (
        "v1.2",
        "b" * 40,
        "7",
    )
    plain = env_of(build_spec(request, state.model_copy(update={"version_tag": None})).to_json())
    assert "LAUNCHKIT_GIT_TAG" not in plain


@pytest.mark.slow
@pytest.mark.parametrize(("after", "annotated"), [(0, True), (3, True), (2, False)])
def test_the_job_describes_the_commit_as_the_checkout(repo, tmp_path, after, annotated):
    _, head = _tagged(repo, after, annotated)
    tag, tagged, n = version_tag(str(repo.path), head)
    env = {
        "LAUNCHKIT_NO_PYTHON": "1",
        "LAUNCHKIT_GIT_TAG": tag,
        "LAUNCHKIT_GIT_TAG_COMMIT": tagged,
        "LAUNCHKIT_GIT_TAG_DISTANCE": str(n),
    }
    r = entrypoint(tmp_path, str(repo.remote), head, DESCRIBE, env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == git(repo.path, *[a for a in DESCRIBE[1:] if a != "--dirty"], head)
    assert r.stdout.startswith(f"v26.1.0-{after}-g")


@pytest.mark.slow
def test_local_run_sees_the_version_tag(repo):
    _tagged(repo, after=2)
    r = run_cli("run", "--local", "--follow", "--no-python", "--", *DESCRIBE, cwd=repo.path, timeout=180)
    assert r.code == 0, r.stderr
    assert git(repo.path, *DESCRIBE[1:]) in r.stdout and "v26.1.0-2-g" in r.stdout
