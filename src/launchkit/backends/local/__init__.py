"""The local backend: runs the job's own entrypoint on this machine, under a detached supervisor.

`LocalBackend` (backend.py) is loaded on first use: the supervisor (`python -m
launchkit.backends.local.supervisor`) runs this package's __init__ and must start without pydantic.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the supervisor starts without importing `typing`
if TYPE_CHECKING:
    from typing import Any

    from launchkit.backends.local.backend import LocalBackend

__all__ = ["LocalBackend"]


def __getattr__(name: str) -> Any:
    if name == "LocalBackend":
        from launchkit.backends.local.backend import LocalBackend

        return LocalBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
