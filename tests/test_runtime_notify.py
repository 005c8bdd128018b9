"""The job's own Slack poster (runtime/node/launch/notify.py) through `python -m launchkit.runtime.node launch`,
as bash hands over: which replica posts what, a SIGTERM'd job posts nothing for itself, a failed post is
one warning line that changes nothing else. Real processes and a webhook receiver on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from launchkit.notify import posted_by_job
from launchkit.runtime.node.launch import notify
from lk_helpers import policy_env
from webhook import (
    HOOK_PATH,
    Holding,
    hook_fixture,  # noqa: F401 - the `hook` fixture
)


def launch(tmp_path: Path, code: str, url: str, **env: str) -> subprocess.Popen[str]:
    """The runtime, with the webhook `url` in its environment, runs `python -c code`."""
    full = {
        "PATH": os.environ["PATH"],
        "LAUNCHKIT_LAUNCHER": "none",
        "BEAKER_EXPERIMENT_ID": "01EXP",
        notify.ENV: url,
        **env,
    }
    cmd = [sys.executable, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--"]
    return subprocess.Popen(
        [*cmd, sys.executable, "-c", code],
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(p: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = p.communicate(timeout=120)
    return p.returncode, out, err


def test_replica_0_posts_its_start_and_success_and_the_command_never_sees_the_webhook(tmp_path, hook):
    code, out, err = finish(launch(tmp_path, "print('hi')", hook.url))
    assert code == 0, err
    assert hook.texts == [
        ":rocket: launchkit run *01EXP* started",
        ":white_check_mark: launchkit run *01EXP* succeeded",
    ]
    code, out, _ = finish(
        launch(tmp_path, "import os; print(os.environ.get('LAUNCHKIT_SLACK_WEBHOOK'))", hook.url)
    )
    assert out == "None\n"


def test_the_replica_that_fails_posts_its_exit_code_and_names_itself(tmp_path, hook):
    env = {"BEAKER_REPLICA_RANK": "1", "BEAKER_REPLICA_COUNT": "2", "LAUNCHKIT_ATTEMPT": "2"}
    code, _, err = finish(launch(tmp_path, "import sys; sys.exit(3)", hook.url, **env))
    assert code == 3, err
    assert hook.texts == [
        ":x: launchkit run *01EXP* failed with exit code 3 (replica 1 of 2, attempt 2); "
        "see why: `launchkit why 01EXP`"
    ]  # no start: replica 0 posts that


def test_a_job_ended_by_sigterm_posts_nothing_for_itself(tmp_path, hook):
    """A cancel, a preemption or a sibling's failure: whoever sent the signal posts it."""
    p = launch(tmp_path, "import sys, time; print('up', flush=True); time.sleep(600)", hook.url)
    assert p.stdout.readline() == "up\n"
    p.send_signal(signal.SIGTERM)
    code, _, err = finish(p)
    assert code == 128 + signal.SIGTERM, err
    assert hook.texts == [":rocket: launchkit run *01EXP* started"]


def test_the_soft_inactivity_warning_is_posted(tmp_path, hook):
    code, _, err = finish(
        launch(
            tmp_path,
            "import time; print('x', flush=True); time.sleep(1.5)",
            hook.url,
            **policy_env(inactive_soft_timeout=0.5),
        )
    )
    assert code == 0, err
    assert hook.texts[1].startswith(":zzz: launchkit run *01EXP* no output for "), hook.texts
    assert hook.texts[1].endswith("(--inactive-soft-timeout)") and len(hook.texts) == 3, hook.texts


def test_a_webhook_that_fails_is_one_warning_line_and_changes_nothing_else(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}{HOOK_PATH}"
    code, out, err = finish(launch(tmp_path, "import sys; print('done'); sys.exit(5)", url))
    assert code == 5 and out == "done\n", err
    warnings = [line for line in err.splitlines() if "Slack" in line]
    assert len(warnings) == 2, err  # the start's and the end's
    assert warnings[0].startswith("[launchkit] warning: Slack notification to http://127.0.0.1/… failed (")
    assert HOOK_PATH not in err


def test_follow_leaves_to_the_job_what_the_job_posts():
    from launchkit.backends import Cause, EndReason

    def end(kind: Cause, by: str | None = None) -> EndReason:
        return EndReason(kind=kind, line="x", by=by)

    job = [
        end(Cause.succeeded),
        end(Cause.exit_code),
        end(Cause.oom),
        end(Cause.timeout, "launchkit"),
    ]
    assert all(map(posted_by_job, job))
    follower = [Cause.setup, Cause.preempted, Cause.canceled, Cause.node_lost, Cause.image_pull]
    assert not any(posted_by_job(end(k)) for k in follower)
    assert not posted_by_job(end(Cause.timeout, "--task-timeout")) and not posted_by_job(None)


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.slack.com/services/T0/B0/secret",
        "http://127.0.0.1:8080/hook?token=x",
        "https://user:pw@example.com/x",
        "not a url",
        "http://[::1",
        "https://host:99999/x",
        "",
    ],
)
def test_the_job_shows_a_webhook_as_launchkit_does(url):
    """The node's poster and launchkit's messages show a webhook the same way (two copies: the node's
    package cannot import launchkit, and launchkit's commands do not load the runtime package for it)."""
    from launchkit.core.redact import url_host_only

    assert notify.host_only(url) == url_host_only(url)
    assert "secret" not in url_host_only(url) and "pw" not in url_host_only(url)


# The runtime's launch, in a process of its own, with a poster that notes, when a post begins, which of
# the runtime's children are the command (its argv holds a marker): then lets the command end.
POST_BEGINS = r"""
import json, os, sys
from launchkit.runtime.node.launch import launchers, notify
from launchkit.runtime.node.policy import EMPTY

go, marker = sys.argv[1], sys.argv[2]


def running():
    found = []
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
            with open("/proc/%s/cmdline" % name, "rb") as f:
                argv = f.read().split(b"\0")  # (bytes: another test's process may have any)
        except OSError:
            continue
        if int(stat[stat.rfind(b")") + 2 :].split()[1]) == os.getpid() and marker.encode() in argv:
            found.append(int(name))
    return found


class Noting(notify.Poster):
    def soon(self, text):
        try:
            print(json.dumps({"post": text, "command running": running()}), flush=True)
        finally:  # the command ends whatever happened here
            open(go, "w").close()


job = notify.Job({"BEAKER_EXPERIMENT_ID": "01EXP"}, Noting("https://h/x", lambda url, text: None))
loop = 'while [ ! -e "$1" ]; do sleep 0.01; done'
plan = launchers.Plan(["sh", "-c", loop, marker, go], dict(os.environ))
sys.exit(launchers.run(plan, "exec", job=job, policy=EMPTY))
"""


def test_the_start_post_begins_only_once_the_command_runs(tmp_path):
    """Issue 46: no post goes before the command: when the start's post begins, the command has been
    exec'd (it waits for the poster's go, so it is still there to be seen)."""
    go, marker = tmp_path / "go", "lk-command-" + tmp_path.name
    p = subprocess.run(
        [sys.executable, "-c", POST_BEGINS, str(go), marker],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    noted = [json.loads(line) for line in p.stdout.splitlines()]
    assert [n["post"] for n in noted] == [":rocket: launchkit run *01EXP* started"], p.stdout
    assert len(noted[0]["command running"]) == 1, p.stdout


def test_the_command_never_waits_for_its_start_post(tmp_path):
    """A webhook that holds the start post unanswered: the command's first line comes while the post
    still waits (its deadline not passed); answered, the start and the end are posted in that order."""
    hook = Holding()
    try:
        p = launch(tmp_path, "print('first', flush=True)", hook.url)
        assert p.stdout is not None and p.stdout.readline() == "first\n"
        assert hook.given_up() == []  # no post's deadline passed before the command's first line
        hook.release()
        code, _, err = finish(p)
        assert code == 0, err
        assert hook.texts == [
            ":rocket: launchkit run *01EXP* started",
            ":white_check_mark: launchkit run *01EXP* succeeded",
        ]
        assert "Slack" not in err, err
    finally:
        hook.close()


def test_a_start_is_posted_once_however_often_the_command_starts_in_place():
    sent: list[str] = []
    job = notify.Job(
        {"BEAKER_EXPERIMENT_ID": "01EXP"}, notify.Poster("https://h/x", lambda u, t: sent.append(t))
    )
    for _ in range(3):  # restart.py: the command again after a stop, the same job
        job.tell("started", "python")
    job.poster.finish(None)
    assert sent == [":rocket: launchkit run *01EXP* started"]


@pytest.mark.parametrize("code", [0, 143], ids=["posted", "nothing-to-post"])
def test_the_jobs_end_waits_for_slack_and_its_events_at_once(code):
    """With both a webhook and --notify-url, the job's end waits for the two posters together (the
    slower one), never one after the other: each end post here only returns once the other is under
    way too (a barrier), so posts made in turn break it."""
    import threading

    from timescale import scaled

    met = threading.Barrier(2, timeout=scaled(30))
    got: list[str | None] = []

    def send(_url: str, _text: str) -> str | None:
        try:
            met.wait()
        except threading.BrokenBarrierError:
            return "posted alone"
        return None

    env = {"BEAKER_EXPERIMENT_ID": "01EXP"}
    job = notify.Job(
        env,
        notify.Poster("https://h/x", send, warn=got.append),
        notify.Poster("https://h/e", send, warn=got.append),
    )
    if code:  # nothing of its own to post (SIGTERM: told by whoever ended it): the posts under way
        job.poster.soon("a")
        job.events.soon("b")
    job.ended(code)
    assert got == [] and not met.broken
