"""`--retry-on exit:29,75` (issue 44 item 1): named exit codes as a cause. The runtime on the node
restarts the command in place when it exits with one of them (as `stalled`), on both backends, up to
the cap, counted apart from the stalled restarts; anything else ends the job as before."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from conftest import run_cli
from inproc import run_main
from launchkit.runtime.node.launch import restart, watchdog
from launchkit.runtime.node.policy import ENV as POLICY_ENV
from launchkit.runtime.node.policy import EXIT, PREEMPTION, STALLED, Policy
from lk_helpers import FAST_ENV, launched_id

PY = sys.executable

# Each start appends its restart count; exits with the codes given in turn (the last one from then on).
EXITS = """
import os, sys
n = int(os.environ.get("LAUNCHKIT_RESTART", "0"))
with open(sys.argv[1], "a") as f:
    f.write("%s %d\\n" % (os.environ.get("LAUNCHKIT_ATTEMPT", "-"), n))
codes = [int(c) for c in sys.argv[2].split(",")]
print("[step=%d/10] loss=1.0" % (n + 5), flush=True)
sys.exit(codes[min(n, len(codes) - 1)])
"""


@pytest.mark.parametrize(
    ("given", "causes", "codes"),
    [
        (["exit:29,75"], (EXIT,), (29, 75)),
        (["preemption,exit:29", "exit:75,3"], (PREEMPTION, EXIT), (3, 29, 75)),
        (["exit:75,stalled"], (STALLED, EXIT), (75,)),
    ],
)
def test_exit_codes_are_parsed_with_the_causes(given, causes, codes):
    from launchkit.core import retrying

    assert retrying.parse(given) == (causes, codes)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--retry-on", "exit"], "'exit' names no exit code (e.g. exit:29,75)"),
        (["--retry-on", "exit:0"], "exit code '0': give codes 1-255"),
        (["--retry-on", "exit:124"], "124 is the watchdog's stop: use stalled"),
        (["--retry-on", "exit:x"], "exit code 'x'"),
        (
            ["--retry-on", "exit:3", "--replicas", "2"],
            "--retry-on exit:3 restarts one replica's command in place",
        ),
    ],
)
def test_bad_exit_codes_are_refused_in_one_line(args, says):
    r = run_main("run", "--dry-run", "--offline", *args, "--", "python", "train.py")
    assert r.code == 2, r.stderr
    assert says in r.stderr and len(r.stderr.strip().splitlines()) <= 2, r.stderr


def test_the_spec_carries_the_codes_in_the_policy_and_asks_beaker_for_no_retry():
    r = run_main("run", "--dry-run", "--offline", "--remote", "https://github.com/a/b.git", "--allow-dirty",
                 "--retry-on", "exit:29,75", "--retries", "2", "--", "python", "train.py")  # fmt: skip
    assert r.code == 0, r.stderr
    task = yaml.safe_load(r.stdout)["tasks"][0]
    env = {e["name"]: e.get("value") for e in task["envVars"]}
    policy = Policy.decode(env[POLICY_ENV])
    assert policy == Policy(retry_on=[EXIT], retry_cap=2, retry_exit_codes=[29, 75])
    assert env[POLICY_ENV].startswith('{"parent":true')  # the runtime stays the parent to restart it
    assert "allowedTaskRetries" not in r.stdout and "autoResume: false" in r.stdout


def _launch(tmp_path, policy: Policy, codes: str) -> tuple[int, str, list[str]]:
    seen = tmp_path / "starts"
    (tmp_path / "job.py").write_text(EXITS)
    env = {"PATH": "/usr/bin:/bin", "LAUNCHKIT_LAUNCHER": "none", POLICY_ENV: policy.encode() or "",
           "LAUNCHKIT_ATTEMPT": "1"}  # fmt: skip
    cmd = [PY, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--t0", "0"]
    ran = subprocess.run([*cmd, "--", PY, "job.py", str(seen), codes], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, timeout=120)  # fmt: skip
    return ran.returncode, ran.stdout.decode(), seen.read_text().splitlines()


@pytest.mark.parametrize(
    ("codes", "cap", "ends", "starts"),
    [
        ("29,75,0", 3, 0, 3),  # both codes restarted, then it succeeds
        ("29", 2, 29, 3),  # the cap: 2 restarts, then its own exit code ends the job
        ("1", 3, 1, 1),  # a code not named: not restarted
        ("29,1", 3, 1, 2),
    ],
)
def test_the_runtime_restarts_the_command_on_a_named_exit_code(tmp_path, codes, cap, ends, starts):
    policy = Policy(retry_on=[EXIT], retry_cap=cap, retry_exit_codes=[29, 75])
    code, out, seen = _launch(tmp_path, policy, codes)
    assert code == ends, out
    assert seen == [f"{i + 1} {i}" for i in range(starts)], out  # attempt and restart count go up
    said = [line for line in out.splitlines() if "restarting the command in place" in line]
    assert len(said) == starts - 1, out
    if said:
        assert (
            said[0]
            == "[launchkit] restarting the command in place (attempt 2; --retry-on exit:29,75): exit code 29"
        )


def test_stalled_and_exit_restarts_count_apart():
    """Each in-place cause up to the cap: a stop and an exit code each restart it once with a cap of 1."""
    results = iter([(124, "no progress for 1s"), (29, None), (29, None)])
    starts = []

    def runner(argv, env, s, stops, tell, steps):
        starts.append(env.get("LAUNCHKIT_RESTART", "0"))
        code, stop = next(results)
        if stop:
            stops.append(stop)
        return code

    policy = Policy(retry_on=[STALLED, EXIT], retry_cap=1, stall_timeout=1, retry_exit_codes=[29])
    s = watchdog.Settings(1.0, 0.0, [], None, None)
    assert restart.run(["x"], {}, s, runner=runner, left=policy.restarts, policy=policy) == 29
    assert starts == ["0", "1", "2"]


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lkstate")}


@pytest.mark.slow
def test_local_a_named_exit_code_is_retried_in_place_and_told(repo, env, tmp_path):
    seen = tmp_path / "starts"
    r = run_cli("run", "--local", "--no-python", "--retry-on", "exit:29,75", "--retries", "2", "--follow", "--",
                PY, "-c", EXITS, str(seen), "29,0", cwd=repo.path, env=env, timeout=180)  # fmt: skip
    assert r.code == 0, r.stderr
    assert seen.read_text().splitlines() == ["1 0", "2 1"]  # one job: attempts 1 and 2 in place
    assert "restarting the command in place (attempt 2; --retry-on exit:29,75): exit code 29" in r.stdout
    why = run_cli("why", launched_id(r.stderr), env=env, timeout=60)
    assert why.stdout.splitlines()[0].endswith("succeeded"), why.stdout  # then its phases
    other = run_cli("run", "--local", "--no-python", "--retry-on", "exit:29", "--follow", "--",
                    PY, "-c", EXITS, str(tmp_path / "other"), "7", cwd=repo.path, env=env, timeout=180)  # fmt: skip
    assert other.code == 7 and "restarting" not in other.stdout, other.stdout


@pytest.mark.slow
def test_beaker_launch_with_exit_codes_is_taken(repo, fake_beaker):
    r = run_cli("run", "--workspace", "ai2/launchkit", "--yes", "--name", "ex", "--retry-on", "exit:29",
                "--require-resume", "--", "python", "train.py", cwd=repo.path, timeout=90)  # fmt: skip
    assert r.code == 0, r.stderr  # an in-place cause: --require-resume can be checked on Beaker too
    exp = next(e for e in fake_beaker.state.experiments.values() if e.name == "ex")
    env = {e["name"]: e.get("value") for e in exp.spec["tasks"][0]["envVars"]}
    assert Policy.decode(env[POLICY_ENV]).retry_exit_codes == (29,)
    assert exp.allowed_retries == 0  # Beaker retries nothing: the runtime restarts it in place
