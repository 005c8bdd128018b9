"""Starting a run's supervisor: `python -m launchkit.backends.local.supervisor RUN_DIR`, detached (a
session of its own), holding the run's lock, its output on the run's `supervisor.log`.
Standard library only.
"""

from __future__ import annotations

import os
import subprocess
import sys

from launchkit.runtime.node.launch.notify import hooks_text
from launchkit.runtime.node.policy import ENV_NOTIFY, ENV_WEBHOOK

WEBHOOK_ENV = ENV_WEBHOOK  # a webhook in the launching shell: never the supervisor's
HOOKS_FD_ENV = "LAUNCHKIT_HOOKS_FD"  # the pipe the hooks are handed over on (slack.py reads it)
WEBHOOK_NAMES = ("LAUNCHKIT_SLACK_WEBHOOK_URL", "GANTRY_SLACK_WEBHOOK_URL")  # core/contract.SLACK_WEBHOOK_ENV


def hand_over(secret: str) -> int:
    """A pipe's read end with `secret` in it and its write end closed: a child reads it once (no
    environment, /proc/PID/environ, and no file ever holds it). The caller passes it and closes it."""
    r, w = os.pipe()
    try:
        os.write(w, secret.encode() + b"\n")  # far below a pipe's buffer: never blocks
    finally:
        os.close(w)
    return r


def start_supervisor(
    rdir: str,
    lock: int,
    log: int,
    webhook: str | None = None,
    drop: tuple[str, ...] = (),
    events: str | None = None,
) -> int:
    """Start the supervisor of the run in `rdir`, holding `lock`, writing to `log`: its pid (never
    waited for). `webhook`, `events`: the run's Slack webhook and events URL (--notify-secret's),
    handed over on one pipe; the webhook's variables (and `drop`: --slack-webhook-secret's and
    --notify-secret's, when nothing else needs them) are left out of its environment."""
    gone = {WEBHOOK_ENV, ENV_NOTIFY, HOOKS_FD_ENV, *WEBHOOK_NAMES, *drop}
    env = {k: v for k, v in os.environ.items() if k not in gone}
    fds: tuple[int, ...] = (lock,)
    if webhook or events:
        fds += (hand_over(hooks_text(webhook, events)),)
        env[HOOKS_FD_ENV] = str(fds[-1])
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "launchkit.backends.local.supervisor", rdir],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            pass_fds=fds,
            env=env,
        )
    finally:
        for fd in fds[1:]:
            os.close(fd)
    proc.returncode = 0  # detached: never waited for
    return proc.pid
