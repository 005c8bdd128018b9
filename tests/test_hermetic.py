"""The suite is hermetic to the shell it is launched from (tests/conftest.py): UV_*, XDG_* and BEAKER_*
of a cluster login (UV_CACHE_DIR is set on many) change nothing; CI runs the fast tier once under a
set UV_CACHE_DIR (.ci/run)."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT


def test_the_launching_shells_settings_do_not_reach_a_test():
    assert not [v for v in os.environ if v.startswith(("UV_", "BEAKER_", "LAUNCHKIT_"))]
    home = os.environ["HOME"]
    xdg = {v: p for v, p in os.environ.items() if v.startswith("XDG_")}
    assert sorted(xdg) == ["XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"]
    assert all(p.startswith(home + os.sep) for p in xdg.values()), xdg


def test_a_cluster_shell_changes_no_outcome(tmp_path):
    """With UV_CACHE_DIR set, two tests of test_creds_quoting.py took the env-store path and failed."""
    shell = {
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
        "UV_OFFLINE": "1",
        "UV_LINK_MODE": "copy",
        "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
        "BEAKER_TOKEN": "not-a-token",
    }
    tests = [
        "tests/test_creds_quoting.py::test_glob_and_command_substitution_in_extras_stay_values",
        "tests/test_hermetic.py::test_the_launching_shells_settings_do_not_reach_a_test",
    ]
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env={**os.environ, **shell, "PYTEST_ADDOPTS": f"--basetemp={tmp_path / 'inner'}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "2 passed" in r.stdout
