"""gantry 3.7.0's `GitRepoState`, read by launchkit's git reader (launchkit.git): the commit to launch,
where the job clones it from, the branch. Unlike gantry it needs neither the GitHub CLI nor a GitHub
remote: any remote a Beaker node can clone works (`repo` is then the remote's path)."""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from launchkit.backends.beaker.github import visibility
from launchkit.core.gitstate import GitState
from launchkit.core.remoteurl import github_repo, is_url, job_remote
from launchkit.errors import LaunchkitError
from launchkit.gantry.exceptions import ConfigurationError, GitError, InvalidRemoteError, UnpushedChangesError
from launchkit.git import read_git_state
from launchkit.jobchecks import local_remote

__all__ = ["GitRepoState"]


def _names(remote_url: str) -> tuple[str, str]:
    """(`org/repo`, the browsable https URL) of a remote URL."""
    if gh := github_repo(remote_url):
        return gh, f"https://github.com/{gh}"
    url = remote_url if local_remote(remote_url) else job_remote(remote_url).url
    url = url.removesuffix("/").removesuffix(".git")
    return "/".join(url.split("/")[-2:]), url


def _checkout_of(repo: str) -> str | None:
    """The root of the checkout in the current directory when its remote is GitHub's `repo`; else None."""
    try:
        state = read_git_state(allow_dirty=True, require_pushed=False)
    except LaunchkitError:
        return None
    return state.repo_root if state.github_repo == repo else None


@dataclass
class GitRepoState:
    """The state of a git repository to launch. Use `from_env()` or `from_remote()`."""

    repo: str
    """The repository name, e.g. ``"allenai/beaker-gantry"``."""
    repo_url: str
    """The repository URL for cloning, e.g. ``"https://github.com/allenai/beaker-gantry"``."""
    ref: str
    """The commit SHA."""
    branch: str | None = None
    """The remote branch, if any."""
    _is_remote: bool = dataclasses.field(repr=False, default=False)
    _root: str | None = dataclasses.field(repr=False, default=None, compare=False)
    _remote_url: str | None = dataclasses.field(repr=False, default=None, compare=False)

    @property
    def is_dirty(self) -> bool:
        """Whether tracked files of the local checkout have uncommitted changes."""
        if self._is_remote or self._root is None:
            return False
        from git import Repo

        with Repo(self._root) as repo:
            return bool(repo.is_dirty())

    @cached_property
    def is_public(self) -> bool:
        """Whether the repository can be cloned without a token (GitHub's answer; other hosts: True
        unless the clone needs credentials, which launchkit cannot tell, so False)."""
        if not github_repo(self.repo_url):
            return False
        return visibility(self.repo).private is False

    @property
    def short_ref(self) -> str:
        return self.ref[:7] if len(self.ref) == 40 and self.ref.isalnum() else self.ref

    @property
    def ref_url(self) -> str:
        return f"{self.repo_url}/commit/{self.short_ref}"

    @property
    def branch_url(self) -> str | None:
        return None if self.branch is None else f"{self.repo_url}/tree/{self.branch}"

    @cached_property
    def commit_message(self) -> str | None:
        if self._is_remote or self._root is None:
            return None
        from git import Repo
        from git.exc import ODBError

        try:
            with Repo(self._root) as repo:
                return str(repo.commit(self.ref).message)
        except (ODBError, ValueError, OSError):  # a commit this checkout lacks has no message
            return None

    def short_commit_message(self, max_length: int = 50) -> str | None:
        if self.commit_message is None:
            return None
        msg = self.commit_message.split("\n")[0].strip()
        return msg if len(msg) <= max_length else msg[: max_length - 1] + "…"

    def is_in_tree(self, path: str | os.PathLike[str]) -> bool:
        """Whether `path` (relative to the current directory, the repository's root) is in the commit."""
        if self._is_remote or self._root is None:
            raise ConfigurationError("is_in_tree needs the local checkout (this state is from a remote)")
        from git import Repo

        rel = Path(path).resolve().relative_to(Path(self._root).resolve())
        with Repo(self._root) as repo:
            return str(rel) in repo.commit(self.ref).tree

    def _git_state(self) -> GitState:
        """What the job is given, as gantry gives it: the commit `ref` of `repo` (cloned from the remote this
        state was read from while `repo` still names it, else from `https://github.com/<repo>`, as
        gantry's job clones) and `branch`. A hand-built state (`GitRepoState(repo=..., ref=...)`) uses the
        current checkout for launch-time checks only when it is a checkout of that repository."""
        if not re.fullmatch(r"[0-9a-fA-F]{4,64}", self.ref or ""):
            raise ConfigurationError(
                f"GitRepoState.ref must be a commit SHA, got {self.ref!r} (GitRepoState.from_remote() "
                "resolves a branch or tag to one)"
            )
        remote, root = self._remote_url, self._root
        if remote is None or _names(remote)[0] != self.repo:
            remote, root = f"https://github.com/{self.repo}", _checkout_of(self.repo)
        return GitState(
            remote_url=remote,
            commit=self.ref,
            branch=self.branch,
            repo_root=root,
            github_repo=github_repo(remote),
        )

    @classmethod
    def _of(cls, state: GitState, *, is_remote: bool) -> GitRepoState:
        repo, url = _names(state.remote_url)
        return cls(
            repo=repo,
            repo_url=url,
            ref=state.commit,
            branch=state.branch,
            _is_remote=is_remote,
            _root=state.repo_root,
            _remote_url=state.remote_url,
        )

    @classmethod
    def from_remote(cls, remote_url: str, ref: str | None = None, branch: str | None = None) -> GitRepoState:
        """A remote repository's commit: `ref`, or the tip of `branch`."""
        if ref is None and branch is None:
            raise ConfigurationError("Either --ref or --branch is required when using remote repositories.")
        if not is_url(remote_url):
            if remote_url.count("/") != 1:
                raise InvalidRemoteError(f"Remote ('{remote_url}') must be a URL or a GitHub 'account/repo'")
            remote_url = f"https://github.com/{remote_url}"
        try:
            state = read_git_state(remote=remote_url, ref=ref, branch=branch, allow_dirty=True)
        except LaunchkitError as e:
            raise GitError(e.one_line()) from None
        return cls._of(state, is_remote=True)

    @classmethod
    def from_env(cls, ref: str | None = None, branch: str | None = None) -> GitRepoState:
        """The checkout in the current directory: its commit (or `ref`) and its upstream branch.

        :raises GitError: not in a git repository, or one launchkit cannot launch from.
        :raises UnpushedChangesError: the commit is not on the remote.
        """
        try:
            state = read_git_state(ref=ref, branch=branch, allow_dirty=True, require_pushed=False)
        except LaunchkitError as e:
            raise GitError(e.one_line()) from None
        try:
            read_git_state(ref=ref, branch=branch, allow_dirty=True, require_pushed=True)
        except LaunchkitError as e:
            raise UnpushedChangesError(e.one_line()) from None
        return cls._of(state, is_remote=False)
