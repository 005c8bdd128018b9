"""Parsing of durations (`90`, `30s`, `5m`, `2h30m`, `1d`) and sizes (`512MiB`, `10GiB`, `10.24gb`)."""

from __future__ import annotations

import re

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

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
    """Seconds from `90` (seconds), `30s`, `5m`, `2h30m`, `1d`. Raises ValueError with a hint."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
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
                raise ValueError(f"invalid duration {text!r}: use e.g. 90, 30s, 5m, 2h30m or 1d")
    if value < 0:
        raise ValueError(f"invalid duration {text!r}: must not be negative")
    return value


def parse_size(text: str | int) -> int:
    """Bytes from `512MiB`, `10GiB`, `10.24gb`, `1000000`. Raises ValueError with a hint."""
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(text)
        if not m or (m.group(2) or "").lower() not in _SIZE_FACTORS:
            raise ValueError(f"invalid size {text!r}: use e.g. 512MiB, 10GiB or 10.24GB")
        value = int(float(m.group(1)) * _SIZE_FACTORS[(m.group(2) or "").lower()])
    if value <= 0:
        raise ValueError(f"invalid size {text!r}: must be greater than zero")
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
