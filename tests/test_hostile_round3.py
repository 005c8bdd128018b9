"""Issue 31: wrong blame, wrong exit codes and tracebacks on hostile input (round 3).

Each case is one line on stderr naming the value and the fix, with the documented exit code (2 usage,
3 precondition), or simply works.
"""

from __future__ import annotations

import os

import pytest

from conftest import Repo, git
from inproc import run_main
from test_error_paths import one_line

CMD = ["--", "python", "train.py"]
NOT_UTF8 = os.fsdecode(b"x\xff")  # the byte 0xff as Python keeps it from argv or a path


# -- git: what the repository is, told as git tells it ----------------------------------------------


@pytest.mark.parametrize("args", [[], ["--ref", "HEAD"], ["--local"]], ids=["plain", "ref", "local"])
def test_repository_owned_by_another_user_keeps_gits_message(repo, args):
    # git's own test switch for "owned by someone else": no root or chown needed
    env = {"GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"}
    r = run_main("run", "--dry-run", *args, *CMD, cwd=repo.path, env=env)
    line = one_line(r, 3, "dubious ownership", f"git config --global --add safe.directory {repo.path}")
    assert "has no URL" not in line


def test_repository_path_that_is_not_utf8_launches(tmp_path, repo):
    moved = tmp_path / ("proj-" + NOT_UTF8)
    os.rename(repo.path, moved)
    r = run_main("run", "--dry-run", *CMD, cwd=moved)
    assert r.code == 0, r.stderr
    assert "dry run: commit" in r.stderr


@pytest.mark.parametrize("upstream", [True, False], ids=["upstream", "no-upstream"])
@pytest.mark.parametrize("args", [[], ["--ref", "HEAD"], ["--local"]], ids=["plain", "ref", "local"])
def test_branch_name_that_is_not_utf8_is_named(repo: Repo, upstream, args):
    name = "feature-" + NOT_UTF8
    git(repo.path, "checkout", "-q", "-b", name)
    if upstream:
        git(repo.path, "push", "-q", "-u", "origin", "HEAD")
    r = run_main("run", "--dry-run", *args, *CMD, cwd=repo.path)
    one_line(r, 3, "branch 'feature-x\\xff' is not UTF-8", "git branch -m")


def test_version_tag_that_is_not_utf8_is_no_tag(repo: Repo):
    git(repo.path, "tag", "v1.0-" + NOT_UTF8)
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert "LAUNCHKIT_GIT_TAG" not in r.stdout
