"""`--stall-timeout auto` (issue 44 item 3): the budget from the job's own step intervals, the cap while a
checkpoint or an evaluation runs, the budget in force told when it changes; before a stall stop, the
stacks of the command's Python processes in the log."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import yaml

from inproc import run_main
from launchkit.runtime.node.launch import stackdump
from launchkit.runtime.node.launch.stallbudget import CAP, FLOOR, AutoBudget
from launchkit.runtime.node.policy import ENV as POLICY_ENV
from launchkit.runtime.node.policy import Policy
from timescale import scaled

PY = sys.executable


def test_the_budget_is_k_times_the_slowest_recent_interval_within_floor_and_cap():
    b = AutoBudget(k=5, floor=10, cap=100)
    assert b.budget() == 100 and "until 3 step intervals are known" in (b.change() or "")
    for t in (0, 1, 2, 3):
        b.progress(t)
    assert b.budget() == 10  # 5 x 1s is below the floor
    told = b.change()
    assert told is not None and told.startswith(
        "stall budget 10s: 5 x the slowest of the last 3 step intervals (1.0s) (the floor)"
    )
    for t in (7, 11):  # 4s intervals: 20s
        b.progress(t)
    assert b.budget() == 20 and b.change() is not None
    b.progress(15)
    assert b.change() is None  # the same budget is not told again
    for t in range(16, 16 + 30):
        b.progress(t)
    assert b.budget() == 10  # the 4s intervals left the window of 20


def test_a_checkpoint_or_eval_phase_gets_the_cap_and_does_not_count_as_a_step():
    b = AutoBudget(k=5, floor=1, cap=60)
    for t in range(5):
        b.progress(t)
    b.change()
    for quiet in ("loss=1.2 lr=3e-4", "NCCL INFO comm 0x5 rank 0"):
        b.line(quiet)
        assert b.phase is None
    b.line("2026-01-01 INFO Saving checkpoint to /weka/ckpt/step1000")
    assert b.budget() == 60
    told = b.change()
    assert told is not None and "checkpoint or evaluation phase: '2026-01-01 INFO Saving checkpoint" in told
    b.progress(300)  # the save took 296s: not a step interval
    assert b.budget() == 5 and b.slowest() == 1
    for line in (
        "***** Running Evaluation *****",
        "Validation DataLoader 0:  10%",
        "Running evaluation on 500 batches",
    ):
        b = AutoBudget(k=5, floor=1, cap=60)
        b.line(line)
        assert b.phase is not None, line
    assert (FLOOR, CAP) == (300.0, 7200.0)  # the documented defaults


HANGS = """
import sys, time
print("ready", file=sys.stderr, flush=True)
time.sleep(1000)
"""


def test_a_stack_dump_of_the_groups_python_processes_through_faulthandler(tmp_path):
    env = stackdump.command_env({"PATH": os.environ["PATH"]})
    assert env["PYTHONFAULTHANDLER"] == "1"
    assert stackdump.command_env({"PYTHONFAULTHANDLER": ""})["PYTHONFAULTHANDLER"] == ""  # the job's own
    out = tmp_path / "out"
    with open(out, "wb") as f:
        p = subprocess.Popen([PY, "-c", HANGS], env=env, stdout=f, stderr=f, start_new_session=True)
    try:
        deadline = time.monotonic() + scaled(60)  # a hang guard: "ready" is the event
        while b"ready" not in out.read_bytes():
            assert time.monotonic() < deadline, out.read_bytes()
            time.sleep(0.05)  # it runs its own code (not still starting up)
        said: list[str] = []
        n = stackdump.dump(p.pid, said.append, lambda b: None, which=lambda _: None)  # no py-spy here
        assert n == 1 and said == [
            f"the stacks of process {p.pid} (faulthandler, SIGABRT), before it is stopped:"
        ]
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    text = out.read_text()
    assert "Fatal Python error: Aborted" in text and 'File "<string>", line 4 in <module>' in text, text


def test_no_python_process_is_one_line():
    said: list[str] = []
    assert stackdump.dump(2**22 + 12345, said.append, lambda b: None) == 0
    assert said == ["no Python process of the command to dump the stacks of"]


# -- the runtime: a long checkpoint pause survives, a hang is caught ---------------------------------
CHECKPOINTS_THEN_HANGS = """
import sys, time
for i in range(8):
    print("[step=%d/100] loss=1.0" % i, flush=True)
    time.sleep(0.05)
print("Saving checkpoint to /tmp/ckpt/step8", flush=True)
time.sleep(3)  # longer than the floor, shorter than the cap
for i in range(8, 12):
    print("[step=%d/100] loss=1.0" % i, flush=True)
    time.sleep(0.05)
time.sleep(1000)  # the hang
"""


def test_auto_budget_survives_a_checkpoint_pause_and_stops_a_hang_with_a_stack_dump(tmp_path):
    (tmp_path / "job.py").write_text(CHECKPOINTS_THEN_HANGS)
    policy = Policy(stall_auto=[1, 6], stall_grace=30)
    env = {"PATH": "/usr/bin:/bin", "LAUNCHKIT_LAUNCHER": "none", POLICY_ENV: policy.encode() or ""}
    cmd = [PY, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--t0", "0"]
    ran = subprocess.run([*cmd, "--", PY, "job.py"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=120)  # fmt: skip
    out = ran.stdout.decode()
    assert ran.returncode == 124, out
    told = [line for line in out.splitlines() if line.startswith("[launchkit] stall budget ")]
    assert told[0].startswith("[launchkit] stall budget 6s: the cap, until 3 step intervals are known"), out
    assert any(t.startswith("[launchkit] stall budget 1s: 5 x the slowest") for t in told), told
    assert any("checkpoint or evaluation phase: 'Saving checkpoint to /tmp/ckpt/step8'" in t for t in told), (
        told
    )
    assert "[step=11/100]" in out  # the 3 s save did not stop it
    stop = out.strip().splitlines()[-1]
    assert stop.startswith("[launchkit] stopped: no progress for 1s (last: step=11/100 at "), stop
    assert "--stall-timeout auto: 5 x the slowest of the last" in stop, stop
    assert "(faulthandler, SIGABRT), before it is stopped:" in out and 'File "' in out, out
    assert 'job.py", line 11 in <module>' in out, out  # where it hung: time.sleep(1000)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("auto:1m", "auto takes a floor and a cap, or neither"),
        ("auto:5m:1m", "the floor must be above zero and at most the cap"),
        ("auto:0s:1m", "the floor must be above zero"),
    ],
)
def test_bad_auto_budgets_are_refused_in_one_line(value, says):
    r = run_main("run", "--dry-run", "--offline", "--stall-timeout", value, "--", "python", "train.py")
    assert r.code == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) <= 2, r.stderr


def test_the_spec_carries_auto_in_the_policy():
    r = run_main("run", "--dry-run", "--offline", "--remote", "https://github.com/a/b.git", "--allow-dirty",
                 "--stall-timeout", "auto", "--retry-on", "stalled", "--", "python", "train.py")  # fmt: skip
    assert r.code == 0, r.stderr
    env = {e["name"]: e.get("value") for e in yaml.safe_load(r.stdout)["tasks"][0]["envVars"]}
    policy = Policy.decode(env[POLICY_ENV])
    assert policy.stall_auto == (FLOOR, CAP) and policy.stall_timeout is None and policy.restarts == 3
