"""Read the local repository's state with GitPython. I/O lives here, not in launchkit.core.

Fast path (`launchkit run` from a branch that tracks a pushed upstream): repository discovery and
refs are read by GitPython without subprocesses, plus ONE `git status --porcelain=v2 --branch` that
gives dirtiness and ahead/behind against the upstream. Only when the commit is ahead of (or has no)
upstream do we ask git which remote-tracking branches contain it. Everything is offline: the check
trusts the remote-tracking refs from your last push/fetch.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from launchkit.core.gitstate import GitState
from launchkit.errors import PreconditionError, UsageError

FULL_SHA = re.compile(r"[0-9a-f]{40}")
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_SCP_LIKE = re.compile(r"^[^/:]+@[^/:]+:")  # git@github.com:org/repo.git


def clean_remote_url(url: str, repo_root: str | None = None) -> str:
    """The URL a job can clone from: credentials dropped, relative local paths made absolute."""
    if _URL_SCHEME.match(url):
        parts = urlsplit(url)
        if parts.password is not None or (parts.username and parts.scheme in ("http", "https")):
            netloc = parts.hostname or ""
            if parts.port:
                netloc += f":{parts.port}"
            return urlunsplit(parts._replace(netloc=netloc))
        return url
    if _SCP_LIKE.match(url) or os.path.isabs(url):
        return url
    if repo_root is not None and (url.startswith(".") or os.path.exists(os.path.join(repo_root, url))):
        return os.path.normpath(os.path.join(repo_root, url))
    return url


def read_git_state(path: str | None = None, *, remote: str | None = None, ref: str | None = None,
                   branch: str | None = None, allow_dirty: bool = False) -> GitState:
    """The commit to launch and where a job can fetch it from. Raises one-line errors with a fix."""
    import git  # GitPython: imported lazily to keep `--help` fast

    path = path or os.getcwd()
    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        repo = None
    if repo is None or repo.bare:
        if remote and _looks_like_url(remote) and (ref or branch):
            return _from_remote_only(git, remote, ref=ref, branch=branch)
        raise UsageError(f"{path!r} is not inside a git repository",
                         hint="run launchkit from your project's checkout, or pass --remote URL with --ref/--branch")
    try:
        return _read(git, repo, remote=remote, ref=ref, branch=branch, allow_dirty=allow_dirty)
    finally:
        repo.close()


def _looks_like_url(remote: str) -> bool:
    return bool(_URL_SCHEME.match(remote) or _SCP_LIKE.match(remote) or os.path.isabs(remote))


def _read(git: Any, repo: Any, *, remote: str | None, ref: str | None, branch: str | None,
          allow_dirty: bool) -> GitState:
    root = str(repo.working_tree_dir)
    remotes = {r.name: r for r in repo.remotes}
    if not remotes and not (remote and _looks_like_url(remote)):
        raise UsageError(f"the repository at {root} has no remote",
                         hint="add one (git remote add origin URL) and push, or pass --remote URL")
    status = _status(repo)
    head_branch = status.get("branch.head")
    if head_branch == "(detached)":
        head_branch = None
    if status.get("branch.oid") in (None, "(initial)"):
        raise PreconditionError(f"the repository at {root} has no commits yet", hint="commit and push first")

    # which remote
    remote_name: str | None
    if remote and remote in remotes:
        remote_name, url = remote, None
    elif remote and _looks_like_url(remote):
        # a URL: use the remote that has it (so the pushed check works), else take it as given
        remote_name = next((n for n, r in remotes.items() if remote in r.urls), None)
        url = remote
    elif remote:
        raise UsageError(f"--remote {remote!r} is neither a remote of this repository nor a URL",
                         hint="known remotes: " + (", ".join(sorted(remotes)) or "none"))
    else:
        upstream_remote = _tracking_remote(repo, head_branch) if head_branch else None
        remote_name = upstream_remote or ("origin" if "origin" in remotes else sorted(remotes)[0])
        url = None
    if url is None:
        assert remote_name is not None
        urls = list(remotes[remote_name].urls)
        if not urls:
            raise UsageError(f"remote {remote_name!r} has no URL", hint=f"git remote set-url {remote_name} URL")
        url = urls[0]

    # which commit
    if ref is not None:
        commit = _resolve_ref(git, repo, ref, remote_name)
        out_branch = branch
    elif branch is not None:
        if remote_name is None:
            return _from_remote_only(git, url, ref=None, branch=branch, root=root)
        commit = _resolve_ref(git, repo, f"refs/remotes/{remote_name}/{branch}", remote_name, shown=branch)
        out_branch = branch
    else:
        if head_branch is None:
            raise PreconditionError(
                f"HEAD is detached at {status['branch.oid'][:12]}",
                hint="check out a branch, or pass --ref HEAD (or a SHA) to launch this exact commit")
        if not allow_dirty and status.get("dirty"):
            raise PreconditionError(
                f"you have uncommitted changes to tracked files ({status['dirty']})",
                hint="commit and push them, or pass --allow-dirty to launch the last commit anyway")
        commit = status["branch.oid"]
        up = status.get("branch.upstream")
        out_branch = up.split("/", 1)[1] if up and "/" in up and up.split("/", 1)[0] == remote_name else head_branch
        upstream_has_it = up and status.get("ahead") == 0 and up.split("/", 1)[0] == remote_name
        if remote_name is not None and not upstream_has_it:
            _require_on_remote(repo, commit, remote_name, head_branch)
        return GitState(remote_url=clean_remote_url(url, root), commit=commit, branch=out_branch,
                        repo_root=root, remote_name=remote_name)
    if remote_name is not None:
        _require_on_remote(repo, commit, remote_name, None)
    return GitState(remote_url=clean_remote_url(url, root), commit=commit, branch=out_branch,
                    repo_root=root, remote_name=remote_name)


def _status(repo: Any) -> dict[str, Any]:
    """One `git status --porcelain=v2 --branch`: HEAD oid/name, upstream, ahead count, dirtiness."""
    out = repo.git.status("--porcelain=v2", "--branch", "--untracked-files=no", "--ignore-submodules=dirty")
    info: dict[str, Any] = {}
    changed: list[str] = []
    for line in out.splitlines():
        if line.startswith("# branch.ab "):
            ahead, _behind = line[len("# branch.ab "):].split()
            info["ahead"] = int(ahead)
        elif line.startswith("# "):
            key, _, value = line[2:].partition(" ")
            info[key] = value
        elif line:
            changed.append(line.split(" ")[-1].split("\t")[0])
    if changed:
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        info["dirty"] = shown
    return info


def _tracking_remote(repo: Any, branch: str) -> str | None:
    try:
        return repo.config_reader().get_value(f'branch "{branch}"', "remote", None) or None
    except Exception:  # noqa: BLE001 - no tracking configured
        return None


def _resolve_ref(git: Any, repo: Any, ref: str, remote_name: str | None, shown: str | None = None) -> str:
    """A full SHA for `ref` from the local repository (a short SHA becomes the full SHA)."""
    try:
        sha = repo.git.rev_parse("--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}").strip()
    except git.GitCommandError:
        sha = ""
    if FULL_SHA.fullmatch(sha):
        return sha
    name = shown or ref
    if shown is not None:
        raise UsageError(f"--branch {name!r} is not on remote {remote_name!r}",
                         hint=f"push it (git push {remote_name} {name}) or run git fetch {remote_name}")
    if FULL_SHA.fullmatch(ref.lower()):
        raise UsageError(f"--ref {ref!r} is not in this repository",
                         hint=f"run git fetch {remote_name or 'origin'}, or check the SHA")
    raise UsageError(f"--ref {name!r} is not a known branch, tag or commit",
                     hint=f"check the name, or run git fetch {remote_name or 'origin'}")


def _require_on_remote(repo: Any, commit: str, remote_name: str, branch: str | None) -> None:
    """Refuse a commit that no remote-tracking branch of `remote_name` contains."""
    out = repo.git.for_each_ref("--contains", commit, "--count=1", "--format=%(refname)",
                                f"refs/remotes/{remote_name}/")
    if out.strip():
        return
    push = f"git push {remote_name} {branch}" if branch else f"git push {remote_name} HEAD:BRANCH"
    raise PreconditionError(
        f"commit {commit[:12]} is not on remote {remote_name!r}, so the job could not fetch it",
        hint=f"push it ({push}); if it is already pushed, run git fetch {remote_name}")


def _from_remote_only(git: Any, url: str, *, ref: str | None, branch: str | None,
                      root: str | None = None) -> GitState:
    """--remote URL outside a repository (or a URL remote): resolve the ref with `git ls-remote`."""
    if ref is not None and FULL_SHA.fullmatch(ref.lower()):
        return GitState(remote_url=clean_remote_url(url, root), commit=ref.lower(), branch=branch,
                        repo_root=root)
    wanted = ref or branch
    assert wanted is not None
    try:
        out = git.Git().ls_remote(url, wanted, kill_after_timeout=60)
    except git.GitCommandError as e:
        msg = (e.stderr or "").strip().splitlines()
        raise PreconditionError(f"cannot read remote {url!r}: {msg[-1] if msg else e}",
                                hint="check the URL and your access to it") from None
    lines = [line.split("\t") for line in out.splitlines() if "\t" in line]
    exact = [sha for sha, name in lines if name in (wanted, f"refs/heads/{wanted}", f"refs/tags/{wanted}^{{}}",
                                                    f"refs/tags/{wanted}")]
    if not exact:
        flag = "--ref" if ref else "--branch"
        raise UsageError(f"{flag} {wanted!r} is not on remote {url!r}",
                         hint="give a branch or tag name that exists there, or a full 40-character SHA")
    return GitState(remote_url=clean_remote_url(url, root), commit=exact[-1], branch=branch, repo_root=root)
