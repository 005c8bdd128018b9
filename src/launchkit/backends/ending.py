"""Why a run ended, in one line with its fix: shared by both backends (exit codes, the entrypoint's
setup steps, OOM kills). Beaker's own cancelation codes are read in backends/beaker/ending.py."""

from __future__ import annotations

from collections.abc import Iterable

from launchkit.backends.protocol import Cause, EndReason, RunInfo, RunStatus
from launchkit.runtime.node import policy

OOM_EXIT = policy.OOM_EXIT  # 128 + SIGKILL: what the kernel's out-of-memory killer leaves
# The runtime's timing line, printed right before the user's command starts (runtime/lib.sh
# lk_timing_line, node/launch/launchers.py timing_line; a ray head once its driver starts): a job
# whose log has it ran the command, so its exit code is the command's, 100-109 included.
COMMAND_STARTED = b"[launchkit] setup done in "
# The runtime's watchdog (runtime/node/launch/watchdog.py) ends a command that stalls or goes silent with this
# exit code, and says why in the last line of the job's log.
WATCHDOG_EXIT = 124
WATCHDOG_STOPPED = b"[launchkit] stopped: "
REQUIRE_RESUME = "--require-resume"  # a stop's reason ends with "(--require-resume)" (watchdog.RESUME_FLAG)

# runtime/entrypoint.sh exit codes (docs/runtime.md, "Steps"): what failed and what to do
SETUP_STEPS: dict[int, tuple[str, str]] = {
    100: (
        "a job input is missing or malformed (e.g. a secret that is not set)",
        "the job log names it: `launchkit logs {id}`; set the secret with `launchkit secret set`",
    ),
    101: (
        "cloning the repository failed (commit not pushed, or no access)",
        "push the commit, and for a private repository give a GitHub token (the GITHUB_TOKEN secret)",
    ),
    102: (
        "updating git submodules failed",
        "check the submodules' URLs and access (the GITHUB_TOKEN secret)",
    ),
    103: (
        "the --pre-setup hook failed",
        "fix the --pre-setup command (its output is in `launchkit logs {id}`)",
    ),
    104: ("installing uv failed", "use an image with uv, or one that can download it"),
    105: (
        "creating the Python environment failed",
        "check --python / --conda-file / --venv (details in `launchkit logs {id}`)",
    ),
    106: (
        "installing the project's dependencies failed",
        "check uv.lock / pyproject.toml or --install (details in `launchkit logs {id}`)",
    ),
    107: (
        "the --post-setup hook failed",
        "fix the --post-setup command (its output is in `launchkit logs {id}`)",
    ),
    108: ("cluster setup (NCCL, caches) failed", "see `launchkit logs {id}`; try another --cluster"),
    109: ("setting up the multi-node launcher failed", "check --launcher and the replica settings"),
}


def command_started(lines: Iterable[bytes]) -> bool:
    """Whether a job's log (its lines, from the start) says the runtime started the user's command:
    reads up to the runtime's line that says so, which comes before any of the command's output."""
    return any(line.startswith(COMMAND_STARTED) for line in lines)


def watchdog_stop(lines: Iterable[bytes]) -> str | None:
    """Why the runtime's watchdog ended the job (the last `[launchkit] stopped: ...` line of its log's
    tail), or None."""
    why = None
    for line in lines:
        if line.startswith(WATCHDOG_STOPPED):
            why = line[len(WATCHDOG_STOPPED) :].decode("utf-8", "replace").strip()
    return why


WATCHDOG_STOP = policy.STOPPED_LINE  # how a watchdog stop's line begins (LAUNCHKIT_STOP: follow's)


def watchdog_stopped(why: str, code: int, run_id: str) -> EndReason:
    """The run's end when the runtime's watchdog stopped it: launchkit's stop, never the user's (its
    words are the job's own: the runtime posts them, policy.stop_line)."""
    line, fix = policy.stop_line(why, run_id)
    return EndReason(kind=Cause.timeout, line=line, fix=fix, by="launchkit", exit_code=code)


def from_exit_code(
    code: int,
    run_id: str,
    *,
    started: bool | None = False,
    memory: str | None = None,
    oom: bool = False,
    stopped: str | None = None,
) -> EndReason:
    """A finished run's reason from its exit code (0: succeeded). `started`: whether the user's command
    had started (command_started: its log says so); the runtime's setup codes (100-109) mean a setup
    step failed only before that (None: not known). `oom`: the backend saw an OOM kill; a bare 137 is
    reported as most likely one. `memory`: the run's memory limit, if it had one. `stopped`: why the
    runtime's watchdog ended it (watchdog_stop: the last line of its log), for WATCHDOG_EXIT."""
    if code == 0:
        return EndReason(kind=Cause.succeeded, line="succeeded", exit_code=0)
    if stopped and code == WATCHDOG_EXIT and not oom:
        return watchdog_stopped(stopped, code, run_id)
    if oom:
        limit = f" (limit {memory})" if memory else ""
        return EndReason(
            kind=Cause.oom,
            line=f"killed for using too much memory{limit}",
            fix=policy.exit_line(OOM_EXIT, run_id, memory)[1],
            exit_code=code,
        )
    if code == OOM_EXIT:
        line, fix = policy.exit_line(code, run_id, memory)
        return EndReason(kind=Cause.oom, line=line, fix=fix, exit_code=code)
    if code in SETUP_STEPS and started is None:
        what, _ = SETUP_STEPS[code]
        return EndReason(
            kind=Cause.exit_code,
            line=f"failed with exit code {code}: launchkit's code for \"{what}\", or your command's own"
            " (its log could not be read to tell whether your command had started)",
            fix=policy.LOG_FIX.format(id=run_id),
            exit_code=code,
        )
    if code in SETUP_STEPS and not started:
        what, fix = SETUP_STEPS[code]
        return EndReason(
            kind=Cause.setup,
            line=f"setup failed before your command ran: {what} (exit {code})",
            fix=fix.format(id=run_id),
            exit_code=code,
        )
    line, fix = policy.exit_line(code, run_id)  # as the job's runtime posts it
    return EndReason(kind=Cause.exit_code, line=line, fix=fix, exit_code=code)


# launchkit's own stop of a run it follows (`run --timeout/--start-timeout`: cli/following.py), as the
# backends keep it (local: the run's record; Beaker: a line of the experiment's description)
LAUNCHKIT_STOP = "stopped by launchkit following it: "


def launchkit_stopped(why: str) -> EndReason:
    """A run that launchkit's follower stopped (a limit of `run --follow` passed): never the user's."""
    return EndReason(
        kind=Cause.timeout,
        line=LAUNCHKIT_STOP + why,
        fix="raise that limit, or drop it",
        by="launchkit",
    )


def canceled(by: str | None = None) -> EndReason:
    who = f" by {by}" if by else ""
    return EndReason(kind=Cause.canceled, line=f"was canceled{who}", by=by)


def timed_out(which: str, fix: str) -> EndReason:
    return EndReason(kind=Cause.timeout, line=f"was stopped by a timeout: {which}", fix=fix, by=which)


def describe(run: RunInfo) -> str:
    """One line (without the run id) saying how the run ended and what to do, or where it stands; an
    attempt that did not resume from where the one before got is said (`RunInfo.resume`)."""
    resume = run.resume if run.resume and (run.end is None or run.resume not in run.end.line) else None
    if run.end is not None:
        told = "; ".join(n for n in (resume, run.culprit) if n)
        if told:
            return f"{run.end.line} ({told})" + (f"; {run.end.fix}" if run.end.fix else "")
        return run.end.text()
    if run.status.finished or run.status == RunStatus.preempted:  # a backend that gave no reason
        code = f" with exit code {run.exit_code}" if run.exit_code not in (None, 0) else ""
        return f"{run.status.value}{code}" + (f": {run.message}" if run.message else "")
    if run.waiting is not None:  # queued again after a retry or a preemption: that attempt is said too
        return f"is {run.status.value}: {run.waiting.text()}" + (f" ({run.retry})" if run.retry else "")
    notes = [n for n in (run.retry, run.message, resume) if n]  # a retried run: its attempt, the last end
    return f"is {run.status.value}" + (f" ({'; '.join(notes)})" if notes else "")
