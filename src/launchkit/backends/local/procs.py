"""Finding and ending every process of a local run, portably (psutil; Linux and macOS).

A run's processes are found three ways, so that nothing is orphaned even when its supervisor died:
its replicas' process groups (recorded before each replica starts), every process that carries the
run's marker variable in its environment (survives `setsid` and re-parenting to PID 1), and, while
the supervisor lives, its descendants. psutil is imported only when processes must be searched
(~60 ms), never on the supervisor's fast path.
"""

from __future__ import annotations

import os
import signal
import time

TYPE_CHECKING = False  # the supervisor imports this module and starts without `typing`
if TYPE_CHECKING:
    from typing import Any

RUN_MARKER = "LAUNCHKIT_LOCAL_RUN"  # set in every replica's environment to the run id


def group_alive(pgid: int) -> bool:
    """True while any process of process group `pgid` exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _marked(run_id: str, groups: set[int]) -> list[Any]:
    """Live processes of the run: those with its marker variable, and the members of `groups`
    when a marked process shows the group is (still) the run's, not a reused id."""
    import psutil

    me = os.getpid()
    found, others = [], []
    for p in psutil.process_iter(["environ", "status"]):
        if p.pid == me or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if (p.info["environ"] or {}).get(RUN_MARKER) == run_id:
            found.append(p)
        else:
            others.append(p)
    ours = set()
    for p in found:
        try:
            ours.add(os.getpgid(p.pid))
        except OSError:
            pass
    for p in others:
        try:
            if os.getpgid(p.pid) in groups & ours:
                found.append(p)
        except OSError:
            pass
    return found


def live_runs() -> set[str]:
    """Ids of the local runs that still have a process (by their marker variable)."""
    import psutil

    found = set()
    for p in psutil.process_iter(["environ"]):
        run_id = (p.info["environ"] or {}).get(RUN_MARKER)
        if run_id:
            found.add(run_id)
    return found


def _descendants(root: int) -> list[Any]:
    import psutil

    try:
        return [p for p in psutil.Process(root).children(recursive=True) if p.pid != os.getpid()]
    except psutil.Error:
        return []


def _signal(procs: list[Any], sig: int) -> None:
    import psutil

    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass


def end_run(run_id: str, groups: list[int], grace: float, *, root: int | None = None) -> int:
    """End every process of run `run_id` (SIGTERM, then SIGKILL after `grace` s); how many there were.

    `groups`: the replicas' process groups; `root`: a live ancestor (the supervisor itself) whose
    descendants belong to the run too.
    """

    def find() -> list[Any]:
        procs = {p.pid: p for p in _marked(run_id, set(groups))}
        if root is not None:
            procs.update((p.pid, p) for p in _descendants(root))
        return list(procs.values())

    procs = find()
    count = len(procs)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _signal(procs, sig)
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5)
        while procs and time.monotonic() < deadline:
            time.sleep(0.02)
            procs = [p for p in procs if _running(p)]  # zombies count as ended
        procs = [p for p in {q.pid: q for q in [*procs, *find()]}.values() if _running(p)]
        if not procs:
            break
    return count


def _running(p: Any) -> bool:
    import psutil

    try:
        return bool(p.is_running() and p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def which(name: str, path: str | None = None) -> str | None:
    """shutil.which for plain names, without importing shutil (and its compression modules) into
    the supervisor, whose start-up every local run waits for."""
    for folder in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep):
        candidate = os.path.join(folder, name)
        if folder and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return None


def reap_children() -> bool:
    """Reap exited children; True if none is left (as subreaper: none of the job's processes is)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return False
        except ChildProcessError:
            return True


def become_subreaper() -> bool:
    """Orphans of our children get re-parented to us (Linux), so we can find and end them."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - not Linux: processes are found by their marker instead
        return False
