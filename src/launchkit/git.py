"""Read the local repository's state. I/O lives here, not in launchkit.core.

One reader, through GitPython (imported inside the functions that need it: `--help` never loads it):
its Repo, refs and config readers for HEAD, the branch, its upstream and the remotes, and `repo.git`
for what GitPython only exposes as git commands (`status`, `describe`, `for-each-ref --contains`,
`ls-remote`). GitPython reads refs and .git/config as UTF-8 only: what is not is explained (_not_utf8).
Offline: the pushed check trusts the remote-tracking refs from your last push or fetch.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from launchkit.core.gitstate import GitState
from launchkit.core.remoteurl import is_url, job_remote, strip_credentials
from launchkit.errors import PreconditionError, UsageError

if TYPE_CHECKING:
    from git import Git, Repo


FULL_SHA = re.compile(r"[0-9a-f]{40}")
NULL_SHA = "0" * 40
REF_OR_BRANCH = "pass --ref to launch a commit or --branch to launch a branch's pushed tip, not both"


def _no_gitpython(e: ImportError) -> PreconditionError:
    """GitPython's import failed: no git on PATH (GitPython refuses to import then), or a broken install.
    GitPython is imported where it is used: it runs `git version` at import (35-70 ms)."""
    said = (str(e).strip() or type(e).__name__).splitlines()[0]
    if "git executable" in said:
        return PreconditionError("git is not installed", hint="install git and try again")
    return PreconditionError(f"GitPython cannot start: {said}", hint="install git and try again")


def _git(runner: Git, command: str, *args: str, timeout: float = 60) -> str:
    """`git COMMAND ARGS` through GitPython, its output kept as git printed it (bytes that are not
    UTF-8 as surrogateescape keeps them; refused where they would enter a spec, in _state)."""
    from git import GitCommandNotFound

    try:
        status, out, err = getattr(runner, command.replace("-", "_"))(  # GitPython's `git.<command>(...)`
            *args,
            with_extended_output=True,
            with_exceptions=False,
            kill_after_timeout=timeout,  # killed then: status is not 0, stderr says so
            env={"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
        )
    except GitCommandNotFound:
        raise PreconditionError("git is not installed", hint="install git and try again") from None
    if status != 0:
        raise _unsafe(err) or _GitFailed(command, err.strip())
    return str(out)


def _unsafe(stderr: str) -> PreconditionError | None:
    """git's refusal of a repository another user owns (safe.directory), with git's own fix."""
    lines = [line.strip() for line in stderr.splitlines()]
    said = next((line for line in lines if "detected dubious ownership" in line), None)
    if said is None:
        return None
    fix = next((line for line in lines if line.startswith("git config --global --add safe.directory")), None)
    return PreconditionError(
        said.removeprefix("fatal: ").removeprefix("error: "),
        hint=f"if you trust its owner: {fix}" if fix else "see `git help config` (safe.directory)",
    )


class _GitFailed(PreconditionError):
    def __init__(self, command: str, stderr: str):
        lines = stderr.splitlines()
        super().__init__(f"`git {command}` failed: {lines[-1] if lines else 'no message'}")
        self.stderr = stderr


def _open_repo(path: str) -> Repo | None:
    """The checkout containing `path` (any subdirectory), or None outside a work tree."""
    try:
        from git import InvalidGitRepositoryError, NoSuchPathError, Repo
    except ImportError as e:
        raise _no_gitpython(e) from None
    try:
        repo = Repo(path, search_parent_directories=True)
    except (InvalidGitRepositoryError, NoSuchPathError):
        return None
    if repo.bare or repo.working_tree_dir is None or _inside_git_dir(path, str(repo.git_dir)):
        repo.close()
        return None
    return repo


def _inside_git_dir(path: str, git_dir: str) -> bool:
    real = os.path.realpath(path)
    return os.path.commonpath([real, os.path.realpath(git_dir)]) == os.path.realpath(git_dir)


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
    with repo:
        try:
            return _read(
                repo,
                remote=remote,
                ref=ref,
                branch=branch,
                allow_dirty=allow_dirty,
                require_pushed=require_pushed,
            )
        except UnicodeDecodeError:  # GitPython reads refs and .git/config as UTF-8 only
            raise _not_utf8(repo) from None


def _shown(text: str) -> str:
    """Text decoded with surrogateescape, its undecodable bytes as \\xNN."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _not_utf8_branch(name: str) -> PreconditionError:
    return PreconditionError(
        f"branch '{_shown(name)}' is not UTF-8 text, and Beaker specs are",
        hint="rename it (git branch -m NEW_NAME) and push it",
    )


def _not_utf8(repo: Repo) -> PreconditionError:
    """What in the repository is not UTF-8, when GitPython could not read it."""
    root = str(repo.working_tree_dir)
    try:
        head = _git(repo.git, "symbolic-ref", "-q", "--short", "HEAD").strip()
    except PreconditionError:
        head = ""
    if not _is_utf8(head):
        return _not_utf8_branch(head)
    return PreconditionError(
        f"the repository at {_shown(root)} has a ref name or .git/config value that is not UTF-8 text",
        hint="rename it (git branch -m NEW_NAME, git remote rename OLD NEW)",
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
    root = str(repo.working_tree_dir)
    names = [r.name for r in repo.remotes]
    url_given = bool(remote and is_url(remote))
    if not names and not url_given and not require_pushed:
        remote, url_given = root, True  # nothing to push to: the job clones from the checkout itself
    if not names and not url_given:
        raise UsageError(
            f"the repository at {root} has no remote",
            hint="add one with `git remote add origin URL` and push, or pass --remote URL",
        )
    head = _sha_of(repo, "HEAD")
    if head is None:
        raise PreconditionError(f"the repository at {root} has no commits yet", hint="commit and push first")
    head_branch = None if repo.head.is_detached else repo.head.reference.name
    up_remote, up_branch = _upstream(repo, names) if head_branch else (None, None)

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
        dirty, untracked = _status(repo)
        if dirty and not allow_dirty:
            raise _dirty(dirty)
        on_upstream = up_branch is not None and up_remote == remote_name
        pushed = on_upstream and _sha_of(repo, f"refs/remotes/{remote_name}/{up_branch}") == head
        if require_pushed and remote_name is not None and not pushed:
            _require_on_remote(repo, head, remote_name, head_branch)
        return _state(
            repo.git,
            commit=head,
            branch=up_branch if on_upstream else head_branch,
            untracked=untracked,
            dirty=tuple(dirty),
            **state,
        )
    if require_pushed and remote_name is not None:
        _require_on_remote(repo, commit, remote_name, None)
    return _state(repo.git, commit=commit, branch=branch, **state)


# `git describe` as setuptools-scm, hatch-vcs and versioneer ask it (launchkit.pyenv.version_tag)
DESCRIBE = ("describe", "--tags", "--long", "--match", "*[0-9]*")


def _version_tag(runner: Git, described: str | None) -> tuple[str, str, int] | None:
    """(tag, tagged commit, commits since) from DESCRIBE's output; None without a version tag."""
    tag, _, distance = (described or "").strip().rpartition("-")[0].rpartition("-")
    if not tag or not distance.isdigit() or not _is_utf8(tag):  # a tag a spec cannot carry: none
        return None
    try:
        tagged = _git(runner, "rev-parse", "--verify", "-q", f"refs/tags/{tag}^{{commit}}").strip()
    except PreconditionError:
        return None
    return (tag, tagged, int(distance)) if tagged else None


def _state(runner: Git | None, **fields: object) -> GitState:
    """The GitState of `fields`, with the commit's version tag when there is a repository (`runner`)."""
    branch, url = fields.get("branch"), fields.get("remote_url")
    if isinstance(branch, str) and not _is_utf8(branch):
        raise _not_utf8_branch(branch)
    if isinstance(url, str) and url != fields.get("repo_root") and not _is_utf8(url):
        raise PreconditionError(
            f"the remote URL '{_shown(url)}' is not UTF-8 text, and Beaker specs are",
            hint="point the remote at a UTF-8 URL or path (git remote set-url NAME URL)",
        )
    if runner is not None:
        try:
            described: str | None = _git(runner, *DESCRIBE, str(fields["commit"]))
        except PreconditionError:
            described = None
        fields.update(version_tag=_version_tag(runner, described), tag_read=True)
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


def _sha_of(repo: Repo, ref_path: str) -> str | None:
    """The SHA a ref file (loose or packed) holds, read without running git; None if missing."""
    from git import SymbolicReference

    try:
        return SymbolicReference.dereference_recursive(repo, ref_path)
    except UnicodeDecodeError:  # GitPython reads packed-refs as UTF-8: another ref there is not
        try:
            return _git(repo.git, "rev-parse", "--verify", "-q", ref_path).strip() or None
        except _GitFailed:
            return None
    except ValueError:
        return None


def _upstream(repo: Repo, names: list[str]) -> tuple[str | None, str | None]:
    """(remote, branch) of HEAD's upstream, e.g. `origin/feature/x` -> ("origin", "feature/x")."""
    tracking = repo.head.reference.tracking_branch()
    if tracking is None:
        return None, None
    short = tracking.path.removeprefix("refs/remotes/")
    for name in sorted(names, key=len, reverse=True):
        if short.startswith(name + "/"):
            return name, short[len(name) + 1 :]
    return None, None


def _fetch_url(repo: Repo, remote_name: str) -> str:
    """The remote's fetch URL with insteadOf applied (GitPython asks `git remote get-url`)."""
    from git import GitCommandError

    try:
        # git answers a remote without a URL with its name
        url = next((url for url in repo.remote(remote_name).urls if url and url != remote_name), None)
    except GitCommandError:
        url = None
    if url is None:
        _git(repo.git, "rev-parse")  # git refusing the repository itself?
        raise _no_url(remote_name)
    return url


def _no_url(remote_name: str) -> PreconditionError:
    return PreconditionError(
        f"remote {remote_name!r} has no URL", hint=f"set one with `git remote set-url {remote_name} URL`"
    )


# `git status` as launchkit asks it. A submodule counts as changed when its checked-out commit
# differs from the recorded one or its tracked files have changes (the job gets the recorded commit);
# files untracked inside it do not count, as untracked files of the repository itself do not.
STATUS = ("--porcelain=v2", "-z", "--no-renames", "--untracked-files=normal", "--ignore-submodules=untracked")
SUBMODULE_CHANGED = "(a submodule with uncommitted changes)"


def _status(repo: Repo) -> tuple[list[str], tuple[str, ...]]:
    """Changed tracked paths and untracked (not ignored) paths, from one `git status` (GitPython's
    is_dirty and untracked_files run three git commands and do not tell a changed submodule apart)."""
    changes = _changes(_git(repo.git, "status", *STATUS))
    if changes is None:
        raise PreconditionError(
            "`git status` answered in a form launchkit does not know", hint="update git (2.11 or newer)"
        )
    dirty, untracked = changes
    return dirty, tuple(untracked)


def _changes(status: str) -> tuple[list[str], list[str]] | None:
    """(changed tracked paths, untracked paths) from STATUS's output (headers skipped); a submodule
    whose own files changed is marked SUBMODULE_CHANGED. None: an entry of an unknown kind."""
    dirty: list[str] = []
    untracked: list[str] = []
    for entry in status.split("\0"):
        if entry.startswith("? "):
            untracked.append(entry[2:])
        elif entry[:2] in ("1 ", "u "):  # changed tracked file: its path is the last field
            fields = entry.split(" ", 8 if entry[0] == "1" else 10)
            inside = fields[2].startswith("S") and fields[2][2] == "M"  # S<commit><modified><untracked>
            dirty.append(f"{fields[-1]} {SUBMODULE_CHANGED}" if inside else fields[-1])
        elif entry and not entry.startswith("# "):
            return None
    return dirty, untracked


def _dirty(dirty: list[str]) -> PreconditionError:
    subs = [d.removesuffix(f" {SUBMODULE_CHANGED}") for d in dirty if d.endswith(SUBMODULE_CHANGED)]
    if subs:
        many = len(subs) > 1
        return PreconditionError(
            f"submodule{'s' if many else ''} {_some(subs)} {'have' if many else 'has'} uncommitted "
            "changes, and a job gets only committed states",
            hint="commit them in the submodule, then the submodule here, and push both; "
            "or pass --allow-dirty to launch the last commit anyway",
        )
    return PreconditionError(
        f"you have uncommitted changes to tracked files ({_some(dirty)})",
        hint="commit and push them, or pass --allow-dirty to launch the last commit anyway",
    )


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
    from gitdb.exc import BadName, BadObject

    try:
        sha = repo.commit(ref).hexsha  # GitPython's own rev-parse; tags are peeled to their commit
    except (BadName, BadObject, ValueError, IndexError, TypeError):
        return None
    return None if sha == NULL_SHA else sha  # GitPython takes the all-zero SHA without a lookup


def _require_branch_tip(
    repo: Repo, ref: str, commit: str, branch: str, remote_name: str | None, url: str
) -> None:
    """--ref with --branch: the ref must be what --branch launches, or the label would lie."""
    if remote_name is None:
        tip = _from_remote_only(url, ref=None, branch=branch, root=str(repo.working_tree_dir)).commit
    else:
        tip = _resolve_ref(repo, f"refs/remotes/{remote_name}/{branch}", remote_name, shown=branch)
    if tip != commit:
        raise UsageError(
            f"--ref {ref!r} ({commit[:12]}) is not the tip of --branch {branch!r} ({tip[:12]})",
            hint=REF_OR_BRANCH,
        )


def _require_on_remote(repo: Repo, commit: str, remote_name: str, branch: str | None) -> None:
    """Refuse a commit that no remote-tracking branch of `remote_name` contains (one git command;
    GitPython's is_ancestor would run one per branch)."""
    out = _git(
        repo.git,
        "for-each-ref",
        "--contains",
        commit,
        "--count=1",
        "--format=%(refname)",
        f"refs/remotes/{remote_name}/",
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
    try:
        from git import Git
    except ImportError as e:
        raise _no_gitpython(e) from None
    runner = Git(root or os.getcwd())
    in_repo = runner if root is not None else None  # the version tag, where the commit may be
    if ref is not None and FULL_SHA.fullmatch(ref.lower()):
        commit = ref.lower()
        if branch is not None:
            tip = _ls_remote(runner, url, branch, "--branch")
            if tip != commit:
                raise UsageError(
                    f"--ref {ref!r} is not the tip of --branch {branch!r} ({tip[:12]})",
                    hint=REF_OR_BRANCH,
                )
        return _state(in_repo, commit=commit, branch=branch, **state)
    if ref is not None and branch is not None:
        commit = _ls_remote(runner, url, ref, "--ref")
        if _ls_remote(runner, url, branch, "--branch") != commit:
            raise UsageError(
                f"--ref {ref!r} ({commit[:12]}) is not the tip of --branch {branch!r}",
                hint=REF_OR_BRANCH,
            )
        return _state(in_repo, commit=commit, branch=branch, **state)
    wanted, flag = (ref, "--ref") if ref is not None else (branch, "--branch")
    assert wanted is not None
    return _state(in_repo, commit=_ls_remote(runner, url, wanted, flag), branch=branch, **state)


def _ls_remote(runner: Git, url: str, wanted: str, flag: str) -> str:
    """The SHA `wanted` (a branch or tag name) has on the remote at `url`."""
    shown = strip_credentials(url)  # never echo credentials embedded in the URL
    try:
        out = _git(runner, "ls-remote", "--", url, wanted)
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
