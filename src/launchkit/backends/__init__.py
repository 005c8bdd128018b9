"""Backends run and observe jobs. Both (beaker, local) implement the small `Backend` protocol.

CLI commands pick a backend with `get_backend(name)`; modules are imported lazily so that
`launchkit --help` never loads beaker-py or grpc.
"""

from __future__ import annotations

from launchkit.errors import UsageError

TYPE_CHECKING = False  # not typing's: the supervisor imports this package and skips `typing` (~10 ms)
if TYPE_CHECKING:
    from typing import Any

    from launchkit.backends.protocol import Backend, LogQuery, RunInfo, RunStatus, Submission

__all__ = ["Backend", "LogQuery", "RunInfo", "RunStatus", "Submission", "backend_for_run_id", "get_backend"]


def __getattr__(name: str) -> Any:
    """The protocol types, loaded on first use (they need pydantic; the local supervisor does not)."""
    if name in ("Backend", "LogQuery", "RunInfo", "RunStatus", "Submission"):
        from launchkit.backends import protocol

        return getattr(protocol, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_backend(name: str, **options: Any) -> Backend:
    if name == "local":
        from launchkit.backends.local import LocalBackend

        return LocalBackend(**options)
    if name == "beaker":
        from launchkit.backends.beaker import BeakerBackend

        return BeakerBackend(**options)
    raise UsageError(f"unknown backend {name!r}", hint="use --backend beaker or --backend local")


def backend_for_run_id(run_id: str) -> str:
    """Local run ids start with `local-`; anything else is a Beaker id or name."""
    return "local" if run_id.startswith("local-") else "beaker"
