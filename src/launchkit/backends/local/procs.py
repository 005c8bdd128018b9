"""Finding and ending every process of a local run, portably (psutil; Linux and macOS).

A run's processes are found without trusting the job (which may scrub its environment, start new
sessions, or outlive its supervisor):
- its cgroup (cgroup v2, where this machine lets us make one): every replica joins it before it runs
  and nothing the job does leaves it (short of root moving itself out);
- otherwise its process tree, recorded by the supervisor (`procs.json`: pid and start time of every
  descendant, the supervisor being their subreaper) and checked against start times, so a reused pid
  is never taken for the job's; with their current descendants and process groups;
- and, always, its replicas' process groups and the processes carrying its marker variable.
psutil is imported only when processes must be searched (~60 ms), never on the supervisor's fast path.
"""

from __future__ import annotations

import json
import os
import signal
import time

from launchkit.envflags import env_flag
from launchkit.runtime.node.environment.steplog import RECORD_WRITER

TYPE_CHECKING = False  # the supervisor imports this module and starts without `typing`
if TYPE_CHECKING:
    from typing import Any

RUN_MARKER = "LAUNCHKIT_LOCAL_RUN"  # set in every replica's environment to the run id
CGROUP_VAR = "LAUNCHKIT_CGROUP"  # "0": never make a cgroup (the recorded process tree only)
CGROUP_PREFIX = "launchkit-"
TREE_FILE = "procs.json"  # the supervisor's record of the run's processes: [[pid, start time], ...]


# ---- the run's cgroup (cgroup v2; standard library only)
def cgroup_mount(fstype: str = "cgroup2", controller: str | None = None) -> tuple[str, str] | None:
    """(mount point, root within the hierarchy) of a mounted cgroup filesystem: v2 (`cgroup2`), or the v1
    hierarchy (`cgroup`) of `controller`."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) > 4 and rest[:1] == [fstype]:
            if controller is None or controller in rest[-1].split(","):
                return fields[4], fields[3]
    return None


def _cgroup2_mount() -> tuple[str, str] | None:
    return cgroup_mount("cgroup2")


def cgroup_dir(mount: tuple[str, str], path: str) -> str | None:
    """The directory of cgroup `path` (as /proc/self/cgroup names it) under `mount`, if it exists."""
    point, root = mount
    if root != "/" and path.startswith(root):
        path = path[len(root) :]
    own = os.path.join(point, path.lstrip("/"))
    return own if os.path.isdir(own) else None


def own_cgroup() -> str | None:
    """The directory of this process's cgroup v2, or None (no cgroup v2, not Linux)."""
    mount = _cgroup2_mount()
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            path = next((line[3:].strip() for line in f if line.startswith("0::")), None)
    except OSError:
        return None
    if mount is None or path is None:
        return None
    return cgroup_dir(mount, path)


def cgroups_wanted() -> bool:
    """LAUNCHKIT_CGROUP (on unless 0/false/no/off; another value is a UsageError, raised at launch)."""
    return env_flag(CGROUP_VAR, default=True)


def make_cgroup(run_id: str) -> str | None:
    """A new cgroup for the run's processes, beside the supervisor's own; None where not possible."""
    if not cgroups_wanted():
        return None
    return child_cgroup(own_cgroup(), run_id)


def child_cgroup(parent: str | None, run_id: str) -> str | None:
    """A new cgroup for run `run_id` under `parent` (v2, or a v1 hierarchy); None where not possible."""
    if parent is None:
        return None
    path = os.path.join(parent, CGROUP_PREFIX + run_id)
    try:
        os.mkdir(path)
    except OSError:
        return None
    return path


def join_cgroup(cgroup: str, pid: int) -> bool:
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(pid))
    except OSError:
        return False
    return True


def run_cgroup(run_id: str, path: object) -> str | None:
    """The run's cgroup as recorded, if it is one of ours for this run (never any other cgroup)."""
    if not isinstance(path, str) or os.path.basename(path) != CGROUP_PREFIX + run_id:
        return None
    mount = _cgroup2_mount()
    if mount is None or not path.startswith(mount[0].rstrip("/") + "/"):
        return None
    return path if os.path.isfile(os.path.join(path, "cgroup.procs")) else None


def cgroup_pids(cgroup: str) -> list[int]:
    """Processes in the cgroup and in any cgroup the job made below it."""
    pids = []
    for folder, _, _ in os.walk(cgroup):
        try:
            with open(os.path.join(folder, "cgroup.procs"), encoding="ascii") as f:
                pids += [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            pass
    return pids


def cgroup_kill(cgroup: str) -> None:
    """SIGKILL everything in the cgroup at once (cgroup.kill, Linux 5.14+), else one by one."""
    try:
        with open(os.path.join(cgroup, "cgroup.kill"), "w") as f:
            f.write("1")
        return
    except OSError:
        pass
    for pid in cgroup_pids(cgroup):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def remove_cgroup(cgroup: str | None) -> None:
    """Remove the (empty) cgroup and the ones below it; a populated one stays."""
    if not cgroup:
        return
    for folder, _, _ in sorted(os.walk(cgroup), key=lambda w: -len(w[0])):
        try:
            os.rmdir(folder)
        except OSError:
            pass


# ---- the recorded process tree
def read_tree(rdir: str | os.PathLike[str]) -> list[tuple[int, float]]:
    try:
        with open(os.path.join(rdir, TREE_FILE), "rb") as f:
            data = json.loads(f.read())
        return [(int(pid), float(started)) for pid, started in data]
    except (OSError, ValueError, TypeError):
        return []


def write_tree(rdir: str, tree: list[tuple[int, float]]) -> None:
    tmp = os.path.join(rdir, f".{TREE_FILE}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(sorted(tree)))
    os.replace(tmp, os.path.join(rdir, TREE_FILE))


def descendants_now(root: int) -> list[tuple[int, float]]:
    """(pid, start time) of every live descendant of `root`."""
    import psutil

    out = []
    for p in _descendants(root):
        try:
            out.append((p.pid, p.create_time()))
        except psutil.Error:
            pass
    return out


def _recorded(tree: list[tuple[int, float]]) -> list[Any]:
    """The recorded processes that still live: same pid *and* same start time (pids get reused)."""
    import psutil

    found = []
    for pid, started in tree:
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - started) < 0.01 and _running(p):
                found.append(p)
        except psutil.Error:
            pass
    return found


def group_alive(pgid: int) -> bool:
    """True while any process of process group `pgid` exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _marked(run_id: str, groups: set[int], known: list[Any] | None = None) -> list[Any]:
    """Live processes of the run: those with its marker variable or `known` to be its, and the
    members of `groups` when one of those shows the group is (still) the run's, not a reused id."""
    import psutil

    me = os.getpid()
    mine = {p.pid for p in known or []}
    found, others = [], []
    for p in psutil.process_iter(["environ", "status"]):
        if p.pid == me or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if p.pid in mine or (p.info["environ"] or {}).get(RUN_MARKER) == run_id:
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


class RunProcs:
    """Where to look for one run's processes: `groups` (the replicas' process groups), `cgroup`
    (checked with run_cgroup), `rdir` (for the recorded tree) and `root`, a live ancestor (the
    supervisor itself) whose descendants belong to the run too."""

    def __init__(
        self,
        run_id: str,
        groups: list[int],
        *,
        cgroup: str | None = None,
        rdir: str | os.PathLike[str] | None = None,
        root: int | None = None,
    ) -> None:
        self.run_id, self.groups, self.cgroup, self.rdir, self.root = run_id, groups, cgroup, rdir, root
        self.found: list[str] = []

    @classmethod
    def of(cls, rdir: str | os.PathLike[str], rec: dict[str, Any]) -> RunProcs:
        """From a run's directory and record (its supervisor gone or not)."""
        groups = [r["pgid"] for r in (rec.get("ranks") or {}).values() if isinstance(r.get("pgid"), int)]
        return cls(rec["id"], groups, cgroup=run_cgroup(rec["id"], rec.get("cgroup")), rdir=rdir)

    def find(self, scan: bool = True) -> list[Any]:
        """Live processes of the run; `scan`: also look through every process's marker variable."""
        import psutil

        known = _recorded(read_tree(self.rdir)) if self.rdir is not None else []
        if self.cgroup:
            for pid in cgroup_pids(self.cgroup):
                try:
                    known.append(psutil.Process(pid))
                except psutil.Error:
                    pass
        for p in list(known):
            known += _descendants(p.pid)
        if self.root is not None:
            known += _descendants(self.root)
        procs = {p.pid: p for p in _marked(self.run_id, set(self.groups), known)} if scan else {}
        procs.update((p.pid, p) for p in known if p.pid != os.getpid())
        return [p for p in procs.values() if _running(p)]

    def alive(self, scan: bool = True) -> list[int]:
        """Pids of the run's live processes."""
        return sorted(p.pid for p in self.find(scan))

    def end(self, grace: float, scan: bool = True) -> tuple[int, list[int]]:
        """End every process (SIGTERM, then SIGKILL after `grace` s): (how many there were, the pids
        still alive afterwards, which only processes we may not signal should leave). `self.found`:
        those found first, as `name (pid N)`. `scan`: as find's (False where the run's cgroup or its
        supervisor as subreaper holds every process: reading every process's environment can block on
        one stuck in the kernel, say a page fault on a hung network filesystem)."""
        procs = self.find(scan)
        count = len(procs)
        self.found = [describe(p) for p in procs if not _record_writer(p)]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            _signal(procs, sig)
            if sig == signal.SIGKILL and self.cgroup:
                cgroup_kill(self.cgroup)
            deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5)
            while procs and time.monotonic() < deadline:
                time.sleep(0.02)
                procs = [p for p in procs if _running(p)]  # zombies count as ended
            procs = [p for p in {q.pid: q for q in [*procs, *self.find(scan)]}.values() if _running(p)]
            if not procs:
                break
        if not procs:
            remove_cgroup(self.cgroup)
        return count, sorted(p.pid for p in procs)


def end_run(run_id: str, groups: list[int], grace: float, *, root: int | None = None, **where: Any) -> int:
    """End every process of run `run_id` (RunProcs.end); how many there were."""
    return RunProcs(run_id, groups, root=root, **where).end(grace)[0]


def _record_writer(p: Any) -> bool:
    """Whether `p` is the runtime's own record writer (steplog.RECORD_WRITER), not the command's."""
    import psutil

    try:
        return RECORD_WRITER in p.environ()
    except psutil.Error:
        return False


def describe(p: Any) -> str:
    """`sleep (pid 123)`: a process as the run's messages name it."""
    import psutil

    try:
        return f"{p.name()} (pid {p.pid})"
    except psutil.Error:
        return f"pid {p.pid}"


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


SUPERVISOR_NAME = b"lk-supervisor"  # its name for `ps -o comm` and `pgrep` (not its command line)


def become_subreaper() -> bool:
    """Orphans of our children get re-parented to us (Linux), so we can find and end them; and the
    supervisor goes by SUPERVISOR_NAME."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, SUPERVISOR_NAME, 0, 0, 0)  # PR_SET_NAME
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:  # noqa: BLE001 - not Linux: processes are found by their marker instead
        return False
