"""--slack-webhook-url: start / success / failure (exit code, link) posted to a local HTTP server while
the run is followed; the URL is never printed."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from conftest import run_cli
from fakebeaker.state import AutoRun

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

WS = "ai2/launchkit"
SECRET_PART = "T000/B000/xoxb-do-not-print"


@pytest.fixture
def slack():
    posts: list[dict] = []
    status = {"code": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            posts.append({"path": self.path, "json": json.loads(body)})
            self.send_response(status["code"])
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/services/{SECRET_PART}"
    yield url, posts, status
    server.shutdown()
    server.server_close()


def _run(repo, name, *args, env=None, verbose=False):
    return run_cli(
        *(["-v"] if verbose else []),
        "run", "--workspace", WS, "--name", name, "--follow", *args, "--", "python", "t.py",
        cwd=repo.path,
        timeout=90,
        env=env,
    )  # fmt: skip


def test_start_and_success(repo, fake_beaker, slack):
    url, posts, _ = slack
    fake_beaker.state.set_auto(AutoRun(start_after=0.1, run_for=0.2, lines=["hi"]))
    r = _run(repo, "ok-job", "--slack-webhook-url", url)
    assert r.code == 0, r.stderr
    texts = [p["json"]["text"] for p in posts]
    assert len(texts) == 2, texts
    assert "ok-job" in texts[0] and "started" in texts[0]
    assert "succeeded" in texts[1] and "/ex/" in texts[1]
    assert all(p["path"] == f"/services/{SECRET_PART}" for p in posts)
    assert SECRET_PART not in r.stdout + r.stderr


def test_failure_with_exit_code_and_link_via_gantrys_env_name(repo, fake_beaker, slack):
    url, posts, _ = slack
    fake_beaker.state.set_auto(AutoRun(start_after=0.1, run_for=0.2, exit_code=3, lines=["boom"]))
    r = _run(repo, "bad-job", env={"GANTRY_SLACK_WEBHOOK_URL": url})
    assert r.code == 3, r.stderr
    last = posts[-1]["json"]["text"]
    exp = next(e for e in fake_beaker.state.experiments.values() if e.name == "bad-job")
    assert "failed with exit code 3" in last and f"/ex/{exp.id}" in last
    assert SECRET_PART not in r.stdout + r.stderr


def test_a_failing_webhook_is_a_warning_and_the_url_stays_hidden(repo, fake_beaker, slack):
    url, _posts, status = slack
    status["code"] = 500
    fake_beaker.state.set_auto(AutoRun(start_after=0.1, run_for=0.2, lines=["hi"]))
    r = _run(repo, "warn-job", verbose=True, env={"LAUNCHKIT_SLACK_WEBHOOK_URL": url})
    assert r.code == 0, r.stderr
    assert "Slack notification to http://127.0.0.1/… failed (HTTP 500)" in r.stderr, r.stderr
    assert SECRET_PART not in r.stdout + r.stderr


def test_without_follow_it_says_how_to_get_notifications(repo, fake_beaker, slack):
    url, posts, _ = slack
    r = run_cli("run", "--workspace", WS, "--slack-webhook-url", url, "--", "x", cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    assert "--follow" in r.stderr and not posts and SECRET_PART not in r.stderr


def test_bad_url_is_a_usage_error_without_the_url(repo):
    r = run_cli("run", "--dry-run", "--slack-webhook-url", f"ftp://hooks.example/{SECRET_PART}", "--", "x",
                cwd=repo.path)  # fmt: skip
    assert r.code == 2 and "ftp://hooks.example/…" in r.stderr and SECRET_PART not in r.stderr
    r = run_cli("run", "--dry-run", "--slack-webhook-url", "http://127.0.0.1/x", "--", "x", cwd=repo.path)
    assert r.code == 0 and "127.0.0.1/x" not in r.stdout  # not in the spec


def test_a_watchdog_stop_is_told_as_launchkits(repo, slack):
    """An --inactive-timeout stop (checked by the job's runtime) is posted as launchkit's, with the limit."""
    url, posts, _ = slack
    r = run_cli(
        "run", "--local", "--no-python", "--follow", "--inactive-timeout", "2", "--slack-webhook-url", url,
        "--", "bash", "-c", "echo one; sleep 600",
        cwd=repo.path, timeout=120,
    )  # fmt: skip
    assert r.code == 124, r.stderr
    assert len(posts) == 2, posts  # the run posts its start and its stop itself: follow re-posts neither
    last = posts[-1]["json"]["text"]
    assert "stopped by launchkit: no output for 2s (--inactive-timeout)" in last and "canceled" not in last, (
        last
    )
