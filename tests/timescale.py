"""One factor for every hang guard of the suite: LAUNCHKIT_TEST_TIMEOUT_SCALE (default 1).

A test's time limits only end a hang: each is many times what the step takes on an idle machine. A busy
machine (a login node, a shared CI runner, `.ci/run`'s busy loops) stretches every step alike, so one
factor stretches every guard alike: pytest-timeout's limit and `timeout` markers (tests/conftest.py),
every `subprocess` wait a test makes (conftest.py scales the `timeout=` of `Popen.wait`/`communicate`,
hence `subprocess.run`, when a test file calls it) and the deadline loops of the helpers (`scaled`).
`LAUNCHKIT_TEST_TIMEOUT_SCALE=4 uv run pytest` on a machine four times busier than it should be.
Unset, the factor is the machine's load per core when the suite starts (its 1-minute average, at least
1): `uv run pytest` on a busy login node stretches its guards without being told.

Stdlib only: the fake Beaker imports it when it runs as its own process.
"""

from __future__ import annotations

import math
import os

VARIABLE = "LAUNCHKIT_TEST_TIMEOUT_SCALE"


def timeout_scale(
    environ: dict[str, str] | os._Environ[str] = os.environ, load: float | None = None
) -> float:
    """The factor, from VARIABLE: a positive finite number; unset or empty, `load_factor(load)`."""
    text = environ.get(VARIABLE, "").strip()
    if not text:
        return load_factor(load)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{VARIABLE}={text!r} is not a positive number: set it to e.g. 3 (or unset it)")
    return value


def load_factor(load: float | None = None, cores: int | None = None) -> float:
    """The machine's load per core (`load`: its 1-minute load average, read when None), at least 1."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average on this system
            return 1.0
    return max(1.0, load / (cores or os.cpu_count() or 1))


SCALE = timeout_scale()  # read once, at import: conftest.py drops LAUNCHKIT_* from each test's environment


def scaled(seconds: float) -> float:
    """A hang guard of `seconds` on an idle machine, stretched by the suite's one factor."""
    return seconds * SCALE
