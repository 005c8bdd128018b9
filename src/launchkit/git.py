"""Read the local repository's state with plain `git` calls. I/O lives here, not in launchkit.core.

One reader for every case: the root (`rev-parse`), the remotes, HEAD and its branch, the upstream
(`for-each-ref`), the remote's URL with insteadOf applied (`ls-remote --get-url`, no network), refs
resolved by git's own `rev-parse`, the changes from one `git status`.
Offline: the pushed check trusts the remote-tracking refs from your last push or fetch.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from launchkit.core.gitstate import GitState
from launchkit.core.remoteurl import is_url, job_remote, strip_credentials
from launchkit.errors import PreconditionError, UsageError

FULL_SHA = re.compile(r"[0-9a-f]{40}")
NULL_SHA = "0" * 40
REF_OR_BRANCH = "pass --ref to launch a commit or --branch to launch a branch's pushed tip, not both"


def _git(*args: str, cwd: str, timeout: float = 60) -> str:
    """git's output; a failure raises _GitFailed (a PreconditionError naming the call)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", *args], check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
        )
    except FileNotFoundError:
        raise PreconditionError("git is not installed", hint="install git and try again") from None
    except subprocess.TimeoutExpired:
        raise PreconditionError(
            f"`git {args[0]}` took longer than {timeout:.0f}s", hint="check the repository or the remote"
        ) from None
    if proc.returncode != 0:
        raise _GitFailed(args[0], proc.stderr.strip())
    return proc.stdout


class _GitFailed(PreconditionError):
    def __init__(self, command: str, stderr: str):
        lines = stderr.splitlines()
        super().__init__(f"`git {command}` failed: {lines[-1] if lines else 'no message'}")
        self.stderr = stderr


@dataclass(frozen=True)
class Repo:
    """The checkout being launched: its work tree's root and its remotes' names."""

    root: str
    remotes: list[str]

    def sha(self, ref: str) -> str | None:
        """The commit `ref` names (a branch, tag, short or full SHA, `HEAD~2`, ...), or None."""
        try:
            out = _git("rev-parse", "--verify", "-q", "--end-of-options", f"{ref}^{{commit}}", cwd=self.root)
        except _GitFailed:
            return None
        return out.strip() or None

    def branch(self) -> str | None:
        """HEAD's branch (`feature/x`), or None when HEAD is detached."""
        try:
            return _git("symbolic-ref", "-q", "--short", "HEAD", cwd=self.root).strip() or None
        except _GitFailed:
            return None


def _open_repo(path: str) -> Repo | None:
    """The checkout containing `path` (any subdirectory), or None outside a work tree."""
    try:
        out = _git("rev-parse", "--is-bare-repository", "--is-inside-git-dir", "--show-toplevel", cwd=path)
    except _GitFailed:
        return None
    lines = out.splitlines()
    if len(lines) != 3 or lines[:2] != ["false", "false"]:
        return None  # a bare repository, or inside .git
    return Repo(lines[2], _git("remote", cwd=lines[2]).split())


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
    repository without a remote, a commit the remote does not have, and SSH remotes of any host.
    """
    path = path or os.getcwd()
    repo = _open_repo(path) if os.path.isdir(path) else None
    if repo is None:
        if remote and is_url(remote) and (ref or branch):
            return _from_remote_only(remote, ref=ref, branch=branch, require_pushed=require_pushed)
        raise UsageError(
            f"{path!r} is not inside a git repository",
            hint="run launchkit from your project's checkout, or pass --remote URL with --ref/--branch",
        )
    return _read(
        repo, remote=remote, ref=ref, branch=branch, allow_dirty=allow_dirty, require_pushed=require_pushed
    )


def _read(
    repo: Repo,
    *,
    remote: str | None,
    ref: str | None,
    branch: str | None,
    allow_dirty: bool,
    require_pushed: bool,
) -> GitState:
    root = repo.root
    names = repo.remotes
    url_given = bool(remote and is_url(remote))
    if not names and not url_given and not require_pushed:
        remote, url_given = root, True  # nothing to push to: the job clones from the checkout itself
    if not names and not url_given:
        raise UsageError(
            f"the repository at {root} has no remote",
            hint="add one with `git remote add origin URL` and push, or pass --remote URL",
        )
    head = repo.sha("HEAD")
    if head is None:
        raise PreconditionError(f"the repository at {root} has no commits yet", hint="commit and push first")
    head_branch = repo.branch()
    up_remote, up_branch = _upstream(repo, head_branch) if head_branch else (None, None)

    # which remote
    remote_name: str | None
    url: str | None = None
    if remote and remote in names:
        remote_name = remote
    elif remote and url_given:
        # a URL: use the remote that has it (so the pushed check works), else take it as given
        remote_name = next((n for n in names if _fetch_url(repo, n) == remote), None)
        url = remote
    elif remote:
        raise UsageError(
            f"--remote {remote!r} is neither a remote of this repository nor a URL",
            hint="known remotes: " + (", ".join(sorted(names)) or "none"),
        )
    else:
        remote_name = up_remote or ("origin" if "origin" in names else min(names))
    if url is None:
        assert remote_name is not None
        url = _fetch_url(repo, remote_name)
    state: dict[str, object] = {"repo_root": root, "remote_name": remote_name}
    state.update(_job_remote(url, remote_name, root, require_pushed))

    # which commit
    if ref is not None:
        commit = _resolve_ref(repo, ref, remote_name)
        if branch is not None:
            _require_branch_tip(repo, ref, commit, branch, remote_name, url)
    elif branch is not None:
        if remote_name is None:
            return _from_remote_only(url, ref=None, branch=branch, root=root, require_pushed=require_pushed)
        commit = _resolve_ref(repo, f"refs/remotes/{remote_name}/{branch}", remote_name, shown=branch)
    else:
        if head_branch is None:
            raise PreconditionError(
                f"HEAD is detached at {head[:12]}",
                hint="check out a branch, or pass --ref HEAD (or a SHA) to launch this exact commit",
            )
        dirty, untracked = _status(root)
        if dirty and not allow_dirty:
            raise PreconditionError(
                f"you have uncommitted changes to tracked files ({_some(dirty)})",
                hint="commit and push them, or pass --allow-dirty to launch the last commit anyway",
            )
        on_upstream = up_branch is not None and up_remote == remote_name
        pushed = on_upstream and repo.sha(f"refs/remotes/{remote_name}/{up_branch}") == head
        if require_pushed and remote_name is not None and not pushed:
            _require_on_remote(root, head, remote_name, head_branch)
        return _state(
            commit=head, branch=up_branch if on_upstream else head_branch, untracked=untracked, **state
        )
    if require_pushed and remote_name is not None:
        _require_on_remote(root, commit, remote_name, None)
    return _state(commit=commit, branch=branch, **state)


# `git describe` as setuptools-scm, hatch-vcs and versioneer ask it (launchkit.pyenv.version_tag)
DESCRIBE = ("describe", "--tags", "--long", "--match", "*[0-9]*", "HEAD")


def _version_tag(root: str, described: str | None) -> tuple[str, str, int] | None:
    """(tag, tagged commit, commits since) from DESCRIBE's output; None without a version tag."""
    tag, _, distance = (described or "").strip().rpartition("-")[0].rpartition("-")
    if not tag or not distance.isdigit():
        return None
    try:
        tagged = _git("rev-parse", "--verify", "-q", f"refs/tags/{tag}^{{commit}}", cwd=root).strip()
    except PreconditionError:
        return None
    return (tag, tagged, int(distance)) if tagged else None


def _state(**fields: object) -> GitState:
    root = fields.get("repo_root")
    if "tag_read" not in fields and isinstance(root, str):  # the version tag, read once with the state
        try:
            described: str | None = _git(*DESCRIBE[:-1], str(fields["commit"]), cwd=root)
        except PreconditionError:
            described = None
        fields.update(version_tag=_version_tag(root, described), tag_read=True)
    return GitState(**fields)  # type: ignore[arg-type]


def _job_remote(
    url: str, remote_name: str | None, root: str | None, require_pushed: bool
) -> dict[str, object]:
    """remote_url and github_repo of the state; an SSH remote a job cannot use is refused here."""
    job = job_remote(url)
    if job.ssh_host is not None and require_pushed:
        shown = strip_credentials(url)
        if remote_name is None:
            raise UsageError(
                f"--remote {shown!r} is SSH and jobs have no SSH keys",
                hint=f"pass an https URL instead, e.g. --remote {job.https_guess}",
            )
        raise PreconditionError(
            f"remote {remote_name!r} is SSH ({shown}) and jobs have no SSH keys, so they could not clone it",
            hint=f"use https: git remote set-url {remote_name} {job.https_guess} "
            f"(or pass --remote {job.https_guess}), with --git-token-secret for a private repository",
        )
    return {"remote_url": _absolute_local_path(job.url, root), "github_repo": job.github_repo}


def _absolute_local_path(url: str, root: str | None) -> str:
    """A remote given as a path relative to the checkout, made absolute (the job runs elsewhere)."""
    if root is None or is_url(url) or os.path.isabs(url):
        return url
    if url.startswith(".") or os.path.exists(os.path.join(root, url)):
        return os.path.normpath(os.path.join(root, url))
    return url


def _upstream(repo: Repo, branch: str) -> tuple[str | None, str | None]:
    """(remote, branch) of `branch`'s upstream, e.g. `origin/feature/x` -> ("origin", "feature/x")."""
    out = _git(
        "for-each-ref", "--format=%(upstream:remotename)%00%(upstream)", f"refs/heads/{branch}", cwd=repo.root
    )
    remote, _, upstream = out.strip().partition("\0")
    prefix = f"refs/remotes/{remote}/"
    if remote not in repo.remotes or not upstream.startswith(prefix):
        return None, None  # no upstream, or a local branch's
    return remote, upstream[len(prefix) :]


def _fetch_url(repo: Repo, remote_name: str) -> str:
    """The remote's fetch URL with insteadOf applied."""
    url = _git("ls-remote", "--get-url", remote_name, cwd=repo.root).strip()
    if not url or url == remote_name:  # git answers with the name when the remote has no URL
        raise PreconditionError(
            f"remote {remote_name!r} has no URL",
            hint=f"set one with `git remote set-url {remote_name} URL`",
        )
    return url


def _status(root: str) -> tuple[list[str], tuple[str, ...]]:
    """Changed tracked paths and untracked (not ignored) paths, from one `git status`."""
    out = _git(
        "status",
        "--porcelain",
        "-z",
        "--no-renames",
        "--untracked-files=normal",
        "--ignore-submodules=dirty",
        cwd=root,
    )
    dirty: list[str] = []
    untracked: list[str] = []
    for entry in out.split("\0"):
        if entry:
            (untracked if entry.startswith("??") else dirty).append(entry[3:])
    return dirty, tuple(untracked)


def _some(paths: list[str]) -> str:
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _resolve_ref(repo: Repo, ref: str, remote_name: str | None, shown: str | None = None) -> str:
    """A full SHA for `ref` (branch, tag, short or full SHA, `HEAD~2`, ...) of the local repository."""
    sha = _commit_of(repo, ref)
    if sha is not None:
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


def _commit_of(repo: Repo, ref: str) -> str | None:
    sha = repo.sha(ref)  # tags are peeled to their commit
    return None if sha == NULL_SHA else sha


def _require_branch_tip(
    repo: Repo, ref: str, commit: str, branch: str, remote_name: str | None, url: str
) -> None:
    """--ref with --branch: the ref must be what --branch launches, or the label would lie."""
    if remote_name is None:
        tip = _from_remote_only(url, ref=None, branch=branch, root=repo.root).commit
    else:
        tip = _resolve_ref(repo, f"refs/remotes/{remote_name}/{branch}", remote_name, shown=branch)
    if tip != commit:
        raise UsageError(
            f"--ref {ref!r} ({commit[:12]}) is not the tip of --branch {branch!r} ({tip[:12]})",
            hint=REF_OR_BRANCH,
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


def _from_remote_only(
    url: str,
    *,
    ref: str | None,
    branch: str | None,
    root: str | None = None,
    require_pushed: bool = True,
) -> GitState:
    """--remote URL without a local clone of it: resolve the ref with `git ls-remote` (network)."""
    state: dict[str, object] = {"repo_root": root, **_job_remote(url, None, root, require_pushed)}
    if ref is not None and FULL_SHA.fullmatch(ref.lower()):
        commit = ref.lower()
        if branch is not None:
            tip = _ls_remote(url, branch, "--branch", root)
            if tip != commit:
                raise UsageError(
                    f"--ref {ref!r} is not the tip of --branch {branch!r} ({tip[:12]})",
                    hint=REF_OR_BRANCH,
                )
        return _state(commit=commit, branch=branch, **state)
    if ref is not None and branch is not None:
        commit = _ls_remote(url, ref, "--ref", root)
        if _ls_remote(url, branch, "--branch", root) != commit:
            raise UsageError(
                f"--ref {ref!r} ({commit[:12]}) is not the tip of --branch {branch!r}",
                hint=REF_OR_BRANCH,
            )
        return _state(commit=commit, branch=branch, **state)
    wanted, flag = (ref, "--ref") if ref is not None else (branch, "--branch")
    assert wanted is not None
    return _state(commit=_ls_remote(url, wanted, flag, root), branch=branch, **state)


def _ls_remote(url: str, wanted: str, flag: str, root: str | None) -> str:
    """The SHA `wanted` (a branch or tag name) has on the remote at `url`."""
    shown = strip_credentials(url)  # never echo credentials embedded in the URL
    try:
        out = _git("ls-remote", "--", url, wanted, cwd=root or os.getcwd())
    except _GitFailed as e:
        lines = e.stderr.replace(url, shown).splitlines()
        raise PreconditionError(
            f"cannot read remote {shown!r}: {lines[-1] if lines else 'git ls-remote failed'}",
            hint="check the URL and your access to it",
        ) from None
    names = (wanted, f"refs/heads/{wanted}", f"refs/tags/{wanted}", f"refs/tags/{wanted}^{{}}")
    exact = [sha for sha, _, name in (line.partition("\t") for line in out.splitlines()) if name in names]
    if not exact:
        raise UsageError(
            f"{flag} {wanted!r} is not on remote {shown!r}",
            hint="give a branch or tag name that exists there, or a full 40-character SHA",
        )
    return exact[-1]
