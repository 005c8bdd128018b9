"""`--retry-on stalled` (docs/retries.md): the command restarted in place, in the same job, each time
the watchdog (watchdog.py) stops it, up to LAUNCHKIT_RETRY_CAP times. Each start gets LAUNCHKIT_ATTEMPT
one higher when the backend gave the job its attempt number (the local supervisor does; a Beaker job
cannot know it), and LAUNCHKIT_RESTART, the restarts in this job so far. A forwarded signal (a stop, a
preemption) between two starts ends it instead. Each start after the first gets LAUNCHKIT_RESUME_FROM,
the step the one before reached, which the watchdog checks it against (watchdog.py: resume
verification); a start stopped for `--require-resume` is not started again.
"""

from __future__ import annotations

import signal
import sys
from typing import Callable, Sequence

from . import watchdog
from .procs import FORWARDED

Runner = Callable[..., int]


def allowed(env: dict[str, str]) -> int:
    """Restarts allowed: LAUNCHKIT_RETRY_CAP when LAUNCHKIT_RETRY_ON names `stalled`, else 0."""
    if "stalled" not in (env.get("LAUNCHKIT_RETRY_ON") or "").split(","):
        return 0
    cap = env.get("LAUNCHKIT_RETRY_CAP") or "0"
    return int(cap) if cap.isdigit() else 0


def _say(message: str) -> None:
    print(f"[launchkit] {message}", file=sys.stderr, flush=True)


def run(
    argv: Sequence[str],
    env: dict[str, str],
    s: watchdog.Settings,
    runner: Runner = watchdog.run,
    tell: Callable[[str, str], None] | None = None,
) -> int:
    """Run argv under the watchdog, again after each of its stops while restarts are left; `tell` as
    watchdog.run's (the job's Slack poster)."""
    left = allowed(env)
    base = env.get("LAUNCHKIT_ATTEMPT") or ""
    restart = 0
    signalled: list[int] = []
    while True:
        stops: list[str] = []
        steps: list[float] = []
        code = runner(argv, env, s, stops=stops, tell=tell, steps=steps)
        if signalled:  # a signal came while it was being restarted
            return 128 + signalled[0]
        if not stops or restart >= left or stops[-1].endswith(f"({watchdog.RESUME_FLAG})"):
            return code
        for name in FORWARDED:  # until the next start (the watchdog's own handlers), a signal ends it
            signal.signal(getattr(signal, name), lambda n, _f: signalled.append(n))
        restart += 1
        env = dict(env, LAUNCHKIT_RESTART=str(restart))
        attempt: str | None = None
        if base.isdigit():
            attempt = str(int(base) + restart)
            env["LAUNCHKIT_ATTEMPT"] = attempt
        if steps:  # the next start is checked against it (an earlier start's, when this one had none)
            env["LAUNCHKIT_RESUME_FROM"] = watchdog.step_value(steps[-1])
        s = s._replace(resume=watchdog.resume_of(env))
        which = f"attempt {attempt}" if attempt else f"restart {restart} of {left}"
        _say(f"restarting the command in place ({which}; --retry-on stalled): {stops[-1]}")
        if signalled:
            return 128 + signalled[0]
