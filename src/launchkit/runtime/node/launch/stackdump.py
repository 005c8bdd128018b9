"""Before a stall stop, the evidence: a stack dump of the command's Python processes in the job's log
(docs/runtime.md, "Stack dump before a stall stop").

With `py-spy` on PATH, `py-spy dump --pid PID` for each (it reads the process from outside; its output
goes to the log). Without it, or where it fails (no ptrace permission), Python's own faulthandler: the
watchdog starts the command with PYTHONFAULTHANDLER=1 (unless the job sets it), so SIGABRT makes a
Python process write every thread's traceback to its stderr, the job's log, and end; the process is
about to be stopped anyway. Its core dump is turned off first (prlimit RLIMIT_CORE 0, that process
only). Every step has a deadline; a failure is one line.
"""

from __future__ import annotations

import os
import resource
import signal
import time
from typing import Callable

from .procs import which as find

PYSPY_TIMEOUT = 20.0  # seconds for each py-spy dump
ABORT_WAIT = 5.0  # seconds for the aborted processes to write their tracebacks and end
MAX_PROCS = 16  # Python processes dumped at most (a data loader's workers are many)
ENV = "PYTHONFAULTHANDLER"


def command_env(env: dict[str, str]) -> dict[str, str]:
    """The command's environment with faulthandler on (the job's own setting kept)."""
    return env if env.get(ENV) is not None else dict(env, **{ENV: "1"})


def python_pids(pgid: int, proc: str = "/proc") -> list[int]:
    """The Python processes of process group `pgid` (their executable's name starts with `python`)."""
    found = []
    try:
        names = os.listdir(proc)
    except OSError:
        return []
    for name in sorted(names, key=lambda n: int(n) if n.isdigit() else 0):
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc, name, "stat"), "rb") as f:
                stat = f.read()
            with open(os.path.join(proc, name, "cmdline"), "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0]
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == pgid and os.path.basename(argv0).startswith(b"python"):
            found.append(int(name))
    return found[:MAX_PROCS]


def dump(
    pgid: int,
    say: Callable[[str], None],
    write: Callable[[bytes], None],
    which: Callable[[str], str | None] = find,
) -> int:
    """Dump the stacks of group `pgid`'s Python processes into the log; how many were dumped."""
    import subprocess

    pids = python_pids(pgid)
    if not pids:
        say("no Python process of the command to dump the stacks of")
        return 0
    pyspy = which("py-spy")
    left = []
    for pid in pids:
        if pyspy is None:
            left.append(pid)
            continue
        say(f"the stacks of process {pid} (py-spy dump), before it is stopped:")
        try:
            r = subprocess.run(
                [pyspy, "dump", "--pid", str(pid)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                timeout=PYSPY_TIMEOUT, check=False,
            )  # fmt: skip
            write(r.stdout)
            if r.returncode != 0:
                left.append(pid)
        except (OSError, subprocess.SubprocessError) as e:
            say(f"py-spy dump failed ({type(e).__name__})")
            left.append(pid)
    for pid in left:
        say(f"the stacks of process {pid} (faulthandler, SIGABRT), before it is stopped:")
        try:
            resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
        except (OSError, ValueError, AttributeError):
            pass  # not Linux, or not ours: a core may be written where the job allows it
        try:
            os.kill(pid, signal.SIGABRT)
        except OSError:
            pass
    deadline = time.monotonic() + ABORT_WAIT
    while left and time.monotonic() < deadline:
        left = [p for p in left if _alive(p)]
        time.sleep(0.05)
    return len(pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"
