"""`--memory` for local runs: the run's processes share one memory limit, as a Beaker task's do.

The kernel enforces it through the memory controller: cgroup v2's `memory.max` where the run's v2
cgroup (procs.make_cgroup) has the controller, else a cgroup of the v1 memory hierarchy (machines
with both, like this project's CI, keep memory on v1). An out-of-memory kill is read back from the
controller's own counter (`oom_kill` in memory.events or memory.oom_control), so the end of the run
says so for certain. Where neither can be had the limit is not enforced and the supervisor says
why. Standard library only: the supervisor starts light.
"""

from __future__ import annotations

import os

from launchkit.backends.local.procs import cgroup_dir, cgroup_mount, child_cgroup


class MemoryLimit:
    """A memory cgroup for one run: `join(pid)` before the replica runs, `oom_kills()` after."""

    def __init__(self, path: str, version: int) -> None:
        self.path, self.version = path, version

    @classmethod
    def make(cls, run_id: str, limit: int, v2_cgroup: str | None) -> MemoryLimit | None:
        if v2_cgroup and "memory" in _read(os.path.join(v2_cgroup, "cgroup.controllers")).split():
            if _write(os.path.join(v2_cgroup, "memory.max"), str(limit)):
                _write(os.path.join(v2_cgroup, "memory.swap.max"), "0")
                return cls(v2_cgroup, 2)
        path = child_cgroup(_v1_memory_cgroup(), run_id)
        if path is None:
            return None
        if not _write(os.path.join(path, "memory.limit_in_bytes"), str(limit)):
            remove(path)
            return None
        _write(os.path.join(path, "memory.swappiness"), "0")
        return cls(path, 1)

    def join(self, pid: int) -> bool:
        if self.version == 2:
            return True  # the run's v2 cgroup: the replica is in it already
        return _write(os.path.join(self.path, "cgroup.procs"), str(pid))

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        for line in _read(os.path.join(self.path, name)).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def remove(self) -> None:
        if self.version == 1:
            remove(self.path)


def remove(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass


def _v1_memory_cgroup() -> str | None:
    """This process's cgroup in the v1 memory hierarchy, or None."""
    mount = cgroup_mount("cgroup", "memory")
    path = next(
        (
            line.split(":", 2)[2]
            for line in _read("/proc/self/cgroup").splitlines()
            if line.count(":") >= 2 and "memory" in line.split(":", 2)[1].split(",")
        ),
        None,
    )
    return cgroup_dir(mount, path) if mount and path else None


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _write(path: str, value: str) -> bool:
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(value)
    except OSError:
        return False
    return True
