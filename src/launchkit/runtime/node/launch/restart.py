"""`--retry-on stalled` and `--retry-on exit:CODES` (docs/retries.md): the command restarted in place,
in the same job, each time the watchdog (watchdog.py) stops it, up to the policy's cap (node/policy.py:
`Policy.restarts`), and each time it exits with one of the codes named, up to the cap again
(`Policy.exit_restarts`: each cause counts its own). Each
start gets policy.ENV_ATTEMPT one higher when the backend gave the job its attempt number (the local
supervisor does; a Beaker job cannot know it), and policy.ENV_RESTART, the restarts in this job so far.
A forwarded signal (a stop, a preemption) between two starts ends it instead. Each start after the
first gets policy.ENV_RESUME_FROM, the step the one before reached, which the watchdog checks it
against (watchdog.py: resume verification); a start stopped for `--require-resume` is not started again.
"""

from __future__ import annotations

import signal
import sys
from typing import Callable, Sequence

from ..policy import ENV_ATTEMPT, ENV_RESTART, ENV_RESUME_FROM, STALLED, Policy
from . import watchdog
from .procs import FORWARDED

Runner = Callable[..., int]


def _say(message: str) -> None:
    print(f"[launchkit] {message}", file=sys.stderr, flush=True)


def run(
    argv: Sequence[str],
    env: dict[str, str],
    s: watchdog.Settings,
    runner: Runner = watchdog.run,
    tell: Callable[[str, str], None] | None = None,
    left: int = 0,
    policy: Policy | None = None,
) -> int:
    """Run argv under the watchdog, again after each of its stops while `left` restarts are left
    (the policy's `restarts`), and after each exit with one of the `policy`'s `retry_exit_codes` while
    its `exit_restarts` last; `tell` as watchdog.run's (the job's Slack poster)."""
    base = env.get(ENV_ATTEMPT) or ""
    restart = 0  # every restart so far (LAUNCHKIT_RESTART)
    stalls_left = left
    codes = policy.retry_exit_codes if policy is not None else ()
    exits_left = policy.exit_restarts if policy is not None else 0
    signalled: list[int] = []
    while True:
        stops: list[str] = []
        steps: list[float] = []
        code = runner(argv, env, s, stops=stops, tell=tell, steps=steps)
        if signalled:  # a signal came while it was being restarted
            return 128 + signalled[0]
        if not stops and code in codes and exits_left > 0 and policy is not None:
            exits_left -= 1
            why, cause = f"exit code {code}", policy.exit_label()
        elif stops and stalls_left > 0 and not stops[-1].endswith(f"({watchdog.RESUME_FLAG})"):
            stalls_left -= 1
            why, cause = stops[-1], STALLED
        else:
            return code
        for name in FORWARDED:  # until the next start (the watchdog's own handlers), a signal ends it
            signal.signal(getattr(signal, name), lambda n, _f: signalled.append(n))
        restart += 1
        env = dict(env)
        env[ENV_RESTART] = str(restart)
        attempt: str | None = None
        if base.isdigit():
            attempt = str(int(base) + restart)
            env[ENV_ATTEMPT] = attempt
        if steps:  # the next start is checked against it (an earlier start's, when this one had none)
            env[ENV_RESUME_FROM] = watchdog.step_value(steps[-1])
        s = s._replace(resume=watchdog.resume_of(env, s.require))
        which = f"attempt {attempt}" if attempt else f"restart {restart}"
        said = f"restarting the command in place ({which}; --retry-on {cause}): {why}"
        _say(said)
        if tell is not None:
            tell("restarted", said)
        if signalled:
            return 128 + signalled[0]
