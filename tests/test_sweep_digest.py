"""Sweeps speak as one (issue 44 item 5): a sweep's follower posts one digest per change of the whole
(`12 succeeded · 5 failed (exit 1) · 2 retried after preemption · 1 running`), no task posts for itself
(policy.POSTERS: SWEEP), and `why` of a sweep gives the same line with the tasks that need attention.
The fake Beaker (a 20-task `--sweep`, the real entrypoint for one of its tasks) and the local backend
(`--sweep-experiments` through the Python API's `wait`)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from inproc import run_main
from launchkit import api
from launchkit.application import Application
from launchkit.core.digest import TaskState, attention_lines, digest_line
from launchkit.core.status import RunStatus
from launchkit.notify import SweepDigest
from launchkit.runtime.node import policy
from launchkit.runtime.node.launch import notify
from lk_helpers import FAST_ENV, entrypoint
from webhook import hook_fixture  # noqa: F401 - the `hook` fixture

WS = "ai2/launchkit"


def _states(**counts: int) -> list[TaskState]:
    out = []
    for i in range(counts.get("ok", 0)):
        out.append(TaskState(name=f"ok{i}", status=RunStatus.succeeded, exit_code=0, line="succeeded"))
    for i in range(counts.get("bad", 0)):
        out.append(
            TaskState(name=f"bad{i}", status=RunStatus.failed, exit_code=1, line="failed with exit code 1")
        )
    for i in range(counts.get("oom", 0)):
        out.append(TaskState(name=f"oom{i}", status=RunStatus.failed, exit_code=137, line="killed"))
    for i in range(counts.get("pre", 0)):
        out.append(TaskState(name=f"pre{i}", status=RunStatus.running, retried="preemption"))
    for i in range(counts.get("run", 0)):
        out.append(TaskState(name=f"run{i}", status=RunStatus.running))
    return out


def test_the_digest_line_counts_the_whole_and_names_who_needs_attention():
    states = _states(ok=980, bad=12, pre=5, run=3)
    assert (
        digest_line(states) == "980 succeeded · 12 failed (exit 1) · 5 retried after preemption · 3 running"
    )
    assert digest_line(_states(ok=1, bad=2, oom=1)) == "1 succeeded · 2 failed (exit 1) · 1 failed (exit 137)"
    lines = attention_lines(_states(bad=12), limit=10)
    assert lines[0] == "bad0: failed with exit code 1" and lines[-1] == "... and 2 more failed"


def test_the_digest_is_posted_once_per_change_at_most_every_so_often_and_always_at_the_end(hook):
    t = [0.0]
    d = SweepDigest(
        Application(), "launchkit sweep *s*", "01S", hook.url, hook.url, every=60, clock=lambda: t[0]
    )
    assert d.update(_states(run=3))
    assert not d.update(_states(run=3))  # no change: nothing
    t[0] = 10.0
    assert not d.update(_states(ok=1, run=2))  # a change within a minute: not yet
    t[0] = 61.0
    assert d.update(_states(ok=2, run=1))  # the newest, a minute on
    t[0] = 62.0
    assert d.update(_states(ok=2, bad=1))  # the end: at once
    texts = hook.wait_for(3)
    bodies = [b for b in hook.wait_bodies(6) if "kind" in b]
    assert texts[-1].startswith(":bar_chart: launchkit sweep *s* 2 succeeded · 1 failed (exit 1)")
    assert "\n• bad0: failed with exit code 1" in texts[-1]  # the end names who needs attention
    assert [b["line"] for b in bodies] == [
        "3 running",
        "2 succeeded · 1 running",
        "2 succeeded · 1 failed (exit 1)",
    ]
    assert bodies[-1]["kind"] == "digest" and bodies[-1]["done"] is True and bodies[-1]["run"] == "01S"
    assert bodies[-1]["attention"] == [{"task": "bad0", "line": "failed with exit code 1"}]


def test_a_sweeps_task_posts_nothing_for_itself():
    """policy.POSTERS' SWEEP mode: the job's runtime makes no poster (the hooks still leave the env)."""
    env = {policy.ENV_WEBHOOK: "https://hooks.example/x", policy.ENV_NOTIFY: "https://e.example/x"}
    assert (
        notify.from_env(env, mode=policy.Policy(sweep=True, notify_url="https://e.example/y").slack_mode())
        is None
    )
    assert env == {}
    assert (
        policy.Policy(sweep=True, webhook_secret="H").parent is False
    )  # nothing to post: not held as parent
    assert not policy.posts_any(policy.JOB, policy.SWEEP) and policy.posts(
        policy.FOLLOW, policy.SWEEP, "digest"
    )


@pytest.mark.slow
def test_a_fake_beaker_sweep_posts_digests_not_task_messages_and_why_names_the_failed(
    repo, fake_beaker, hook, tmp_path
):
    s = fake_beaker.state
    seeds = ",".join(str(i) for i in range(20))
    r = run_cli("run", "--workspace", WS, "--name", "sw", "--no-python", "--notify-url", hook.url,
                "--sweep", f"seed={seeds}", "--", "bash", "-c", "echo seed {seed}; exit 0",
                cwd=repo.path, timeout=90)  # fmt: skip
    assert r.code == 0, r.stderr
    assert "a sweep's notifications are one digest per change of the whole" in r.stderr, r.stderr
    exp = next(e for e in s.experiments.values() if e.name == "sw")
    assert len(exp.tasks) == 20
    # one task, run by the real entrypoint with the job's environment: it posts nothing for itself
    job = s.start_job(exp)
    env = {v["name"]: v.get("value", "") for v in exp.tasks[0].spec["envVars"] if not v.get("secret")}
    env.update(s.job_env(job))
    env["LAUNCHKIT_GIT_REMOTE"] = str(repo.remote)
    for name in ("RESULTS_DIR", "LAUNCHKIT_RUNTIME_DIR"):
        env.pop(name, None)
    ran = entrypoint(
        tmp_path, str(repo.remote), env["LAUNCHKIT_GIT_COMMIT"], ["bash", "-c", "echo seed 0"], env
    )
    assert ran.returncode == 0, ran.stderr
    # mixed outcomes: 12 succeed, 5 fail with exit 1, 2 are preempted and run again, 1 still runs
    for i, task in enumerate(exp.tasks):
        j = task.latest_job
        if i < 12:
            s.finish_job(j, 0)
        elif i < 17:
            s.finish_job(j, 1)
        elif i < 19:
            s.start_job(j)
            s.preempt_job(j, start_next=True)
        else:
            s.start_job(j)
    why = run_main("why", exp.id)
    assert why.code == 0, why.stderr
    line = "12 succeeded · 5 failed (exit 1) · 2 retried after preemption · 1 running"
    assert f"tasks: {line}" in why.stdout, why.stdout
    assert "need attention:" in why.stdout and "task main__seed_12: failed with exit code 1" in why.stdout, (
        why.stdout
    )
    assert hook.bodies == []  # nothing posted yet: no task posts, nobody follows
    for task in exp.tasks[17:]:  # the rest end: the follower's digest is the sweep's one message
        s.finish_job(task.latest_job, 0)
    out = run_main("follow", exp.id)
    assert out.code == 1, out.stderr  # (a task failed)
    got = hook.wait_bodies(1)
    assert [b["kind"] for b in got] == ["digest"], got
    assert got[-1]["line"] == "15 succeeded · 5 failed (exit 1)" and got[-1]["done"] is True
    assert len(got[-1]["attention"]) == 5 and got[-1]["run"] == exp.id


@pytest.mark.slow
def test_a_local_sweep_of_experiments_posts_its_digest_from_wait(repo, hook, monkeypatch, tmp_path):
    for k, v in {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lkstate")}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(repo.path)
    req = api.request(["bash", "-c", "echo '[step=1/2]'; exit {code}"], local=True, no_python=True,
                      sweep=["code=0,00,3"], sweep_experiments=True, notify_url=hook.url)  # fmt: skip
    runs = req.launch_all()
    assert len(runs) == 3
    done, pending = api.wait(runs, poll=0.1)
    assert len(done) == 3 and pending == []
    got = hook.wait_bodies(1)
    assert {b["kind"] for b in got} == {"digest"}, got  # no run posted its own start, progress or end
    assert got[-1]["line"] == "2 succeeded · 1 failed (exit 3)" and got[-1]["done"] is True
    assert got[-1]["attention"][0]["line"] == "failed with exit code 3"
    assert json.dumps(got).count('"kind": "digest"') == len(got)
