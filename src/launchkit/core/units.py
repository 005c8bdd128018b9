"""Parsing of durations (`90`, `30s`, `5m`, `2h30m`, `1d`) and sizes (`512MiB`, `10GiB`, `10.24gb`)."""

from __future__ import annotations

import math
import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

# Beaker's wire limits: durations are int64 nanoseconds, sizes uint64 bytes.
MAX_SECONDS = (2**63 - 1) // 1_000_000_000  # about 292 years
MAX_BYTES = 2**64 - 1
# Counts: GPU and CPU counts are uint32 in Beaker; other counts (replicas, retries, lines, list
# limits) stay within int32.
MAX_UINT32 = 2**32 - 1
MAX_COUNT = 2**31 - 1


class UnitError(ValueError):
    """A value that is not a duration or size Beaker can take: what is wrong, and the fix."""

    def __init__(self, problem: str, hint: str):
        super().__init__(f"{problem}: {hint}")
        self.problem = problem
        self.hint = hint


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_FACTORS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "p": 10**15,
    "pb": 10**15,
    "ki": 2**10,
    "kib": 2**10,
    "mi": 2**20,
    "mib": 2**20,
    "gi": 2**30,
    "gib": 2**30,
    "ti": 2**40,
    "tib": 2**40,
    "pi": 2**50,
    "pib": 2**50,
}


def parse_duration(text: str | float) -> float:
    """Seconds from `90` (seconds), `30s`, `5m`, `2h30m`, `1d`. Raises UnitError (a ValueError)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    elif isinstance(text, str):
        s = text.strip().lower()
        if re.fullmatch(r"\d+(\.\d+)?", s):
            value = float(s)
        else:
            pos, value = 0, 0.0
            for m in _DURATION_PART.finditer(s):
                if m.start() != pos:
                    break
                value += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
                pos = m.end()
            if pos != len(s) or not s:
                raise UnitError("not a duration", "use e.g. 90 (seconds), 30s, 5m, 2h30m or 1d")
    else:
        raise UnitError("not a duration", "use e.g. 90 (seconds), 30s, 5m, 2h30m or 1d")
    if math.isnan(value):
        raise UnitError("not a number", "give a duration such as 30m")
    if value < 0:
        raise UnitError("must not be negative", "give a duration such as 30m")
    if value > MAX_SECONDS:
        raise UnitError("is too long", f"durations end at {MAX_SECONDS}s (about 292 years); give e.g. 7d")
    return value


def positive_seconds(value: str | float) -> float:
    """A timeout: a duration greater than zero. Raises UnitError (a ValueError)."""
    seconds = parse_duration(value)
    if seconds <= 0:
        raise UnitError("must be greater than zero", "give a duration such as 90s or 2m")
    return seconds


def parse_size(text: str | int) -> int:
    """Bytes from `512MiB`, `10GiB`, `10.24gb`, `1000000`. Raises UnitError (a ValueError)."""
    hint = "use e.g. 512MiB, 10GiB or 10.24GB (greater than zero)"
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    elif isinstance(text, str):
        m = _SIZE.match(text)
        if not m or (m.group(2) or "").lower() not in _SIZE_FACTORS:
            raise UnitError("not a size", hint)
        amount = float(m.group(1)) * _SIZE_FACTORS[(m.group(2) or "").lower()]
        if not math.isfinite(amount) or amount > MAX_BYTES:
            raise UnitError("is too large", "Beaker takes at most 16EiB (2^64 - 1 bytes)")
        value = int(amount)
    else:
        raise UnitError("not a size", hint)
    if value <= 0:
        raise UnitError("must be greater than zero", hint)
    if value > MAX_BYTES:
        raise UnitError("is too large", "Beaker takes at most 16EiB (2^64 - 1 bytes)")
    return value


def format_size(num_bytes: int) -> str:
    """The shortest exact Beaker size string for a byte count (`10GiB`, `10240MB`, `123`)."""
    exact = [
        f"{num_bytes // factor}{unit}"
        for unit, factor in (
            ("TiB", 2**40),
            ("GiB", 2**30),
            ("MiB", 2**20),
            ("KiB", 2**10),
            ("TB", 10**12),
            ("GB", 10**9),
            ("MB", 10**6),
            ("KB", 10**3),
        )
        if num_bytes % factor == 0
    ]
    return min(exact + [str(num_bytes)], key=len)


def to_nanoseconds(seconds: float) -> int:
    return round(seconds * 1_000_000_000)


def ago(seconds: float) -> str:
    """How long ago, in its largest whole unit: `4m ago`, `2d ago`, `12s ago`."""
    s = max(0, int(seconds))
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit} ago"
    return f"{s}s ago"


def span(seconds: float) -> str:
    """A duration in its two largest units: `9h32m`, `3m12s`, `41s`, `2.3s` (under 10 s), `1d4h`."""
    if seconds < 10:
        return f"{max(0.0, seconds):.1f}s"
    s = int(seconds)
    for big, n, small, m in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= n:
            rest = (s % n) // m
            return f"{s // n}{big}{rest}{small}" if rest else f"{s // n}{big}"
    return f"{s}s"
