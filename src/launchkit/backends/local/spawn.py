"""Starting a run's supervisor: `python -m launchkit.backends.local.supervisor RUN_DIR`, detached (a
session of its own), holding the run's lock, its output on the run's `supervisor.log`.
Standard library only.
"""

from __future__ import annotations

import os
import subprocess
import sys

from launchkit.runtime.node.policy import ENV_WEBHOOK as WEBHOOK_ENV  # to the supervisor only


def start_supervisor(rdir: str, lock: int, log: int, webhook: str | None = None) -> int:
    """Start the supervisor of the run in `rdir`, holding `lock`, writing to `log`: its pid (never
    waited for). `webhook`: --slack-webhook-url, in its environment only (never in a file)."""
    env = {k: v for k, v in os.environ.items() if k != WEBHOOK_ENV}
    if webhook:
        env[WEBHOOK_ENV] = webhook
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchkit.backends.local.supervisor", rdir],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,
        pass_fds=(lock,),
        env=env,
    )
    proc.returncode = 0  # detached: never waited for
    return proc.pid
