"""Process-tree helpers (Linux /proc): find and end every descendant, so nothing is orphaned."""

from __future__ import annotations

import os
import signal
import time


def _parents() -> dict[int, int]:
    parents = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        parents[int(name)] = int(fields[1])
    return parents


def descendants(*roots: int) -> list[int]:
    """All live descendants of `roots` (not the roots themselves)."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True if `pid` runs (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] != b"Z"


def cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def signal_tree(sig: int, groups: list[int], roots: list[int]) -> None:
    """Send `sig` to process groups and to every descendant of `roots` (including escaped sessions)."""
    pids = set(descendants(*roots)) | set(groups)
    for pgid in groups:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_tree(groups: list[int], roots: list[int], grace: float) -> None:
    """SIGTERM, wait up to `grace` seconds, then SIGKILL whatever is left."""
    signal_tree(signal.SIGTERM, groups, roots)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not any(alive(p) for p in [*groups, *descendants(*roots)]):
            return
        time.sleep(0.05)
    signal_tree(signal.SIGKILL, groups, roots)


def become_subreaper() -> None:
    """Orphans of our children get re-parented to us (Linux), so we can find and end them."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - best effort outside Linux
        pass
