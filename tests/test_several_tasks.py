"""Several tasks from one `run`: --multi commands and --sweep grids (core/tasks.py), through the CLI
against the fake Beaker (follow, logs, list, stop), and in the spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli
from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.core.spec import build_spec
from launchkit.core.tasks import label_of
from launchkit.errors import UsageError

WS = "ai2/launchkit"
GIT = GitState(remote_url="https://github.com/a/b", commit="0" * 40)


def _env(task) -> dict[str, str]:
    return {e.name: e.value for e in task.env_vars if e.value is not None}


def test_sweep_grid_names_env_and_substitution():
    r = build_request(
        {"sweep": ["lr=1e-4,3e-4", "seed=1,2"]},
        ["python", "train.py", "--lr={lr}", '{"seed": {seed}}'],
        environ={},
    )
    tasks = build_spec(r, GIT).tasks
    assert [t.name for t in tasks] == [
        "main__lr_1e-4__seed_1",
        "main__lr_1e-4__seed_2",
        "main__lr_3e-4__seed_1",
        "main__lr_3e-4__seed_2",
    ]
    assert tasks[2].arguments == ["python", "train.py", "--lr=3e-4", '{"seed": 1}']
    env = _env(tasks[1])
    # each value once: LAUNCHKIT_SWEEP_<KEY> and the label follow from LAUNCHKIT_SWEEP (the node
    # exports them: test_runtime_task_env.py)
    assert env["LAUNCHKIT_SWEEP"] == label_of(env) == "lr=1e-4,seed=2"
    assert not [k for k in env if k.startswith("LAUNCHKIT_SWEEP_") or k == "LAUNCHKIT_TASK_LABEL"]
    assert env["LAUNCHKIT_TASK_NAME"] == "main__lr_1e-4__seed_2" and env["LAUNCHKIT_TASK_INDEX"] == "1"


def test_a_label_is_in_the_spec_only_when_it_says_more():
    r = build_request({"multi": True, "sweep": ["lr=1,2"]}, ["a", "{lr}", "--", "b", "{lr}"], environ={})
    envs = [_env(t) for t in build_spec(r, GIT).tasks]
    assert [e["LAUNCHKIT_TASK_LABEL"] for e in envs] == ["0:lr=1", "0:lr=2", "1:lr=1", "1:lr=2"]
    assert [label_of(e) for e in envs] == ["0:lr=1", "0:lr=2", "1:lr=1", "1:lr=2"]
    r = build_request({"multi": True}, ["a", "--", "b"], environ={})
    envs = [_env(t) for t in build_spec(r, GIT).tasks]  # the task's name is its label
    assert [(label_of(e), e["LAUNCHKIT_TASK_NAME"]) for e in envs] == [(None, "main__0"), (None, "main__1")]


def test_multi_splits_commands_and_keeps_escaped_separators():
    r = build_request({"multi": True}, ["python", "a.py", "--", "echo", "\\--", "x"], environ={})
    assert [(t.name, t.arguments) for t in build_spec(r, GIT).tasks] == [
        ("main__0", ["python", "a.py"]),
        ("main__1", ["echo", "--", "x"]),
    ]
    # without --multi a `--` inside the command reaches it verbatim: one task
    r = build_request({}, ["python", "a.py", "--", "echo"], environ={})
    assert [t.arguments for t in build_spec(r, GIT).tasks] == [["python", "a.py", "--", "echo"]]


@pytest.mark.parametrize(
    ("given", "command", "message"),
    [
        ({"multi": True}, ["a", "--"], "command 2 of 2 is empty"),
        ({"sweep": ["lr"]}, ["a"], "needs KEY=V1,V2"),
        ({"sweep": ["lr=1,,2"]}, ["a"], "empty value"),
        ({"sweep": ["lr=1,1"]}, ["a"], "lists a value twice"),
        ({"sweep": ["lr=1", "LR=2"]}, ["a"], "sweeps 'LR' twice"),
        ({"sweep": ["x=a/b,a_b"]}, ["a"], "give the same task name"),
        ({"sweep_experiments": True}, ["a"], "--sweep-experiments needs --sweep"),
        (
            {"sweep": ["a=" + ",".join(map(str, range(40))), "b=" + ",".join(map(str, range(40)))]},
            ["a"],
            "1600 tasks",
        ),
    ],
)
def test_bad_multi_and_sweep(given, command, message):
    with pytest.raises(UsageError) as e:
        build_request(given, command, environ={})
    assert message in str(e.value)


def test_several_tasks_get_their_own_rendezvous_port():
    r = build_request({"sweep": ["seed=1,2"], "torchrun": True}, ["python", "t.py"], environ={})
    ports = {_env(t)["LAUNCHKIT_RDZV_PORT"] for t in build_spec(r, GIT).tasks}
    assert len(ports) == 2


def _bytes(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launchkit", *args],
        capture_output=True,
        timeout=timeout,
        env=os.environ.copy(),
        check=False,
    )


@pytest.mark.slow
def test_sweep_launches_one_experiment_with_four_tasks_and_follow_labels_them(repo, fake_beaker):
    r = run_cli(
        "run",
        "--workspace",
        WS,
        "--name",
        "grid",
        "--sweep",
        "lr=1e-4,3e-4",
        "--sweep",
        "seed=1,2",
        "--",
        "python",
        "train.py",
        "--lr",
        "{lr}",
        cwd=repo.path,
        timeout=90,
    )
    assert r.code == 0, r.stderr
    exps = [e for e in fake_beaker.state.experiments.values() if e.name == "grid"]
    assert len(exps) == 1
    exp = exps[0]
    assert len(exp.tasks) == 4 and len({t.name for t in exp.tasks}) == 4
    state = fake_beaker.state
    for i, t in enumerate(exp.tasks):  # each job prints what its task was given
        env = {e["name"]: e.get("value") for e in t.spec["envVars"]}
        lr = dict(kv.split("=", 1) for kv in env["LAUNCHKIT_SWEEP"].split(","))["lr"]
        state.append_logs(t.latest_job, [f"lr={lr} argv={t.spec['arguments'][-1]}"])
        state.finish_job(t.latest_job, 7 if i == 2 else 0)

    f = _bytes("follow", exp.id)
    assert f.returncode == 7, f.stderr
    lines = sorted(f.stdout.decode().splitlines())
    assert lines == [
        "[lr=1e-4,seed=1] lr=1e-4 argv=1e-4",
        "[lr=1e-4,seed=2] lr=1e-4 argv=1e-4",
        "[lr=3e-4,seed=1] lr=3e-4 argv=3e-4",
        "[lr=3e-4,seed=2] lr=3e-4 argv=3e-4",
    ]
    logs = _bytes("logs", exp.id, "--all")
    assert logs.returncode == 0 and sorted(logs.stdout.decode().splitlines()) == lines
    one = _bytes("logs", exp.id, "--task", "main__lr_3e-4__seed_2")
    assert one.stdout == b"lr=3e-4 argv=3e-4\n"
    listed = json.loads(run_cli("list", "--json", timeout=60).stdout)
    assert next(x for x in listed if x["id"] == exp.id)["tasks"] == 4


@pytest.mark.slow
def test_stop_cancels_every_task(repo, fake_beaker):
    r = run_cli(
        "run", "--workspace", WS, "--name", "multi", "--multi", "--", "echo", "a", "--", "echo", "b",
        cwd=repo.path, timeout=90,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    exp = next(e for e in fake_beaker.state.experiments.values() if e.name == "multi")
    assert [t.spec["arguments"] for t in exp.tasks] == [["echo", "a"], ["echo", "b"]]
    s = run_cli("stop", exp.id, "--yes", timeout=60)
    assert s.code == 0, s.stderr
    assert all(t.latest_job.finalized is not None for t in exp.tasks)


@pytest.mark.slow
def test_sweep_experiments_launch_one_experiment_each(repo, fake_beaker):
    r = run_cli(
        "run", "--workspace", WS, "--name", "sep", "--sweep", "seed=1,2", "--sweep-experiments",
        "--", "python", "train.py", "{seed}", cwd=repo.path, timeout=90,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    exps = sorted(
        (e for e in fake_beaker.state.experiments.values() if e.name.startswith("sep-")), key=lambda e: e.name
    )
    assert [e.name for e in exps] == ["sep-main__seed_1", "sep-main__seed_2"]
    assert [e.tasks[0].spec["arguments"] for e in exps] == [
        ["python", "train.py", "1"],
        ["python", "train.py", "2"],
    ]
    assert r.stderr.count("launched ") == 2


@pytest.mark.slow
def test_a_local_run_refuses_several_tasks(repo):
    r = run_cli("run", "--local", "--no-python", "--multi", "--", "true", "--", "true", cwd=repo.path)
    assert r.code == 2 and "2 tasks in one run: local runs have one task" in r.stderr, r.stderr
    assert "--sweep-experiments" in r.stderr


@pytest.mark.slow
def test_local_sweep_experiments_are_separate_runs(repo):
    from lk_helpers import wait_finished

    r = run_cli(
        "run", "--local", "--no-python", "--name", "lsweep", "--sweep", "x=a,b", "--sweep-experiments",
        "--", "sh", "-c", "echo x={x}", cwd=repo.path,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    runs = [m.split()[0] for m in r.stderr.split("launched ")[1:]]
    assert len(runs) == 2, r.stderr
    outs = set()
    for run in runs:
        assert wait_finished(run, {})["status"] == "succeeded"
        outs.add(run_cli("logs", run, timeout=60).stdout.strip().splitlines()[-1])
    assert outs == {"x=a", "x=b"}
