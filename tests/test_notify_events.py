"""`--notify-url URL` / `--notify-secret NAME` (issue 44 item 4): the run's events posted as JSON from
where the job runs, by the posters that post Slack (docs/notifications.md, "Events as JSON"); what
the receiver gets equals what `follow --json` prints for the same run. Real processes: a receiver on
127.0.0.1, local runs under their supervisor, the real entrypoint run as the fake Beaker's job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from inproc import run_main
from launchkit import events
from launchkit.backends.local.store import home
from launchkit.runtime.node import policy
from launchkit.runtime.node.launch import notify
from lk_helpers import (
    FAST_ENV,
    entrypoint,
    fake_beaker_spec_env,
    files_holding,
    launched_id,
    stop_local_run,
    supervisor_gone,
    wait_finished,
)
from webhook import (
    HOOK_PATH,
    hook_fixture,  # noqa: F401 - the `hook` fixture
)

WS = "ai2/launchkit"
# prints its environment (for the checks), a progress line, then ends with the code it is given
TRAINS = "env; echo '[step=5/10] loss=1.5'; exit ${1:-0}"


def _same(bodies: list[dict]) -> list[tuple]:
    return [events.Event.model_validate(b).same() for b in bodies]


def _printed(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


# ---- refused at launch, in one line (exit 2) -------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--notify-url", "http://example.com/hook"], "plain http is only for 127.0.0.1 or localhost"),
        (["--notify-url", "ftp://example.com/x"], "it is not an http(s) URL"),
        (["--notify-url", "notaurl"], "--notify-url (value not shown): it is not an http(s) URL"),
        (["--notify-url", "https://u:pw@example.com/x"], "a URL with a password"),
        (["--notify-url", "https://example.com/x?token=abcdef123456"], "a URL with a credential parameter"),
        (["--notify-url", "https://example.com/x", "--notify-secret", "EV"], "both say where"),
        (["--notify-secret", "no/slash"], "is not a valid secret name"),
        (["--notify-secret", "EV", "--ray"], "is not posted from a Ray job yet"),
    ],
)
def test_bad_notify_values_are_refused_at_launch(repo, args, said):
    r = run_main("run", "--dry-run", "--offline", *args, "--", "python", "t.py", cwd=repo.path)
    assert r.code == 2 and said in r.stderr, r.stderr
    assert "pw@" not in r.stderr and "abcdef123456" not in r.stderr  # a URL is shown as its host only


def test_the_spec_holds_a_plain_url_in_the_policy_and_a_secret_by_name(repo, tmp_path):
    r = run_main("run", "--dry-run", "--offline", "--notify-url", "https://events.example/in", "--",
                 "python", "t.py", cwd=repo.path)  # fmt: skip
    assert r.code == 0, r.stderr
    assert r"\"notify_url\":\"https://events.example/in\"" in r.stdout  # plain text: the help says so
    r = run_main("run", "--dry-run", "--offline", "--notify-secret", "team.events", "--", "x", cwd=repo.path)
    assert r.code == 0, r.stderr
    assert f"name: {policy.ENV_NOTIFY}\n" in r.stdout and "secret: team.events" in r.stdout
    config = tmp_path / "config.toml"
    config.write_text('notify_secret = "team.ev"\n')  # a team's default, as slack_webhook_secret
    r = run_cli(
        "run", "--dry-run", "--offline", "--", "x", cwd=repo.path, env={"LAUNCHKIT_CONFIG": str(config)}
    )
    assert r.code == 0 and "secret: team.ev" in r.stdout, r.stderr


# ---- the runtime's events, in process ---------------------------------------------------------------
def test_the_job_posts_each_event_as_one_json_object_with_the_runs_id():
    sent: list[str] = []
    stream = notify.Poster(
        "http://127.0.0.1:9/e", lambda _u, body: sent.append(body), secrets=["s3cr3tvalue"]
    )
    ticks = iter([0.0, 1.0, 31.0])
    job = notify.Job(
        {"BEAKER_EXPERIMENT_ID": "01R", "LAUNCHKIT_TASK_NAME": "t3"}, None, stream, lambda: next(ticks)
    )
    job.started()
    for line in ("a", "b", "c"):  # the first, then one every PROGRESS_EVERY seconds
        job.tell("progress", f"step={line}\n[step={line}] key=s3cr3tvalue")
    job.ended(3)
    got = [json.loads(b) for b in sent]
    assert [g["kind"] for g in got] == ["started", "progress", "progress", "failed"]
    assert {g["run"] for g in got} == {"01R"} and {g["task"] for g in got} == {"t3"}
    assert got[1]["line"] == "[step=a] key=***" and got[1]["progress"] == "step=a"
    assert got[2]["progress"] == "step=c"
    assert got[3]["line"] == "failed with exit code 3"
    assert got[3]["fix"] == "see the end of its log: `launchkit logs 01R --tail 50`"
    for g in got:
        events.Event.model_validate(g)  # the Event schema, plus run and task


# ---- end to end --------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("code", [0, 3])
def test_a_local_run_posts_what_follow_json_prints(repo, hook, code):
    """--notify-url on a local run: the receiver's events equal `follow --json`'s for the same run."""
    r = run_cli("run", "--local", "--no-python", "--notify-url", hook.url, "--", "bash", "-c", TRAINS,
                "x", str(code), cwd=repo.path, env=FAST_ENV, timeout=60)  # fmt: skip
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    wait_finished(run_id, FAST_ENV)
    supervisor_gone(home() / "runs" / run_id)
    printed = run_cli("follow", run_id, "--json", env=FAST_ENV, timeout=60)
    assert printed.code == code, printed.stderr
    got = hook.wait_bodies(3)
    assert _same(got) == _same(_printed(printed.stdout)), (got, printed.stdout)
    assert [b["kind"] for b in got] == ["started", "progress", "succeeded" if code == 0 else "failed"]
    assert {b["run"] for b in got} == {run_id}


@pytest.mark.slow
def test_a_local_stop_and_a_secret_url_that_never_shows(repo, hook):
    """--notify-secret NAME on a local run: NAME's value comes from the launching shell; `launchkit stop`
    is posted by the supervisor in why's words; the URL is in no file of the run, no log, not in the
    command's environment."""
    env = {**FAST_ENV, "LK_TEST_EVENTS": hook.url}
    r = run_cli("run", "--local", "--no-python", "--notify-secret", "LK_TEST_EVENTS", "--", "bash", "-c",
                "env; echo ready; exec sleep 600", cwd=repo.path, env=env, timeout=60)  # fmt: skip
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    hook.wait_bodies(1)
    stop_local_run(run_id, env)
    printed = run_cli("follow", run_id, "--json", env=env, timeout=60)
    got = hook.wait_bodies(2)
    assert [b["kind"] for b in got] == ["started", "canceled"], got
    assert _same(got) == _same(_printed(printed.stdout))
    log = run_cli("logs", run_id, env=env, timeout=60).stdout
    assert "ready" in log and policy.ENV_NOTIFY not in log and HOOK_PATH not in log, log
    assert "LK_TEST_EVENTS=" not in log  # the command does not inherit the secret's variable either
    assert HOOK_PATH not in r.stdout + r.stderr
    held = files_holding(Path(home()), HOOK_PATH.encode())
    assert held == [], held


@pytest.mark.slow
def test_the_fake_beakers_job_posts_through_the_real_entrypoint_what_follow_json_prints(
    repo, fake_beaker, hook, tmp_path
):
    """--notify-secret on Beaker: the spec names the secret; the real entrypoint, given the job's
    environment as the fake Beaker sets it, posts the run's events; `follow --json` of the same run
    prints the same events, and the URL is in neither the command's environment nor its output."""
    s = fake_beaker.state
    ws = s.find_workspace(WS)
    s.put_secret(ws.id, "LK_TEST_EVENTS", hook.url)
    r = run_cli("run", "--workspace", WS, "--name", "ev", "--no-python", "--notify-secret", "LK_TEST_EVENTS",
                "--", "bash", "-c", TRAINS, "x", "3", cwd=repo.path, timeout=90)  # fmt: skip
    assert r.code == 0, r.stderr
    exp = next(e for e in s.experiments.values() if e.name == "ev")
    assert HOOK_PATH not in json.dumps(exp.tasks[0].spec)
    job = s.start_job(exp)
    env = {**fake_beaker_spec_env(s, exp), **s.job_env(job)}
    assert env[policy.ENV_NOTIFY] == hook.url  # the secret, resolved as Beaker would
    env["LAUNCHKIT_GIT_REMOTE"] = str(repo.remote)
    for name in ("RESULTS_DIR", "LAUNCHKIT_RUNTIME_DIR"):
        env.pop(name, None)
    ran = entrypoint(
        tmp_path, str(repo.remote), env["LAUNCHKIT_GIT_COMMIT"], ["bash", "-c", TRAINS, "x", "3"], env
    )
    assert ran.returncode == 3, ran.stderr
    assert policy.ENV_NOTIFY not in ran.stdout and HOOK_PATH not in ran.stdout + ran.stderr
    s.append_logs(exp, ran.stdout.splitlines() + ran.stderr.splitlines())
    s.finish_job(exp, ran.returncode)
    out = run_main("follow", exp.id, "--json")
    assert out.code == 3, out.stderr
    got = hook.wait_bodies(3)
    assert [b["kind"] for b in got] == ["started", "progress", "failed"], got
    assert _same(got) == _same(_printed(out.stdout)), (got, out.stdout)
    assert {b["run"] for b in got} == {exp.id}


def test_the_watchdog_matches_progress_for_events_only_when_one_is_due():
    """--notify-url without a watchdog limit: the first progress line is told, then none is matched
    until `report` seconds passed (a job printing a line a millisecond is not parsed for nothing)."""
    from launchkit.runtime.node.launch import watchdog

    s = watchdog.Settings(None, 0.0, watchdog.progress_patterns(()), None, None, report=30.0)
    w = watchdog.Watch(s, 0.0, 0.0)
    told = []
    for now in (0.0, 1.0, 29.0, 31.0):
        w.saw(1, f"[step={int(now)}/9] loss=1\n".encode(), now, now)
        if w.fresh is not None:
            told.append(w.fresh[0])
            w.fresh = None
    assert told == ["step=0/9", "step=31/9"]
    assert w.last_progress == 31.0  # (lines between were not matched: nothing needed them)


@pytest.mark.slow
def test_follow_posts_the_end_the_job_cannot_know_as_follow_json_tells_it(repo, fake_beaker, hook):
    """A Beaker job canceled (by bob): its runtime, ended by SIGTERM, posts nothing for it; `follow`
    posts the end as `follow --json` tells it, once, to the run's --notify-url (read from the workload
    `get` read: no spec call)."""
    s = fake_beaker.state
    r = run_cli("run", "--workspace", WS, "--name", "cx", "--no-python", "--notify-url", hook.url, "--",
                "python", "train.py", cwd=repo.path, timeout=90)  # fmt: skip
    assert r.code == 0, r.stderr
    exp = next(e for e in s.experiments.values() if e.name == "cx")
    s.start_job(exp)
    s.cancel_experiment(exp, by="bob")
    fake_beaker.reset_calls()
    out = run_main("follow", exp.id)
    assert fake_beaker.calls["GetExperimentYamlSpec"] == 0, dict(fake_beaker.calls)
    printed = run_main("follow", exp.id, "--json")
    got = hook.wait_bodies(1)
    assert [b["kind"] for b in got] == ["canceled"], got
    assert _same(got) == _same(_printed(printed.stdout)[-1:]), (got, printed.stdout)
    assert "bob" in got[0]["line"] and out.code != 0
