"""Read the local repository's state with GitPython. I/O lives here, not in launchkit.core."""

from __future__ import annotations

from launchkit.core.gitstate import GitState
from launchkit.errors import PreconditionError, UsageError


def read_git_state(path: str = ".", *, remote: str | None = None, ref: str | None = None,
                   branch: str | None = None, allow_dirty: bool = False) -> GitState:
    """Minimal first cut; the foundation issue completes it (pushed check, --remote, errors)."""
    import git  # GitPython: imported lazily to keep `--help` fast

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(f"{path!r} is not inside a git repository",
                         hint="run launchkit from your project's checkout, or pass --remote URL --ref SHA")
    if not repo.remotes:
        raise UsageError("the repository has no remote", hint="add one with `git remote add origin URL`")
    if not allow_dirty and ref is None and repo.is_dirty():
        raise PreconditionError("you have uncommitted changes to tracked files",
                                hint="commit and push them, or pass --allow-dirty")
    rem = repo.remotes[0]
    return GitState(remote_url=rem.url, commit=repo.head.commit.hexsha, branch=branch,
                    repo_root=repo.working_tree_dir, remote_name=rem.name)
