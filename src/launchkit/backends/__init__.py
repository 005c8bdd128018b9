"""Backends run and observe jobs. Both (beaker, local) implement the typed `Backend` protocol.

What a backend can do beyond the common core is declared in `capabilities`; the CLI checks those
(`require`), never the backend's name. A backend gets the `Application` on construction and reports
through it (`app.info/warn/debug`); it never imports the CLI package. CLI commands pick a backend with
`get_backend(name, app)`; modules are imported lazily so that `launchkit --help` never loads beaker-py
or grpc.
"""

from __future__ import annotations

from launchkit.errors import UsageError

TYPE_CHECKING = False  # not typing's: the supervisor imports this package and skips `typing` (~10 ms)
if TYPE_CHECKING:
    from typing import Any

    from launchkit.application import Application
    from launchkit.backends.protocol import (
        Backend,
        Capability,
        EndKind,
        EndReason,
        GpuRow,
        LogQuery,
        NoCredentials,
        RunInfo,
        RunStatus,
        Submission,
        require,
    )

__all__ = [
    "Backend",
    "Capability",
    "EndKind",
    "EndReason",
    "GpuRow",
    "LogQuery",
    "NoCredentials",
    "RunInfo",
    "RunStatus",
    "Submission",
    "backend_for_run_id",
    "get_backend",
    "require",
]
_PROTOCOL = frozenset(__all__) - {"backend_for_run_id", "get_backend"}


def __getattr__(name: str) -> Any:
    """The protocol types (backends/protocol.py), loaded on first use: they need pydantic, and the
    local supervisor, which lives under this package, starts without it."""
    if name in _PROTOCOL:
        from launchkit.backends import protocol

        return getattr(protocol, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_backend(name: str, app: Application, *, workspace: str | None = None) -> Backend:
    """`workspace` (Capability.workspaces): where the backend's lists and --latest look."""
    if name == "local":
        from launchkit.backends.local import LocalBackend

        return LocalBackend(app)
    if name == "beaker":
        from launchkit.backends.beaker import BeakerBackend

        return BeakerBackend(app, workspace=workspace)
    raise UsageError(f"unknown backend {name!r}", hint="use --backend beaker or --backend local")


def backend_for_run_id(run_id: str) -> str:
    """Local run ids start with `local-`; anything else is a Beaker id or name."""
    return "local" if run_id.startswith("local-") else "beaker"
