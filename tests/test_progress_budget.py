"""Progress matching has a budget (issue 40 item 3; runtime/node/launch/matching.py): a pattern that
backtracks for ever is refused at launch in one line; the job's runtime, given one anyway (a spec
written by hand or by an older launchkit), passes the command's output through, gives matching up once
in one warning line, and ends with the command's exit code; `list`/`why` bound their own matching.
Real processes through `python -m launchkit.runtime.node launch`, as bash hands over."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inproc import run_main
from launchkit.backends.progress import attempt_progress, last_progress
from launchkit.runtime.node.launch import matching, watchdog
from lk_helpers import policy_env

CATASTROPHIC = r"^step \d+|(a+)+$"  # the issue's: exponential on 41 a's and a '!'
BAD_LINE = "a" * 41 + "!"


@pytest.mark.parametrize(
    "pattern",
    [CATASTROPHIC, r"(a*)*b", r"(\w+\s?)*$", r"(x+x+)+y", r"(.*a){12}", r"(a|a)*b", r"(?:a|b|ab)*c"],
)
def test_patterns_that_backtrack_exponentially_are_named(pattern):
    assert matching.unsafe(pattern) is not None


@pytest.mark.parametrize(
    "pattern",
    [
        *matching.DEFAULT_PATTERNS,
        r"iter \d+",
        r"(?:foo|bar)+",
        r"(\d\d:)+",
        r"(?i)(epoch|step)[ =:]\d+",
        r"(\d+/)?",
    ],
)
def test_ordinary_patterns_pass(pattern):
    assert matching.unsafe(pattern) is None


def test_a_catastrophic_progress_pattern_is_refused_at_launch_in_one_line(repo):
    r = run_main(
        "run",
        "--dry-run",
        "--stall-timeout",
        "10m",
        "--progress-pattern",
        CATASTROPHIC,
        "--",
        "true",
        cwd=repo.path,
    )
    assert r.code == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--progress-pattern" in lines[0] and "exponential" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def _launch(tmp_path: Path, script: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    (tmp_path / "job.py").write_text(script)
    full = {"PATH": os.environ["PATH"], "LAUNCHKIT_LAUNCHER": "none", **env}
    cmd = [sys.executable, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--"]
    return subprocess.Popen(
        [*cmd, sys.executable, "job.py"], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _readline(p: subprocess.Popen[bytes], hang_guard: float = 120) -> bytes:
    """The next line of the job's output (the guard only ends a hang: the old runtime froze)."""
    assert p.stdout is not None
    line = b""
    while not line.endswith(b"\n"):  # unbuffered: select sees every byte not yet read
        ready, _, _ = select.select([p.stdout], [], [], hang_guard)
        assert ready, "no output: the runtime is stuck"
        byte = os.read(p.stdout.fileno(), 1)
        assert byte, "the output ended"
        line += byte
    return line


RUNS_UNTIL_TOLD = f"""
import os, sys, time
print("step 1", flush=True)
print("{BAD_LINE}", flush=True)
print("after the bad line", flush=True)
i = 2
while not os.path.exists("end"):
    print("step %d" % i, flush=True)
    i += 1
    time.sleep(0.2)
sys.exit(3)
"""


def test_the_runtime_passes_output_on_while_the_matcher_is_stuck_and_gives_it_up_once(tmp_path):
    env = policy_env(stall_timeout=600, progress_patterns=[CATASTROPHIC])
    p = _launch(tmp_path, RUNS_UNTIL_TOLD, env)
    try:
        assert _readline(p) == b"step 1\n"
        assert _readline(p) == (BAD_LINE + "\n").encode()
        assert _readline(p) == b"after the bad line\n"  # the reader never waits for the matcher
        ready, _, _ = select.select([p.stderr], [], [], 120)  # (a hang guard)
        assert ready
        warning = p.stderr.readline().decode()  # type: ignore[union-attr]
        (tmp_path / "end").write_text("")
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
        p.wait(timeout=30)
    assert warning.startswith("[launchkit] warning: progress matching is given up"), warning
    assert p.returncode == 3, err  # the command's own exit code, and it ran on
    assert out.startswith(b"step ") and out.endswith(b"\n"), out
    assert not [ln for ln in err.decode().splitlines() if ln.startswith("[launchkit]")], err  # once
    assert "Traceback" not in err.decode()


def test_after_giving_matching_up_the_stall_limit_counts_output_and_still_stops_a_silent_command(tmp_path):
    script = f"print('{BAD_LINE}', flush=True)\nimport time\ntime.sleep(600)\n"
    env = policy_env(stall_timeout=1, stall_grace=20, progress_patterns=[CATASTROPHIC])
    p = _launch(tmp_path, script, env)
    _out, err = p.communicate(timeout=180)
    assert p.returncode == watchdog.EXIT_STOPPED, err
    lines = err.decode().splitlines()
    assert "progress matching is given up" in lines[0], err
    assert lines[-1].startswith("[launchkit] stopped: no progress for 1s"), err


def test_the_matcher_is_given_up_when_a_line_waits_too_long_by_the_clock_given():
    m = matching.Remote([CATASTROPHIC])
    try:
        now = time.monotonic()
        m.feed([BAD_LINE], now, time.time())
        assert not m.late(now)
        assert m.late(now + matching.LATE + 1)
        assert m.failed is not None and "waited" in m.failed
    finally:
        m.close()  # (and reaped)
    with pytest.raises(ChildProcessError):
        os.waitpid(m.pid, os.WNOHANG)


def test_a_long_line_is_matched_on_its_first_characters_only():
    compiled = matching.compile_all([r"step \d+$"])
    assert matching.progress_in("step 5", compiled) == "step 5"
    assert matching.progress_in("x" * matching.SLICE + " step 5", compiled) is None


@pytest.mark.timeout(120)
def test_list_why_and_the_supervisor_bound_their_matching_of_a_catastrophic_pattern():
    records = [(None, b"step 1"), (None, BAD_LINE.encode()), (None, b"noise")]
    assert last_progress(records, [CATASTROPHIC]) is None  # given up after its budget, not hung
    compiled = watchdog.progress_patterns([CATASTROPHIC])
    assert watchdog.progress_of([raw for _, raw in records], compiled, True) is None  # (local retry.py)
    assert attempt_progress([(None, b"step 1")], [(None, BAD_LINE.encode())], [CATASTROPHIC])[1] is None
    assert matching.scan(["step 1", "step 2"], compiled, budget=60) == (
        (0, "step 1", 1.0),
        (1, "step 2", 2.0),
    )


def test_the_users_patterns_matched_apart_find_the_first_and_newest_progress_and_its_time():
    got = last_progress([(None, b"step 1"), (7 * 10**18, b"step 2\rstep 3"), (None, b"x")], [r"^step \d+"])
    assert got is not None and got.text == "step 3" and got.at is not None and got.at.year == 2191
    first, last = attempt_progress(
        [(1, b"setup"), (2 * 10**18, b"iter 3 of 9")], [(3 * 10**18, b"iter 7 of 9")], [r"iter (?P<step>\d+)"]
    )
    assert first is not None and (first.text, first.step, first.at.year) == ("iter 3", 3.0, 2033)  # type: ignore[union-attr]
    assert last is not None and (last.text, last.step, last.at.year) == ("iter 7", 7.0, 2065)  # type: ignore[union-attr]
    default = last_progress([(None, b"[step=3/9] a")], ())
    assert default is not None and default.text == "step=3/9"
