"""What launchkit knows about the user's repository: data only (reading it lives in launchkit.git)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class GitState(BaseModel):
    model_config = ConfigDict(frozen=True)

    remote_url: str  # what the job clones: no credentials, https for GitHub/GitLab/Bitbucket SSH remotes
    commit: str  # full 40-character SHA
    branch: str | None = None  # remote branch name, if known
    repo_root: str | None = None  # local checkout root (None with --remote outside a repo)
    remote_name: str | None = None
    github_repo: str | None = None  # "org/repo" when the job clones from GitHub (token secret applies)
    untracked: tuple[str, ...] = ()  # untracked, not ignored paths (launching HEAD of a checkout)
    dirty: tuple[str, ...] = ()  # tracked paths with uncommitted changes (launched anyway: --allow-dirty)
    # the nearest version tag of the commit (name, tagged commit, commits since): `git describe` in the job
    version_tag: tuple[str, str, int] | None = None
    tag_read: bool = False  # version_tag is git's answer (None: no version tag), not yet to be asked

    def untracked_warning(self, shown: int = 3) -> str | None:
        """One line naming the untracked files the job will not have, or None."""
        if not self.untracked:
            return None
        n = len(self.untracked)
        noun = "path is" if n == 1 else "paths are"
        return (
            f"{n} untracked {noun} not in the job: {_some(self.untracked, shown)} "
            "(commit them, or list them in .gitignore)"
        )

    def dirty_warning(self, shown: int = 3) -> str | None:
        """One line naming the uncommitted changes the job will not have (the last commit is launched)."""
        if not self.dirty:
            return None
        return (
            f"uncommitted changes to {_some(self.dirty, shown)} are not in the job: it runs commit "
            f"{self.commit[:12]} (commit and push them to include them)"
        )


def _some(paths: tuple[str, ...], shown: int) -> str:
    n = len(paths)
    return ", ".join(paths[:shown]) + (f" and {n - shown} more" if n > shown else "")
