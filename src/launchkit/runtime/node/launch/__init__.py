"""The job's command (docs/runtime.md "Exec methods", docs/multi-node.md): the multi-node launchers
and the final exec (launchers.py), Ray's head and workers (ray_cluster.py), the watchdog that stays
the command's parent (watchdog.py), and child processes with their signals (procs.py).

Here: what they all say when the launch cannot go on (exit codes of docs/runtime.md, lib.sh)."""

from __future__ import annotations

import sys

EXIT_INPUTS = 100
EXIT_EXEC = 109


class LaunchError(Exception):
    """The launcher cannot run: one line for the job's log, and the step's exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def log(message: str) -> None:
    print(f"[launchkit] {message}", file=sys.stderr, flush=True)
