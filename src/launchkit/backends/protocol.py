"""The types every backend speaks: run status and info, capabilities, log queries, submissions,
and the `Backend` protocol.

Imported lazily through `launchkit.backends` (it loads pydantic), so that the local supervisor,
which lives under that package, starts without it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from enum import Enum
from typing import IO, Protocol

from pydantic import BaseModel, ConfigDict, Field

from launchkit.backends.handover import NoCredentials, Submission, having, looks_ahead, placement_of
from launchkit.backends.registry import Capability, titles
from launchkit.core.digest import TaskState
from launchkit.core.phases import PhaseDetail, PhaseNotes, Phases
from launchkit.core.specview import SpecView
from launchkit.core.status import Cause, RunStatus
from launchkit.core.units import ago
from launchkit.errors import UsageError
from launchkit.runtime.node.policy import Policy

__all__ = [  # re-exported: they live in light modules
    "Capability",
    "Cause",
    "NoCredentials",
    "RunStatus",
    "Submission",
    "looks_ahead",
    "placement_of",
]


class Posting(str, Enum):
    """Who posts a run's Slack messages (docs/notifications.md)."""

    follower = "follower"  # `follow`, with its webhook: every event it sees
    job = "job"  # the job's runtime what it knows (a webhook secret); `follow` only the rest
    run = "run"  # the run itself, every event (local: its runtime and its supervisor)
    sweep = "sweep"  # a sweep's run or task: its follower posts the sweep's digest, nobody else anything


class EndReason(BaseModel):
    """Why a finished run ended, from the backend's own fields and events. `line` is one sentence
    (no run id); `fix` what to do about it (None: nothing to fix). Never an invented exit code:
    `exit_code` is None when the job had none (e.g. its image could not be pulled)."""

    model_config = ConfigDict(frozen=True)

    kind: Cause
    line: str
    fix: str | None = None
    exit_code: int | None = None
    by: str | None = None  # canceled/preempted: by whom or by what, when known
    will_retry: bool | None = None  # preempted: whether Beaker starts the task again

    def text(self) -> str:
        return self.line + (f"; {self.fix}" if self.fix else "")


class WaitReason(BaseModel):
    """Why a queued run waits, from the backend's own scheduling data: `kind` (slot_limit, no_node,
    cordoned, budget, priority, synchronized, queued), one line (no run id) and what to do about it."""

    model_config = ConfigDict(frozen=True)

    kind: str
    line: str
    fix: str | None = None

    def text(self) -> str:
        return self.line + (f"; {self.fix}" if self.fix else "")


class Progress(BaseModel):
    """A running run's last progress line as its watchdog's patterns match it (node/launch/watchdog.py:
    `progress_in`): what it said (`step=1200`) and when it was logged (None: not known)."""

    model_config = ConfigDict(frozen=True)

    text: str
    at: dt.datetime | None = None

    def ago(self, now: dt.datetime) -> str:
        """`4m ago` (empty when the time is not known)."""
        return "" if self.at is None else ago((now - self.at).total_seconds())

    def line(self, now: dt.datetime) -> str:
        """`last progress: step=1200 at 12:03 UTC (4m ago)`."""
        when = f" at {self.at.astimezone(dt.UTC):%H:%M} UTC ({self.ago(now)})" if self.at else ""
        return f"last progress: {self.text}{when}"


class StepProgress(BaseModel):
    """A progress line of an attempt: what it said and its step (the pattern's `step` group, else its
    first number; None: it had none), as resume verification compares them (node/launch/watchdog.py)."""

    model_config = ConfigDict(frozen=True)

    text: str
    step: float | None = None
    at: dt.datetime | None = None  # when it was logged (a last progress: which replica stopped first)


class AttemptDetail(BaseModel):
    """One attempt (job) of one replica of one task (`why --json`'s `attempts_detail`): how it ended,
    its GPU-hours (its GPUs x how long it ran; None: not known) and its first and last progress."""

    model_config = ConfigDict(frozen=True)

    task: str
    replica: int = 0
    attempt: int
    cause: str | None = None  # how it ended ("exit code 1", "preempted", "stalled"); None: still going
    exit_code: int | None = None
    gpu_hours: float | None = None
    first_progress: StepProgress | None = None
    last_progress: StepProgress | None = None


class RunInfo(BaseModel):
    """One run (a Beaker experiment, or a local run) as the CLI shows it."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    backend: str
    status: RunStatus
    exit_code: int | None = None
    created: dt.datetime
    started: dt.datetime | None = None
    finished: dt.datetime | None = None
    author: str | None = None
    replicas: int = 1  # Beaker: every task's replicas
    tasks: int = 1  # tasks of a --multi/--sweep experiment
    url: str | None = None
    launchkit: bool = True  # launched by launchkit (vs. any other Beaker workload)
    message: str | None = None  # why it ended that way, when the backend knows (e.g. why it was lost)
    end: EndReason | None = None  # why it ended (finished runs), one line with its fix
    task_statuses: dict[str, int] = {}  # several tasks: RunStatus value -> how many tasks are in it
    # several tasks (`get`): each task's state, exit code and why line (core/digest.py: a sweep's digest)
    tasks_detail: list[TaskState] = []
    attempts: int = 1  # the most attempts (retries, resumes) any replica of any task had (core/runs.py)
    retry: str | None = None  # retried or resumed: "attempt 2 of 5; last: node lost" (runs.attempt_text)
    waiting: WaitReason | None = None  # queued: why it waits, one line with its fix
    progress: Progress | None = None  # running: its last progress line (`list`, `why`: Backend.progress)
    # an attempt that restarted below the step the one before reached: "attempt 2 restarted at step 0;
    # attempt 1 had reached step 12,639: it is not resuming from its checkpoint" (backends/progress.py)
    resume: str | None = None
    attempts_detail: list[AttemptDetail] = []  # `why`: every attempt (Backend.attempts_detail)
    # where its time went (core/phases.py): seconds per phase (queued, starting, setup, first_output,
    # running; None when not known), `list` from what it read anyway, `why` all (Backend.phases)
    phases: Phases | None = None
    gpu_hours: float | None = None  # GPUs x hours of every job that ran (None: not known)
    phase_notes: PhaseNotes | None = None  # `why`: each waiting reason, the env cache, the step timings
    # `why`: the phases of every job (attempt x replica) read; in `why --json` only (why_cmd adds it)
    phases_detail: list[PhaseDetail] = Field(default=[], exclude=True)
    cluster: str | None = None  # `stats`: where its newest attempt ran (Backend.phases(where=True))
    # several replicas stopped by the watchdog: the one whose progress stopped first (`why`)
    culprit: str | None = None


class LogQuery(BaseModel):
    model_config = ConfigDict(frozen=True)

    replica: int | None = None  # None: all replicas
    task: str | None = None  # needs Capability.tasks
    all_tasks: bool = False  # needs Capability.tasks
    tail: int | None = None
    head: int | None = None
    since: dt.datetime | None = None
    since_ago: float | None = None  # `--since 10m`: seconds before now, by the backend's clock (a server's)
    timestamps: bool = False
    run: int | None = None  # `--attempt`: the Nth attempt (1 = first); None: the newest. Capability.tasks


# one row of `find-gpus`, keys are the table's columns (--gpus: `nodes`, the nodes it can start on now)
GpuRow = dict[str, "str | int | list[str] | list[dict[str, str | int]]"]


class Backend(Protocol):
    """What every backend implements. Options that need a capability are ignored without it; the
    CLI rejects them first (`require`)."""

    name: str
    capabilities: frozenset[Capability]

    def prepare(self, submission: Submission) -> Submission:
        """The submission with its spec exactly as submit() will send it (names resolved, secrets
        added); read-only unless `submission.launching`. Raises NoCredentials when the service cannot
        be asked at all."""
        ...

    def submit(self, submission: Submission) -> RunInfo: ...

    def get(self, run_ref: str) -> RunInfo: ...

    def latest(self, *, author: str | None = None) -> RunInfo | None: ...

    def list_runs(
        self,
        *,
        limit: int = 20,
        statuses: list[RunStatus] | None = None,
        author: str | None = None,
        text: str | None = None,
        max_age: dt.timedelta | None = None,
        include_all: bool = False,  # Capability.others_runs
        mine: bool = False,  # Capability.others_runs
        progress: bool = False,  # fill `progress` of running runs (Beaker: the newest few, PROGRESS_ROWS)
    ) -> list[RunInfo]: ...

    def progress(self, run: RunInfo) -> Progress | None:
        """A running run's last progress line (replica 0's newest attempt): its log's tail (one bounded
        read) matched with the run's own progress patterns. None: not running, or no line matched."""
        ...

    def attempts_detail(self, run: RunInfo) -> list[AttemptDetail]:
        """Every attempt of the run (`why`): cause, exit code, GPU-hours, first and last progress (each
        attempt's log read at both ends, bounded)."""

    def phases(self, run: RunInfo, *, where: bool = False, detail: bool = False) -> RunInfo:
        """The run with `phases`, `phase_notes` and `gpu_hours` filled (core/phases.py): from its jobs'
        timestamps, its waiting events and the first lines of its newest attempt's log (bounded).
        `where`: also `cluster`, where its newest attempt ran (Beaker: its node's cluster, the org's
        nodes listed once per connection). `detail`: also `phases_detail`, every job's phases (each
        attempt of each replica; none for a run of one job)."""
        ...

    def write_logs(self, run: RunInfo, query: LogQuery, out: IO[bytes]) -> None:
        """Write raw log bytes (never re-decoded) for the run to `out`."""
        ...

    def secret_values(self, run: RunInfo) -> dict[str, str | None]:
        """Secret name -> value of every secret the run was given (None: it cannot be read here), so
        `follow` and `logs` can mask them (launchkit.masking). Never printed or stored."""
        ...

    def run_policy(self, run: RunInfo) -> Policy:
        """The run's policy as its spec holds it (runtime/node/policy.py): its hooks, whether it is a
        sweep's (a sweep's follower posts its digest with them)."""
        ...

    def events_posting(self, run: RunInfo) -> Posting:
        """Who posts the run's JSON events (--notify-url, --notify-secret): the job (`follow` only what
        it cannot know), the run itself (local: its runtime and supervisor), or a sweep's follower."""
        ...

    def slack_posting(self, run: RunInfo) -> Posting:
        """Who posts the run's Slack messages (docs/notifications.md): `follow`, the job (a webhook
        given to it; `follow` posts only what the job cannot know) or the run itself."""
        ...

    def follow(
        self,
        run: RunInfo,
        out: IO[bytes],
        *,
        replica: int | None = None,
        all_replicas: bool = False,
        tail: int | None = None,
    ) -> int:
        """Stream until the run finishes; return the job's exit code.

        `all_replicas` needs Capability.all_replicas; `tail`: start with the last N lines so far."""
        ...

    def stop(self, run: RunInfo, *, reason: str | None = None) -> RunInfo:
        """Cancel the run. `reason`: launchkit's own stop (a limit of `run --follow` passed), kept where
        `why` and `list` read it (ending.launchkit_stopped), so it is never told as the user's."""
        ...

    def download_results(self, run: RunInfo, dest: str | None) -> list[str]:
        """Fetch the run's results (per replica) into `dest` (None: the backend's default); return the
        directories holding them."""
        ...

    def results_location(self, run: RunInfo) -> str:
        """One line saying where the run's results are (printed when `follow` ends)."""
        ...

    def find_gpus(
        self,
        *,
        gpu_types: list[str] | None = None,
        include_all: bool = False,
        gpus: int | None = None,
        replicas: int = 1,
    ) -> list[GpuRow]:
        """GPUs this backend can use; the filters need Capability.gpu_filters. `gpus` (and `replicas`):
        where a replica of that many GPUs can start now, soonest first (Capability.gpu_filters)."""
        ...


# Optional interfaces: a backend with the capability implements the protocol; `secret_store(b)` etc.
# give it typed (a usage error when the backend lacks the capability).


class Placement(Protocol):
    """Capability.placement: where a submission's tasks can land, as the service resolves it."""

    def placement(self, submission: Submission) -> list[str] | None:
        """The clusters the submission's cluster constraints (names, aliases, globs, GPU types, tags)
        resolve to, or None when it has none. Read-only; prepare() reuses the answer (no new calls)."""
        ...


class LooksAhead(Protocol):
    """Capability.service: a launch's look-ups sent before its spec is built (launch.plan: while git
    is read and the spec made), for prepare() to take."""

    def ask_ahead(self, workspace: str | None, *, images: Sequence[str], budget: str | None) -> None:
        """Send now what prepare() will ask for a launch into `workspace` (None: the backend's) that
        needs no spec: Beaker's workspace, its secrets and default budget, the runtime dataset, and
        `images` and `budget` by name (what the spec will name: core/spec.py). Never raises: prepare()
        asks again what is missing, and says what is wrong where it would."""
        ...

    def drop_ahead(self) -> None:
        """Give up the look-ups asked ahead that are still in flight (a launch refused before prepare():
        it exits without waiting for the service)."""
        ...


class SecretStore(Protocol):
    """Capability.secrets: a workspace's secrets, by name (values are written, never read back)."""

    def set_secret(self, name: str, value: str, workspace: str | None = None) -> str:
        """Store secret `name`; return the workspace's name. The value is never logged or echoed."""
        ...

    def secret_names(self, workspace: str | None = None) -> list[str]: ...


class SessionHost(Protocol):
    """Capability.sessions: what `launchkit session` hands the service's CLI."""

    def session_spec(self, submission: Submission) -> tuple[str, SpecView]:
        """(workspace name, the spec as submit() would send it, uploads made)."""
        ...

    def session_placement(self, submission: Submission) -> list[str] | None:
        """Placement.placement for a session (clusters that take sessions only count too)."""
        ...

    def close(self) -> None: ...


class PageLinks(Protocol):
    """Capability.pages: web pages of runs, workspaces and other objects (`launchkit open`)."""

    def url_for(self, target: str | None) -> str: ...

    def latest(self, *, author: str | None = None) -> RunInfo | None: ...


class Accounts(Protocol):
    """Capability.accounts: the name of the user the credentials belong to."""

    def user_name(self) -> str: ...


class Pruning(Protocol):
    """Capability.pruning: runs kept on this machine, removed by `launchkit prune`."""

    def prunable(self, age: dt.timedelta) -> list[RunInfo]: ...

    def size(self, run: RunInfo) -> int: ...

    def remove(self, run: RunInfo) -> None: ...


def secret_store(backend: Backend) -> SecretStore:
    return having(backend, Capability.secrets)  # type: ignore[no-any-return]


def session_host(backend: Backend) -> SessionHost:
    return having(backend, Capability.sessions)  # type: ignore[no-any-return]


def page_links(backend: Backend) -> PageLinks:
    return having(backend, Capability.pages)  # type: ignore[no-any-return]


def accounts(backend: Backend) -> Accounts:
    return having(backend, Capability.accounts)  # type: ignore[no-any-return]


def pruning(backend: Backend) -> Pruning:
    return having(backend, Capability.pruning)  # type: ignore[no-any-return]


def require(backend: Backend, capability: Capability, **given: object) -> None:
    """A usage error when any of `given` (option name -> value) is set but the backend lacks `capability`."""
    flags = ["--" + k.replace("_", "-") for k, v in given.items() if v not in (None, False, [], ())]
    if flags and capability not in backend.capabilities:
        raise UsageError(
            f"{', '.join(flags)}: only for {titles(capability)} runs",
            hint=f"drop it for {backend.name} runs",
        )
