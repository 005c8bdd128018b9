"""The entrypoint's git token goes only to the repository's own host, only over https (issue 21
item 2): never to a submodule or redirect on another host, never over plain http."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import git
from lk_helpers import entrypoint

LIB = Path(__file__).parents[1] / "src/launchkit/runtime/lib.sh"
TOKEN = "tok-3f9a1c77e2"


def fill(remote: str, protocol: str, host: str, **env: str) -> str:
    """What lk_git's credential helpers answer for `protocol://host`, in a job cloning `remote`."""
    script = f'source {LIB}; printf "protocol=%s\\nhost=%s\\n\\n" "$1" "$2" | lk_git credential fill'
    r = subprocess.run(
        ["bash", "-c", script, "fill", protocol, host],
        env={
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", "/nonexistent"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "LAUNCHKIT_GIT_REMOTE": remote,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    return r.stdout


@pytest.mark.parametrize(
    "remote,protocol,host,offered",
    [
        ("https://git.example.com/o/r.git", "https", "git.example.com", True),
        ("git@git.example.com:o/r.git", "https", "git.example.com", True),  # SSH becomes https
        ("https://git.example.com:8443/o/r.git", "https", "git.example.com:8443", True),
        ("https://git.example.com/o/r.git", "http", "git.example.com", False),  # never over http
        ("https://git.example.com/o/r.git", "https", "evil.example.com", False),  # a submodule elsewhere
        ("https://git.example.com/o/r.git", "https", "git.example.com:8443", False),  # another port
        ("https://git.example.com:8443/o/r.git", "https", "git.example.com", False),
        ("http://git.example.com/o/r.git", "http", "git.example.com", False),  # an http remote: no token
        ("http://git.example.com/o/r.git", "https", "git.example.com", False),
        ("/srv/git/r.git", "https", "git.example.com", False),
        ("https://tok@git.example.com/o/r.git", "https", "git.example.com", True),
    ],
)
def test_the_git_token_is_offered_only_to_the_remotes_https_host(remote, protocol, host, offered):
    out = fill(remote, protocol, host, LAUNCHKIT_GIT_TOKEN=TOKEN)
    assert (f"password={TOKEN}" in out) == offered, out


@pytest.mark.parametrize(
    "protocol,host,offered",
    [("https", "github.com", True), ("http", "github.com", False), ("https", "evil.example.com", False)],
)
def test_the_github_token_is_offered_only_to_github_over_https(protocol, host, offered):
    out = fill("https://github.com/o/r.git", protocol, host, GITHUB_TOKEN=TOKEN)
    assert (f"password={TOKEN}" in out) == offered, out


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Asks for credentials (401 Basic) and records every Authorization header it is sent."""

    def do_GET(self):
        self.server.seen.append(self.headers.get("Authorization") or "")  # type: ignore[attr-defined]
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="evil"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def evil_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_a_submodule_on_another_host_never_receives_the_token(repo, tmp_path, evil_server):
    """The attack of issue 21: .gitmodules points at http://127.0.0.1:PORT/evil/dep.git."""
    url = f"http://127.0.0.1:{evil_server.server_address[1]}/evil/dep.git"
    (repo.path / ".gitmodules").write_text(f'[submodule "dep"]\n\tpath = dep\n\turl = {url}\n')
    git(repo.path, "add", ".gitmodules")
    git(repo.path, "update-index", "--add", "--cacheinfo", f"160000,{'a' * 40},dep")
    git(repo.path, "commit", "-q", "-m", "submodule on another host")
    git(repo.path, "push", "-q", "origin", "HEAD")
    sha = git(repo.path, "rev-parse", "HEAD")
    for env in ({"LAUNCHKIT_GIT_TOKEN": TOKEN}, {"GITHUB_TOKEN": TOKEN}):
        r = entrypoint(
            tmp_path / next(iter(env)),
            str(repo.remote.as_uri()),
            sha,
            ["true"],
            {"LAUNCHKIT_NO_PYTHON": "1", "LAUNCHKIT_RETRY_DELAY": "0", **env},
        )
        assert r.returncode == 102, r.stderr  # the submodule step fails: it is not reachable
        assert TOKEN not in r.stdout + r.stderr
    assert evil_server.seen, "the submodule host was never asked"
    assert all(not h for h in evil_server.seen), evil_server.seen  # asked, but never given a credential
