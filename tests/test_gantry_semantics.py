"""gantry 3.7.0's semantics where gantry's flags are used (issue 19 item 4).

In-process dry runs (offline: no Beaker credentials in the tests); the group creation runs against
the fake Beaker."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from conftest import Result
from inproc import run_main
from launchkit.runtime.node.policy import ENV as POLICY_ENV
from launchkit.runtime.node.policy import Policy


def _dry(repo, *args: str) -> tuple[Result, dict[str, Any]]:
    r = run_main("run", "--dry-run", *args, "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0, r.stderr
    return r, yaml.safe_load(r.stdout)["tasks"][0]


def _env(task: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("secret")) for e in task["envVars"]}


def _warnings(r: Result) -> list[str]:
    return [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]


def test_gpus_0_means_no_gpus(repo):
    _, task = _dry(repo, "--gpus", "0")
    assert task["resources"] == {"gpuCount": 0}


def test_no_python_with_install_runs_the_install_command(repo):
    _, task = _dry(repo, "--no-python", "--install", "make deps")
    env = _env(task)
    assert env["LAUNCHKIT_NO_PYTHON"] == "1" and env["LAUNCHKIT_INSTALL_CMD"] == "make deps"
    r = run_main("run", "--dry-run", "--no-python", "--uv-extra", "x", "--", "true", cwd=repo.path)
    assert r.code == 2 and "--no-python cannot be combined with --uv-extra" in r.stderr


@pytest.mark.parametrize(
    "args", [["--start-timeout", "5m"], ["--start-timeout", "5m", "--inactive-timeout", "30m"]]
)
def test_waiting_limits_without_waiting_are_accepted_with_one_warning(repo, args):
    r, _ = _dry(repo, *args)
    warned = _warnings(r)
    assert len(warned) == 1 and "no effect" in warned[0] and args[0] in warned[0], r.stderr
    r, _ = _dry(repo, "--follow", *args)  # waiting: they apply, no warning
    assert _warnings(r) == []


@pytest.mark.parametrize("follow", [[], ["--follow"]])
def test_the_job_watchdog_settings_go_to_the_job_followed_or_not(repo, follow):
    """--inactive-timeout, --inactive-soft-timeout and --stall-timeout are checked by the job's runtime."""
    args = ["--inactive-timeout", "30m", "--inactive-soft-timeout", "10m", "--stall-timeout", "1h"]
    r, task = _dry(repo, *follow, *args, "--progress-pattern", r"iter \d+", "--progress-pattern", "ok")
    assert _warnings(r) == [], r.stderr
    policy = Policy.decode(_env(task)[POLICY_ENV])
    assert policy == Policy(
        inactive_timeout=1800,
        inactive_soft_timeout=600,
        stall_timeout=3600,
        progress_patterns=[r"iter \d+", "ok"],
    )
    assert policy.stall_grace is None
    _, task = _dry(repo)
    assert POLICY_ENV not in _env(task)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--progress-pattern", "x"], "--progress-pattern applies to --stall-timeout"),
        (["--stall-timeout", "1m", "--progress-pattern", "("], "is not a regular expression"),
        (["--stall-timeout", "0"], "must be longer than zero"),
    ],
)
def test_bad_watchdog_settings_are_one_line_usage_errors(repo, args, said):
    r = run_main("run", "--dry-run", *args, "--", "python", "train.py", cwd=repo.path)
    assert r.code == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_the_watchdog_options_hold_for_a_ray_job(repo):
    """--ray: the head's runtime runs the driver under the watchdog (node/ray_cluster.py)."""
    _, task = _dry(repo, "--ray", "--replicas", "2", "--stall-timeout", "1m", "--inactive-timeout", "5m")
    env = _env(task)
    assert env["LAUNCHKIT_LAUNCHER"] == "ray", env
    policy = Policy.decode(env[POLICY_ENV])
    assert (policy.stall_timeout, policy.inactive_timeout) == (60, 300), env


def test_replicas_alone_turn_nothing_on(repo):
    _, task = _dry(repo, "--replicas", "2")
    assert task["replicas"] == 2 and task["leaderSelection"] is False and task["hostNetworking"] is False
    for key in ("propagateFailure", "propagatePreemption", "synchronizedStartTimeout"):
        assert key not in task


def test_torchrun_keeps_its_wiring(repo):
    _, task = _dry(repo, "--replicas", "2", "--gpus", "8", "--torchrun")
    assert task["leaderSelection"] is True and task["hostNetworking"] is True
    assert task["propagateFailure"] is True and task["propagatePreemption"] is True
    assert task["synchronizedStartTimeout"] == 300 * 10**9


@pytest.mark.parametrize("flag", ["--no-host-networking", "--no-leader-selection"])
def test_torchrun_without_leader_or_host_networking_as_gantry(repo, flag):
    _, task = _dry(repo, "--replicas", "2", "--gpus", "8", "--torchrun", flag)
    assert task["leaderSelection"] is False and task["hostNetworking"] is False
    assert "propagateFailure" not in task and "synchronizedStartTimeout" not in task
    assert _env(task)["LAUNCHKIT_LAUNCHER"] == "torchrun"


@pytest.mark.parametrize(
    ("args", "env", "spelling"),
    [
        (
            ["--venv", "base"],
            {"LAUNCHKIT_CONDA_ENV": "base", "LAUNCHKIT_PYTHON_MANAGER": "conda"},
            "--conda-env",
        ),
        (["--no-conda"], {"LAUNCHKIT_SYSTEM_PYTHON": "1"}, "--system-python"),
        (["--conda", "environment.yml"], {"LAUNCHKIT_CONDA_FILE": "environment.yml"}, "--conda-file"),
        (["--no-nfs"], {}, "removed NFS"),
    ],
)
def test_pre_3_7_spellings_with_a_meaning_are_accepted_with_one_line(repo, args, env, spelling):
    if "--conda" in args:
        repo.commit({"environment.yml": "name: job\ndependencies: [python=3.11]\n"})
    r, task = _dry(repo, *args)
    got = _env(task)
    assert {k: got.get(k) for k in env} == env
    warned = _warnings(r)
    assert len(warned) == 1 and args[0] in warned[0] and spelling in warned[0], r.stderr


@pytest.mark.parametrize(
    ("args", "migration"),
    [
        (["--nfs"], "--weka BUCKET:/PATH"),
        (["--pip", "requirements.txt"], '--install "pip install -r FILE"'),
        (["--stop-preemptible"], "drop it"),
        (["--venv", "base", "--conda-env", "other"], "keep --conda-env"),
    ],
)
def test_pre_3_7_spellings_without_a_meaning_are_refused_with_the_migration(repo, args, migration):
    r = run_main("run", "--dry-run", *args, "--", "python", "train.py", cwd=repo.path)
    assert r.code == 2 and migration in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2  # the error and its hint


def test_old_spellings_are_hidden_from_help():
    text = run_main("run", "--help").stdout
    for old in ("--venv", "--no-conda", "--nfs", "--pip", "--stop-preemptible"):
        assert f"{old} " not in text
