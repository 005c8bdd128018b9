"""The version tag git.py reads with the repository state (DESCRIBE) is launchkit.pyenv.version_tag's
answer."""

from __future__ import annotations

from conftest import git
from launchkit import git as lkgit
from launchkit.pyenv import version_tag


def test_no_tag_is_read_once(repo):
    plain = lkgit.read_git_state(str(repo.path))
    assert plain.tag_read and plain.version_tag is None
    assert version_tag(str(repo.path), plain.commit) is None


def test_the_nearest_version_tag(repo):
    git(repo.path, "tag", "release-1.0")  # a hyphen in the tag, as `git describe` has them in its output
    tagged = git(repo.path, "rev-parse", "HEAD")
    repo.commit({"a.py": "1\n"}, "one")
    git(repo.path, "tag", "-a", "notes", "-m", "no digit: not a version tag")
    repo.commit({"b.py": "2\n"}, "two")
    plain = lkgit.read_git_state(str(repo.path))
    assert plain.tag_read
    assert plain.version_tag == ("release-1.0", tagged, 2) == version_tag(str(repo.path), plain.commit)


def test_a_given_ref_is_described_itself(repo):
    git(repo.path, "tag", "-a", "v2", "-m", "annotated")
    first = git(repo.path, "rev-parse", "HEAD")
    repo.commit({"a.py": "1\n"}, "one")
    state = lkgit.read_git_state(str(repo.path), ref=first, require_pushed=True)
    assert state.version_tag == ("v2", first, 0) == version_tag(str(repo.path), first)
