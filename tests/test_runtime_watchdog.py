"""The runtime's watchdog (node/launch/watchdog.py): the command runs as a child whose output passes through
byte for byte; a stall (no progress line) or silence ends its process group, and the job's log's last
line says why (backends/ending.py reads it). Real processes through `python -m launchkit.runtime.node
launch`, as bash hands over; small timeouts in the job, no sleeps in the test."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from launchkit.backends import ending
from launchkit.runtime.node.launch import watchdog
from launchkit.runtime.node.policy import Policy
from lk_helpers import policy_env


def launch(tmp_path: Path, script: str, env: dict[str, str], **kw) -> subprocess.Popen[bytes]:
    (tmp_path / "job.py").write_text(script)
    full = {"PATH": os.environ["PATH"], "LAUNCHKIT_LAUNCHER": "none", **env}
    cmd = [sys.executable, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--t0", "0"]
    return subprocess.Popen(
        [*cmd, "--", sys.executable, "job.py"], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw
    )


def finish(p: subprocess.Popen[bytes]) -> tuple[int, bytes, str]:
    out, err = p.communicate(timeout=120)
    return p.returncode, out, err.decode()


STALLS = """
import sys, time
print("[step=1/100] loss=3.2", flush=True)
open("child.pid", "w").write(str(__import__("os").getpid()))
while True:
    print("NCCL WARN still here", flush=True)
    time.sleep(0.05)
"""


def test_a_job_that_stops_making_progress_is_ended_and_the_log_says_why(tmp_path):
    p = launch(tmp_path, STALLS, policy_env(stall_timeout=1, stall_grace=0))
    code, out, err = finish(p)
    assert code == watchdog.EXIT_STOPPED, err
    assert out.startswith(b"[step=1/100] loss=3.2\nNCCL WARN still here\n")
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(
        r"\[launchkit\] stopped: no progress for 1s \(last: step=1/100 at \d\d:\d\d:\d\d UTC; --stall-timeout\)",
        last,
    ), err
    assert ending.watchdog_stop(err.encode().splitlines(keepends=True)) == last.split("stopped: ", 1)[1]
    with pytest.raises(ProcessLookupError):  # its group was ended, not left behind
        os.kill(int((tmp_path / "child.pid").read_text()), 0)


def test_a_silent_job_is_ended_by_the_inactive_timeout(tmp_path):
    script = "import time\nprint('hello', flush=True)\ntime.sleep(600)\n"
    code, out, err = finish(launch(tmp_path, script, policy_env(inactive_timeout=1)))
    assert code == watchdog.EXIT_STOPPED and out == b"hello\n"
    assert err.strip().splitlines()[-1] == "[launchkit] stopped: no output for 1s (--inactive-timeout)"


def test_progress_keeps_it_going_and_output_and_exit_code_pass_through(tmp_path):
    """Output byte for byte (no newline at the end, \\r progress bars, binary); the exit code is its own."""
    script = (
        "import sys, time\n"
        "for i in range(6):\n"
        "    sys.stdout.write(f'\\r{i}/6 [00:0{i}<00:01, 2it/s]'); sys.stdout.flush(); time.sleep(0.4)\n"
        "sys.stdout.buffer.write(b'\\n\\xff\\x00 end'); sys.stderr.write('err line\\n'); sys.exit(7)\n"
    )
    env = policy_env(stall_timeout=1, stall_grace=0, inactive_soft_timeout=60)
    code, out, err = finish(launch(tmp_path, script, env))
    assert code == 7, err
    assert out == b"".join(b"\r%d/6 [00:0%d<00:01, 2it/s]" % (i, i) for i in range(6)) + b"\n\xff\x00 end"
    assert err.endswith("err line\n") and "stopped" not in err


def test_no_progress_line_at_all_is_stopped_after_the_grace(tmp_path):
    script = "import time\nwhile True:\n    print('loading', flush=True); time.sleep(0.05)\n"
    env = policy_env(stall_timeout=1, stall_grace=1)
    code, _, err = finish(launch(tmp_path, script, env))
    assert code == watchdog.EXIT_STOPPED
    assert err.strip().splitlines()[-1] == (
        "[launchkit] stopped: no progress line in 2s since it started"
        " (--stall-timeout 1s after a --stall-grace of 1s)"
    )


def test_signals_reach_the_command_through_the_watchdog(tmp_path):
    script = (
        "import os, signal, time\n"
        # os.write: the signal may land while the main thread is still inside print('ready'), and a
        # second print on the same buffer would be a reentrant call
        "signal.signal(signal.SIGTERM, lambda *a: (os.write(1, b'got TERM\\n'), os._exit(5)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(600)\n"
    )
    p = launch(tmp_path, script, policy_env(inactive_timeout=600))
    assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    p.send_signal(signal.SIGTERM)
    code, out, err = finish(p)
    assert (code, out) == (5, b"got TERM\n"), err


def test_the_default_patterns_match_common_trainers():
    s = watchdog.settings(Policy(stall_timeout=60))
    assert s is not None
    lines = {
        "OLMo-core": "2026-01-01 12:00:00 INFO [step=1200/5000,epoch=1] train/CE loss=2.31",
        "HF tqdm": " 12%|█▏        | 60/500 [00:31<03:48,  1.93it/s]",
        "HF logging": "{'loss': 1.2345, 'grad_norm': 3.1, 'learning_rate': 5e-05, 'epoch': 0.5}",
        "Lightning": "Epoch 3:  40%|████      | 40/100 [00:02<00:03, 18.12it/s, v_num=0]",
        "plain": "step 12 loss 0.5",
    }
    for who, line in lines.items():
        assert any(p.search(line) for p in s.patterns), who
    for noise in ("NCCL WARN Call to ibv_reg_mr failed", "loading checkpoint shards", "stepping down"):
        assert not any(p.search(noise) for p in s.patterns), noise


def test_no_setting_means_no_watchdog_and_bad_values_are_named():
    assert watchdog.settings(Policy()) is None
    with pytest.raises(ValueError, match="stall_timeout='x'"):
        Policy(stall_timeout="x")
    with pytest.raises(ValueError, match="--progress-pattern"):
        watchdog.settings(Policy(stall_timeout=1, progress_patterns=["("]))
