"""Launch-time checks of what would otherwise fail only in the job (reads the repository: I/O).

- `check_command`: a path that exists only relative to the subdirectory `run` was started from (the
  job starts at the repository root), and one command word with spaces that is not a file (exec
  would look for a program of that name).
- `has_gpu`: whether a local job could use a CUDA or ROCm GPU (else `--local` picks CPU torch).
- `check_remote_reachable`: a Beaker job clones `origin` on a node, which cannot reach a local path
  or a `file://` URL of this machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit

from launchkit.backends.beaker_remembered import configured_address
from launchkit.errors import PreconditionError, UsageError
from launchkit.userfile import LOCK_FILE_LIMIT, read_user_file

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def _in_commit(root: str, commit: str, paths: list[str], timeout: float = 10) -> set[str]:
    """Which of `paths` (relative to the root) are in `commit`."""
    if not paths:
        return set()
    try:
        r = subprocess.run(
            ["git", "ls-tree", "--name-only", "-z", commit, "--", *paths],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return set(paths)  # cannot tell: refuse nothing
    return set(r.stdout.split("\0")) if r.returncode == 0 else set(paths)


def _inside(path: str) -> str | None:
    """`path` normalised, or None when it leaves the repository or is absolute."""
    if os.path.isabs(path):
        return None
    norm = os.path.normpath(path)
    return None if norm == "." or norm.startswith("..") else norm


def check_command(commands: list[list[str]], *, exec_method: str, root: str, commit: str, cwd: str) -> None:
    """Refuse (exit 2) a command the job would fail to start or to find its file for."""
    sub = os.path.relpath(os.path.realpath(cwd), os.path.realpath(root))
    sub = "" if sub == "." or sub.startswith("..") else sub
    first = commands[0][0] if commands and commands[0] else ""
    spaced = exec_method == "exec" and any(c.isspace() for c in first) and not os.path.isabs(first)
    words = (
        {w for cmd in commands for w in cmd if w and not w.startswith("-") and _inside(w)} if sub else set()
    )
    if spaced and _inside(first):
        words.add(first)
    candidates: dict[str, tuple[str | None, str | None]] = {}  # word -> (root path, subdir path)
    for w in words:
        at_root = _inside(w)
        in_sub = _inside(os.path.join(sub, w)) if sub else None
        candidates[w] = (at_root, in_sub)
    found = _in_commit(root, commit, sorted({p for pair in candidates.values() for p in pair if p}))
    if sub:
        for cmd in commands:
            for w in cmd:
                at_root, in_sub = candidates.get(w, (None, None))
                if in_sub and in_sub in found and at_root not in found:
                    fixed = ("./" if w.startswith("./") else "") + in_sub
                    raise UsageError(
                        f"{w!r} is {in_sub} from the repository root, where the job runs (not {sub}/)",
                        hint=f"give the path from the root: {fixed}",
                    )
    if spaced and _inside(first) not in found:
        raise UsageError(
            f"the command {first!r} is one word with spaces: the job would look for a program of that name",
            hint=f"drop the quotes (launchkit run -- {first}), or add --exec-method bash to run a shell line",
        )


def local_remote(url: str) -> bool:
    """A local path or file:// URL: only this machine can clone it."""
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme:
        return scheme == "file"
    return ":" not in url.split("/", 1)[0]  # not scp-like host:path: a path


def beaker_address(environ: dict[str, str] | None = None) -> str | None:
    """The Beaker address beaker-py would use: BEAKER_ADDR, else `agent_address` in BEAKER_CONFIG or
    ~/.beaker/config.yml; None when neither says (beaker.org)."""
    return configured_address(environ)


def check_remote_reachable(url: str, *, beaker_addr: str | None) -> None:
    """Refuse (exit 3) a local-path origin for a Beaker job, unless that Beaker is on this machine
    (its address is loopback, as a test's), where its jobs can read this machine's files."""
    if not local_remote(url):
        return
    host = urlsplit(beaker_addr).hostname if beaker_addr and "://" in beaker_addr else None
    if host in LOOPBACK:
        return
    raise PreconditionError(
        f"the job's remote {url} is a path on this machine: a Beaker node cannot clone it",
        hint="push to a host nodes can reach (git remote set-url origin https://HOST/ORG/REPO.git; "
        "or --remote URL), or run here with --local",
    )


def has_gpu(root: str = "/") -> bool:
    """An NVIDIA driver (/dev/nvidiactl, /proc/driver/nvidia) or ROCm (/dev/kfd) on this machine; a
    Mac counts as one (uv's default torch there already is the right build)."""
    if sys.platform != "linux":
        return True
    return any(
        os.path.exists(os.path.join(root, p)) for p in ("dev/nvidiactl", "proc/driver/nvidia", "dev/kfd")
    )


def lock_pins_torch(root: str) -> bool:
    """Whether root/uv.lock has a torch package (its build is fixed by the lock)."""
    try:
        data = read_user_file(os.path.join(root, "uv.lock"), "uv.lock", limit=LOCK_FILE_LIMIT, hint="")
    except UsageError:  # none, or not a regular file: the preflight tells
        return False
    return any(line.strip() == b'name = "torch"' for line in data.splitlines())
