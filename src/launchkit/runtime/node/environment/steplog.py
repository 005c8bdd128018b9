"""A setup step's log ($RESULTS_DIR/.launchkit/logs/NN_step.log) and the commands run into it.

Each command is recorded as a `$ argv` line (what the bash's lk_run_logged wrote, and what the
install progress line shows as `running ...`), then its output. Children never see the runtime's own
directory on PYTHONPATH (lk_node puts it there for this interpreter only).
"""

from __future__ import annotations

import os
import subprocess
import sys

TYPE_CHECKING = False  # (typing costs a job's start-up ~10 ms: for the type checker only)
if TYPE_CHECKING:
    from typing import Mapping, Sequence


# set in a record writer's environment (StepLog.background): the runtime's own, not the command's (the
# local supervisor ends it with the run, unnamed among what the command left running)
RECORD_WRITER = "LAUNCHKIT_RECORD_WRITER"


def child_environ(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default: this process's) without the runtime's package directory on PYTHONPATH."""
    env = dict(os.environ if environ is None else environ)
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != here]
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        env.pop("PYTHONPATH", None)
    return env


class StepLog:
    """Appends to one log file; `run` runs a command quietly into it and returns its exit status."""

    def __init__(self, path: str, errors: bool = False) -> None:
        """`errors`: this process's own stderr (a traceback, say) goes to the log too."""
        self.path = path
        if errors:
            sys.stderr = open(path, "a", buffering=1)  # for the rest of the process

    def write(self, line: str) -> None:
        with open(self.path, "a") as f:
            f.write(line.rstrip("\n") + "\n")

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> int:
        self.write("$ " + " ".join(argv))
        with open(self.path, "ab") as out:
            try:
                return subprocess.call(
                    list(argv),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=child_environ(env),
                    cwd=cwd,
                )
            except OSError as e:  # not installed, not executable: as bash says it, status 127
                out.write((f"{argv[0]}: {e.strerror}\n").encode())
                return 127

    def quiet(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
        """Run a probe whose output nobody needs (not logged)."""
        try:
            return subprocess.call(
                list(argv),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
                env=child_environ(env),
            )
        except OSError:
            return 127

    def background(self, argv: Sequence[str], output: str, env: Mapping[str, str] | None = None) -> None:
        """Start `argv` writing its stdout to the file `output` and leave it running: nothing waits."""
        try:
            with open(output, "wb") as out:
                subprocess.Popen(
                    list(argv),
                    stdout=out,
                    stderr=subprocess.DEVNULL,
                    stdin=subprocess.DEVNULL,
                    env={**child_environ(env), RECORD_WRITER: "1"},
                )
        except OSError:
            pass  # a record for the user: never a reason to fail the job
