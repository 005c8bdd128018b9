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
from inproc import run_main
from timescale import scaled

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
    r = run_main("run", "--workspace", WS, "--cluster", "ai2/interactive", "--", "true", cwd=repo.path)
    assert r.code == 2 and "sessions only" in r.stderr, r.stderr


@pytest.mark.parametrize("port", ["0", "70000", "-1", "65536"])
def test_a_session_refuses_an_impossible_port(repo, port):
    r = run_main("session", "--dry-run", "--port", port, cwd=repo.path)
    assert r.code == 2 and f"--port {port}" in r.stderr and "1 to 65535" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_session_takes_the_edge_ports(repo):
    r = run_main("session", "--dry-run", "--port", "1", "--port", "65535", cwd=repo.path)
    assert r.code == 0 and "--port 1 --port 65535" in r.stdout, r.stderr


def test_a_user_key_named_like_an_internal_marker_is_just_an_unknown_key(repo):
    (repo.path / "pyproject.toml").write_text('[tool.gantry]\n_gantry_ignored = 5\nbudget = "ai2/x"\n')
    r = run_main("run", "--dry-run", "--", "true", cwd=repo.path)
    assert r.code == 2 and "_gantry_ignored" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_gantry_only_keys_are_still_reported(repo):
    (repo.path / "pyproject.toml").write_text('[tool.gantry]\nquiet = true\nbudget = "ai2/x"\n')
    r = run_main("run", "--dry-run", "--", "true", cwd=repo.path)
    assert r.code == 0 and "not used: quiet" in r.stderr, r.stderr


@pytest.mark.slow  # an end-to-end launch against the fake
def test_a_sweep_that_fails_midway_names_what_was_created_and_a_relaunch_adds_only_the_rest(
    repo, fake_beaker
):
    import threading
    import time

    def sweep():
        return run_cli(
            "--beaker-timeout", "3", "run", "--workspace", WS, "--name", "part", "--sweep", "seed=1,2,3",
            "--sweep-experiments", "--", "python", "train.py", "{seed}", cwd=repo.path, timeout=120,
        )  # fmt: skip

    def ours():
        return sorted(e.name for e in fake_beaker.state.experiments.values() if e.name.startswith("part-"))

    # every create waits 1 s in the server; once the first exists, creates are answered 503
    fake_beaker.faults.latency(1.0, "CreateExperiment")
    armed = threading.Event()

    def arm():
        deadline = time.monotonic() + scaled(60)
        while not ours() and time.monotonic() < deadline:
            time.sleep(0.01)
        fake_beaker.faults.unavailable(10_000, "CreateExperiment")
        armed.set()

    threading.Thread(target=arm, daemon=True).start()
    r = sweep()
    assert armed.is_set() and ours() == ["part-main__seed_1"], (ours(), r.stderr)
    first = next(e for e in fake_beaker.state.experiments.values() if e.name == "part-main__seed_1")
    assert r.code == 5, r.stderr
    assert "nothing was created" not in r.stderr
    assert f"created 1 of 3 experiments: part-main__seed_1 ({first.id})" in r.stderr, r.stderr
    assert "not created: part-main__seed_2, part-main__seed_3" in r.stderr
    assert "run the same command again" in r.stderr

    fake_beaker.faults.reset()
    r = sweep()
    assert r.code == 0, r.stderr
    assert ours() == ["part-main__seed_1", "part-main__seed_2", "part-main__seed_3"]  # no duplicate
    assert f"part-main__seed_1: launched before as {first.id}" in r.stderr
    assert r.stdout.count("\n") == 2, r.stdout  # the two new ids
    r = sweep()  # complete: launching it again launches it again
    assert r.code == 0 and len(ours()) == 6, r.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MiB tmpfs (root only): a disk that really fills, ENOSPC at every write path."""
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], capture_output=True, timeout=30
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, timeout=30)


@pytest.mark.slow
def test_a_full_disk_during_run_follow_fails_the_run_with_the_reason_and_exit_3(repo, small_disk):
    from lk_helpers import FAST_ENV, launched_id

    env = {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(small_disk / "state")}
    job = ["python3", "-c", "for i in range(400000): print('line', i)"]
    r = run_cli("run", "--local", "--no-python", "--follow", "--", *job, cwd=repo.path, env=env, timeout=180)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert r.code == 3, r.stderr[-2000:]
    assert len(errors) == 1 and "No space left on device" in errors[0], errors
    assert "Traceback" not in r.stderr
    run_id = launched_id(r.stderr)
    rec = json.loads((small_disk / "state" / "runs" / run_id / "status.json").read_text())
    assert rec["status"] == "failed" and "No space left on device" in rec["message"], rec
    listed = run_cli("list", "--local", "--json", env=env)
    assert json.loads(listed.stdout)[0]["status"] == "failed", listed.stderr
