"""Real Beaker under stress (issue 22): rate limits, clock skew, lagging listings, name limits, and
why every job ended. Each test failed on the code before issue 22."""

from __future__ import annotations

import json

import pytest

from fakebeaker.plugin import both_ways
from fakebeaker.state import AutoRun
from inproc import run_main
from lk_helpers import policy_env

WS = "ai2/launchkit"


def _run(repo, *args: str):
    return run_main("run", "--workspace", WS, *args, "--", "python", "train.py", cwd=repo.path)


def _mine(fake, name: str) -> list:
    return [e for e in fake.state.experiments.values() if e.name == name]


# -- exactly-once create, transient vs final -----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("fake_beaker", [{"clock_skew": -300.0}], indirect=True)
def test_skewed_server_clock_and_503_after_create_leave_exactly_one_experiment(repo, fake_beaker):
    fake_beaker.faults.fail_create_after_record(1, "503")
    r = _run(repo, "--yes", "--name", "skewed")
    assert r.code == 0, r.stderr
    assert len(_mine(fake_beaker, "skewed")) == 1, [e.name for e in fake_beaker.state.experiments.values()]
    assert not [e for e in fake_beaker.state.experiments.values() if e.name.startswith("skewed-")]


@pytest.mark.slow
def test_http_429_at_create_is_retried_not_reported_as_a_bad_spec(repo, fake_beaker):
    fake_beaker.faults.rate_limit(1, "CreateExperiment", retry_after=1)
    r = _run(repo, "--yes", "--name", "limited")
    assert r.code == 0, r.stderr
    assert len(_mine(fake_beaker, "limited")) == 1
    assert fake_beaker.calls["CreateExperiment"] == 2


@pytest.mark.slow
def test_one_resource_exhausted_on_get_job_does_not_end_run_follow(repo, fake_beaker):
    lines = [f"line {i}" for i in range(5)]
    fake_beaker.state.set_auto(AutoRun(start_after=0.2, run_for=1.5, exit_code=3, lines=lines))
    fake_beaker.faults.rate_limit(1, "GetJob", retry_after=0.2)
    r = _run(repo, "--yes", "--name", "followed", "--follow")
    assert r.code == 3, r.stderr
    assert r.stdout.splitlines()[-5:] == lines  # the log tail is not lost
    assert fake_beaker.faults.take_rate_limit("GetJob") is None  # the fault was used
    assert "failed with exit code 3" in r.stderr


def test_list_find_gpus_and_secret_list_survive_one_rate_limit(fake_beaker):
    for method, argv in (
        ("ListWorkloads", ("list", "--json")),
        ("ListClusters", ("find-gpus", "--json")),
        ("ListNodes", ("find-gpus", "--json")),
        ("ListSecrets", ("secret", "list", "--workspace", WS)),
        ("ResolveOrganizationName", ("list", "--json")),
    ):
        fake_beaker.faults.rate_limit(1, method, retry_after=0.05)
        r = run_main(*argv)
        assert r.code == 0, (method, r.stderr)
        assert fake_beaker.faults.take_rate_limit(method) is None, method  # it was hit, and survived


def test_rate_limited_for_longer_than_beaker_timeout_says_so_and_exits_5(fake_beaker):
    fake_beaker.faults.rate_limit(None, "ListWorkloads")
    r = run_main("--beaker-timeout", "4", "list")  # time for the calls before it, on a loaded machine
    assert r.code == 5, r.stderr
    assert "rate limit" in r.stderr.lower() and "Traceback" not in r.stderr


# -- --latest ------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("fake_beaker", [{"list_lag": 120.0}], indirect=True)
def test_latest_is_the_run_launched_last_even_while_listings_lag(repo, fake_beaker):
    old = fake_beaker.state.add_experiment(WS, "older", author="alice", description="[launchkit]")
    fake_beaker.state.experiments[old.id].listed_from = 0.0  # the old one is listed already
    r = _run(repo, "--yes", "--name", "newest")
    assert r.code == 0, r.stderr
    new = _mine(fake_beaker, "newest")[0]
    r = run_main("stop", "--latest", "--dry-run", "--json")
    assert r.code == 0, r.stderr
    assert [x["id"] for x in json.loads(r.stdout)] == [new.id]


# -- names ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_names_near_128_characters_stay_within_the_limit_suffix_included(repo, fake_beaker):
    name = "n" * 128
    for _ in range(2):
        r = _run(repo, "--yes", "--name", name)
        assert r.code == 0, r.stderr
    names = [e.name for e in fake_beaker.state.experiments.values()]
    assert len(names) == 2 and all(len(n) <= 128 for n in names), names


def test_a_name_over_128_characters_is_refused_before_anything_is_sent(repo, fake_beaker):
    r = run_main(
        "run", "--workspace", WS, "--yes", "--name", "n" * 129, "--", "python", "x.py", cwd=repo.path
    )
    assert r.code == 2 and "128" in r.stderr and "--name" in r.stderr, r.stderr
    assert fake_beaker.calls["CreateExperiment"] == 0


# -- why every job ended -------------------------------------------------------------------------------
def _why(exp_id: str) -> str:
    r = run_main("why", exp_id)
    assert r.code == 0, r.stderr
    return r.stdout.splitlines()[0]  # the end; then where its time went


def _exp(fake, name: str, **spec_extra):
    return fake.state.add_experiment(WS, name, author="alice", description="[launchkit]")


def test_why_exit_code_setup_step_and_success(fake_beaker):
    s = fake_beaker.state
    ok, bad, clone = _exp(fake_beaker, "ok"), _exp(fake_beaker, "bad"), _exp(fake_beaker, "clone")
    s.finish_job(ok, 0)
    s.finish_job(bad, 3)
    s.finish_job(clone, 101)
    assert _why(ok.id) == f"{ok.id} succeeded"
    assert f"{bad.id} failed with exit code 3" in _why(bad.id)
    line = _why(clone.id)
    assert "setup failed" in line and "cloning the repository" in line and "GITHUB_TOKEN" in line


def test_a_commands_own_setup_code_is_told_as_its_exit_code(fake_beaker):
    """100-109 mean a launchkit setup step only before the command started: the job's log says whether
    it did (the runtime's line right before it), read up to that line, and only for those codes."""
    s = fake_beaker.state
    mine, setup = _exp(fake_beaker, "mine"), _exp(fake_beaker, "setup")
    s.start_job(mine)
    s.append_logs(mine, ["[launchkit] setup done in 0.47s (clone 0.03s, install[uv.lock] 0.43s)", "epoch 1"])
    s.finish_job(mine, 106)
    s.start_job(setup)
    s.append_logs(
        setup,
        ["error: no solution", "[launchkit] error: install failed (exit 1); the command was not started"],
    )
    s.finish_job(setup, 106)
    line = _why(mine.id)
    assert line.startswith(f"{mine.id} failed with exit code 106") and "setup" not in line, line
    follow = run_main("follow", mine.id)
    assert follow.code == 106 and "epoch 1" in follow.stdout
    assert f"{mine.id} failed with exit code 106" in follow.stderr and "setup" not in follow.stderr
    line = _why(setup.id)
    assert "setup failed before your command ran: installing the project's dependencies failed" in line


def test_the_runtimes_watchdog_stop_is_told_as_launchkits(fake_beaker, tmp_path):
    """The real runtime stops a stalled command; its log and exit code, as Beaker keeps them, are told
    by why, list and follow as launchkit's stop with its cause (one tail read, only for exit 124). A
    command's own 124 (no such line) stays its own."""
    import subprocess
    import sys

    (tmp_path / "job.py").write_text(
        "import time\nprint('[step=7/100] loss=1.0', flush=True)\n"
        "while True:\n    print('NCCL WARN', flush=True); time.sleep(0.05)\n"
    )
    env = {"PATH": "/usr/bin:/bin", **policy_env(stall_timeout=1, stall_grace=0)}
    cmd = [sys.executable, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--t0", "0"]
    ran = subprocess.run(
        [*cmd, "--", sys.executable, "job.py"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=120,
    )
    assert ran.returncode == 124, ran.stdout
    s = fake_beaker.state
    stalled, own = _exp(fake_beaker, "stalled"), _exp(fake_beaker, "own")
    for exp, lines, code in ((stalled, ran.stdout.decode().splitlines(), 124), (own, ["bye"], 124)):
        s.start_job(exp)
        s.append_logs(exp, lines)
        s.finish_job(exp, code)
    line = _why(stalled.id)
    assert line.startswith(f"{stalled.id} stopped by launchkit: no progress for 1s (last: step=7/100 at "), (
        line
    )
    assert "--stall-timeout" in line and "canceled" not in line, line
    assert _why(own.id).startswith(f"{own.id} failed with exit code 124")
    r = run_main("list", "--json")
    row = next(x for x in json.loads(r.stdout) if x["id"] == stalled.id)
    assert row["end"]["kind"] == "timeout" and row["end"]["by"] == "launchkit", row
    follow = run_main("follow", stalled.id)
    assert follow.code == 124 and "stopped by launchkit: no progress for 1s" in follow.stderr, follow.stderr


@both_ways("oom_report", ("message", "exit_code"))
def test_why_oom_kill_names_the_memory_limit_and_the_fix(fake_beaker):
    exp = _exp(fake_beaker, "oom")
    fake_beaker.state.oom_kill(exp)
    line = _why(exp.id)
    assert "memory" in line and "--memory" in line and "137" not in line.split("--memory")[1]


def test_why_image_pull_failure_has_no_invented_exit_code(fake_beaker):
    exp = _exp(fake_beaker, "pull")
    fake_beaker.state.fail_job(exp, "failed to pull image docker.io/nope:latest")
    line = _why(exp.id)
    assert "image could not be pulled" in line and "exit code" not in line, line
    r = run_main("list", "--json")
    row = next(x for x in json.loads(r.stdout) if x["id"] == exp.id)
    assert row["exit_code"] is None and row["end"]["kind"] == "image_pull"
    r = run_main("list", env={"COLUMNS": "200"})  # the whole reason (tables fit the terminal)
    line = next(x for x in r.stdout.splitlines() if exp.id in x)
    assert "image could not be pulled" in line and " 1 " not in line, line


def test_why_preempted_canceled_by_user_timeout_node_lost_never_scheduled(fake_beaker):
    s = fake_beaker.state
    pre, user, tmo, node, never = (_exp(fake_beaker, n) for n in ("pre", "user", "tmo", "node", "never"))
    s.start_job(pre)
    nxt = s.preempt_job(pre)
    assert "is queued" in _why(pre.id)  # Beaker runs the task again: its new job is queued
    s.cancel_job(nxt)  # ...and canceled before it started
    assert "canceled" in _why(pre.id)
    s.start_job(user)
    r = run_main("stop", user.id, "--yes")
    assert r.code == 0, r.stderr
    s.wait_for(lambda: s.find_experiment(user.id).finalized)
    assert "canceled by alice" in _why(user.id).lower()
    s.start_job(tmo)
    s.time_out_job(tmo)
    assert "timeout" in _why(tmo.id) and "--task-timeout" in _why(tmo.id)
    s.start_job(node)
    s.lose_node(node)
    assert "node was lost" in _why(node.id) and "--retries" in _why(node.id)
    s.queue_forever(never)
    s.cancel_job(never, code=7, message="Job is impossible to schedule")
    line = _why(never.id)
    assert "never scheduled" in line and "slot limit" in line, line


def test_why_preempted_and_not_resumed(fake_beaker):
    s = fake_beaker.state
    exp = _exp(fake_beaker, "pre2")
    s.start_job(exp)
    s.cancel_job(exp, code=1, message="Job preempted", canceled_for="preempted by a higher-priority job")
    line = _why(exp.id)
    assert "preempted" in line and "will not be retried" in line and "--priority" in line, line


@pytest.mark.slow
def test_follow_tells_an_image_pull_failure_without_an_exit_code(repo, fake_beaker):
    r = _run(repo, "--yes", "--name", "nopull")
    assert r.code == 0, r.stderr
    exp = _mine(fake_beaker, "nopull")[0]
    fake_beaker.state.fail_job(exp, "failed to pull image")
    r = run_main("follow", exp.id)
    assert r.code != 0
    assert "image could not be pulled" in r.stderr and "exit code" not in r.stderr, r.stderr
