"""GitHub remotes on Beaker (issue 9, item 4): the workspace's GITHUB_TOKEN secret rides along
(`<user>_GITHUB_TOKEN` first); a private repository without one is refused before submitting. The
GitHub API is a local server on 127.0.0.1 (LAUNCHKIT_GITHUB_API), so no test needs the network."""

from __future__ import annotations

import http.server
import json
import socket
import threading

import pytest

from conftest import git, run_cli

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

WS = "ai2/launchkit"
COMMAND = ("--", "python", "train.py")


PUBLIC = {"/repos/acme/public": {"private": False}}  # anything else: 404, as for a private repo


class _GitHubAPI(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.asked.append(self.path)  # type: ignore[attr-defined]
        body = PUBLIC.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b'{"message": "Not Found"}')
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body).encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def github_api(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _GitHubAPI)
    server.asked = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("LAUNCHKIT_GITHUB_API", f"http://127.0.0.1:{server.server_address[1]}")
    yield server
    server.shutdown()
    server.server_close()


def _on_github(repo, name: str) -> None:
    """origin on github.com (SSH, as users have it); the pushed commit stays in origin's tracking refs."""
    git(repo.path, "remote", "set-url", "origin", f"git@github.com:acme/{name}.git")


def _drop_secret(fake, name: str) -> None:
    fake.state.find_workspace(WS).secrets.pop(name)


def _submitted(fake) -> list:
    return list(fake.state.experiments.values())


def test_github_remote_gets_the_workspace_token_secret(repo, fake_beaker, github_api):
    _on_github(repo, "private")
    r = run_cli("run", "--workspace", WS, "--name", "gh", *COMMAND, cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    (exp,) = _submitted(fake_beaker)
    env = {e["name"]: e for e in exp.spec["tasks"][0]["envVars"]}
    assert env["GITHUB_TOKEN"] == {"name": "GITHUB_TOKEN", "secret": "GITHUB_TOKEN"}
    assert env["LAUNCHKIT_GIT_REMOTE"]["value"] == "https://github.com/acme/private.git"
    assert github_api.asked == ["/repos/acme/private"]  # asked first, as gantry: a public one gets none
    # the user's own secret wins over the shared one
    fake_beaker.state.put_secret(WS, "alice_GITHUB_TOKEN", "ghp_alice")
    r = run_cli("run", "--workspace", WS, "--dry-run", *COMMAND, cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    assert "secret: alice_GITHUB_TOKEN" in r.stdout and "ghp_alice" not in r.stdout + r.stderr


def test_private_repository_without_a_token_is_refused_before_submitting(repo, fake_beaker, github_api):
    _on_github(repo, "private")
    _drop_secret(fake_beaker, "GITHUB_TOKEN")
    r = run_cli("run", "--workspace", WS, *COMMAND, cwd=repo.path, timeout=90)
    assert r.code == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "acme/private" in lines[0] and "launchkit secret set GITHUB_TOKEN" in lines[0]
    assert "Traceback" not in r.stderr
    assert github_api.asked == ["/repos/acme/private"]
    assert not _submitted(fake_beaker)


def test_public_repository_gets_no_token(repo, fake_beaker, github_api):
    """As gantry: the workspace has GITHUB_TOKEN, but a public repository's job is not given it."""
    _on_github(repo, "public")
    r = run_cli("run", "--workspace", WS, "--name", "pub", *COMMAND, cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    (exp,) = _submitted(fake_beaker)
    assert "GITHUB_TOKEN" not in {e["name"] for e in exp.spec["tasks"][0]["envVars"]}


def test_unreachable_github_warns_and_launches(repo, fake_beaker, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("LAUNCHKIT_GITHUB_API", f"http://127.0.0.1:{port}")
    _on_github(repo, "private")
    _drop_secret(fake_beaker, "GITHUB_TOKEN")
    r = run_cli("run", "--workspace", WS, "--name", "open", *COMMAND, cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    assert "could not check whether GitHub repository acme/private is private" in r.stderr
    assert len(_submitted(fake_beaker)) == 1
