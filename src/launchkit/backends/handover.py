"""What a launch hands a backend and asks of it: `Submission`, `NoCredentials`, `looks_ahead`,
`placement_of`. Apart from protocol.py (which re-exports them) so that a dry run plans without the run
types (RunInfo with its phases and digest models, ~10 ms of pydantic models it never builds)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, SecretStr

from launchkit.backends.registry import Capability
from launchkit.core.specview import SpecView
from launchkit.errors import PreconditionError, UsageError

if TYPE_CHECKING:
    from launchkit.backends.protocol import Backend, LooksAhead, Placement


class Submission(BaseModel):
    """What `run` hands a backend: the typed spec plus what is needed to run it. A backend that changes
    the spec edits its `spec.copy()` and hands back `model_copy(update={"spec": ...})`."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    spec: SpecView  # core/specview.py: beaker-py's JSON of the spec, read and edited by field
    workspace: str | None = None
    repo_root: str | None = None  # local checkout (the local backend clones from it)
    auto_secrets: bool = True  # beaker: add well-known secrets (HF_TOKEN, ...) the workspace has
    prepared: bool = False  # `spec` is already exactly what submit() sends (Backend.prepare)
    # prepare() with `launching` (launch.ready, after the plan line: never a dry run) also creates what
    # the spec needs (Beaker: the runtime dataset), so the spec it returns (--save-spec) is the one sent
    launching: bool = False
    # --upload: the placeholder dataset name mounted in the spec (core.spec.upload_dataset_name) -> local path
    uploads: dict[str, str] = {}
    # --slack-webhook-url: a backend that runs the job here hands it to the job's runtime (local:
    # its supervisor's environment; docs/notifications.md); never in the spec
    slack_webhook_url: SecretStr | None = None
    # prepare(): the clusters where every replica could start now, when it learnt that without another
    # call (None: not known); the plan line says it (core/plan.py)
    start_now: tuple[str, ...] | None = None


class NoCredentials(PreconditionError):
    """The backend's service needs credentials and none are configured (`run --dry-run` stays offline)."""


def having(backend: Backend, capability: Capability) -> Any:
    """`backend` when it has `capability`; else a usage error naming both."""
    if capability not in backend.capabilities:
        raise UsageError(f"{capability.value} is not available for {backend.name} runs")
    return backend


def looks_ahead(backend: Backend | None) -> LooksAhead | None:
    """The backend's LooksAhead, when it asks a service (Capability.service); else None."""
    if backend is None or Capability.service not in backend.capabilities:
        return None
    return backend  # type: ignore[return-value]


def placement_of(backend: Backend) -> Placement:
    return having(backend, Capability.placement)  # type: ignore[no-any-return]
