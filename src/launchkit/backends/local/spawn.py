"""Starting a run's supervisor: detached (a session of its own), holding the run's lock, its output
on the run's `supervisor.log`.

On Linux, from a single-threaded CLI, the supervisor is the CLI's process forked, without an exec:
its modules are loaded already, so the job starts ~40 ms sooner than from a new interpreter (~2 ms to
fork, against Python's start-up and the supervisor's imports); it costs ~20 MB more memory while the
job runs. Elsewhere (macOS, where fork without exec is unsafe; a CLI with threads; or
LAUNCHKIT_SUPERVISOR_START=exec) it is `python -m launchkit.backends.local.supervisor RUN_DIR`.
Standard library only.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

START_VAR = "LAUNCHKIT_SUPERVISOR_START"  # "exec": a new interpreter, as off Linux
MAX_FD = 1 << 20  # close_range(2) on Linux: the bound costs nothing


def start_supervisor(rdir: str, lock: int, log: int) -> int:
    """Start the supervisor of the run in `rdir`, holding `lock`, writing to `log`: its pid (never
    waited for)."""
    if forking():
        sys.stdout.flush()  # nothing buffered here may be written twice, or into the run's log
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _forked_supervisor(rdir, lock, log)
        return pid
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchkit.backends.local.supervisor", rdir],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        pass_fds=(lock,),
    )
    proc.returncode = 0  # detached: never waited for
    return proc.pid


def preload() -> None:
    """Import here what the forked supervisor would import before its job can start (ctypes, for
    the subreaper: ~3 ms): called while the CLI waits anyway."""
    try:
        import ctypes  # noqa: F401
    except ImportError:
        pass  # the supervisor does without a subreaper


def forking() -> bool:
    """Whether start_supervisor forks (else it execs a new interpreter)."""
    return sys.platform == "linux" and os.environ.get(START_VAR) != "exec" and single_threaded()


def single_threaded() -> bool:
    """Whether this process has one thread (Linux): only then is a fork without exec safe."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _forked_supervisor(rdir: str, lock: int, log: int) -> NoReturn:
    """The child of start_supervisor's fork: becomes the supervisor, never returns into the CLI."""
    code = 1
    try:
        os.setsid()
        import gc

        gc.freeze()  # the CLI's objects are never collected here: none closes a descriptor of ours
        # (a CLI started with 0, 1 or 2 closed may have been given one of those for these two)
        lock, log = (fd if fd > 2 else fcntl.fcntl(fd, fcntl.F_DUPFD, 3) for fd in (lock, log))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, lock)  # nothing of the CLI's stays open (its caller's pipes, runs.db)
        os.closerange(lock + 1, MAX_FD)
        from launchkit.backends.local.supervisor import main

        main(rdir)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the supervisor's own failure: into its log, as exec'd
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
