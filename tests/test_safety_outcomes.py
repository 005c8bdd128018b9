"""Issue 21 item 6: outcomes told as they are. Sessions take the sessions-only clusters and refuse
impossible ports; internal config markers can't collide with a user's keys; a partly created
--sweep-experiments names what was created and a re-launch creates only the rest; a full disk
during a local `run --follow` ends the run failed with the reason, and follow exits 3."""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import run_cli

WS = "ai2/launchkit"


@pytest.fixture
def beaker_cli(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    stub = bin_dir / "beaker"
    stub.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    stub.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, record


@pytest.mark.parametrize("cluster", ["ai2/interactive", "interactive", "sessions"])
def test_a_session_goes_to_a_sessions_only_cluster(repo, fake_beaker, beaker_cli, cluster):
    env, record = beaker_cli
    r = run_cli("session", "--workspace", WS, "--cluster", cluster, "--detach", cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    argv = json.loads(record.read_text())
    assert argv[argv.index("--cluster") + 1] == "ai2/interactive"


def test_run_still_refuses_a_sessions_only_cluster(repo, fake_beaker):
    r = run_cli("run", "--workspace", WS, "--cluster", "ai2/interactive", "--", "true", cwd=repo.path)
    assert r.code == 2 and "sessions only" in r.stderr, r.stderr


@pytest.mark.parametrize("port", ["0", "70000", "-1", "65536"])
def test_a_session_refuses_an_impossible_port(repo, port):
    r = run_cli("session", "--dry-run", "--port", port, cwd=repo.path)
    assert r.code == 2 and f"--port {port}" in r.stderr and "1 to 65535" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_session_takes_the_edge_ports(repo):
    r = run_cli("session", "--dry-run", "--port", "1", "--port", "65535", cwd=repo.path)
    assert r.code == 0 and "--port 1 --port 65535" in r.stdout, r.stderr


def test_a_user_key_named_like_an_internal_marker_is_just_an_unknown_key(repo):
    (repo.path / "pyproject.toml").write_text('[tool.gantry]\n_gantry_ignored = 5\nbudget = "ai2/x"\n')
    r = run_cli("run", "--dry-run", "--", "true", cwd=repo.path)
    assert r.code == 2 and "_gantry_ignored" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_gantry_only_keys_are_still_reported(repo):
    (repo.path / "pyproject.toml").write_text('[tool.gantry]\nquiet = true\nbudget = "ai2/x"\n')
    r = run_cli("run", "--dry-run", "--", "true", cwd=repo.path)
    assert r.code == 0 and "not used: quiet" in r.stderr, r.stderr
