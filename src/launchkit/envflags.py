"""LAUNCHKIT_* yes/no variables (LAUNCHKIT_DEBUG, LAUNCHKIT_CGROUP): one reading for all of them.

Import-light on purpose: the local supervisor reads LAUNCHKIT_CGROUP on its fast path.
"""

from __future__ import annotations

import os

from launchkit.errors import UsageError

YES, NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
WORDS = {**dict.fromkeys(YES, True), **dict.fromkeys(NO, False)}


def env_flag(name: str, default: bool = False, environ: dict[str, str] | None = None) -> bool:
    """1/true/yes/on or 0/false/no/off, in any case; unset or empty: `default`. Anything else is a
    UsageError naming the variable."""
    raw = (os.environ if environ is None else environ).get(name, "").strip()
    if not raw:
        return default
    value = WORDS.get(raw.lower())
    if value is None:
        raise UsageError(
            f"{name}={raw!r} is not a yes/no value",
            hint=f"set {name}=1 or {name}=0 (true/false, yes/no and on/off work too), or unset it",
        )
    return value
