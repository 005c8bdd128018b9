"""The local supervisor's two small deciders, in process: the cause of a job's end for `--retry-on`
(backends/local/retry.py) and what the supervisor itself posts to Slack (backends/local/posts.py).
Their end-to-end behaviour is in tests/test_retry_on.py and tests/test_notifications.py (slow tier)."""

from __future__ import annotations

import os

import pytest

from launchkit.backends.local import logs, posts, retry, spawn
from launchkit.core.specview import EnvVar, TaskView
from launchkit.runtime.node.launch import notify
from launchkit.runtime.node.policy import ENV_NOTIFY, FAILURE, NEVER_STARTED, PREEMPTION, STALLED, Policy
from launchkit.runtime.node.policy import ENV_WEBHOOK as ENV_SLACK_WEBHOOK


def _log(rdir, lines: list[str], rank: int = 0, attempt: int = 1) -> None:
    path = logs.log_file(rdir, rank, attempt)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        for i, line in enumerate(lines):
            f.write(b"%d %s\n" % (1_000_000 + i, line.encode()))


STARTED = "[launchkit] setup done in 0.03s (clone 0.02s)"


@pytest.mark.parametrize(
    ("code", "lines", "cause"),
    [
        (143, [], PREEMPTION),  # a SIGTERM launchkit did not send
        (1, [STARTED, "Traceback"], FAILURE),
        (124, [STARTED, "step 1", "[launchkit] stopped: no progress for 2s (--stall-timeout)"], STALLED),
        (124, [STARTED, "the command's own 124"], FAILURE),
        (103, ["[launchkit] error: pre-setup failed"], NEVER_STARTED),
        (103, [STARTED, "exit 103 from the command"], FAILURE),
    ],
)
def test_the_cause_of_a_jobs_end(tmp_path, code, lines, cause):
    _log(tmp_path, lines, rank=1, attempt=2)
    assert retry.cause_of(code, str(tmp_path), 1, 2, None) == cause


def test_what_each_cause_records_and_whether_it_is_retried():
    assert retry.fields(PREEMPTION) == {"status": "canceled", "stop": "preempted"}
    assert retry.fields(NEVER_STARTED) == {"status": "failed", "cause": "never started"}
    assert retry.fields(FAILURE) == {"status": "failed"}
    on = Policy(retry_on=[PREEMPTION], retry_cap=3)
    assert retry.wanted(Policy(), FAILURE)  # without --retry-on: any failure, as Beaker's task retries
    assert retry.wanted(on, PREEMPTION) and not retry.wanted(on, FAILURE)
    assert not retry.wanted(Policy(retry_on=[STALLED], retry_cap=3), STALLED)  # restarted in place already


def test_the_webhook_is_taken_out_of_the_supervisors_environment():
    task = TaskView({"name": "main", "envVars": [EnvVar(ENV_SLACK_WEBHOOK, secret="HOOK").to_json()]})
    environ = {"HOOK": "https://hooks.example/T/B/x", "OTHER": "1"}
    assert posts.hooks(task, environ) == ("https://hooks.example/T/B/x", None)
    assert environ == {"OTHER": "1"}  # no replica inherits it
    handed = {ENV_SLACK_WEBHOOK: "http://127.0.0.1:9/h", "OTHER": "1"}  # --slack-webhook-url
    assert posts.hooks(TaskView({"name": "main"}), handed) == ("http://127.0.0.1:9/h", None)
    assert handed == {"OTHER": "1"}
    assert posts.hooks(TaskView({"name": "main"}), {}) == (None, None)


def test_the_events_url_is_taken_out_of_the_supervisors_environment_or_read_from_the_pipe():
    """--notify-secret NAME: NAME's value, out of the environment; handed on the pipe after the webhook."""
    named = TaskView({"name": "main", "envVars": [EnvVar(ENV_NOTIFY, secret="EV").to_json()]})
    environ = {"EV": "https://events.example/x", "OTHER": "1"}
    assert posts.hooks(named, environ) == (None, "https://events.example/x")
    assert environ == {"OTHER": "1"}
    fd = spawn.hand_over(notify.hooks_text(None, "http://127.0.0.1:9/e"))
    assert posts.hooks(TaskView({"name": "main"}), {posts.HANDED_FD: str(fd)}) == (
        None,
        "http://127.0.0.1:9/e",
    )
    fd = spawn.hand_over(notify.hooks_text("http://127.0.0.1:9/h", "http://127.0.0.1:9/e"))
    assert posts.hooks(TaskView({"name": "main"}), {posts.HANDED_FD: str(fd)}) == (
        "http://127.0.0.1:9/h", "http://127.0.0.1:9/e",
    )  # fmt: skip


def test_what_the_supervisor_posts_at_the_end(tmp_path):
    rdir = str(tmp_path)
    rec = {"id": "local-1", "status": "canceled"}
    assert "was canceled by you (`launchkit stop`)" in (posts.end_message(rdir, rec, None, None) or "")
    assert "was stopped by a timeout: --task-timeout 1s" in (
        posts.end_message(rdir, rec, "--task-timeout 1s", None) or ""
    )
    said = dict(rec, message="stopped by launchkit following it: no start within 5s")
    assert "was canceled (stopped by launchkit following it" in (
        posts.end_message(rdir, said, None, None) or ""
    )
    assert "could not write its log" in (
        posts.end_message(rdir, {"id": "local-1", "status": "running"}, None, "could not write its log") or ""
    )
    assert posts.end_message(rdir, {"id": "local-1", "status": "succeeded"}, None, None) is None  # the job's
    crashed = {"id": "local-1", "status": "failed", "message": "supervisor error: boom"}
    assert "supervisor error: boom" in (posts.end_message(rdir, crashed, None, None) or "")
