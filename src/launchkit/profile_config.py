"""Reads the user's cluster profiles (`[tool.launchkit.profiles.NAME]`) from pyproject.toml.

Stop-gap until the config loader passes its parsed `[tool.launchkit]` table: both `run` and
`launchkit profiles` call `user_profiles()`, so swapping the source is a one-place change.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from launchkit.errors import UsageError


def find_pyproject(start: str | Path | None = None) -> Path | None:
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists():
            return None
    return None


def user_profiles(start: str | Path | None = None) -> dict[str, Any]:
    """The `[tool.launchkit.profiles]` table of the nearest pyproject.toml ({} if none)."""
    path = find_pyproject(start)
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"cannot read {path}: {e}", hint="fix the TOML syntax") from None
    profiles = data.get("tool", {}).get("launchkit", {}).get("profiles", {})
    if not isinstance(profiles, dict):
        raise UsageError(
            f"{path}: [tool.launchkit.profiles] must be a table of profiles",
            hint="e.g. [tool.launchkit.profiles.mycluster]",
        )
    return profiles
