"""The one git reader (launchkit.git, through GitPython) in the states a launch meets: real repositories
with a local bare remote."""

from __future__ import annotations

import pytest

from conftest import git, run_cli
from launchkit.errors import PreconditionError, UsageError
from launchkit.git import read_git_state


def test_pushed_untracked_subdirectory_and_spaces(repo):
    repo.commit({"sub dir/a b.py": "x\n"}, "spaces")
    (repo.path / "new file.txt").write_text("u\n")
    state = read_git_state(str(repo.path / "sub dir"))
    assert state.untracked == ("new file.txt",) and state.branch == "main"
    assert state.commit == git(repo.path, "rev-parse", "HEAD") and state.repo_root == str(repo.path)


def test_refusals_dirty_and_unpushed(repo):
    (repo.path / "train.py").write_text("changed\n")
    with pytest.raises(PreconditionError, match=r"uncommitted changes to tracked files \(train.py\)"):
        read_git_state(str(repo.path))
    assert read_git_state(str(repo.path), allow_dirty=True).commit == git(repo.path, "rev-parse", "HEAD")
    git(repo.path, "commit", "-qam", "local only")
    with pytest.raises(PreconditionError, match="is not on remote 'origin'"):
        read_git_state(str(repo.path))


def test_upstream_on_a_slashed_branch_and_insteadof(repo):
    git(repo.path, "checkout", "-q", "-b", "feature/x")
    repo.commit({"f.py": "1\n"}, "feature", push=False)
    git(repo.path, "push", "-q", "-u", "origin", "feature/x")
    git(repo.path, "config", f"url.{repo.remote.as_uri()}.insteadOf", "https://github.com/alice/r.git")
    git(repo.path, "remote", "set-url", "origin", "https://github.com/alice/r.git")
    state = read_git_state(str(repo.path))
    assert state.branch == "feature/x" and state.remote_url == repo.remote.as_uri()
    assert state.github_repo is None  # what git fetches from (insteadOf applied) is not GitHub


def test_detached_head_no_upstream_git_dir_and_bare(repo):
    git(repo.path, "checkout", "-q", "--detach")
    with pytest.raises(PreconditionError, match="HEAD is detached"):
        read_git_state(str(repo.path))
    head = git(repo.path, "rev-parse", "HEAD")
    assert read_git_state(str(repo.path), ref="HEAD").commit == head
    git(repo.path, "checkout", "-q", "-b", "no-upstream")
    assert read_git_state(str(repo.path)).branch == "no-upstream"  # its commit is on origin/main
    for outside in (repo.path / ".git", repo.remote):
        with pytest.raises(UsageError, match="is not inside a git repository"):
            read_git_state(str(outside))


def test_refs_tags_and_unknown_names(repo):
    first = git(repo.path, "rev-parse", "HEAD")
    git(repo.path, "tag", "-a", "v1", "-m", "annotated")
    repo.commit({"a.py": "1\n"}, "one")
    assert read_git_state(str(repo.path), ref="v1").commit == first  # peeled to its commit
    assert read_git_state(str(repo.path), ref="HEAD~1").commit == first
    assert read_git_state(str(repo.path), ref=first[:10]).commit == first
    with pytest.raises(UsageError, match="--ref 'nope' is not a known branch, tag or commit"):
        read_git_state(str(repo.path), ref="nope")
    with pytest.raises(UsageError, match="is not a known branch"):
        read_git_state(str(repo.path), ref="--output=x")  # never taken as an option of git's
    with pytest.raises(UsageError, match="is not in this repository"):
        read_git_state(str(repo.path), ref="0" * 40)
    assert read_git_state(str(repo.path), branch="main").commit == git(repo.path, "rev-parse", "HEAD")


def test_a_remote_without_url(repo):
    git(repo.path, "config", "--unset", "remote.origin.url")
    git(repo.path, "config", "remote.origin.pushurl", "x")
    with pytest.raises(PreconditionError, match="remote 'origin' has no URL"):
        read_git_state(str(repo.path))


def test_no_git_on_path_is_one_line(repo, tmp_path):
    """GitPython refuses to import without git: said in one line, exit 3 (a real process: the test's
    own GitPython is imported already)."""
    r = run_cli("run", "--dry-run", "--", "python", "train.py", cwd=repo.path, env={"PATH": str(tmp_path)})
    assert r.code == 3 and r.stderr.strip() == "error: git is not installed (install git and try again)", (
        r.stderr
    )
