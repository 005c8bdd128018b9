"""Starting a run's supervisor: `python -m launchkit.backends.local.supervisor RUN_DIR`, detached (a
session of its own), holding the run's lock, its output on the run's `supervisor.log`.
Standard library only.
"""

from __future__ import annotations

import subprocess
import sys


def start_supervisor(rdir: str, lock: int, log: int) -> int:
    """Start the supervisor of the run in `rdir`, holding `lock`, writing to `log`: its pid (never
    waited for)."""
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
