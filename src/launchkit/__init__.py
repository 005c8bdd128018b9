"""launchkit: launch ML jobs from a git repository onto Beaker (or this machine).

`launchkit.api` is the Python API (docs/api.md); it is imported on first use, so `launchkit --help`
does not load what a launch needs."""

from __future__ import annotations

TYPE_CHECKING = False  # (typing costs the local supervisor's start: for the type checker only)
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "api"]


def __getattr__(name: str) -> Any:
    if name == "api":
        import launchkit.api

        return launchkit.api
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
