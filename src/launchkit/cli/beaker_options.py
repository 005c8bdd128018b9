"""Options only the Beaker backend understands, passed to it as keyword arguments when given."""

from __future__ import annotations

from typing import Any


def beaker_options(backend: Any, **options: Any) -> dict[str, Any]:
    """The options that are set (not None/False); a usage error if any is set for another backend."""
    given = {k: v for k, v in options.items() if v not in (None, False, [], ())}
    if given and getattr(backend, "name", "") != "beaker":
        from launchkit.errors import UsageError

        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise UsageError(f"{flags}: only for Beaker runs", hint=f"drop it for {backend.name} runs")
    return given
