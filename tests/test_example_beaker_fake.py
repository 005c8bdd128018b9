"""examples/beaker-fake/try.sh waits for the fake Beaker to be ready, not a fixed time: under load the
first `uv run` took longer than its 20 s, and it sourced an empty file (issue 31). The fake's slow start
is simulated by a stub `sleep` on PATH that counts the script's polls and lets the fake start only
after 150 of them (more than the old 100), so no test waits on the clock."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT

TRY = ROOT / "examples" / "beaker-fake" / "try.sh"

# `uv`: the fake's `uv run` waits for $LK_GO (or fails with $LK_FAIL), then it and every other call run uv
UV = """#!/bin/bash
if [[ " $* " == *" fakebeaker "* ]]; then
    [[ -n ${LK_FAIL:-} ]] && { echo "$LK_FAIL" >&2; exit 3; }
    until [[ -e $LK_GO ]]; do "$LK_SLEEP" 0.01; done
fi
exec "$LK_UV" "$@"
"""
# `sleep`: the script's polls, counted; the fake may start at poll $LK_READY_AT
SLEEP = """#!/bin/bash
n=$(($(cat "$LK_POLLS" 2>/dev/null || echo 0) + 1))
echo "$n" >"$LK_POLLS"
((n >= LK_READY_AT)) && touch "$LK_GO"
exec "$LK_SLEEP" 0.01
"""


def _try(tmp_path: Path, ready_at: int, **env: str) -> subprocess.CompletedProcess:
    from uv import find_uv_bin

    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in (("uv", UV), ("sleep", SLEEP)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    full = {
        **os.environ,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "LK_UV": find_uv_bin(),
        "LK_SLEEP": shutil.which("sleep") or "/bin/sleep",
        "LK_GO": str(tmp_path / "go"),
        "LK_POLLS": str(tmp_path / "polls"),
        "LK_READY_AT": str(ready_at),
        "UV_NO_SYNC": "1",  # the project's venv as it is: other tests use it meanwhile
        **env,
    }
    return subprocess.run(["bash", str(TRY)], cwd=ROOT, env=full, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_try_sh_waits_for_a_slow_fake(tmp_path):
    r = _try(tmp_path, ready_at=150)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "+ launchkit secret list" in r.stderr and "MY_TOKEN" in r.stdout
    assert int((tmp_path / "polls").read_text()) >= 150


def test_try_sh_says_when_the_fake_never_gets_ready(tmp_path):
    r = _try(tmp_path, ready_at=10**9, LAUNCHKIT_TRY_TIMEOUT="0")
    assert r.returncode == 1
    assert r.stderr.startswith("try.sh: the fake Beaker was not ready after 0s (LAUNCHKIT_TRY_TIMEOUT)")
    assert "+ launchkit" not in r.stderr  # nothing ran against an empty environment


def test_try_sh_says_when_the_fake_fails(tmp_path):
    r = _try(tmp_path, ready_at=1, LK_FAIL="address already in use")
    assert r.returncode == 1
    assert "try.sh: the fake Beaker exited before it was ready; its output:" in r.stderr
    assert "address already in use" in r.stderr and "+ launchkit" not in r.stderr
