"""The plain-git reader of the common launch (launchkit.git._read_plain) agrees with GitPython's."""

from __future__ import annotations

import subprocess

import pytest

from conftest import git
from launchkit import git as lkgit
from launchkit.errors import PreconditionError


def _both(path, allow_dirty: bool = False):
    plain = lkgit._read_plain(str(path), allow_dirty=allow_dirty, require_pushed=True)
    repo = lkgit._open_repo(str(path))
    assert repo is not None
    with repo:
        slow = lkgit._read(
            repo, remote=None, ref=None, branch=None, allow_dirty=allow_dirty, require_pushed=True
        )
    return plain, slow


def test_same_state_pushed_untracked_subdirectory_and_spaces(repo):
    repo.commit({"sub dir/a b.py": "x\n"}, "spaces")
    (repo.path / "new file.txt").write_text("u\n")
    plain, slow = _both(repo.path / "sub dir")
    assert plain is not None and plain == slow
    assert plain.untracked == ("new file.txt",) and plain.branch == "main"


def test_same_refusals_dirty_and_unpushed(repo):
    (repo.path / "train.py").write_text("changed\n")
    with pytest.raises(PreconditionError, match=r"uncommitted changes to tracked files \(train.py\)"):
        lkgit._read_plain(str(repo.path), allow_dirty=False, require_pushed=True)
    plain, slow = _both(repo.path, allow_dirty=True)
    assert plain == slow
    git(repo.path, "commit", "-qam", "local only")
    with pytest.raises(PreconditionError, match="is not on remote 'origin'"):
        lkgit._read_plain(str(repo.path), allow_dirty=False, require_pushed=True)


def test_upstream_on_a_slashed_branch_and_insteadof(repo, tmp_path):
    git(repo.path, "checkout", "-q", "-b", "feature/x")
    repo.commit({"f.py": "1\n"}, "feature", push=False)
    git(repo.path, "push", "-q", "-u", "origin", "feature/x")
    git(repo.path, "config", f"url.{repo.remote.as_uri()}.insteadOf", "https://github.com/alice/r.git")
    git(repo.path, "remote", "set-url", "origin", "https://github.com/alice/r.git")
    plain, slow = _both(repo.path)
    assert plain is not None and plain == slow and plain.branch == "feature/x"


def test_unusual_states_go_to_gitpython(repo):
    git(repo.path, "checkout", "-q", "--detach")
    assert lkgit._read_plain(str(repo.path), allow_dirty=False, require_pushed=True) is None
    git(repo.path, "checkout", "-q", "-b", "no-upstream")
    assert lkgit._read_plain(str(repo.path), allow_dirty=False, require_pushed=True) is None
    assert lkgit._read_plain(str(repo.path / ".git"), allow_dirty=False, require_pushed=True) is None
    bare = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=repo.remote, capture_output=True, timeout=30)
    assert bare.returncode == 0
    assert lkgit._read_plain(str(repo.remote), allow_dirty=False, require_pushed=True) is None
