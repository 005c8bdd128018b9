"""Resume verification (issue 44 item 2, docs/retries.md "Did it resume?"): an attempt whose first
progress step is below the step the attempt before reached is told (the job's log, Slack, `follow`,
`why`, `list`), and with `--require-resume` stopped as launchkit's stop, never retried again. Per-attempt
records in `why --json`'s `attempts_detail`. Real processes through the runtime, the local backend's
supervisor, and the fake Beaker."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from fakebeaker.state import CANCEL_SIBLING_TASK_FAILED
from inproc import run_main
from launchkit.backends import ending
from launchkit.backends.progress import attempt_progress, resume_note
from launchkit.backends.protocol import AttemptDetail, StepProgress
from launchkit.runtime.node.launch import notify, watchdog
from lk_helpers import FAST_ENV, launched_id, policy_env, wait_finished

PY = sys.executable
NOTE = (
    "attempt 2 restarted at step 0; attempt 1 had reached step 12,639: it is not resuming from its checkpoint"
)


# -- the step of a progress line ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "text", "step"),
    [
        ("[step=1200/5000,epoch=1] loss=2.1", "step=1200/5000", 1200.0),
        ("12/500 [00:03<01:40, 4.8it/s]", "12/500 [0", 12.0),
        ("{'loss': 1.2, 'learning_rate': 5e-05, 'epoch': 0.5}", "'loss': 1.2, 'learning_rate': 5e-05, 'epoch':", 0.5),
        # Lightning's bar counts within an epoch (tqdm's pattern comes first): docs/retries.md says so
        ("Epoch 3:  40%|####  | 40/100 [00:02<00:03, 18.1it/s]", "40/100 [0", 40.0),
        ("train Step: 77 loss 1", "Step: 77", 77.0),
    ],
)  # fmt: skip
def test_each_default_pattern_names_its_step_and_matches_what_it_did(line, text, step):
    found = watchdog.progress_step(line, watchdog.progress_patterns(()))
    assert found is not None and found[1] == step
    if text is not None:
        assert found[0] == text == watchdog.progress_in(line, watchdog.progress_patterns(()))


def test_a_user_pattern_steps_by_its_step_group_else_its_first_number():
    named = watchdog.progress_patterns([r"it (?P<step>\d+) of \d+"])
    assert watchdog.progress_step("epoch 9 it 40 of 90", named) == ("it 40 of 90", 40.0)
    plain = watchdog.progress_patterns([r"iter \d+"])
    assert watchdog.progress_step("iter 5", plain) == ("iter 5", 5.0)
    assert watchdog.progress_step("loss=", watchdog.progress_patterns(["loss="])) == ("loss=", None)


def test_the_note_compares_each_replica_with_its_own_attempt_before():
    def d(attempt: int, first: float | None, last: float | None, replica: int = 0) -> AttemptDetail:
        mk = lambda v: None if v is None else StepProgress(text=f"step={v:g}", step=v)
        return AttemptDetail(
            task="main", replica=replica, attempt=attempt, first_progress=mk(first), last_progress=mk(last)
        )

    assert resume_note([d(1, 0, 12639), d(2, 0, 5)]) == NOTE
    assert resume_note([d(1, 0, 12639), d(2, 12640, 12700)]) is None  # resumed
    assert resume_note([d(1, 0, 12639, replica=1), d(2, 0, 5, replica=0)]) is None  # another replica's
    assert resume_note([d(1, 0, None), d(2, 0, 5)]) is None  # nothing known of attempt 1
    head, tail = [(None, b"setup"), (10**18, b"[step=3/9] a")], [(None, b"[step=7/9] b\r[step=8/9] c")]
    first, last = attempt_progress(head, tail, ())
    assert (first.step, last.step, last.text) == (3.0, 8.0, "step=8/9")  # type: ignore[union-attr]
    assert (first.at.year, last.at) == (2001, None)  # type: ignore[union-attr]: each with its own line's time


# -- the runtime: the check on the node ----------------------------------------------------------------
RESTARTS_AT_0 = """
import sys
print("[step=0/100] loss=3.2", flush=True)
print("[step=1/100] loss=3.1", flush=True)
sys.exit(3)
"""


def _launch(tmp_path: Path, script: str, env: dict[str, str]) -> tuple[int, str]:
    (tmp_path / "job.py").write_text(script)
    full = {"PATH": "/usr/bin:/bin", "LAUNCHKIT_LAUNCHER": "none", **env}
    cmd = [PY, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--t0", "0"]
    ran = subprocess.run([*cmd, "--", PY, "job.py"], env=full, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=120)  # fmt: skip
    return ran.returncode, ran.stdout.decode()


def test_the_runtime_tells_an_attempt_that_did_not_resume_and_lets_it_run(tmp_path):
    code, out = _launch(tmp_path, RESTARTS_AT_0, {"LAUNCHKIT_RESUME_FROM": "12639", "LAUNCHKIT_ATTEMPT": "2"})
    assert code == 3, out  # its own exit code
    assert f"[launchkit] {NOTE}\n" in out and out.count("not resuming") == 1, out
    assert "[step=1/100] loss=3.1" in out


def test_require_resume_stops_it_as_launchkits_stop(tmp_path):
    env = {"LAUNCHKIT_RESUME_FROM": "12639", "LAUNCHKIT_ATTEMPT": "2", **policy_env(require_resume=True)}
    code, out = _launch(tmp_path, RESTARTS_AT_0, env)
    assert code == watchdog.EXIT_STOPPED, out
    last = out.strip().splitlines()[-1]
    assert last == f"[launchkit] stopped: {NOTE} (--require-resume)", out
    why = ending.watchdog_stop([last.encode()])
    assert why is not None
    end = ending.from_exit_code(124, "R1", started=True, stopped=why)
    assert end.by == "launchkit" and end.line == f"stopped by launchkit: {NOTE} (--require-resume)"
    assert end.fix is not None and "drop --require-resume" in end.fix and "--stall-timeout" not in end.fix


# The command ends first; a process it left writes a line, then its first progress line (the watchdog
# reads it after it saw the command end, as it may a line the command wrote as it exited): the same verdict.
ENDS_THEN_LINE = """
import subprocess, sys
line = "import time; time.sleep(0.1); print('tick', flush=True); time.sleep(0.2); print('[step=0/100] x', flush=True)"
subprocess.Popen([sys.executable, "-c", line])
sys.exit(1)
"""


@pytest.mark.parametrize("pattern", [None, r"step=(?P<step>\d+)/"])  # the built-in patterns; the matcher
def test_require_resume_decides_alike_when_the_command_ended_before_its_line_was_read(tmp_path, pattern):
    """(a race: the command exiting 1 right after printing step 0 was retried as a failure, 1 in 3)"""
    given = {"progress_patterns": [pattern]} if pattern else {}
    env = {"LAUNCHKIT_RESUME_FROM": "12639", "LAUNCHKIT_ATTEMPT": "2",
           **policy_env(require_resume=True, **given)}  # fmt: skip
    code, out = _launch(tmp_path, ENDS_THEN_LINE, env)
    assert code == watchdog.EXIT_STOPPED, out
    assert out.strip().splitlines()[-1].startswith(f"[launchkit] stopped: {NOTE.split(';')[0]}"), out


def test_an_attempt_that_resumed_is_not_told(tmp_path):
    script = RESTARTS_AT_0.replace("step=0/", "step=12640/").replace("step=1/", "step=12641/")
    code, out = _launch(tmp_path, script, {"LAUNCHKIT_RESUME_FROM": "12639", "LAUNCHKIT_ATTEMPT": "2",
                                            **policy_env(require_resume=True)})  # fmt: skip
    assert code == 3 and "resum" not in out, out


STALLS_THEN_RESTARTS_AT_0 = """
import os, sys, time
n = int(os.environ.get("LAUNCHKIT_RESTART", "0"))
print("[step=%d/100] loss=1.0" % (0 if n else 12639), flush=True)
if n == 2:
    sys.exit(0)
while True:
    print("NCCL WARN", flush=True); time.sleep(0.05)
"""


@pytest.mark.parametrize(("require", "code", "starts"), [(False, 0, 3), (True, 124, 2)])
def test_in_place_restarts_are_checked_and_a_required_resume_is_not_restarted_again(
    tmp_path, require, code, starts
):
    env = policy_env(
        stall_timeout=1, stall_grace=0, retry_on=["stalled"], retry_cap=3, require_resume=require
    )
    got, out = _launch(tmp_path, STALLS_THEN_RESTARTS_AT_0, env)
    assert got == code, out
    assert out.count("restarting the command in place") == starts - 1, out
    told = "restart 1 (in place) restarted at step 0; the start before it had reached step 12,639"
    assert told in out, out
    if require:
        assert out.strip().splitlines()[-1].endswith("(--require-resume)"), out


def test_the_jobs_poster_posts_the_note_and_a_require_resume_stop():
    sent: list[str] = []
    job = notify.Job({"LAUNCHKIT_RUN_ID": "R1", "LAUNCHKIT_ATTEMPT": "2"},
                     notify.Poster("https://hooks.slack.com/x", send=lambda _u, t: sent.append(t)))  # fmt: skip
    job.tell("resume", NOTE)
    job.tell("stopped", f"{NOTE} (--require-resume)")
    job.ended(124)
    assert sent == [
        f":repeat: launchkit run *R1* {NOTE}",
        f":repeat: launchkit run *R1* stopped by launchkit: {NOTE} (--require-resume) (attempt 2)",
    ]


# -- the local backend: attempts of one run ------------------------------------------------------------
# Attempt 1 reaches step 12,639 and fails; attempt 2 starts over at step 0, then succeeds.
STARTS_OVER = """
import os, sys
attempt = os.environ["LAUNCHKIT_ATTEMPT"]
if attempt == "1":
    print("[step=12639/20000] loss=0.9", flush=True)
    sys.exit(1)
print("[step=0/20000] loss=3.2", flush=True)
print("[step=1/20000] loss=3.1", flush=True)
"""


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lkstate")}


@pytest.mark.slow
def test_local_a_retry_from_step_0_is_told_in_follow_why_and_list(repo, env):
    r = run_cli("run", "--local", "--no-python", "--retry-on", "failure", "--retries", "2", "--follow", "--",
                PY, "-c", STARTS_OVER, cwd=repo.path, env=env, timeout=180)  # fmt: skip
    assert r.code == 0, r.stderr
    assert f"[launchkit] {NOTE}" in r.stdout, r.stdout  # follow prints the job's log
    run_id = launched_id(r.stderr)
    why = run_cli("why", run_id, env=env, timeout=60)
    assert why.stdout.splitlines()[0] == (
        f"{run_id} succeeded after 1 retry (attempt 1: exit code 1) ({NOTE});"
        f" attempt 1's log: `launchkit logs {run_id} --attempt 1`"
    ), why.stdout
    listed = json.loads(run_cli("list", "--local", "--json", env=env, timeout=60).stdout)
    assert next(x for x in listed if x["id"] == run_id)["resume"] == NOTE
    detail = json.loads(run_cli("why", run_id, "--json", env=env, timeout=60).stdout)["attempts_detail"]
    assert [(d["attempt"], d["cause"], d["exit_code"]) for d in detail] == [
        (1, "exit code 1", 1),
        (2, "succeeded", 0),
    ]
    last = detail[0]["last_progress"]
    assert (last["text"], last["step"]) == ("step=12639/20000", 12639.0) and last["at"].startswith("20")
    assert detail[1]["first_progress"]["step"] == 0.0 and detail[1]["last_progress"]["step"] == 1.0
    first_at, last_at = detail[1]["first_progress"]["at"], detail[1]["last_progress"]["at"]
    assert first_at and first_at.startswith("20") and first_at <= last_at, detail[1]  # each line's own time
    assert all(d["gpu_hours"] == 0 for d in detail)  # no GPUs here: known, and zero


@pytest.mark.slow
def test_local_require_resume_stops_the_attempt_and_nothing_retries_it(repo, env):
    """`--retries 3` alone: the supervisor retries any failure, the runtime's stop excepted."""
    fails_too = STARTS_OVER + "sys.exit(1)\n"  # without the stop, attempt 2 would fail and be retried
    r = run_cli("run", "--local", "--no-python", "--retries", "3", "--require-resume",
                "--follow", "--", PY, "-c", fails_too, cwd=repo.path, env=env, timeout=180)  # fmt: skip
    assert r.code == 124, r.stderr
    run_id = launched_id(r.stderr)
    done = wait_finished(run_id, env)
    assert done["attempts"] == 2, done  # attempt 2 was stopped and not retried, with 2 retries left
    why = run_cli("why", run_id, env=env, timeout=60).stdout.splitlines()[0]  # then its phases
    assert re.fullmatch(
        rf"{run_id} stopped by launchkit: {re.escape(NOTE)} \(--require-resume\)"
        r" \(attempt 2 of 2; attempt 1: exit code 1\); load the newest checkpoint.*",
        why,
    ), why


def test_require_resume_with_nothing_that_retries_is_refused(repo, env):
    r = run_cli(
        "run", "--local", "--require-resume", "--dry-run", "--", "true", cwd=repo.path, env=env, timeout=60
    )
    assert r.code == 2 and "nothing retries this run" in r.stderr, r.stderr


# -- the fake Beaker ------------------------------------------------------------------------------------
WS = "ai2/launchkit"


def _launch_beaker(repo, name: str, *args: str):
    return run_cli("run", "--workspace", WS, "--yes", "--name", name, *args, "--", "python", "train.py",
                   cwd=repo.path, timeout=90)  # fmt: skip


@pytest.mark.slow
def test_beaker_why_reads_every_attempt_and_tells_a_retry_from_step_0(repo, fake_beaker):
    s = fake_beaker.state
    assert _launch_beaker(repo, "over", "--retry-on", "failure", "--retries", "2").code == 0
    exp = next(e for e in s.experiments.values() if e.name == "over")
    s.start_job(exp)
    s.append_logs(exp.tasks[0].latest_job, ["[launchkit] setup done in 1s", "[step=12639/20000] loss=0.9"])
    s.finish_job(exp, 1)
    nxt = exp.tasks[0].latest_job
    s.start_job(nxt)
    s.append_logs(nxt, ["[step=0/20000] loss=3.2", "[step=1/20000] loss=3.1"])
    r = run_main("why", exp.id)
    assert r.code == 0 and NOTE in r.stdout, r.stdout
    detail = json.loads(run_main("why", exp.id, "--json").stdout)["attempts_detail"]
    assert [(d["attempt"], d["cause"], d["exit_code"]) for d in detail] == [
        (1, "exit code 1", 1),
        (2, None, None),
    ]
    assert detail[0]["last_progress"]["step"] == 12639.0 and detail[1]["first_progress"]["step"] == 0.0
    first_at, last_at = detail[1]["first_progress"]["at"], detail[1]["last_progress"]["at"]
    assert first_at and first_at.startswith("20") and first_at <= last_at, detail[1]  # each line's own time


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (["--retry-on", "failure", "--require-resume"], True),
        (["--require-resume", "--retries", "2"], True),
        (["--retry-on", "stalled", "--stall-timeout", "30m", "--require-resume"], False),
    ],
)
def test_beaker_refuses_require_resume_for_its_own_retries(repo, fake_beaker, args, refused):
    r = _launch_beaker(repo, "rr", *args)
    assert (r.code == 2) == refused, r.stderr
    if refused:
        assert (
            "--require-resume cannot be honoured on Beaker" in r.stderr
            and len(r.stderr.strip().splitlines()) <= 2
        )


# -- several replicas: the one whose progress stopped first ------------------------------------------
def test_beaker_why_names_the_replica_whose_progress_stopped_first(fake_beaker):
    s = fake_beaker.state
    exp = s.add_experiment(WS, "two", author="alice", replicas=2, description="x [launchkit]")
    r0, r1 = (t.latest_job for t in exp.tasks)
    t0 = time.time_ns() - 3600 * 10**9
    s.start_job(r0)
    s.start_job(r1)
    s.append_logs(r1, ["[step=5/100] loss=1", "[launchkit] stopped: no progress for 30m (last: step=5/100"
                       " at 11:00:00 UTC; --stall-timeout)"], timestamps=[t0, t0 + 1800 * 10**9])  # fmt: skip
    s.append_logs(r0, ["[step=7/100] loss=1"], timestamps=[t0 + 250 * 10**9])
    s.finish_job(r1, 124)
    s.cancel_job(r0, code=CANCEL_SIBLING_TASK_FAILED, message="a sibling failed")
    why = run_main("why", exp.id).stdout
    assert "stopped by launchkit: no progress for 30m" in why, why
    assert (
        "replica 1 of 2 made no progress first (last: step=5/100 at " in why
        and "4m10s before the next" in why
    )
