"""Slack messages posted from where the job runs (docs/notifications.md): the job's runtime posts what it
knows, the local supervisor or `follow` what it cannot, each event once; the webhook stays out of the
spec, the logs, the run's files and the command's environment. Real processes: a webhook receiver on
127.0.0.1, local runs under their supervisor, and the real entrypoint run as the fake Beaker's job."""

from __future__ import annotations

import re

import pytest

from conftest import run_cli
from launchkit.backends.local.store import home
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

pytestmark = pytest.mark.slow  # end-to-end: real processes, bash, git

WS = "ai2/launchkit"
# prints its environment (for the checks), one progress line, then nothing: the watchdog stops it
STALLS = "env; echo step 1; exec sleep 600"


def test_an_unfollowed_local_job_that_stalls_posts_its_start_and_its_end_once(repo, hook):
    """Nobody follows: the runtime stops the stalled job within its --stall-timeout, `why` says so, and
    the webhook (given with --slack-webhook-url, handed to the supervisor in memory) got the start and
    the end with the reason, each once; the URL is in no file of the run, no log, no command env."""
    r = run_cli(
        "run", "--local", "--no-python", "--stall-timeout", "2s", "--stall-grace", "0",
        "--slack-webhook-url", hook.url, "--", "bash", "-c", STALLS,
        cwd=repo.path, env=FAST_ENV, timeout=60,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert hook.url not in r.stderr and "--follow" not in r.stderr, r.stderr  # no "add --follow" hint
    run_id = launched_id(r.stderr)
    assert wait_finished(run_id, FAST_ENV)["exit_code"] == 124
    supervisor_gone(home() / "runs" / run_id)
    why = run_cli("why", run_id, env=FAST_ENV, timeout=60).stdout
    assert f"{run_id} stopped by launchkit: no progress for 2s (last: step 1 at " in why, why
    started, ended = hook.texts  # exactly two
    assert started == f":rocket: launchkit run *{run_id}* started"
    assert re.fullmatch(
        rf":zzz: launchkit run \*{run_id}\* stopped by launchkit: no progress for 2s \(last: step 1 at "
        r"\d\d:\d\d:\d\d UTC; --stall-timeout\)",
        ended,
    ), ended
    assert set(hook.paths) == {HOOK_PATH}
    # (c) nowhere to be read: the command's environment (it printed it), its log, the run's files
    log = run_cli("logs", run_id, env=FAST_ENV, timeout=60).stdout
    assert "step 1" in log and "LAUNCHKIT_SLACK_WEBHOOK" not in log and HOOK_PATH not in log
    assert files_holding(home(), HOOK_PATH.encode()) == []


def test_a_local_secret_webhook_and_a_stop_post_start_and_cancel_once(repo, hook):
    """--slack-webhook-secret NAME on a local run: NAME's value comes from the launching shell (as every
    local secret); `launchkit stop` is posted by the supervisor as yours, the runtime (ended by SIGTERM)
    posts nothing for it; the command never sees the webhook."""
    env = {**FAST_ENV, "LK_TEST_HOOK": hook.url}
    r = run_cli(
        "run", "--local", "--no-python", "--slack-webhook-secret", "LK_TEST_HOOK",
        "--", "bash", "-c", "env; echo ready; exec sleep 600",
        cwd=repo.path, env=env, timeout=60,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    hook.wait_for(1)
    stop_local_run(run_id, env)
    assert hook.texts == [
        f":rocket: launchkit run *{run_id}* started",
        f":octagonal_sign: launchkit run *{run_id}* was canceled by you (`launchkit stop`)",
    ]
    log = run_cli("logs", run_id, env=env, timeout=60).stdout
    assert "ready" in log and "LAUNCHKIT_SLACK_WEBHOOK" not in log and HOOK_PATH not in log, log


def test_the_spec_names_the_secret_and_never_holds_a_webhook(repo, hook, tmp_path):
    r = run_cli(
        "run", "--dry-run", "--offline", "--slack-webhook-secret", "team.slack-hook",
        "--slack-webhook-url", hook.url, "--", "python", "t.py", cwd=repo.path,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert "name: LAUNCHKIT_SLACK_WEBHOOK\n" in r.stdout and "secret: team.slack-hook" in r.stdout
    assert HOOK_PATH not in r.stdout + r.stderr
    config = tmp_path / "config.toml"
    config.write_text('slack_webhook_secret = "team.hook"\n')
    env = {"LAUNCHKIT_CONFIG": str(config)}
    r = run_cli("run", "--dry-run", "--offline", "--", "x", cwd=repo.path, env=env)
    assert r.code == 0 and "secret: team.hook" in r.stdout, r.stderr  # a config key too (a team's default)
    r = run_cli("run", "--dry-run", "--slack-webhook-secret", "no/slash", "--", "x", cwd=repo.path)
    assert r.code == 2 and "--slack-webhook-secret 'no/slash': is not a valid secret name" in r.stderr


def test_the_job_posts_through_the_runtime_as_the_fake_beaker_runs_it_and_follow_does_not_repost(
    repo, fake_beaker, hook, tmp_path
):
    """--slack-webhook-secret on Beaker: the spec names the secret; the real entrypoint, given the job's
    environment as the fake Beaker sets it, posts the start and the stall stop with its reason, once;
    `follow` (with a webhook of its own) re-posts neither, but posts the cancelation (and by whom) the job cannot know."""
    s = fake_beaker.state
    ws = s.find_workspace(WS)
    s.put_secret(ws.id, "LK_TEST_HOOK", hook.url)
    ids = []
    for name in ("stalls", "canceled"):
        r = run_cli(
            "run", "--workspace", WS, "--name", name, "--no-python", "--slack-webhook-secret", "LK_TEST_HOOK",
            "--stall-timeout", "2s", "--stall-grace", "0", "--", "bash", "-c", STALLS,
            cwd=repo.path, timeout=90,
        )  # fmt: skip
        assert r.code == 0, r.stderr
        ids.append(next(e for e in s.experiments.values() if e.name == name).id)
    exp = s.find_experiment(ids[0])
    job = s.start_job(exp)
    env = {**fake_beaker_spec_env(s, exp), **s.job_env(job)}
    assert env["LAUNCHKIT_SLACK_WEBHOOK"] == hook.url  # the secret, resolved as Beaker would
    env["LAUNCHKIT_GIT_REMOTE"] = str(repo.remote)
    for name in ("RESULTS_DIR", "LAUNCHKIT_RUNTIME_DIR"):
        env.pop(name, None)
    ran = entrypoint(tmp_path, str(repo.remote), env["LAUNCHKIT_GIT_COMMIT"], ["bash", "-c", STALLS], env)
    assert ran.returncode == 124, ran.stderr
    assert "LAUNCHKIT_SLACK_WEBHOOK" not in ran.stdout and HOOK_PATH not in ran.stdout + ran.stderr
    s.append_logs(exp, ran.stdout.splitlines() + ran.stderr.splitlines())
    s.finish_job(exp, ran.returncode)
    started, ended = hook.texts
    assert started == f":rocket: launchkit run *{exp.id}* started"
    assert ended.startswith(
        f":zzz: launchkit run *{exp.id}* stopped by launchkit: no progress for 2s (last: step 1"
    )
    why = run_cli("why", exp.id, timeout=60).stdout
    assert f"{exp.id} stopped by launchkit: no progress for 2s" in why, why

    follow_env = {"LAUNCHKIT_SLACK_WEBHOOK_URL": hook.url}
    r = run_cli("follow", exp.id, env=follow_env, timeout=60)
    assert r.code == 124 and "stopped by launchkit" in r.stderr, r.stderr
    assert len(hook.texts) == 2, hook.texts  # the job posted its start and its end: nothing again

    canceled = s.find_experiment(ids[1])
    s.start_job(canceled)
    s.cancel_experiment(canceled, by="bob")
    r = run_cli("follow", canceled.id, env=follow_env, timeout=60)
    assert len(hook.texts) == 3, hook.texts
    assert (
        hook.texts[2].startswith(":octagonal_sign: launchkit run *canceled* <") and "bob" in hook.texts[2]
    ), hook.texts[2]


def test_a_local_job_that_fails_before_its_command_is_posted_by_the_supervisor(repo, hook):
    """The runtime never got to post (a setup step failed): the supervisor posts the failure, once."""
    r = run_cli(
        "run", "--local", "--no-python", "--pre-setup", "exit 3", "--slack-webhook-url", hook.url,
        "--", "echo", "never",
        cwd=repo.path, env=FAST_ENV, timeout=60,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    assert wait_finished(run_id, FAST_ENV)["exit_code"] == 103
    supervisor_gone(home() / "runs" / run_id)
    assert hook.texts == [
        f":x: launchkit run *{run_id}* failed with exit code 103: the --pre-setup hook failed; "
        f"see why: `launchkit why {run_id}`"
    ]
