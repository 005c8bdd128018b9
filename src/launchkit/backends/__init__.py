"""Backends run and observe jobs. Each implements the typed `Backend` protocol (protocol.py) and is
listed once in the registry (registry.py: name, class, capabilities, run-id prefix).

What a backend can do beyond the common core is declared in `capabilities`; the CLI checks those
(`require`, `feature`), never the backend's name. A backend gets the `Application` on construction and
reports through it (`app.info/warn/debug`); it never imports the CLI package. CLI commands pick a
backend with `get_backend(name, app)`; modules are imported lazily so that `launchkit --help` never
loads beaker-py or grpc.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the supervisor imports this package and skips `typing` (~10 ms)
if TYPE_CHECKING:
    from typing import Any

    from launchkit.application import Application
    from launchkit.backends.protocol import (
        Accounts,
        Backend,
        Capability,
        Cause,
        EndReason,
        GpuRow,
        LogQuery,
        LooksAhead,
        NoCredentials,
        PageLinks,
        Placement,
        Posting,
        Pruning,
        RunInfo,
        RunStatus,
        SecretStore,
        SessionHost,
        Submission,
        accounts,
        looks_ahead,
        page_links,
        placement_of,
        pruning,
        require,
        secret_store,
        session_host,
    )

__all__ = [
    "Accounts",
    "Backend",
    "Capability",
    "Cause",
    "EndReason",
    "GpuRow",
    "LogQuery",
    "LooksAhead",
    "NoCredentials",
    "PageLinks",
    "Placement",
    "Posting",
    "Pruning",
    "RunInfo",
    "RunStatus",
    "SecretStore",
    "SessionHost",
    "Submission",
    "accounts",
    "backend_for_run_id",
    "get_backend",
    "looks_ahead",
    "page_links",
    "placement_of",
    "pruning",
    "require",
    "secret_store",
    "session_host",
]
_PROTOCOL = frozenset(__all__) - {"backend_for_run_id", "get_backend", "registry"}


def __getattr__(name: str) -> Any:
    """The protocol types (backends/protocol.py), loaded on first use: they need pydantic, and the
    local supervisor, which lives under this package, starts without it."""
    if name in _PROTOCOL:
        from launchkit.backends import protocol

        return getattr(protocol, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_backend(name: str, app: Application, *, workspace: str | None = None) -> Backend:
    """`workspace` (Capability.workspaces): where the backend's lists and --latest look."""
    from launchkit.backends import registry

    return registry.load(name, app, workspace=workspace)


def backend_for_run_id(run_id: str) -> str:
    """The backend whose run ids look like `run_id` (the registry's prefixes), else the default."""
    from launchkit.backends import registry

    return registry.for_run_id(run_id).name
