"""A run as tasks x replicas x attempts, and the one place its outcome and cause are decided.

I/O-free: backends turn what their service holds into a flat list of `Job` records, one per job (a
Beaker job; a local replica's process run), and every command reads the run through `RunView` and
`outcome()`; nothing reads `jobs[0]`.

    jobs = [Job(id="j1", task="main", replica=1, replicas=2, state=RunStatus.failed, exit_code=7, ...),
            Job(id="j0", task="main", replica=0, replicas=2, state=RunStatus.canceled,
                stop=Cause.sibling_failed, ...)]
    view = RunView.of(jobs, tasks=[Shape("main", 2)], allowed_retries=0)
    out = outcome(view, now=time.time())   # now/grace: when an expected retry is given up on
    out.state         -> RunStatus.failed
    out.exit_code     -> 7                       (the failing replica's own; None when it had none)
    out.text()        -> "replica 1 of 2 failed with exit code 7 (replica 0 was stopped for it)"
    out.cause         -> the Job that decides it; out.where -> Where(task="main", replica=1, attempt=1)
    out.going         -> False                   (True: a part still runs, or a retry/resume is due)
    logs_args(view, out.where) -> ["--replica", "1"]   (what `logs ID ...` needs to show that part)
    due(view, part, now=..., grace=...) -> "a retry" | "its first job" | None
    attempt_line(view, job) -> "replica 1 of 2: attempt 1 failed with exit code 3; it is retried ..."
    attempt_text(view) -> "attempt 2 of 4; last: node lost"   (list and why show it)
    describe_job(job) -> "failed with exit code 3"

Vocabulary:
- a *part* is one task's one replica (`Part`): its jobs, oldest first, are its *attempts* (1-based;
  attempt N is the part's Nth job, whether it came from a retry or a resume after a preemption).
  `Job.attempt` may be given; otherwise it is the job's place among its part's jobs, ordered by
  `retry_of` links (Beaker's `retry_ancestor_id`) and then by `created`.
- `allowed_retries`: the run's retry budget (Beaker's `retry.allowedTaskRetries`, counted per
  experiment; launchkit's `--retries`). A job that failed gets a new attempt while budget is left.
- a *resume*: an attempt that follows a preemption (or a sibling's preemption or retry); it does not
  spend the retry budget.
- `going`: some part has not finished, or its newest attempt failed with retry budget left (a retry
  is due). A retry that has not appeared `grace` seconds after the job finished is given up on
  (Beaker's delay is unknown, and whether it retries a node loss too). A resume after a preemption
  is created with the cancel (fact sheet 4.3): a preempted newest attempt is not resumed.

Pure functions of their arguments; times are seconds since the epoch (floats) and only compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from launchkit.core.status import Cause, RunStatus


class Job(BaseModel):
    """One job (one attempt of one replica of one task), as a backend reads it."""

    model_config = ConfigDict(frozen=True)

    id: str
    task: str  # the task's name as the user wrote it (replicas of a task share it)
    replica: int = 0
    replicas: int = 1  # the task's replica count
    attempt: int | None = None  # 1-based; None: from retry_of links and `created`
    retry_of: str | None = None  # the job this one retries or resumes (Beaker: retry_ancestor_id)
    state: RunStatus
    exit_code: int | None = None  # the process's own; None when it had none
    stop: Cause | None = None  # canceled: why
    stopped_by: str | None = None  # canceled: who or what, in the service's words
    message: str | None = None  # the service's status message, if any
    cause: str | None = None  # how it ended, where the backend knows better than its exit code ("stalled")
    spent: bool | None = None  # the attempt after it spent the retry budget (None: by Beaker's rules)
    created: float = 0.0
    started: float | None = None
    finished: float | None = None  # finalized (Beaker) / ended (local)
    retry_delay: float | None = None  # seconds its retry waits before it starts (local backoff)

    @property
    def spends_retry(self) -> bool:
        """Whether the attempt after it is a retry (spends budget) rather than a resume."""
        if self.spent is not None:
            return self.spent
        return self.ended_badly or self.stop == Cause.node_lost

    @property
    def ended_badly(self) -> bool:
        """Its own failure (not a cancel): an exit code other than 0, or failed without one."""
        return self.state in (RunStatus.failed, RunStatus.lost) or (
            self.state == RunStatus.succeeded and self.exit_code not in (None, 0)
        )


class Shape(BaseModel):
    """A task of the run as launched: its name and replica count (parts without a job yet count)."""

    model_config = ConfigDict(frozen=True)

    name: str
    replicas: int = 1


class Part(BaseModel):
    """One replica of one task: its attempts, oldest first (each with its `attempt` number set)."""

    model_config = ConfigDict(frozen=True)

    task: str
    replica: int
    replicas: int
    attempts: tuple[Job, ...] = ()

    @property
    def latest(self) -> Job | None:
        return self.attempts[-1] if self.attempts else None

    def attempt(self, n: int) -> Job | None:
        return self.attempts[n - 1] if 1 <= n <= len(self.attempts) else None


class Where(BaseModel):
    """The part (and attempt) a message is about; also what `logs` takes to show it."""

    model_config = ConfigDict(frozen=True)

    task: str
    replica: int = 0
    attempt: int = 1


class RunView(BaseModel):
    """A run's parts, in task order then replica order. Build it with `RunView.of`."""

    model_config = ConfigDict(frozen=True)

    parts: tuple[Part, ...]
    allowed_retries: int = 0
    canceled: bool = False  # the run as a whole was canceled (Beaker: the experiment's `canceled`)
    canceled_by: str | None = None  # by whom, in the service's words

    @classmethod
    def of(
        cls,
        jobs: Iterable[Job],
        *,
        tasks: Sequence[Shape] = (),
        allowed_retries: int = 0,
        canceled: bool = False,
        canceled_by: str | None = None,
    ) -> RunView:
        """Group `jobs` into parts and number their attempts. `tasks`: the run's tasks as launched,
        so that parts without a job yet are there too (their order is the run's task order)."""
        shapes: dict[str, int] = {s.name: s.replicas for s in tasks}
        groups: dict[tuple[str, int], list[Job]] = {}
        for s in tasks:
            for r in range(s.replicas):
                groups[(s.name, r)] = []
        for j in jobs:
            shapes.setdefault(j.task, j.replicas)
            shapes[j.task] = max(shapes[j.task], j.replicas, j.replica + 1)
            groups.setdefault((j.task, j.replica), []).append(j)
        order = list(shapes)
        parts = []
        for task, replica in sorted(groups, key=lambda k: (order.index(k[0]), k[1])):
            attempts = _ordered(groups[(task, replica)])
            parts.append(Part(task=task, replica=replica, replicas=shapes[task], attempts=attempts))
        return cls(
            parts=tuple(parts), allowed_retries=allowed_retries, canceled=canceled, canceled_by=canceled_by
        )

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(p.task for p in self.parts))

    @property
    def jobs(self) -> list[Job]:
        return [j for p in self.parts for j in p.attempts]

    @property
    def latest(self) -> list[Job]:
        """The newest attempt of every part that has one: what the run's state is made of."""
        return [p.latest for p in self.parts if p.latest is not None]

    @property
    def attempts(self) -> int:
        """The most attempts any part had (1 for a run never retried or resumed; 0: no job yet)."""
        return max((len(p.attempts) for p in self.parts), default=0)

    @property
    def retries_used(self) -> int:
        """Attempts made because an earlier one failed (what spends the retry budget)."""
        return sum(1 for p in self.parts for prev in p.attempts[:-1] if prev.spends_retry)

    def part(self, task: str | None = None, replica: int = 0) -> Part | None:
        task = task if task is not None else (self.parts[0].task if self.parts else None)
        return next((p for p in self.parts if p.task == task and p.replica == replica), None)

    def find(self, job_id: str) -> tuple[Part, Job] | None:
        for p in self.parts:
            for j in p.attempts:
                if j.id == job_id:
                    return p, j
        return None

    def name(self, part: Part) -> str:
        """How a message names a part: `replica 1 of 2`, `task main__1`, `task t replica 1 of 2`,
        or "" for the only part of a one-task, one-replica run."""
        several_tasks = len(self.tasks) > 1
        bits = []
        if several_tasks:
            bits.append(f"task {part.task}")
        if part.replicas > 1:
            bits.append(f"replica {part.replica} of {part.replicas}")
        return " ".join(bits)


def _ordered(jobs: list[Job]) -> tuple[Job, ...]:
    """A part's jobs oldest first, numbered. Given attempt numbers win; else a job follows the one it
    names in `retry_of`, else creation time (then id, as Beaker's ids sort by time)."""
    if all(j.attempt is not None for j in jobs):
        return tuple(sorted(jobs, key=lambda j: j.attempt or 0))
    by_time = sorted(jobs, key=lambda j: (j.created, j.id))
    ids = {j.id for j in jobs}
    out: list[Job] = []
    placed: set[str] = set()
    pending = list(by_time)
    while pending:  # ancestors first; a link to an unknown job is ignored
        for j in pending:
            if not j.retry_of or j.retry_of not in ids or j.retry_of in placed:
                out.append(j)
                placed.add(j.id)
                pending.remove(j)
                break
        else:  # a cycle in the links: fall back to time order
            out.extend(pending)
            break
    return tuple(j.model_copy(update={"attempt": i}) for i, j in enumerate(out, 1))


class Outcome(BaseModel):
    """How the run ended (or where it stands), decided once, for every command."""

    model_config = ConfigDict(frozen=True)

    state: RunStatus  # running: a part runs, or a retry/resume is due; queued: none has started yet
    going: bool
    exit_code: int | None = None  # the deciding part's own exit code; 0 when succeeded
    cause: Job | None = None  # the attempt that decides it (a failed replica, a canceled job ...)
    where: Where | None = None  # its part and attempt
    subject: str = ""  # how messages name that part ("replica 1 of 2"; "" for a one-part run)
    notes: tuple[str, ...] = ()  # what else matters ("replica 0 was stopped for it", retries)
    attempts: int = 1
    retries: int = 0  # retries used (failed attempts that were tried again)
    waiting_for: str | None = None  # going: the retry/resume that is due ("a retry of replica 1")
    line: str | None = None  # the plain reason when no single job decides it (canceled before a job)

    def text(self, reason: str | None = None) -> str:
        """One line, without the run id: `replica 1 of 2 failed with exit code 7 (replica 0 was
        stopped for it)`. `reason`: the backend's own words for the deciding job's end (e.g. an
        OOM kill, a setup step), in place of the plain one."""
        if reason is None:
            reason = describe_job(self.cause) if self.cause is not None else self.line or self.state.value
        head = f"{self.subject} {reason}" if self.subject else reason
        return head + (f" ({'; '.join(self.notes)})" if self.notes else "")


def describe_job(job: Job) -> str:
    """A job's end in plain words: `failed with exit code 3`, `was preempted`, `is running`."""
    if job.state == RunStatus.succeeded and job.exit_code in (None, 0):
        return "succeeded"
    if job.ended_badly:
        if job.state == RunStatus.lost:
            return "was lost" + (f" ({job.message})" if job.message else "")
        if job.exit_code not in (None, 0):
            return f"failed with exit code {job.exit_code}"
        return "failed without an exit code" + (f" ({job.message})" if job.message else "")
    if job.state in (RunStatus.canceled, RunStatus.stopping):
        by = f" ({job.stopped_by})" if job.stopped_by else ""
        return {
            Cause.preempted: "was preempted",
            Cause.sibling_failed: "was stopped because another part of the run failed",
            Cause.sibling_preempted: "was stopped because another part of the run was preempted",
            Cause.sibling_retry: "was stopped while another part of the run is retried",
            Cause.node_lost: "was stopped: its node was lost",
            Cause.timeout: "was stopped: it ran past its task timeout",
            Cause.unschedulable: "was never scheduled",
            Cause.idle: "was stopped for being idle",
        }.get(job.stop or Cause.canceled, "was canceled") + by
    return f"is {job.state.value}"


def _attempt_note(job: Job) -> str:
    return f"attempt {job.attempt}: {_short(job)}"


def _short(job: Job) -> str:
    if job.cause:
        return job.cause
    if job.exit_code not in (None, 0) and job.stop is None:
        return f"exit code {job.exit_code}"
    if job.stop == Cause.node_lost:
        return "node lost"
    if job.stop is not None and job.stop.resumes:
        return "preempted" if job.stop == Cause.preempted else "stopped for another part"
    return job.message or job.state.value


def ended_as(job: Job) -> str | None:
    """How a job ended in a word or two (`exit code 1`, `preempted`, `stalled`), None while it goes on
    (`why --json`'s `attempts_detail`)."""
    if job.state in (RunStatus.queued, RunStatus.starting, RunStatus.running, RunStatus.stopping):
        return None
    if job.state == RunStatus.succeeded and job.exit_code in (None, 0):
        return "succeeded"
    return _short(job)


def attempt_text(view: RunView) -> str | None:
    """Where a retried or resumed run stands: `attempt 2 of 5; last: node lost` for its part with the
    most attempts ("of N": the budget plus the resumes that did not spend it; left out when the run
    has no budget), or None for a run still on its first attempt."""
    part = max(view.parts, key=lambda p: len(p.attempts), default=None)
    if part is None or len(part.attempts) < 2:
        return None
    n, last = len(part.attempts), part.attempts[-2]
    free = sum(1 for j in part.attempts[:-1] if not j.spends_retry)
    of = f" of {1 + view.allowed_retries + free}" if view.allowed_retries else ""
    name = view.name(part)
    return f"{name + ': ' if name else ''}attempt {n}{of}; last: {_short(last)}"


def due(view: RunView, part: Part, *, now: float | None = None, grace: float | None = None) -> str | None:
    """What the part still waits for: "its first job", "a retry" (its newest attempt failed with
    budget left, and `grace` has not passed since), or None (it runs, or nothing more comes)."""
    job = part.latest
    if job is None:
        return None if view.canceled else "its first job"
    if not job.state.finished:
        return None
    if view.canceled or (job.stop is not None and job.stop.resumes):
        return None  # canceled; a resume is created with the cancel (fact 4.3): none came, none will
    if job.spends_retry and view.retries_used < view.allowed_retries:
        if now is not None and grace is not None and job.finished is not None and now - job.finished > grace:
            return None  # Beaker did not retry it (e.g. a node loss it does not retry)
        return "a retry"
    return None


def outcome(view: RunView, *, now: float | None = None, grace: float | None = None) -> Outcome:
    """The run's outcome and its cause: the one answer every command shows.

    Order of precedence for a finished run: a part's own failure (the earliest to finish, so the one
    that made the others stop), then a node loss, timeout, never scheduled, preemption not resumed,
    then a cancel by a person, then a sibling's stop; succeeded when every part's newest attempt did.
    `now`/`grace`: an expected retry not seen `grace` seconds after its job finished is given up on."""
    decided = _decide(view, now, grace)
    return decided.model_copy(update={"attempts": view.attempts or 1, "retries": view.retries_used})


def _decide(view: RunView, now: float | None, grace: float | None) -> Outcome:
    latest = view.latest
    if not view.parts or (not latest and view.canceled):
        if view.canceled:
            who = f" ({view.canceled_by})" if view.canceled_by else ""
            line = f"was canceled before any job of it existed{who}"
            return Outcome(state=RunStatus.canceled, going=False, line=line)
        return Outcome(state=RunStatus.queued, going=True, waiting_for="its first job")
    dues = {(p.task, p.replica): due(view, p, now=now, grace=grace) for p in view.parts}
    unfinished = [p for p in view.parts if p.latest is not None and not p.latest.state.finished]
    pending = next(((k, d) for k, d in dues.items() if d), None)
    if unfinished or pending is not None:
        started = any(j.started is not None for j in view.jobs)
        waiting = None
        if pending is not None and not unfinished:
            (task, replica), what = pending
            p = view.part(task, replica)
            name = view.name(p) if p is not None else ""
            waiting = what + (f" of {name}" if name else "")
        state = RunStatus.running if started else RunStatus.queued
        return Outcome(state=state, going=True, waiting_for=waiting)
    return _final(view, latest)


def _final(view: RunView, latest: list[Job]) -> Outcome:
    def pick(jobs: list[Job]) -> Job:
        return min(jobs, key=lambda j: (j.finished if j.finished is not None else float("inf"), j.created))

    own = [j for j in latest if j.ended_badly]
    ranks = (
        (own, RunStatus.failed),
        ([j for j in latest if j.stop == Cause.node_lost], RunStatus.failed),
        ([j for j in latest if j.stop == Cause.timeout], RunStatus.failed),
        ([j for j in latest if j.stop in (Cause.unschedulable, Cause.idle)], RunStatus.failed),
        ([j for j in latest if j.stop == Cause.preempted], RunStatus.preempted),
        ([j for j in latest if j.stop in (Cause.canceled, Cause.other)], RunStatus.canceled),
        ([j for j in latest if j.state == RunStatus.canceled], RunStatus.canceled),
    )
    for jobs, state in ranks:
        if jobs:
            cause = pick(jobs)
            if state == RunStatus.failed and cause.state == RunStatus.lost:
                state = RunStatus.lost
            return _told(view, cause, state)
    return _told(view, None, RunStatus.succeeded)


def _told(view: RunView, cause: Job | None, state: RunStatus) -> Outcome:
    notes: list[str] = []
    line = None
    where = subject = None
    part = None
    if cause is not None:
        found = view.find(cause.id)
        part = found[0] if found else None
        where = Where(task=cause.task, replica=cause.replica, attempt=cause.attempt or 1)
        subject = view.name(part) if part is not None else ""
        stopped = [
            view.name(p)
            for p in view.parts
            if p is not part
            and p.latest is not None
            and p.latest.stop in (Cause.sibling_failed, Cause.sibling_preempted)
        ]
        if stopped and (cause.ended_badly or (cause.stop is not None and not cause.stop.by_sibling)):
            several = len(stopped) > 1
            notes.append(f"{_join(stopped)} {'were' if several else 'was'} stopped for it")
        if part is not None:
            earlier = list(part.attempts[:-1])
            if earlier:
                notes.append(
                    f"attempt {cause.attempt} of {len(part.attempts)}; "
                    + ", ".join(_attempt_note(j) for j in earlier)
                )
    else:  # succeeded: say what it took
        retried = [(p, j) for p in view.parts for j in p.attempts[:-1]]
        failed = [(p, j) for p, j in retried if j.spends_retry]
        resumed = [(p, j) for p, j in retried if not j.spends_retry]
        if failed:
            n = len(failed)
            line = f"succeeded after {n} {'retry' if n == 1 else 'retries'}"
            notes.append(
                ", ".join(f"{_prefix(view.name(p))}attempt {j.attempt}: {_short(j)}" for p, j in failed)
            )
        if resumed:
            n = len({(p.task, p.replica, j.id) for p, j in resumed if j.stop == Cause.preempted})
            if n:
                notes.append(f"resumed after {n} preemption{'s' if n > 1 else ''}")
    exit_code = 0 if state == RunStatus.succeeded else (cause.exit_code if cause is not None else None)
    return Outcome(
        state=state,
        going=False,
        exit_code=exit_code,
        cause=cause,
        where=where,
        subject=subject or "",
        notes=tuple(notes),
        line=line,
    )


def _prefix(name: str) -> str:
    return f"{name} " if name else ""


def _join(names: list[str]) -> str:
    """`replica 0`, `replicas 0 and 2`: names of one task's replicas are shortened."""
    short = [n.removesuffix(f" of {n.rsplit(' of ', 1)[-1]}") if " of " in n else n for n in names]
    if len(short) == 1:
        return short[0]
    return ", ".join(short[:-1]) + " and " + short[-1]


def logs_args(view: RunView, where: Where | None) -> list[str]:
    """The `logs` options that show `where`'s log: --task for a run of several tasks, --replica when
    its task has several, --attempt when it is not the part's newest attempt."""
    if where is None:
        return []
    args: list[str] = []
    if len(view.tasks) > 1:
        args += ["--task", where.task]
    part = view.part(where.task, where.replica)
    if part is not None and part.replicas > 1:
        args += ["--replica", str(where.replica)]
    if part is not None and where.attempt != len(part.attempts):
        args += ["--attempt", str(where.attempt)]
    return args


def attempt_line(view: RunView, job: Job, *, ended: bool = False) -> str | None:
    """While following: one line when an attempt ends and another comes, e.g. `replica 1 of 2:
    attempt 1 failed with exit code 3; it is retried in 1 s (retry 1 of 2)`; None when nothing follows.
    `ended`: the run had ended when this is told (a replay): the retry is told as past, without its wait."""
    found = view.find(job.id)
    if found is None or not job.state.finished:
        return None
    part, job = found  # numbered
    name = view.name(part)
    head = (f"{name}: " if name else "") + f"attempt {job.attempt} {describe_job(job)}"
    if job.stop is not None and job.stop.resumes:
        return head + ("; it resumed as a new attempt" if ended else "; it resumes as a new attempt")
    if job.spends_retry and view.allowed_retries:
        if part.latest is job:  # its retry is still to come
            used = view.retries_used + 1
        else:  # the how-manieth retry it was, counting the run's retries by when their job ended
            done = [j for p in view.parts for j in p.attempts[:-1] if j.spends_retry]
            used = sum(1 for j in done if (j.finished or 0) <= (job.finished or 0))
        if used <= view.allowed_retries:
            if ended:
                return head + f"; it was retried (retry {used} of {view.allowed_retries})"
            after = f" in {_seconds(job.retry_delay)}" if job.retry_delay else ""
            return head + f"; it is retried{after} (retry {used} of {view.allowed_retries})"
    return None


def _seconds(value: float) -> str:
    """1.0 -> '1 s', 0.25 -> '0.25 s', 60.0 -> '60 s'."""
    return f"{value:.2f}".rstrip("0").rstrip(".") + " s"


__all__ = [
    "Job",
    "Outcome",
    "Part",
    "RunView",
    "Shape",
    "Where",
    "attempt_line",
    "attempt_text",
    "describe_job",
    "due",
    "logs_args",
    "outcome",
]
