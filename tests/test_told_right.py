"""The platform told right (issue 42 item 3), each against the fake Beaker: every fix line is one launchkit
would accept, a secret deleted before the job started is named with the command that sets it."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from conftest import run_cli
from fakebeaker.plugin import both_ways
from fakebeaker.state import NS
from inproc import run_main

WS = "ai2/launchkit"
CMD = ("--", "python", "train.py")


def _why(exp_id: str) -> str:
    r = run_main("why", exp_id)
    assert r.code == 0, r.stderr
    return r.stdout.strip()


def _accepted(repo, *args: str) -> None:
    """`run` takes these options (a dry run, offline: only the options are checked)."""
    r = run_main("run", "--dry-run", "--offline", *args, *CMD, cwd=repo.path)
    assert r.code == 0, (args, r.stderr)


def test_the_fix_after_a_preemption_not_resumed_is_one_run_accepts(repo, fake_beaker):
    """Auto-resume was off (--no-auto-resume): the fix said --not-preemptible, which run refuses with it."""
    s = fake_beaker.state
    r = run_main(
        "run", "--workspace", WS, "--yes", "--name", "noresume", "--no-auto-resume", *CMD, cwd=repo.path
    )
    assert r.code == 0, r.stderr
    exp = s.find_experiment("alice/noresume")
    s.start_job(exp)
    s.cancel_job(exp, code=1, message="Job preempted", canceled_for="preempted by a higher-priority job")
    why = _why(exp.id)
    assert "was preempted" in why and "will not be retried" in why, why
    flags = re.findall(r"`(--[a-z-]+(?: [^`]+)?)`", why)
    assert flags and "--not-preemptible" not in why, why
    for flag in flags:  # each, with what the run was launched with
        _accepted(repo, "--no-auto-resume", *flag.split())


def test_a_secret_deleted_before_the_job_started_is_named_with_the_command_that_sets_it(repo, fake_beaker):
    s = fake_beaker.state
    r = run_main(
        "run",
        "--workspace",
        WS,
        "--yes",
        "--name",
        "nosecret",
        "--env-secret",
        "HF_TOKEN",
        *CMD,
        cwd=repo.path,
    )
    assert r.code == 0, r.stderr
    exp = s.find_experiment("alice/nosecret")
    del s.find_workspace(WS).secrets["HF_TOKEN"]  # a teammate deletes it while the job queues
    s.start_job(exp)
    why = _why(exp.id)
    assert "its secret HF_TOKEN is not in the workspace" in why, why
    assert "`launchkit secret set HF_TOKEN`" in why, why
    r = run_cli("secret", "set", "HF_TOKEN", "--workspace", WS, input="hf_value_again\n", timeout=60)
    assert r.code == 0, r.stderr  # the fix works as written


@pytest.mark.parametrize("fake_beaker", [{"clock_skew": -300.0}], indirect=True)
def test_logs_since_a_duration_is_measured_by_the_servers_clock(fake_beaker):
    """The server's clock is 5 minutes behind this machine's and it stamps the lines: `--since 2m` means
    the last 2 minutes by its clock (it printed nothing: every line looked 5 minutes old)."""
    s = fake_beaker.state
    exp = s.add_experiment(WS, "skewed", author="alice", description="[launchkit]")
    s.start_job(exp)
    now = s.now()  # the server's now, in ns
    s.append_logs(exp, ["ten minutes ago", "a minute ago"], timestamps=[now - 600 * NS, now - 60 * NS])
    s.append_logs(exp, ["just now"])
    r = run_main("logs", exp.id, "--since", "2m")
    assert (r.code, r.stdout) == (0, "a minute ago\njust now\n"), r.stderr
    r = run_main("logs", exp.id, "--since", "20m")
    assert r.stdout == "ten minutes ago\na minute ago\njust now\n"


def test_logs_and_why_of_a_run_queued_again_after_a_preemption(fake_beaker):
    """Preempted, resumed, and the new job queues (fact 11.3, 11.10): `logs --tail N` printed nothing (the
    new job has no lines); now the last attempt that ran, said so; `why` names the preemption."""
    s = fake_beaker.state
    exp = s.add_experiment(WS, "requeued", author="alice", description="[launchkit]")
    s.start_job(exp)
    s.append_logs(exp, ["step 1", "step 2", "step 3"])
    assert s.preempt_job(exp) is not None  # auto-resume: a new job, queued
    r = run_main("logs", exp.id, "--tail", "2")
    assert (r.code, r.stdout) == (0, "step 2\nstep 3\n"), r.stderr
    assert "attempt 2 of main has not started yet: the log of attempt 1" in r.stderr, r.stderr
    assert run_main("logs", exp.id, "--attempt", "2").stdout == ""
    why = _why(exp.id)
    assert "is queued: " in why and "attempt 2" in why and "preempted" in why, why


@both_ways("cordon_event", (True, False))
def test_why_names_the_cordoned_nodes_a_queued_job_waits_for(fake_beaker):
    """Every node of ai2/holmes that could take 8 GPUs is cordoned: `why` names them (find-gpus shows them),
    whether or not Beaker's events mention cordoning (fact 11.13: no public source gives such an event)."""
    from fakebeaker import scheduling as fs

    s = fake_beaker.state
    holmes = s.find_cluster("ai2/holmes")
    for node in holmes.nodes:
        fs.cordon(s, node.id)
    exp = fs.gpu_experiment(s, "cordoned", cluster="ai2/holmes")
    why = _why(exp.id)
    names = ", ".join(n.hostname for n in holmes.nodes)
    assert f"is queued: every node of its clusters that could take it is cordoned: {names}" in why, why
    assert "`launchkit find-gpus --gpus 8`" in why


def test_why_tells_replicas_waiting_to_start_together(fake_beaker):
    """Synchronized start (fact 11.11): replica 0 is placed and waits (READY_TO_START), replica 1 has no
    node yet: told as such, with the deadline, not "waiting for Beaker to place it"."""
    from fakebeaker import scheduling as fs

    s = fake_beaker.state
    exp = fs.gpu_experiment(
        s, "together", replicas=2, command=("torchrun", "train.py"), hostNetworking=True, leaderSelection=True,
        synchronizedStartTimeout=300 * NS,
    )  # fmt: skip
    first, second = (t.latest_job for t in sorted(exp.tasks, key=lambda t: t.replica_rank))
    s.start_job(first)  # placed: it waits for the other replica instead of starting
    assert (first.started, first.status_name) == (None, "READY_TO_START")
    fs.hold(s, second, "4 nodes do not have enough slots available")
    until = dt.datetime.fromtimestamp(first.ready / NS + 300, dt.UTC).strftime("%H:%M:%S UTC")
    why = _why(exp.id)
    assert (
        "is queued: its replicas start together: 1 of 2 placed and waiting, 1 not placed yet; the placed "
        f"ones wait up to 5m (synchronized start, until {until}); not placed: none of 4 nodes of its "
        "clusters has 8 free GPUs together now"
    ) in why, why
    s.start_job(second)  # the last one placed: they start together
    assert first.started is not None and second.started is not None
