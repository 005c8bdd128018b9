"""The types every backend speaks: run status and info, log queries, submissions, the protocol.

Imported lazily through `launchkit.backends` (it loads pydantic), so that the local supervisor,
which lives under this package, starts without it.
"""

from __future__ import annotations

import datetime as dt
from enum import Enum
from typing import IO, Any, Protocol

from pydantic import BaseModel, ConfigDict


class RunStatus(str, Enum):
    queued = "queued"
    starting = "starting"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    canceled = "canceled"
    preempted = "preempted"
    lost = "lost"  # local: its supervisor died; processes it left may still run until `stop`

    @property
    def finished(self) -> bool:
        return self in (RunStatus.succeeded, RunStatus.failed, RunStatus.canceled, RunStatus.lost)


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
    replicas: int = 1
    url: str | None = None
    launchkit: bool = True  # launched by launchkit (vs. any other Beaker workload)
    message: str | None = None  # why it ended that way, when the backend knows (e.g. why it was lost)


class LogQuery(BaseModel):
    model_config = ConfigDict(frozen=True)

    replica: int | None = None  # None: all replicas
    task: str | None = None
    tail: int | None = None
    head: int | None = None
    since: dt.datetime | None = None
    timestamps: bool = False


class Submission(BaseModel):
    """What `run` hands a backend: the spec (as JSON) plus what is needed to run it."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    spec: dict[str, Any]  # BeakerExperimentSpec.to_json()
    workspace: str | None = None
    repo_root: str | None = None  # local checkout (the local backend clones from it)
    auto_secrets: bool = True  # beaker: add well-known secrets (HF_TOKEN, ...) the workspace has


class Backend(Protocol):
    name: str

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
    ) -> list[RunInfo]: ...

    def write_logs(self, run: RunInfo, query: LogQuery, out: IO[bytes]) -> None:
        """Write raw log bytes (never re-decoded) for the run to `out`."""
        ...

    def follow(self, run: RunInfo, out: IO[bytes], *, replica: int | None = None) -> int:
        """Stream until the run finishes; return the job's exit code."""
        ...

    def stop(self, run: RunInfo) -> RunInfo: ...

    def find_gpus(self) -> list[dict[str, Any]]: ...
