"""The types every backend speaks: run status and info, capabilities, log queries, submissions,
and the `Backend` protocol.

Imported lazily through `launchkit.backends` (it loads pydantic), so that the local supervisor,
which lives under that package, starts without it.
"""

from __future__ import annotations

import datetime as dt
from enum import Enum
from typing import IO, Any, Protocol

from pydantic import BaseModel, ConfigDict

from launchkit.errors import PreconditionError, UsageError


class RunStatus(str, Enum):
    queued = "queued"
    starting = "starting"
    running = "running"
    stopping = "stopping"  # canceled, the job is still shutting down (Beaker's STOPPING)
    uploading = "uploading"  # the job exited; results are being uploaded (Beaker's UPLOADING_RESULTS)
    succeeded = "succeeded"
    failed = "failed"
    canceled = "canceled"
    preempted = "preempted"
    lost = "lost"  # local: its supervisor died; processes it left may still run until `stop`

    @property
    def finished(self) -> bool:
        return self in (RunStatus.succeeded, RunStatus.failed, RunStatus.canceled, RunStatus.lost)


class EndKind(str, Enum):
    """Why a run ended (backends/ending.py turns each into one line with its fix)."""

    succeeded = "succeeded"
    exit_code = "exit_code"  # your command exited non-zero
    oom = "oom"  # killed for memory (exit 137 / the OOM killer)
    setup = "setup"  # a launchkit setup step failed (entrypoint exit codes 100-109, docs/runtime.md)
    image_pull = "image_pull"  # the image could not be pulled: no exit code at all
    failed = "failed"  # failed without an exit code, for another reason the backend names
    preempted = "preempted"
    canceled = "canceled"  # by a user (who, when known)
    timeout = "timeout"  # by a timeout (which one)
    node_lost = "node_lost"  # its node went away or failed its health checks
    unschedulable = "unschedulable"  # never scheduled (slot limit, no matching cluster, ...)
    lost = "lost"  # local: its supervisor died


class EndReason(BaseModel):
    """Why a finished run ended, from the backend's own fields and events. `line` is one sentence
    (no run id); `fix` what to do about it (None: nothing to fix). Never an invented exit code:
    `exit_code` is None when the job had none (e.g. its image could not be pulled)."""

    model_config = ConfigDict(frozen=True)

    kind: EndKind
    line: str
    fix: str | None = None
    exit_code: int | None = None
    by: str | None = None  # canceled/preempted: by whom or by what, when known
    will_retry: bool | None = None  # preempted: whether Beaker starts the task again

    def text(self) -> str:
        return self.line + (f"; {self.fix}" if self.fix else "")


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


class Capability(str, Enum):
    """Features beyond the common protocol; the value says which options need it (for messages)."""

    all_replicas = "--all-replicas"  # follow several replicas at once, lines prefixed [N]
    tasks = "--task/--all"  # runs with several tasks (logs of one task, or of all)
    others_runs = "--all/--mine/--author"  # runs of other people, and not launched by launchkit
    gpu_filters = "--gpu-type/--all"  # find-gpus filters
    uploads = "--upload"  # run: upload local files and mount them
    unpushed = "unpushed commits"  # run: launch a commit that is not on a remote
    several_tasks = "--multi/--sweep"  # run: several tasks in one run
    workspaces = "--workspace/--group"  # runs scoped to a workspace or a group


class LogQuery(BaseModel):
    model_config = ConfigDict(frozen=True)

    replica: int | None = None  # None: all replicas
    task: str | None = None  # needs Capability.tasks
    all_tasks: bool = False  # needs Capability.tasks
    tail: int | None = None
    head: int | None = None
    since: dt.datetime | None = None
    timestamps: bool = False
    run: int | None = None  # the task's Nth run (1 = first); None: the latest. Needs Capability.tasks


class Submission(BaseModel):
    """What `run` hands a backend: the spec (as JSON) plus what is needed to run it."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    spec: dict[str, Any]  # BeakerExperimentSpec.to_json(): JSON, whose shape beaker-py owns
    workspace: str | None = None
    repo_root: str | None = None  # local checkout (the local backend clones from it)
    auto_secrets: bool = True  # beaker: add well-known secrets (HF_TOKEN, ...) the workspace has
    prepared: bool = False  # `spec` is already exactly what submit() sends (Backend.prepare)
    # --upload: the placeholder dataset name mounted in the spec (core.spec.upload_dataset_name) -> local path
    uploads: dict[str, str] = {}


class NoCredentials(PreconditionError):
    """The backend's service needs credentials and none are configured (`run --dry-run` stays offline)."""


GpuRow = dict[str, "str | int | list[str]"]  # one row of `find-gpus`, keys are the table's columns


class Backend(Protocol):
    """What every backend implements. Options that need a capability are ignored without it; the
    CLI rejects them first (`require`)."""

    name: str
    capabilities: frozenset[Capability]

    def prepare(self, submission: Submission) -> Submission:
        """The submission with its spec exactly as submit() will send it (names resolved, secrets
        added); read-only. Raises NoCredentials when the service cannot be asked at all."""
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
    ) -> list[RunInfo]: ...

    def write_logs(self, run: RunInfo, query: LogQuery, out: IO[bytes]) -> None:
        """Write raw log bytes (never re-decoded) for the run to `out`."""
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

    def stop(self, run: RunInfo) -> RunInfo: ...

    def download_results(self, run: RunInfo, dest: str | None) -> list[str]:
        """Fetch the run's results (per replica) into `dest` (None: the backend's default); return the
        directories holding them."""
        ...

    def results_location(self, run: RunInfo) -> str:
        """One line saying where the run's results are (printed when `follow` ends)."""
        ...

    def find_gpus(self, *, gpu_types: list[str] | None = None, include_all: bool = False) -> list[GpuRow]:
        """GPUs this backend can use; the filters need Capability.gpu_filters."""
        ...


def require(backend: Backend, capability: Capability, **given: object) -> None:
    """A usage error when any of `given` (option name -> value) is set but the backend lacks `capability`."""
    flags = ["--" + k.replace("_", "-") for k, v in given.items() if v not in (None, False, [], ())]
    if flags and capability not in backend.capabilities:
        raise UsageError(
            f"{', '.join(flags)}: only for Beaker runs",  # today only Beaker has optional capabilities
            hint=f"drop it for {backend.name} runs",
        )
