"""`--retry-on CAUSE` (issue 34 item 3): retries by cause on the mechanisms that can tell causes apart,
the attempts in why/list, and a run identity shared by every attempt. Real processes for the local
backend and the runtime, the fake Beaker for Beaker's own mechanisms (auto-resume, task retries).
Jobs wait on files the test makes, never on time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from inproc import run_main
from launchkit.core import runs
from launchkit.core.runs import Job, RunView
from launchkit.core.status import Cause, RunStatus
from launchkit.runtime.node.policy import ENV as POLICY_ENV
from launchkit.runtime.node.policy import ENV_ATTEMPT, FAILURE, PREEMPTION, STALLED, Policy
from lk_helpers import FAST_ENV, launched_id, wait_finished
from timescale import scaled

PY = sys.executable
NO_PY = ("--local", "--no-python")
WS = "ai2/launchkit"


# why on a running run also says its last progress line (issue 34 item 4); these jobs print none
NO_PROGRESS = "; no progress line at the end of its log"


def _wait_for(path: Path, timeout: float = 120) -> str:
    """A file's text once a job made it (its state, not a time, is what is waited for)."""
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().endswith("\n"):
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never came")


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lkstate")}


def _listed(run_id: str, env: dict[str, str]) -> dict:
    r = run_cli("list", "--local", "--json", env=env, timeout=60)
    assert r.code == 0, r.stderr
    return next(x for x in json.loads(r.stdout) if x["id"] == run_id)


# -- refusals: one line, exit 2 ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--retry-on", "node-lost"], "--retry-on node-lost cannot be honoured"),
        (["--retry-on", "preemption,bogus"], "--retry-on 'bogus': unknown cause"),
        (["--retry-on", "stalled"], "--retry-on stalled needs a watchdog"),
        (["--retry-on", "stalled", "--stall-timeout", "5m", "--replicas", "2"], "cannot rejoin the other 1"),
        (["--retry-on", "preemption", "--no-auto-resume"], "contradict each other"),
        (["--retry-on", "failure", "--retries", "0"], "--retries 0 with --retry-on retries nothing"),
        (["--retry-on", "failure", "--preemptible"], "cannot be combined with a --retry-on"),
    ],
)
def test_what_no_backend_can_honour_is_refused_in_one_line(args, says):
    r = run_main("run", "--dry-run", "--offline", *args, "--", "python", "train.py")
    assert r.code == 2, r.stderr
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_never_started_alone_is_refused_on_beaker_and_taken_with_failure(repo, fake_beaker):
    r = run_main("run", "--dry-run", "--workspace", WS, "--retry-on", "never-started", "--", "python", "x.py",
                 cwd=repo.path)  # fmt: skip
    assert r.code == 2 and "--retry-on never-started cannot be honoured on Beaker" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    ok = run_main("run", "--dry-run", "--workspace", WS, "--retry-on", "never-started,failure", "--retries",
                  "2", "--", "python", "x.py", cwd=repo.path)  # fmt: skip
    assert ok.code == 0, ok.stderr
    assert "allowedTaskRetries: 2" in ok.stdout and "autoResume: false" in ok.stdout, ok.stdout


# -- the spec: Beaker's own mechanisms ---------------------------------------------------------------
def _spec(*args: str) -> str:
    r = run_main("run", "--dry-run", "--offline", "--remote", "https://github.com/a/b.git", "--allow-dirty",
                 *args, "--", "python", "train.py")  # fmt: skip
    assert r.code == 0, r.stderr
    return r.stdout


def _policy(spec_yaml: str) -> Policy:
    """The run's policy a printed spec carries (decoded as every reader decodes it)."""
    env = {e["name"]: e.get("value") for e in yaml.safe_load(spec_yaml)["tasks"][0]["envVars"]}
    return Policy.decode(env.get(POLICY_ENV))


def test_the_spec_uses_auto_resume_and_task_retries_only_for_their_causes():
    gantry = _spec("--retries", "4")  # alone: gantry's cause-blind task retries, auto-resume untouched
    assert "allowedTaskRetries: 4" in gantry and "autoResume" not in gantry and _policy(gantry) == Policy()
    pre = _spec("--retry-on", "preemption", "--retry-on", "stalled", "--stall-timeout", "5m")
    assert "allowedTaskRetries" not in pre and "autoResume" not in pre  # Beaker's default: on
    assert _policy(pre) == Policy(
        retry_on=[PREEMPTION, STALLED], retry_cap=3, stall_timeout=300
    )  # the default cap
    fail = _spec("--retry-on", "failure", "--retries", "2")
    assert "allowedTaskRetries: 2" in fail and "autoResume: false" in fail


# -- the run model: attempts told -----------------------------------------------------------------------
def test_attempt_text_names_the_attempt_its_cap_and_the_last_end():
    def job(i: str, state: RunStatus, **kw) -> Job:
        return Job(id=i, task="main", state=state, created=float(len(i)), **kw)

    lost = job("a", RunStatus.canceled, stop=Cause.node_lost)
    pre = job("bb", RunStatus.canceled, stop=Cause.preempted, retry_of="a")
    now = job("ccc", RunStatus.running, retry_of="bb")
    assert runs.attempt_text(
        RunView.of([lost, now.model_copy(update={"retry_of": "a"})], allowed_retries=4)
    ) == ("attempt 2 of 5; last: node lost")
    # a resume after a preemption does not spend the budget: the cap moves with it
    assert (
        runs.attempt_text(RunView.of([lost, pre, now], allowed_retries=4))
        == "attempt 3 of 6; last: preempted"
    )
    assert runs.attempt_text(RunView.of([pre, now.model_copy(update={"retry_of": "bb"})])) == (
        "attempt 2; last: preempted"  # Beaker's auto-resume alone: no cap to tell
    )
    assert runs.attempt_text(RunView.of([now])) is None
    stalled = job("a", RunStatus.failed, exit_code=124, cause="stalled")
    assert runs.attempt_text(RunView.of([stalled, now], allowed_retries=1)).endswith("last: stalled")


# -- the runtime: a stalled command restarted in place ----------------------------------------------
STALLS_TWICE = """
import os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(os.environ.get("LAUNCHKIT_ATTEMPT", "-") + " " + os.environ.get("LAUNCHKIT_RESTART", "0") + "\\n")
print("[step=1/10] loss=1.0", flush=True)
if os.environ.get("LAUNCHKIT_RESTART") == "2":
    sys.exit(0)
while True:
    print("NCCL WARN", flush=True); time.sleep(0.05)
"""


@pytest.mark.parametrize(
    ("cap", "code", "starts"), [("2", 0, ["1 0", "2 1", "3 2"]), ("1", 124, ["1 0", "2 1"])]
)
def test_the_runtime_restarts_a_stalled_command_in_place(tmp_path, cap, code, starts):
    (tmp_path / "job.py").write_text(STALLS_TWICE)
    seen = tmp_path / "starts"
    policy = Policy(stall_timeout=1, stall_grace=0, retry_on=[PREEMPTION, STALLED], retry_cap=int(cap))
    env = {"PATH": "/usr/bin:/bin", POLICY_ENV: policy.encode(), ENV_ATTEMPT: "1"}
    cmd = [PY, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--t0", "0"]
    ran = subprocess.run([*cmd, "--", PY, "job.py", str(seen)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=120)  # fmt: skip
    out = ran.stdout.decode()
    assert ran.returncode == code, out
    assert seen.read_text().splitlines() == starts, out
    assert out.count("restarting the command in place (attempt ") == len(starts) - 1, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("[launchkit] stopped: ") == (code == 124), out  # the end is told as before


def test_in_place_restarts_need_stalled_named():
    assert Policy(retry_on=[PREEMPTION, STALLED], retry_cap=4).restarts == 4
    assert Policy(retry_on=[FAILURE], retry_cap=4).restarts == 0
    assert Policy().restarts == 0


# -- the local backend: the supervisor retries by cause ---------------------------------------------
# Each start records its identity; the first waits to be preempted (its pid in a file the test reads),
# the next waits for the test to let it finish, with the exit code the test gives.
PREEMPTED_ONCE = """
import os, sys, time
here = sys.argv[1]
attempt = os.environ["LAUNCHKIT_ATTEMPT"]
with open(os.path.join(here, "ids"), "a") as f:
    f.write(os.environ["LAUNCHKIT_RUN_ID"] + " " + attempt + " " + os.environ["BEAKER_JOB_ID"] + "\\n")
with open(os.path.join(here, "pid-" + attempt), "w") as f:
    f.write(str(os.getpid()) + "\\n")
while not os.path.exists(os.path.join(here, "go-" + attempt)):
    time.sleep(0.02)
sys.exit(int(sys.argv[2]))
"""


@pytest.mark.slow
def test_local_a_preempted_attempt_is_retried_and_an_exit_1_is_not(repo, env, tmp_path):
    here = tmp_path / "job"
    here.mkdir()
    r = run_cli("run", *NO_PY, "--retry-on", "preemption", "--", PY, "-c", PREEMPTED_ONCE, str(here), "0",
                cwd=repo.path, env=env)  # fmt: skip
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    os.kill(int(_wait_for(here / "pid-1")), signal.SIGTERM)  # preempted: from outside launchkit
    _wait_for(here / "pid-2")
    why = run_cli("why", run_id, env=env, timeout=60)
    assert (
        why.stdout.splitlines()[0] == f"{run_id} is running (attempt 2 of 4; last: preempted){NO_PROGRESS}"
    ), why.stdout
    assert _listed(run_id, env)["retry"] == "attempt 2 of 4; last: preempted"
    lines = run_cli("list", "--local", env={**env, "COLUMNS": "80"}, timeout=60).stdout.splitlines()
    assert max(map(len, lines)) <= 80 and "attempt 2" in next(x for x in lines if run_id in x), lines
    (here / "go-2").touch()
    assert wait_finished(run_id, env)["status"] == "succeeded"
    ids = [line.split() for line in (here / "ids").read_text().splitlines()]
    assert [i[:2] for i in ids] == [[run_id, "1"], [run_id, "2"]], ids  # one run id, attempts 1 and 2
    assert ids[0][2] != ids[1][2]  # a new job each time

    fails = tmp_path / "fails"
    fails.mkdir()
    (fails / "go-1").touch()
    r = run_cli("run", *NO_PY, "--retry-on", "preemption", "--follow", "--", PY, "-c", PREEMPTED_ONCE,
                str(fails), "1", cwd=repo.path, env=env, timeout=120)  # fmt: skip
    assert r.code == 1, r.stderr
    failed = _listed(launched_id(r.stderr), env)
    assert (failed["status"], failed["attempts"], failed["retry"]) == ("failed", 1, None), failed
    assert (fails / "ids").read_text().count("\n") == 1


@pytest.mark.slow
def test_local_retry_on_failure_retries_an_exit_1_and_a_preemption_only_when_named(repo, env, tmp_path):
    here = tmp_path / "job"
    here.mkdir()
    r = run_cli("run", *NO_PY, "--retry-on", "failure", "--retries", "1", "--follow", "--", PY, "-c",
                "import os, sys; sys.exit(0 if os.environ['LAUNCHKIT_ATTEMPT'] == '2' else 1)",
                cwd=repo.path, env=env, timeout=120)  # fmt: skip
    assert r.code == 0, r.stderr
    done = _listed(launched_id(r.stderr), env)
    assert (done["attempts"], done["retry"]) == (2, "attempt 2 of 2; last: exit code 1"), done
    # preempted under --retry-on failure: not retried, and told as a preemption
    r = run_cli("run", *NO_PY, "--retry-on", "failure", "--", PY, "-c", PREEMPTED_ONCE, str(here), "0",
                cwd=repo.path, env=env)  # fmt: skip
    run_id = launched_id(r.stderr)
    os.kill(int(_wait_for(here / "pid-1")), signal.SIGTERM)
    assert wait_finished(run_id, env)["attempts"] == 1
    why = run_cli("why", run_id, env=env, timeout=60).stdout
    assert "was preempted" in why and "SIGTERM from outside launchkit" in why, why


@pytest.mark.slow
def test_local_never_started_retries_a_failed_setup_step_not_the_command(repo, env, tmp_path):
    """--pre-setup fails the first time (exit 103 before the command ran): a new attempt; the command's
    own exit 103 afterwards is a failure, not retried."""
    mark = tmp_path / "setup-failed-once"
    hook = f"test -e {mark} || {{ touch {mark}; exit 1; }}"
    r = run_cli("run", *NO_PY, "--retry-on", "never-started", "--pre-setup", hook, "--follow", "--", PY, "-c",
                "import os, sys; sys.exit(103)", cwd=repo.path, env=env, timeout=120)  # fmt: skip
    assert r.code == 103, r.stderr
    done = _listed(launched_id(r.stderr), env)
    assert (done["attempts"], done["retry"]) == (2, "attempt 2 of 4; last: never started"), done


@pytest.mark.slow
def test_local_stalled_job_is_restarted_in_place_by_its_runtime(repo, env, tmp_path):
    seen = tmp_path / "starts"
    r = run_cli("run", *NO_PY, "--retry-on", "stalled", "--retries", "2", "--stall-timeout", "1s",
                "--stall-grace", "0s", "--follow", "--", PY, "-c", STALLS_TWICE, str(seen),
                cwd=repo.path, env=env, timeout=180)  # fmt: skip
    assert r.code == 0, r.stderr
    assert seen.read_text().splitlines() == ["1 0", "2 1", "3 2"]  # one job: attempts 1..3 in place
    assert _listed(launched_id(r.stderr), env)["attempts"] == 1


# -- the fake Beaker: auto-resume and task retries, by cause ----------------------------------------
def _launch_beaker(repo, name: str, *args: str):
    r = run_cli("run", "--workspace", WS, "--yes", "--name", name, *args, "--", "python", "train.py",
                cwd=repo.path, timeout=90)  # fmt: skip
    assert r.code == 0, r.stderr
    return r


def _exp(fake, name: str):
    return next(e for e in fake.state.experiments.values() if e.name == name)


def _why(exp_id: str) -> str:
    r = run_main("why", exp_id)
    assert r.code == 0, r.stderr
    return r.stdout.splitlines()[0]  # the end; then where its time went


@pytest.mark.slow
def test_beaker_a_preempted_attempt_is_retried_and_an_exit_1_is_not(repo, fake_beaker):
    s = fake_beaker.state
    _launch_beaker(repo, "pre", "--retry-on", "preemption")
    _launch_beaker(repo, "one", "--retry-on", "preemption")
    _launch_beaker(repo, "notpre", "--retry-on", "failure", "--retries", "2")
    pre, one, notpre = (_exp(fake_beaker, n) for n in ("pre", "one", "notpre"))
    s.start_job(pre)
    nxt = s.preempt_job(pre)
    assert nxt is not None  # Beaker's auto-resume
    s.start_job(nxt)
    assert _why(pre.id) == f"{pre.id} is running (attempt 2; last: preempted){NO_PROGRESS}"
    s.finish_job(nxt, 0)
    assert _why(pre.id).startswith(f"{pre.id} succeeded")
    s.start_job(one)
    s.finish_job(one, 1)
    assert len(one.tasks[0].jobs) == 1 and _why(one.id).startswith(f"{one.id} failed with exit code 1")
    s.start_job(notpre)  # --retry-on without preemption: auto-resume is off
    assert s.preempt_job(notpre) is None and len(notpre.tasks[0].jobs) == 1
    assert "preempted" in _why(notpre.id)


@pytest.mark.slow
def test_beaker_retry_on_failure_retries_an_exit_1(repo, fake_beaker):
    s = fake_beaker.state
    _launch_beaker(repo, "fails", "--retry-on", "failure", "--retries", "2")
    exp = _exp(fake_beaker, "fails")
    s.start_job(exp)
    s.finish_job(exp, 1)
    assert len(exp.tasks[0].jobs) == 2  # Beaker's task retry
    s.start_job(exp.tasks[0].latest_job)
    assert _why(exp.id) == f"{exp.id} is running (attempt 2 of 3; last: exit code 1){NO_PROGRESS}"
