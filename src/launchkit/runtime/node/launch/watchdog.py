"""The job's watchdog (docs/runtime.md, "Watchdog"): with `--stall-timeout` or `--inactive-timeout`
/ `--inactive-soft-timeout` the runtime stays the command's parent instead of exec'ing it. It passes
the command's output through byte for byte, forwards the job's signals to the command's process group,
and, where the job runs and with nobody following, ends that group when the command makes no progress
(no line matching a progress pattern) or prints nothing for too long. It then says why in the job's
log, as its last line (`[launchkit] stopped: ...`, which the backends read: backends/ending.py), and
exits EXIT_STOPPED.

Settings come from the run's policy (node/policy.py, decoded once by the launcher): its stall and
inactivity limits and its progress patterns (none given: DEFAULT_PATTERNS).

Resume verification (docs/retries.md, "Did it resume?"): policy.ENV_RESUME_FROM is the step the
attempt before this one had reached (the local supervisor gives it to a new attempt; restart.py to a
command it starts again in place). The first progress line's step (the pattern's `step` group, else
its first number) below it is told once (`attempt 2 restarted at step 0; attempt 1 had reached step
12,639: it is not resuming from its checkpoint`); with the policy's `require_resume`
(`--require-resume`) the watchdog stops the command for it instead, as its own stop, which nothing
retries.

Progress is matched with a budget (matching.py): the user's patterns in a matcher process that the
reader never waits for; when it falls behind it is given up, once, in one warning line, and from then
on any output counts as progress.
"""

from __future__ import annotations

import os
import re
import select
import signal
import time
from typing import Callable, Iterable, NamedTuple, Sequence

from ..policy import ENV_ATTEMPT, ENV_RESTART, ENV_RESUME_FROM, Policy
from . import matching, stackdump, stallbudget
from .matching import DEFAULT_PATTERNS, NUMBER, progress_in, progress_step
from .procs import Children, spawn_forwarding, stop_group

__all__ = ["DEFAULT_PATTERNS", "NUMBER", "progress_in", "progress_step"]  # (read here by the backends too)

EXIT_STOPPED = 124  # the watchdog ended the command (as timeout(1)); its log's last line says why
STOPPED = "stopped: "  # after "[launchkit] ": the line the backends read (backends/ending.py)
SOFT_REPEAT = 3600.0  # the soft warning comes again at most every max(soft, 1 h), as gantry's
STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL to the command's group
LINE_MAX = 4096  # bytes of an unfinished line kept for matching

OWN_LINE = b"[launchkit] "  # the runtime's lines in a job's log (_say)
RESUME_FLAG = "--require-resume"  # in a stop's reason: launchkit's stop for it, never retried


class Resume(NamedTuple):
    """Resume verification: the step the run before this one reached, how the two are named, and
    whether a start below it is stopped (`--require-resume`)."""

    before: float
    this: str  # "attempt 2", "restart 1"
    that: str  # "attempt 1", "the start before it"
    require: bool


class Settings(NamedTuple):
    stall: float | None
    grace: float
    patterns: list[re.Pattern[str]]
    inactive: float | None
    soft: float | None
    resume: Resume | None = None
    require: bool = False  # --require-resume (the policy's), for the starts restart.py makes
    auto: tuple[float, float] | None = None  # --stall-timeout auto: (floor, cap) (stallbudget.py)
    # progress lines are told (`tell("progress", ...)`: the job's event posts), the first and then at
    # most one every `report` seconds (0: none); matched only when one is due, if nothing else needs it
    report: float = 0.0


def settings(policy: Policy, env: dict[str, str] | None = None) -> Settings | None:
    """The watchdog's settings from the run's policy and, for a retried start, the step the one before
    reached (`env`'s policy.ENV_RESUME_FROM); None when neither asks for it (the command is exec'd as
    always). ValueError names a pattern that is not a regular expression."""
    resume = resume_of(env or {}, policy.require_resume)
    if not policy.watched and resume is None:
        return None
    patterns = progress_patterns(policy.progress_patterns)
    limits = (
        policy.stall_timeout,
        policy.grace,
        patterns,
        policy.inactive_timeout,
        policy.inactive_soft_timeout,
    )
    return Settings(*limits, resume=resume, require=policy.require_resume, auto=policy.stall_auto)


def resume_of(env: dict[str, str], require: bool) -> Resume | None:
    """What this start is checked against: policy.ENV_RESUME_FROM (None when unset or not a number);
    named by the attempt where it is known, else by the in-place restart; `require`: --require-resume."""
    m = NUMBER.fullmatch(env.get(ENV_RESUME_FROM) or "")
    if m is None:
        return None
    attempt, restart = env.get(ENV_ATTEMPT) or "", env.get(ENV_RESTART) or ""
    if attempt.isdigit() and int(attempt) > 1:
        this, that = f"attempt {attempt}", f"attempt {int(attempt) - 1}"
    else:
        this, that = f"restart {restart or '?'} (in place)", "the start before it"
    return Resume(float(m.group(0)), this, that, require)


def progress_patterns(given: Sequence[str]) -> list[re.Pattern[str]]:
    """The policy's progress patterns compiled, else DEFAULT_PATTERNS; ValueError names a bad one.
    The backends read a run's progress with these too (`launchkit list`, `why`)."""
    return matching.compile_all(matching.pattern_texts(given))


def progress_of(
    lines: Iterable[bytes], patterns: Sequence[re.Pattern[str]], newest: bool
) -> tuple[str, float | None] | None:
    """The first (or `newest`) progress of a log's lines, oldest first: (text, step) as progress_step's.
    The runtime's own lines (`[launchkit] ...`, which may name steps) are not the command's progress.
    With a budget (matching.scan: the user's patterns get BUDGET seconds, then None)."""
    parts = [
        part.decode("utf-8", "replace")
        for line in lines
        if not line.startswith(OWN_LINE)
        for part in line.replace(b"\r", b"\n").split(b"\n")
    ]
    hit = matching.scan(parts, patterns)[1 if newest else 0]
    return None if hit is None else (hit[1], hit[2])


def step_value(step: float) -> str:
    """A step as LAUNCHKIT_RESUME_FROM carries it: 12639.0 -> "12639", 0.5 -> "0.5"."""
    return str(int(step)) if step == int(step) else repr(step)


def fmt_step(step: float) -> str:
    """12639.0 -> "12,639"; 0.5 -> "0.5"."""
    return f"{int(step):,}" if step == int(step) else f"{step:g}"


def not_resuming(r: Resume, first: float) -> str:
    """`attempt 2 restarted at step 0; attempt 1 had reached step 12,639: it is not resuming from
    its checkpoint`."""
    return (
        f"{r.this} restarted at step {fmt_step(first)}; {r.that} had reached step {fmt_step(r.before)}:"
        " it is not resuming from its checkpoint"
    )


def fmt_secs(seconds: float) -> str:
    """90 -> "1m30s", 7200 -> "2h", 2 -> "2s" (as the durations the user gives)."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{n}{u}" for n, u in ((h, "h"), (m, "m"), (s, "s")) if n) or "0s"


def _clock_time(t: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(t))


class Watch:
    """What the watchdog knows: when output and progress last came, the last progress text.
    Fed with output (`saw`), asked with the time (`check`); both clocks are parameters."""

    def __init__(self, s: Settings, now: float, wall: float, matcher: matching.Remote | None = None) -> None:
        self.s = s
        self.matcher = matcher  # the user's patterns' matcher process; None: matched here (the defaults)
        self.gave_up = False  # progress matching was given up: any output counts as progress
        self.t0 = self.last_output = now
        self.last_progress: float | None = None
        self.progress_text = ""
        self.progress_wall = wall
        self.warned: float | None = None
        self.pending: dict[int, bytes] = {}  # fd -> the unfinished line's bytes
        self.first_step: float | None = None  # the first progress line's step (resume verification)
        self.last_step: float | None = None  # the newest's
        self.notes: list[str] = []  # said once, as they come (the run loop takes them)
        self.fresh: tuple[str, str] | None = None  # a new progress line (text, line), told by the run loop
        self.report_at = now  # when the next progress line is told (Settings.report)
        self.resume_stop: str | None = None  # --require-resume: why this start is stopped
        auto = s.auto
        self.budget = None if auto is None else stallbudget.AutoBudget(floor=auto[0], cap=auto[1])

    def stall(self) -> float | None:
        """The stall limit in force: --stall-timeout's, or the automatic budget's."""
        return self.s.stall if self.budget is None else self.budget.budget()

    def budget_note(self) -> str | None:
        """The automatic budget, when it changed (said in the log)."""
        return None if self.budget is None else self.budget.change()

    def _phases(self, parts: list[bytes], now: float) -> None:
        """--stall-timeout auto: a checkpoint or evaluation phase begun among `parts` (after the
        progress line, when the caller fed it first)."""
        if self.budget is not None and self.budget.phase is None:
            for raw in parts:
                self.budget.line(raw[:LINE_MAX].decode("utf-8", "replace"), now)

    def saw(self, fd: int, data: bytes, now: float, wall: float) -> None:
        self.last_output = now
        only_told = self.s.stall is None and self.s.resume is None and self.budget is None
        if only_told and (not self.s.report or now < self.report_at):
            return  # (nothing needs progress now: the next told line is not due)
        buf = self.pending.get(fd, b"") + data
        parts = buf.replace(b"\r", b"\n").split(b"\n")
        self.pending[fd] = parts.pop()[-LINE_MAX:]
        if self.gave_up:
            self.last_progress, self.progress_wall = now, wall
            if self.budget is not None:
                self.budget.progress(now)
            return
        if self.matcher is not None:
            self.matcher.feed([raw.decode("utf-8", "replace") for raw in parts], now, wall)
            self._phases(parts, now)  # its progress, heard later, ends a phase only if it is newer
            return
        if self.last_progress is None and self.s.resume is not None:
            for raw in parts:  # the first progress line of this start: did it resume?
                found = progress_step(raw.decode("utf-8", "replace"), self.s.patterns)
                if found is not None:
                    self._first(found[1])
                    break
        for i in range(len(parts) - 1, -1, -1):  # the newest complete line that matches
            found = progress_step(parts[i].decode("utf-8", "replace"), self.s.patterns)
            if found is not None:
                self.last_progress, self.progress_wall, self.progress_text = now, wall, found[0]
                if self.s.report and now >= self.report_at:
                    self.fresh = (found[0], parts[i][:LINE_MAX].decode("utf-8", "replace"))
                    self.report_at = now + self.s.report
                if found[1] is not None:
                    self.last_step = found[1]
                    if self.first_step is None:
                        self.first_step = found[1]
                if self.budget is not None:
                    self.budget.progress(now)
                    self._phases(parts[i + 1 :], now)
                return
        self._phases(parts, now)

    def heard(self) -> None:
        """The matcher's answers came (its fileno is readable): as saw's own matching, later."""
        if self.matcher is None:
            return
        first, newest = self.matcher.heard()
        if first is not None and self.last_progress is None and self.s.resume is not None:
            self._first(first[1])
        if newest is not None and (self.last_progress is None or newest[2] >= self.last_progress):
            if self.budget is not None:
                self.budget.progress(newest[2], after_phase=False)
            text, step, self.last_progress, self.progress_wall = newest
            self.progress_text = text
            if self.s.report and newest[2] >= self.report_at:
                self.fresh = (text, text)  # (the matcher answers with the text it matched)
                self.report_at = newest[2] + self.s.report
            if step is not None:
                self.last_step = step
                if self.first_step is None:
                    self.first_step = step

    def behind(self, now: float, wall: float) -> str | None:
        """The warning, once, when the matcher is given up (it ended, or a line waited too long)."""
        if self.matcher is None or self.gave_up or not self.matcher.late(now):
            return None
        self.give_up(now, wall)
        return (
            f"warning: progress matching is given up ({self.matcher.failed}; --progress-pattern);"
            " the command runs on, and --stall-timeout counts any output as progress from now"
        )

    def give_up(self, now: float, wall: float) -> None:
        """From now on any output counts as progress (the stall limit counts from now)."""
        self.gave_up = True
        self.last_progress, self.progress_wall, self.progress_text = now, wall, "output (matching given up)"

    def settle(self, clock: Callable[[], float]) -> None:
        """The command ended while a resume check waited for its first progress line: the answers the
        matcher still owes for its last lines, within the matcher's own budget (then it is given up)."""
        m = self.matcher
        while self.s.resume is not None and self.first_step is None and m is not None and not self.gave_up:
            if not m.pending() or m.late(clock()):
                return
            if select.select([m.fileno()], [], [], 0.2)[0]:
                self.heard()

    def listening(self) -> list[int]:
        """The matcher's answers' fd while it is used."""
        return [] if self.matcher is None or self.gave_up else [self.matcher.fileno()]

    def _first(self, step: float | None) -> None:
        r = self.s.resume
        if r is None or step is None or step >= r.before:
            return
        note = not_resuming(r, step)
        if r.require:
            self.resume_stop = f"{note} ({RESUME_FLAG})"
        else:
            self.notes.append(note)

    def check(self, now: float) -> tuple[str | None, str | None]:
        """(why to stop, or None; a warning to give now, or None)."""
        s = self.s
        if self.resume_stop is not None:
            return self.resume_stop, None
        quiet = now - self.last_output
        if s.inactive is not None and quiet >= s.inactive:
            return f"no output for {fmt_secs(s.inactive)} (--inactive-timeout)", None
        stall = self.stall()
        if stall is not None:
            flag = "--stall-timeout" if self.budget is None else f"--stall-timeout auto: {self.budget.why()}"
            if self.last_progress is not None and now - self.last_progress >= stall:
                last = f"last: {self.progress_text} at {_clock_time(self.progress_wall)}"
                return f"no progress for {fmt_secs(stall)} ({last}; {flag})", None
            first = stall if self.budget is None else self.budget.floor  # auto: its floor after the grace
            if self.last_progress is None and now - self.t0 >= first + s.grace:
                which = fmt_secs(first) if self.budget is None else f"auto (its floor {fmt_secs(first)})"
                return (
                    f"no progress line in {fmt_secs(first + s.grace)} since it started"
                    f" (--stall-timeout {which} after a --stall-grace of {fmt_secs(s.grace)})",
                    None,
                )
        if s.soft is not None and quiet >= s.soft:
            if self.warned is None or now - self.warned >= max(s.soft, SOFT_REPEAT):
                self.warned = now
                return None, f"warning: no output for {fmt_secs(quiet)} (--inactive-soft-timeout)"
        return None, None

    def next_check(self, now: float) -> float:
        """Seconds until a limit could pass (at most 1: the soft warning and signals stay timely)."""
        s, waits = self.s, [1.0]
        if s.inactive is not None:
            waits.append(self.last_output + s.inactive - now)
        stall = self.stall()
        if stall is not None:
            if self.last_progress is None and self.budget is not None:
                stall = self.budget.floor
            since = self.last_progress if self.last_progress is not None else self.t0 + s.grace
            waits.append(since + stall - now)
        return max(0.01, min(waits))


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            n = os.write(fd, data)
        except OSError:
            return  # nobody reads our output any more: the command's goes on being watched
        data = data[n:]


def _say(message: str) -> None:
    _write_all(2, f"[launchkit] {message}\n".encode())


def _same_file(a: int, b: int) -> bool:
    try:
        sa, sb = os.fstat(a), os.fstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def tell_notes(watch: Watch, tell: Callable[[str, str], None] | None) -> None:
    """The resume notes (not resuming, said once) into the log and to `tell`; a new progress line to
    `tell` (as "TEXT\nLINE")."""
    for note in watch.notes:
        _say(note)
        if tell is not None:
            tell("resume", note)
    watch.notes.clear()
    fresh, watch.fresh = watch.fresh, None
    if fresh is not None and tell is not None:
        tell("progress", f"{fresh[0]}\n{fresh[1]}")


def run(
    argv: Sequence[str],
    env: dict[str, str],
    s: Settings,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    stops: list[str] | None = None,
    tell: Callable[[str, str], None] | None = None,
    steps: list[float] | None = None,
) -> int:
    """Run argv in its own process group under the watchdog; its exit code, or EXIT_STOPPED (and why,
    appended to `stops`: the command's own 124 is not a stop). `tell(what, text)` hears of "started"
    (the command runs: told once it does, never before), "signal" (forwarded), "warning", "resume"
    (not resuming: said once) and "stopped" (node/launch/notify.py).
    `steps` gets the newest progress line's step, if one had a step (restart.py checks the next start)."""

    children = Children()
    # the command's stdout and stderr: one pipe when ours are the same file (their order is kept)
    outs = [1] if _same_file(1, 2) else [1, 2]
    pipes = [os.pipe() for _ in outs]
    targets = [(pipes[0][1], 1), (pipes[-1][1], 2)]
    actions: list[tuple[int, ...]] = [(os.POSIX_SPAWN_DUP2, w, fd) for w, fd in targets]
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for pair in pipes for fd in pair]
    heard = None if tell is None else (lambda signum: tell("signal", signal.Signals(signum).name))
    if s.stall is not None or s.auto is not None or s.inactive is not None:  # a stack dump before a stop
        env = stackdump.command_env(env)
    try:  # the job's signals go to the command's process group
        pid = spawn_forwarding(argv, env, own_group=True, file_actions=actions, on_signal=heard)
    finally:
        for _, w in pipes:
            os.close(w)
    if tell is not None:  # (spawned: the command was exec'd) its start post never goes before it
        tell("started", argv[0])
    matcher, failed = None, ""
    texts = [p.pattern for p in s.patterns]
    reads = s.stall is not None or s.auto is not None or s.resume is not None or s.report
    if reads and not matching.is_default(texts):
        try:  # the user's patterns: in a process of their own, with a budget
            matcher = matching.Remote(texts)
        except OSError as e:  # fail open: the command runs, its output counts as progress
            failed = f"warning: cannot start the progress matcher ({e.strerror or e})"
            failed += ": any output counts as progress"
    watch = Watch(s, clock(), wall(), matcher)
    if failed:
        _say(failed)
        watch.give_up(clock(), wall())
    sink = {r: out for (r, _), out in zip(pipes, outs)}
    open_fds = list(sink)
    why: str | None = None
    ended_at: float | None = None
    while open_fds:
        now = clock()
        code = children.poll(pid)
        if code is not None and ended_at is None:
            ended_at = now
        if ended_at is not None and now - ended_at >= 1.0:
            break  # the command ended; something it left holds its output open: stop reading
        # the command's end is looked for at least every 0.2 s: a child it left may hold its output open
        timeout = min(0.2, watch.next_check(now))
        answers = watch.listening()
        ready, _, _ = select.select(open_fds + answers, [], [], timeout)
        if answers and answers[0] in ready:
            watch.heard()
        for fd in ready:
            if fd in answers:
                continue
            data = os.read(fd, 65536)
            if not data:
                open_fds.remove(fd)
                continue
            _write_all(sink[fd], data)
            if why is None:
                watch.saw(fd, data, clock(), wall())
        tell_notes(watch, tell)
        told = watch.budget_note() if why is None and ended_at is None else None
        if told:  # --stall-timeout auto: the budget in force, when it changes
            _say(told)
        if why is None and ended_at is None:
            late = watch.behind(clock(), wall())
            if late:
                _say(late)
            why, warning = watch.check(clock())
            if warning:
                _say(warning)
                if tell is not None:
                    tell("warning", warning)
            if why:
                _say(f"stopping the command: {why}")
                if watch.resume_stop is None:  # a stall or silence: the evidence first (stackdump.py)
                    stackdump.dump(pid, _say, lambda b: _write_all(2, b))
                stop_group(pid, STOP_GRACE, children)
                ended_at = clock()
    if why is None:  # the command ended as its last lines were read: the resume check decides alike
        watch.settle(clock)
        tell_notes(watch, tell)
        why = watch.resume_stop
    for r, _ in pipes:
        os.close(r)
    if matcher is not None:
        matcher.close()
    code = children.wait(pid)
    if steps is not None and watch.last_step is not None:
        steps.append(watch.last_step)
    if why:
        _say(STOPPED + why)  # the last line of the job's log
        if stops is not None:
            stops.append(why)
        if tell is not None:
            tell("stopped", why)
        return EXIT_STOPPED
    return code
