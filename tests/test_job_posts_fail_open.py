"""Posting fails open where the job runs (issue 40 item 3, issue 41 item 3; runtime/node/launch/notify.py):
every post has an overall deadline (a server that trickles its answer cannot hold a finished job
open), no redirect is followed, a webhook that cannot be posted to is one warning line that never
changes the job's outcome, errors name the host and never the URL, and a crash in a helper is one
line. Real processes through `python -m launchkit.runtime.node launch` (the webhook handed over on a
pipe, as bash does), real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launchkit.runtime.node.launch import notify
from webhook import (
    HOOK_PATH,
    Redirect,
    Trickle,
    hook_fixture,  # noqa: F401 - the `hook` fixture
)


def launch(tmp_path: Path, code: str, url: str) -> tuple[int, str, str]:
    """The runtime, given `url` on a pipe (entrypoint.sh: `--webhook-fd`), runs `code`; (rc, out, err)."""
    r, w = os.pipe()
    os.write(w, url.encode() + b"\n")
    os.close(w)
    env = {"PATH": os.environ["PATH"], "LAUNCHKIT_LAUNCHER": "none", "BEAKER_EXPERIMENT_ID": "01EXP"}
    cmd = [sys.executable, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path)]
    try:
        p = subprocess.run(
            [*cmd, "--webhook-fd", str(r), "--", sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            pass_fds=(r,),
            timeout=120,  # a hang guard only: the old poster held the job for ever
        )
    finally:
        os.close(r)
    return p.returncode, p.stdout, p.stderr


def test_a_webhook_that_trickles_its_answer_does_not_hold_the_job_open(tmp_path):
    server = Trickle()
    try:
        code, out, err = launch(tmp_path, "print('done')", server.url)
    finally:
        server.close()
    assert code == 0 and out == "done\n", err
    said = [ln for ln in err.splitlines() if "Slack" in ln]
    assert said and all(
        ln.startswith(
            "[launchkit] warning: Slack notification to http://127.0.0.1/… failed (no answer within"
        )
        for ln in said
    ), err
    assert HOOK_PATH not in err and server.accepted >= 1


def test_a_post_has_one_deadline_for_connect_send_and_read():
    server = Trickle()
    try:
        assert notify.post(server.url, "hi", timeout=1) == "no answer within 1s"
    finally:
        server.close()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("hooks.slack.com/services/T0/B0/x", "not an http(s) URL"),
        ("https://hooks.slack.com/services/T0/B0/a b", "a space"),
        ("file:///etc/passwd", "not an http(s) URL"),
        ("http://[::1", "host or port is not valid"),
        ("https://h:99999/x", "host or port is not valid"),
        ("https://h:0/x", "port is not in 1-65535"),
        ("https:///x", "host is not valid"),
        ("http://hooks.slack.com/services/T0/B0/x", "plain http is only for 127.0.0.1 or localhost"),
    ],
)
def test_a_webhook_that_cannot_be_posted_to_is_one_warning_and_the_job_ends_as_its_command(
    tmp_path, url, problem
):
    assert problem in (notify.url_problem(url) or "")
    code, out, err = launch(tmp_path, "print('done')", url)
    assert code == 0 and out == "done\n", err  # not `failed` 109: the command's own exit code
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[launchkit] warning: the Slack webhook"), err
    assert problem in lines[0] and "Traceback" not in err
    assert "/services/" not in err and "passwd" not in err  # never the URL


@pytest.mark.parametrize("url", ["https://hooks.slack.com/services/T0/B0/x", "http://127.0.0.1:8080/h?x=1"])
def test_ordinary_webhooks_pass_the_check(url):
    assert notify.url_problem(url) is None


def test_a_redirect_is_a_failed_post_told_by_host_and_never_followed(tmp_path, hook):
    server = Redirect(hook.url)
    try:
        code, _, err = launch(tmp_path, "import sys; sys.exit(4)", server.url)
    finally:
        server.close()
    assert code == 4, err
    said = [ln for ln in err.splitlines() if "Slack" in ln]
    assert len(said) == 2, err  # the start's and the end's
    assert all(
        "to http://127.0.0.1/… failed (HTTP 302: a redirect, which is not followed)" in ln for ln in said
    )
    assert hook.texts == [] and HOOK_PATH not in err


def test_a_crash_in_the_poster_is_one_line_and_the_commands_end_stands():
    lines: list[str] = []

    def crashes(url: str, text: str) -> str | None:
        raise RuntimeError(url)  # (as a bug would: the message holds the URL)

    job = notify.Job(
        {"BEAKER_EXPERIMENT_ID": "01EXP"}, notify.Poster("https://h/services/x", crashes, lines.append)
    )
    job.started()
    job.ended(0)
    assert len(lines) == 2 and all("RuntimeError in launchkit's poster" in ln for ln in lines), lines
    assert not any("/services/" in ln for ln in lines)


def test_the_jobs_end_waits_for_the_posts_under_way_at_most_the_given_time():
    import threading

    release = threading.Event()
    sent: list[str] = []

    def slow(url: str, text: str) -> str | None:
        if text == "first":
            release.wait(120)  # (a hang guard only)
        sent.append(text)
        return None

    ticks = iter([0.0, 10.0, 10.0, 10.0])
    poster = notify.Poster("https://h/x", slow, lambda line: None)
    poster.soon("first")
    poster.finish("end", wait=5.0, clock=lambda: next(ticks))  # the clock says the wait is over
    assert sent == ["end"]  # the end did not wait for the stuck one
    release.set()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://[::1", "its host or port is not valid"),
        ("https://h:99999/x", "its host or port is not valid"),
        ("hooks.slack.com/services/T0/B0/x", "not an http(s) URL"),
        ("https://hooks.slack.com/services/T0/B0/a b", "a space"),
    ],
)
def test_a_bad_webhook_url_is_a_one_line_usage_error_at_launch(repo, url, said):
    from inproc import run_main

    r = run_main("run", "--dry-run", "--follow", "--slack-webhook-url", url, "--", "true", cwd=repo.path)
    assert r.code == 2, r.stderr  # not 70: an internal error
    assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "T0/B0" not in r.stderr and "Traceback" not in r.stderr


@pytest.mark.timeout(120)
def test_the_local_supervisors_end_post_is_bounded_too():
    """After `launchkit stop` the supervisor posts the cancel (backends/local/posts.py): a trickling
    server used to keep it blocked."""
    from launchkit.backends.local import posts

    server = Trickle()
    try:
        posts.post(server.url, "end")  # returns: one deadline for the post
    finally:
        server.close()
    assert server.accepted == 1
