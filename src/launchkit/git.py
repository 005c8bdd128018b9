"""Read the local repository's state by running `git` itself. I/O lives here, not in launchkit.core.

`run --dry-run` has a ~180 ms budget and `import git` (GitPython) alone costs ~40 ms, while every
question asked here is one plumbing command, so this module calls the git CLI directly (no network).
The fast path, from a branch that tracks a pushed upstream, is three calls that `prefetch()` starts
in parallel while Python is still importing: `rev-parse --show-toplevel`, `remote -v` (URLs with
insteadOf applied) and ONE `status --porcelain=v2 --branch` (HEAD, upstream, ahead count,
dirtiness). Only when HEAD is ahead of (or has no) upstream do we ask which remote-tracking
branches contain it. Offline: the pushed check trusts the remote-tracking refs from your last push
or fetch.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from launchkit.errors import PreconditionError, UsageError

if TYPE_CHECKING:
    from launchkit.core.gitstate import GitState

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


class _GitFailed(Exception):
    def __init__(self, stderr: str):
        super().__init__(stderr)
        self.stderr = stderr


def _env() -> dict[str, str]:
    return {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


def _git(*args: str, cwd: str, timeout: float = 60) -> str:
    try:
        proc = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env()
        )
    except FileNotFoundError:
        raise PreconditionError("git is not installed", hint="install git and try again") from None
    except subprocess.TimeoutExpired:
        raise PreconditionError(
            f"`git {args[0]}` took longer than {timeout:.0f}s", hint="check the repository or the remote"
        ) from None
    if proc.returncode != 0:
        raise _GitFailed(proc.stderr.strip())
    return proc.stdout


# The fast-path questions, asked from the working directory (all three work from any subdirectory).
_FAST: dict[str, tuple[str, ...]] = {
    "toplevel": ("rev-parse", "--show-toplevel"),
    "remotes": ("remote", "-v"),
    "status": ("status", "--porcelain=v2", "--branch", "--untracked-files=no", "--ignore-submodules=dirty"),
}
_prefetched: dict[tuple[str, str], subprocess.Popen[str]] = {}


def prefetch(cwd: str | None = None) -> None:
    """Start the fast-path git calls in the background (they run while Python imports)."""
    cwd = cwd or os.getcwd()
    try:
        for name, args in _FAST.items():
            _prefetched[(name, cwd)] = subprocess.Popen(
                ["git", *args],
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(),
                stdin=subprocess.DEVNULL,
            )
    except OSError:  # no git: the normal path reports it
        reap()


def reap() -> None:
    """Wait for prefetched calls nobody consumed (so no git process outlives launchkit)."""
    while _prefetched:
        _, proc = _prefetched.popitem()
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def _fast(name: str, cwd: str) -> str:
    proc = _prefetched.pop((name, cwd), None)
    if proc is None:
        return _git(*_FAST[name], cwd=cwd)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise PreconditionError(
            f"`git {_FAST[name][0]}` took longer than 60s", hint="check the repository"
        ) from None
    if proc.returncode != 0:
        raise _GitFailed(err.strip())
    return out


@dataclass
class _Repo:
    root: str
    cwd: str
    urls: dict[str, str]  # remote name -> fetch URL (insteadOf applied)

    @property
    def remotes(self) -> list[str]:
        return list(self.urls)


def _open_repo(path: str) -> _Repo | None:
    try:
        root = _fast("toplevel", path).strip()
    except _GitFailed:
        return None
    if not root:  # inside .git or a bare repository
        return None
    urls: dict[str, str] = {}
    for line in _fast("remotes", path).splitlines():
        name, _, rest = line.partition("\t")
        url, _, kind = rest.rpartition(" ")
        if kind == "(fetch)":
            urls.setdefault(name, url)
    return _Repo(root, path, urls)


def read_git_state(
    path: str | None = None,
    *,
    remote: str | None = None,
    ref: str | None = None,
    branch: str | None = None,
    allow_dirty: bool = False,
    require_pushed: bool = True,
) -> GitState:
    """The commit to launch and where a job can fetch it from. Raises one-line errors with a fix.

    `require_pushed=False` (the local backend, which clones from the checkout itself) accepts a
    repository without a remote and a commit the remote does not have.
    """
    path = path or os.getcwd()
    repo = _open_repo(path) if os.path.isdir(path) else None
    if repo is None:
        if remote and _looks_like_url(remote) and (ref or branch):
            return _from_remote_only(remote, ref=ref, branch=branch)
        raise UsageError(
            f"{path!r} is not inside a git repository",
            hint="run launchkit from your project's checkout, or pass --remote URL with --ref/--branch",
        )
    try:
        return _read(
            repo,
            remote=remote,
            ref=ref,
            branch=branch,
            allow_dirty=allow_dirty,
            require_pushed=require_pushed,
        )
    finally:
        reap()


def _looks_like_url(remote: str) -> bool:
    return bool(_URL_SCHEME.match(remote) or _SCP_LIKE.match(remote) or os.path.isabs(remote))


def _read(
    repo: _Repo,
    *,
    remote: str | None,
    ref: str | None,
    branch: str | None,
    allow_dirty: bool,
    require_pushed: bool = True,
) -> GitState:
    root = repo.root
    if not repo.remotes and not (remote and _looks_like_url(remote)) and not require_pushed:
        remote = root  # nothing to push to: the job clones from the checkout itself
    if not repo.remotes and not (remote and _looks_like_url(remote)):
        raise UsageError(
            f"the repository at {root} has no remote",
            hint="add one with `git remote add origin URL` and push, or pass --remote URL",
        )
    status = _status(repo)
    head_branch = status.get("branch.head")
    if head_branch == "(detached)":
        head_branch = None
    if status.get("branch.oid") in (None, "(initial)"):
        raise PreconditionError(f"the repository at {root} has no commits yet", hint="commit and push first")

    # which remote
    remote_name: str | None
    url: str | None = None
    if remote and remote in repo.remotes:
        remote_name = remote
    elif remote and _looks_like_url(remote):
        # a URL: use the remote that has it (so the pushed check works), else take it as given
        remote_name = next((n for n, u in repo.urls.items() if u == remote), None)
        url = remote
    elif remote:
        raise UsageError(
            f"--remote {remote!r} is neither a remote of this repository nor a URL",
            hint="known remotes: " + (", ".join(sorted(repo.remotes)) or "none"),
        )
    else:
        upstream_remote = _upstream(repo, status)[0]
        remote_name = upstream_remote or ("origin" if "origin" in repo.urls else min(repo.urls))
    if url is None:
        assert remote_name is not None
        url = repo.urls[remote_name]

    # which commit
    if ref is not None:
        commit = _resolve_ref(root, ref, remote_name)
        out_branch = branch
    elif branch is not None:
        if remote_name is None:
            return _from_remote_only(url, ref=None, branch=branch, root=root)
        commit = _resolve_ref(root, f"refs/remotes/{remote_name}/{branch}", remote_name, shown=branch)
        out_branch = branch
    else:
        if head_branch is None:
            raise PreconditionError(
                f"HEAD is detached at {status['branch.oid'][:12]}",
                hint="check out a branch, or pass --ref HEAD (or a SHA) to launch this exact commit",
            )
        if not allow_dirty and status.get("dirty"):
            raise PreconditionError(
                f"you have uncommitted changes to tracked files ({status['dirty']})",
                hint="commit and push them, or pass --allow-dirty to launch the last commit anyway",
            )
        commit = status["branch.oid"]
        up_remote, up_branch = _upstream(repo, status)
        on_upstream = up_branch is not None and up_remote == remote_name
        out_branch = up_branch if on_upstream else head_branch
        if require_pushed and remote_name is not None and not (on_upstream and status.get("ahead") == 0):
            _require_on_remote(root, commit, remote_name, head_branch)
        return _state(
            remote_url=clean_remote_url(url, root),
            commit=commit,
            branch=out_branch,
            repo_root=root,
            remote_name=remote_name,
        )
    if require_pushed and remote_name is not None:
        _require_on_remote(root, commit, remote_name, None)
    return _state(
        remote_url=clean_remote_url(url, root),
        commit=commit,
        branch=out_branch,
        repo_root=root,
        remote_name=remote_name,
    )


def _state(**fields: object) -> GitState:
    from launchkit.core.gitstate import GitState

    return GitState(**fields)  # type: ignore[arg-type]


def _upstream(repo: _Repo, status: dict[str, object]) -> tuple[str | None, str | None]:
    """(remote, branch) of the upstream, e.g. `origin/feature/x` -> ("origin", "feature/x")."""
    up = str(status.get("branch.upstream") or "")
    for name in sorted(repo.urls, key=len, reverse=True):
        if up.startswith(name + "/"):
            return name, up[len(name) + 1 :]
    return None, None


def _status(repo: _Repo) -> dict[str, object]:
    """One `git status --porcelain=v2 --branch`: HEAD oid/name, upstream, ahead count, dirtiness."""
    out = _fast("status", repo.cwd)
    info: dict[str, object] = {}
    changed: list[str] = []
    for line in out.splitlines():
        if line.startswith("# branch.ab "):
            info["ahead"] = int(line.split()[2])
        elif line.startswith("# "):
            key, _, value = line[2:].partition(" ")
            info[key] = value
        elif line:
            changed.append(line.split(" ")[-1].split("\t")[0])
    if changed:
        info["dirty"] = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return info


def _resolve_ref(root: str, ref: str, remote_name: str | None, shown: str | None = None) -> str:
    """A full SHA for `ref` from the local repository (a short SHA becomes the full SHA)."""
    try:
        sha = _git(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", cwd=root
        ).strip()
    except _GitFailed:
        sha = ""
    if FULL_SHA.fullmatch(sha):
        return sha
    fetch = f"git fetch {remote_name or 'origin'}"
    if shown is not None:
        raise UsageError(
            f"--branch {shown!r} is not on remote {remote_name!r}",
            hint=f"push it (git push {remote_name} {shown}) or run {fetch}",
        )
    if FULL_SHA.fullmatch(ref.lower()):
        raise UsageError(f"--ref {ref!r} is not in this repository", hint=f"run {fetch}, or check the SHA")
    raise UsageError(
        f"--ref {ref!r} is not a known branch, tag or commit", hint=f"check the name, or run {fetch}"
    )


def _require_on_remote(root: str, commit: str, remote_name: str, branch: str | None) -> None:
    """Refuse a commit that no remote-tracking branch of `remote_name` contains."""
    out = _git(
        "for-each-ref",
        "--contains",
        commit,
        "--count=1",
        "--format=%(refname)",
        f"refs/remotes/{remote_name}/",
        cwd=root,
    )
    if out.strip():
        return
    push = f"git push {remote_name} {branch}" if branch else f"git push {remote_name} HEAD:BRANCH"
    raise PreconditionError(
        f"commit {commit[:12]} is not on remote {remote_name!r}, so the job could not fetch it",
        hint=f"push it ({push}); if it is already pushed, run git fetch {remote_name}",
    )


def _from_remote_only(url: str, *, ref: str | None, branch: str | None, root: str | None = None) -> GitState:
    """--remote URL without a local clone of it: resolve the ref with `git ls-remote` (network)."""
    if ref is not None and FULL_SHA.fullmatch(ref.lower()):
        return _state(
            remote_url=clean_remote_url(url, root), commit=ref.lower(), branch=branch, repo_root=root
        )
    wanted = ref or branch
    assert wanted is not None
    try:
        out = _git("ls-remote", "--", url, wanted, cwd=root or os.getcwd())
    except _GitFailed as e:
        shown = clean_remote_url(url)  # never echo credentials embedded in the URL
        lines = e.stderr.replace(url, shown).splitlines()
        raise PreconditionError(
            f"cannot read remote {shown!r}: {lines[-1] if lines else 'git ls-remote failed'}",
            hint="check the URL and your access to it",
        ) from None
    names = (wanted, f"refs/heads/{wanted}", f"refs/tags/{wanted}", f"refs/tags/{wanted}^{{}}")
    exact = [sha for sha, _, name in (line.partition("\t") for line in out.splitlines()) if name in names]
    if not exact:
        flag = "--ref" if ref else "--branch"
        raise UsageError(
            f"{flag} {wanted!r} is not on remote {clean_remote_url(url)!r}",
            hint="give a branch or tag name that exists there, or a full 40-character SHA",
        )
    return _state(remote_url=clean_remote_url(url, root), commit=exact[-1], branch=branch, repo_root=root)
