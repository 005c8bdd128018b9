"""How a local run's supervisor starts (backends/local/spawn.py): a new interpreter, detached, holding
nothing of the CLI's but the run's lock, and every replica in the run's cgroup before it runs. Real
processes."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from lk_helpers import FAST_ENV, launched_id
from test_local_reliability import gone, wait_for
from test_safety_local import cgroup_usable

NO_PY = ("--local", "--no-python")


def _fds(pid: int) -> list[str]:
    folder = f"/proc/{pid}/fd"
    out = []
    for name in os.listdir(folder):
        try:
            out.append(os.readlink(os.path.join(folder, name)))
        except OSError:
            pass
    return out


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_the_supervisor_keeps_nothing_of_the_cli_but_the_runs_lock(repo, tmp_path, marker):
    state = tmp_path / "lkstate"
    env = {**os.environ, **FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(state)}
    job = f"cat /proc/self/cgroup; exec -a {marker} sleep 300"
    theirs_r, theirs_w = os.pipe()  # a descriptor the CLI's caller gave it: only the CLI may hold it
    try:
        cli = subprocess.run(
            [sys.executable, "-m", "launchkit", "run", *NO_PY, "--", "bash", "-c", job],
            cwd=repo.path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            pass_fds=(theirs_w,),
        )
        os.close(theirs_w)
        theirs_w = -1
        assert cli.returncode == 0, cli.stderr
        run_id = launched_id(cli.stderr)
        # the CLI has exited: its caller's pipe is closed unless the supervisor kept it
        assert select.select([theirs_r], [], [], 10)[0], "the supervisor holds the CLI's caller's pipe"
        assert os.read(theirs_r, 1) == b""
    finally:
        os.close(theirs_r)
        if theirs_w >= 0:
            os.close(theirs_w)
    rdir = state / "runs" / run_id
    log = rdir / "logs" / "replica-0.log"
    wait_for(lambda: log.exists() and b"\n" in log.read_bytes())
    rec = json.loads((rdir / "status.json").read_text())
    pid = rec["supervisor_pid"]
    try:
        assert Path(f"/proc/{pid}/comm").read_text().strip() == "lk-supervisor"
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"launchkit.backends.local.supervisor" in cmdline, cmdline  # exec'd, never a fork
        held = _fds(pid)
        assert str(rdir / "supervisor.lock") in held  # the lock: held for as long as it lives
        assert not [f for f in held if "runs.db" in f], held  # nothing of the CLI's
        assert os.getsid(pid) == pid  # a session of its own
        if rec.get("cgroup"):  # the job's `cat /proc/self/cgroup` comes after the runtime's first line
            wait_for(lambda: log.read_text().count("\n") >= 2)
            assert f"/launchkit-{run_id}" in log.read_text(), log.read_text()
    finally:
        r = run_cli("stop", "--yes", run_id, env={**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(state)})
    assert r.code == 0, r.stderr
    wait_for(lambda: gone(pid))


@pytest.mark.skipif(not cgroup_usable(), reason="no writable cgroup v2")
@pytest.mark.parametrize("replicas", [1, 3])
def test_each_replica_runs_in_the_run_cgroup_from_its_first_instruction(tmp_path, replicas):
    """The supervisor moves replicas into the run's cgroup in threads (the kernel takes ~10 ms): the
    gate opens only once that is done. The job here is the replica's first command after its gate."""
    from launchkit.backends.local import record

    run_id = f"local-test-{os.getpid()}-{replicas}"
    rdir = tmp_path / "runs" / run_id
    rdir.mkdir(parents=True)
    task = {"name": "main", "command": ["cat", "/proc/self/cgroup"], "replicas": replicas}
    (rdir / "spec.json").write_text(json.dumps({"tasks": [task]}))
    (rdir / "meta.json").write_text("{}")
    record.write(str(rdir), record.new(run_id, "t", replicas))
    r = subprocess.run(
        [sys.executable, "-m", "launchkit.backends.local.supervisor", str(rdir)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LAUNCHKIT_CGROUP": "1"},
    )
    assert r.returncode == 0, r.stderr
    rec = record.read(str(rdir))
    assert rec is not None and rec["status"] == "succeeded", rec
    for rank in range(replicas):
        text = (rdir / "logs" / f"replica-{rank}.log").read_text()
        assert f"/launchkit-{run_id}\n" in text, text


@pytest.mark.slow
def test_gpus_are_counted_once_per_launch(repo, tmp_path):
    """nvidia-smi takes tens of ms on a GPU machine: the count the CLI read to check --gpus is the one
    the supervisor shares out, not read again before the job starts."""
    tools, calls = tmp_path / "tools", tmp_path / "calls"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text(
        f'#!/bin/sh\necho "$*" >> {calls}\necho "GPU 0: Fake (UUID: GPU-0)"\necho "GPU 1: Fake (UUID: GPU-1)"\n'
    )
    smi.chmod(0o755)
    env = {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lkstate")}
    env["PATH"] = f"{tools}:{os.environ['PATH']}"
    job = 'echo "visible=$CUDA_VISIBLE_DEVICES count=$BEAKER_ASSIGNED_GPU_COUNT"'
    r = run_cli("run", *NO_PY, "--gpus", "1", "--follow", "--", "bash", "-c", job, cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    assert "visible=0 count=1" in r.stdout
    assert calls.read_text().splitlines().count("-L") == 1  # (the job's own nvidia-smi aside)
