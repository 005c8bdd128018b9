"""The local backend when things go wrong (issue 11): a supervisor killed at any moment, lost or
corrupt state, full or unwritable state dirs, old bash, too few GPUs; and `prune`. Real processes."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from inproc import run_main
from lk_helpers import FAST_ENV, launched_id, processes_with, wait_finished
from timescale import scaled

NO_PY = ("--local", "--no-python")


@pytest.fixture
def state(tmp_path) -> Path:
    return tmp_path / "lkstate"


@pytest.fixture
def env(state) -> dict[str, str]:
    return {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(state)}


def sleeper_job(marker: str) -> list[str]:
    """A job that sleeps in a child, in an escaped session (setsid) and in its main process."""
    named = f"exec -a {marker} sleep 300"
    return ["bash", "-c", f"({named}) & setsid bash -c '{named}' & {named}"]


def launch(repo, env, *args: str, cmd: list[str]) -> str:
    r = run_cli("run", *args, "--", *cmd, cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    return launched_id(r.stderr)


def listed(env) -> dict[str, dict]:
    r = run_cli("list", "--local", "--json", "--limit", "1000", env=env)
    assert r.code == 0, r.stderr
    return {x["id"]: x for x in json.loads(r.stdout)}


def supervisor_pid(state: Path, run_id: str) -> int:
    db = sqlite3.connect(state / "runs.db")
    try:
        return db.execute("SELECT supervisor_pid FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    finally:
        db.close()


def supervisor_started(state: Path) -> int:
    """Wait for the next supervisor the CLI starts (its pid in runs.db); the previous runs have none alive."""
    deadline = time.monotonic() + scaled(60)
    while time.monotonic() < deadline:
        try:
            db = sqlite3.connect(state / "runs.db", timeout=5)
            try:
                pids = [r[0] for r in db.execute("SELECT supervisor_pid FROM runs WHERE status = 'queued'")]
            finally:
                db.close()
        except sqlite3.Error:
            pids = []
        for pid in pids:
            if pid and not gone(pid):
                return pid
        time.sleep(0.001)
    raise AssertionError("no supervisor started")


def wait_for(predicate, timeout: float = 30) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def gone(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def named(marker: str) -> int:
    """How many processes run as `marker` (exec -a): the job's own sleepers, not its shells."""
    import psutil

    return sum(1 for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [""])[0] == marker)


def one_line(stderr: str) -> bool:
    """One error line (the `plan:` line a launch says first aside)."""
    stderr = "".join(x for x in stderr.splitlines(keepends=True) if not x.startswith("plan: "))
    return stderr.count("\n") == 1 and "Traceback" not in stderr


# ---- 1. the local backend survives its own death


@pytest.mark.slow
def test_killed_supervisor_is_lost_and_stop_ends_its_processes(repo, env, state, marker):
    run_id = launch(repo, env, *NO_PY, cmd=["bash", "-c", f"exec -a {marker} sleep 300"])
    wait_for(lambda: named(marker) == 1)
    os.kill(supervisor_pid(state, run_id), signal.SIGKILL)
    wait_for(lambda: gone(supervisor_pid(state, run_id)))

    info = listed(env)[run_id]
    assert info["status"] == "lost" and "supervisor" in info["message"]
    r = run_cli("follow", run_id, env=env)
    assert r.code == 5 and "is lost" in r.stderr and f"launchkit stop {run_id}" in r.stderr
    assert processes_with(marker)  # lost, not ended: the job's processes are still there
    r = run_cli("prune", "--older-than", "0s", "--dry-run", env=env)
    assert r.code == 0 and run_id not in r.stdout  # never prune a run that still has processes
    r = run_cli("stop", "--yes", run_id, env=env)
    assert r.code == 0 and "canceled" in r.stderr, r.stderr
    assert processes_with(marker) == []
    assert listed(env)[run_id]["status"] == "canceled"
    r = run_cli("stop", "--yes", run_id, env=env)
    assert r.code == 0 and "already canceled" in r.stderr
    assert run_id in run_cli("prune", "--older-than", "0s", "--dry-run", env=env).stdout


@pytest.mark.slow
@pytest.mark.timeout(900)  # 30 launches, each killed at a random moment: minutes under a loaded machine
def test_fault_kill_the_supervisor_at_random_moments(repo, env, state, marker):
    """kill -9 the supervisor of a 2-replica job at 20 random moments: each time `list` says lost
    and `stop` leaves no process of the job (including ones that escaped with setsid)."""
    rng = random.Random(int(os.environ.get("LK_FAULT_SEED", "11")))
    outcomes, phases = [], []
    for i in range(20):
        word = f"{marker}-{i}"
        cli = subprocess.Popen(
            [sys.executable, "-m", "launchkit", "run", *NO_PY, "--replicas", "2", "--", *sleeper_job(word)],
            cwd=repo.path,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            pid = supervisor_started(state)  # the moment the CLI has started it
            if i % 4 == 3:  # a quarter once every sleeper runs (2 x 3, one in its own session)
                wait_for(lambda word=word: named(word) == 6, timeout=60)
            # half of the kills while the supervisor starts up and starts replicas (~20-60 ms in)
            time.sleep(rng.uniform(0.015, 0.06) if i % 2 else rng.uniform(0, 0.3))
            os.kill(pid, signal.SIGKILL)
            run_id = launched_id(cli.communicate(timeout=60)[1])
        finally:
            cli.kill()
        wait_for(lambda pid=pid: gone(pid))
        rec = json.loads((state / "runs" / run_id / "status.json").read_text())
        phases.append(f"{rec['status']}/{len(rec['ranks'])} ranks")  # how far it got when killed
        before = listed(env)[run_id]
        assert before["status"] == "lost", before
        r = run_cli("stop", "--yes", run_id, env=env)
        assert r.code == 0, r.stderr
        assert processes_with(word) == [] and processes_with(run_id) == [], (i, r.stderr)
        after = listed(env)[run_id]
        assert after["status"] in ("canceled", "lost"), after
        if i % 4 == 3:  # its processes were running: stop ended them
            assert after["status"] == "canceled", after
        outcomes.append(after["status"])
    assert len(outcomes) == 20
    print(
        "killed at:",
        {p: phases.count(p) for p in set(phases)},
        "then:",
        {o: outcomes.count(o) for o in set(outcomes)},
    )


def test_supervisor_does_not_load_pydantic_or_sqlite():
    code = (
        "import sys; before = set(sys.modules); import launchkit.backends.local.supervisor; "
        "print(sorted({'pydantic', 'sqlite3'} & (set(sys.modules) - before)))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}  # coverage loads sqlite3
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr


@pytest.mark.slow
def test_too_old_bash_is_refused_with_the_fix(repo, env, tmp_path):
    fake = tmp_path / "oldbash"
    fake.mkdir()
    (fake / "bash").write_text('#!/bin/sh\necho "3 2"\n')
    (fake / "bash").chmod(0o755)
    r = run_cli(
        "run", *NO_PY, "--", "true", cwd=repo.path, env={**env, "PATH": f"{fake}:{os.environ['PATH']}"}
    )
    assert r.code == 3 and one_line(r.stderr), r.stderr
    assert "bash 5.1" in r.stderr and "3.2" in r.stderr and "brew install bash" in r.stderr


@pytest.mark.slow
def test_more_gpus_than_this_machine_has_are_refused(repo, env, tmp_path):
    fake = tmp_path / "gpu"
    fake.mkdir()
    (fake / "nvidia-smi").write_text('#!/bin/sh\necho "GPU 0: Fake GPU (UUID: GPU-0)"\n')
    (fake / "nvidia-smi").chmod(0o755)
    with_one = {**env, "PATH": f"{fake}:{os.environ['PATH']}"}
    r = run_cli("run", *NO_PY, "--gpus", "2", "--", "true", cwd=repo.path, env=with_one)
    assert r.code == 2 and one_line(r.stderr), r.stderr
    assert "--gpus 2: this machine has 1 GPU" in r.stderr and "--gpus 1" in r.stderr
    assert not (Path(env["LAUNCHKIT_LOCAL_HOME"]) / "runs").exists() or not any(
        (Path(env["LAUNCHKIT_LOCAL_HOME"]) / "runs").iterdir()
    )


@pytest.mark.slow
def test_bad_stop_grace_is_one_line(repo, env):
    r = run_cli("run", *NO_PY, "--", "true", cwd=repo.path, env={**env, "LAUNCHKIT_STOP_GRACE": "soon"})
    assert r.code == 2 and one_line(r.stderr) and "LAUNCHKIT_STOP_GRACE='soon'" in r.stderr


# ---- 2. state that can't be lost


@pytest.mark.slow
def test_corrupt_runs_db_is_rebuilt_from_the_run_dirs(repo, env, state):
    done = launch(repo, env, *NO_PY, cmd=["bash", "-c", "exit 3"])
    wait_finished(done, env)
    (state / "runs.db").write_bytes(b"this is not a database" * 100)
    for extra in ("runs.db-wal", "runs.db-shm"):
        (state / extra).unlink(missing_ok=True)
    r = run_cli("list", "--local", "--json", env=env)
    assert r.code == 0, r.stderr
    assert r.stderr.count("\n") == 1 and "rebuilt" in r.stderr and "runs.db" in r.stderr
    (info,) = json.loads(r.stdout)
    assert (info["id"], info["status"], info["exit_code"]) == (done, "failed", 3)
    assert any(p.name.startswith("runs.db.corrupt-") for p in state.iterdir())
    assert run_cli("list", "--local", env=env).stderr == ""  # once

    db = sqlite3.connect(state / "runs.db")  # now damage a page inside an otherwise valid file
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    with open(state / "runs.db", "r+b") as f:
        f.seek(4096)
        f.write(b"\xff" * 4096)
    r = run_cli("list", "--local", "--json", env=env)
    assert r.code == 0 and "rebuilt" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert [x["id"] for x in json.loads(r.stdout)] == [done]


@pytest.mark.slow
def test_deleting_runs_db_while_a_job_runs_loses_nothing(repo, env, state, marker):
    earlier = [launch(repo, env, *NO_PY, cmd=["true"]) for _ in range(3)]
    for run_id in earlier:
        wait_finished(run_id, env)
    running = launch(repo, env, *NO_PY, "--replicas", "2", cmd=sleeper_job(marker))
    wait_for(lambda: named(marker) == 6)
    for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
        (state / name).unlink(missing_ok=True)
    r = run_cli("list", "--local", "--json", env=env)
    assert r.code == 0 and "rebuilt" in r.stderr, r.stderr
    runs = {x["id"]: x["status"] for x in json.loads(r.stdout)}
    assert runs == {**dict.fromkeys(earlier, "succeeded"), running: "running"}
    r = run_cli("stop", "--yes", running, env=env)
    assert r.code == 0 and "canceled" in r.stderr, r.stderr
    assert processes_with(marker) == []
    assert listed(env)[running]["status"] == "canceled"


@pytest.mark.slow
def test_state_dir_that_is_a_file_is_one_line(repo, env, tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    for args in (("list", "--local"), ("run", *NO_PY, "--", "true")):
        r = run_cli(*args, cwd=repo.path, env={**env, "LAUNCHKIT_LOCAL_HOME": str(f)})
        assert r.code == 2 and one_line(r.stderr), r.stderr
        assert f"LAUNCHKIT_LOCAL_HOME={f} is a file" in r.stderr


def test_unwritable_state_dir_is_one_line(repo, env, tmp_path):
    if os.geteuid() == 0:  # root writes anywhere: use a place no one can create directories in
        target = Path("/proc/self/launchkit-state")
    else:
        target = tmp_path / "ro"
        target.mkdir()
        target.chmod(stat.S_IRUSR | stat.S_IXUSR)
    r = run_main("run", *NO_PY, "--", "true", cwd=repo.path, env={**env, "LAUNCHKIT_LOCAL_HOME": str(target)})
    assert r.code == 3 and one_line(r.stderr), r.stderr
    assert "cannot write the local state" in r.stderr and "LAUNCHKIT_LOCAL_HOME" in r.stderr


def limited(args: list[str], kib: int, env, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    """`launchkit ARGS` with files limited to `kib` KiB (RLIMIT_FSIZE): a full disk, without root."""
    script = f'ulimit -f {kib} && exec "$@"'
    return subprocess.run(
        ["bash", "-c", script, "limited", sys.executable, "-m", "launchkit", *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_full_disk_at_launch_fails_cleanly(repo, env, state):
    first = launch(repo, env, *NO_PY, cmd=["true"])
    wait_finished(first, env)
    r = limited(["run", *NO_PY, "--", "true"], 8, env, cwd=repo.path)  # git fits, the spec not
    assert r.returncode == 3 and one_line(r.stderr), r.stderr
    assert "cannot write the local state" in r.stderr
    assert [p.name for p in (state / "runs").iterdir()] == [first]
    assert list(listed(env)) == [first]


@pytest.mark.slow
def test_full_disk_while_following_stops_the_run_with_one_line(repo, env, state):
    job = ["python3", "-c", "import sys\nfor i in range(200000): print('line', i)"]
    r = limited(["run", *NO_PY, "--follow", "--", *job], 512, env, cwd=repo.path)
    assert r.returncode == 3, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "log" in errors[0] and "File too large" in errors[0], r.stderr
    assert "Traceback" not in r.stderr
    run_id = launched_id(r.stderr)
    info = wait_finished(run_id, env)
    assert info["status"] == "failed" and "log" in info["message"]
    assert processes_with(run_id) == []


# ---- prune


@pytest.mark.slow
def test_prune_removes_old_ended_runs_only(repo, env, state, marker):
    old = [launch(repo, env, *NO_PY, cmd=["true"]) for _ in range(2)]
    for run_id in old:
        wait_finished(run_id, env)
    running = launch(repo, env, *NO_PY, cmd=["bash", "-c", f"exec -a {marker} sleep 300"])
    try:
        r = run_cli("prune", "--older-than", "0s", "--dry-run", env=env)
        assert r.code == 0, r.stderr
        assert set(r.stdout.split()) >= set(old) and running not in r.stdout
        assert all((state / "runs" / x).exists() for x in old)
        r = run_cli("prune", "--older-than", "0s", env=env)  # stdin is not a terminal, no --yes
        assert r.code == 2 and "--yes" in r.stderr and one_line(r.stderr)
        assert run_cli("prune", "--older-than", "7d", "--yes", env=env).stdout == ""  # nothing that old
        r = run_cli("prune", "--older-than", "0s", "--yes", env=env)
        assert r.code == 0 and "removed 2 runs" in r.stderr, r.stderr
        assert not any((state / "runs" / x).exists() for x in old)
        assert list(listed(env)) == [running]
        r = run_cli("prune", "--older-than", "soon", env=env)
        assert r.code == 2 and "--older-than" in r.stderr and one_line(r.stderr)
    finally:
        run_cli("stop", "--yes", running, env=env)


# ---- 5. the new user's path


@pytest.mark.slow
def test_latest_follows_the_backend_of_the_last_run(repo, env):
    run_id = launch(repo, env, *NO_PY, cmd=["bash", "-c", "echo from-the-local-job"])
    r = run_cli("follow", "--latest", env=env)  # no --local: the last run was local
    assert r.code == 0 and "from-the-local-job" in r.stdout, r.stderr
    r = run_cli("logs", "--latest", env=env)
    assert r.code == 0 and "from-the-local-job" in r.stdout, r.stderr
    r = run_cli("stop", "--latest", "--yes", env=env)
    assert r.code == 0 and f"{run_id} already succeeded" in r.stderr
    # told otherwise, it goes to Beaker (which has no credentials here)
    r = run_cli("follow", "--latest", "--backend", "beaker", env=env)
    assert r.code != 0 and "Beaker" in r.stderr


@pytest.mark.slow
def test_upload_links_of_a_lost_run_go_with_stop_and_prune(repo, env, state, marker, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("x\n")  # an empty directory is refused
    links = [tmp_path / "mnt" / "a", tmp_path / "mnt" / "b"]
    ids = []
    for link in links:
        ids.append(
            launch(
                repo,
                env,
                *NO_PY,
                "--upload",
                f"{data}:{link}",
                cmd=["bash", "-c", f"exec -a {marker} sleep 300"],
            )
        )
        wait_for(link.is_symlink)
    wait_for(lambda: named(marker) == 2)
    for pid in [supervisor_pid(state, run_id) for run_id in ids]:
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda pid=pid: gone(pid))
    # stop: the job ends and its link goes with it (its supervisor would have removed it)
    assert run_cli("stop", "--yes", ids[0], env=env).code == 0
    assert not links[0].is_symlink() and links[1].is_symlink()
    # prune of a lost run whose processes are gone (killed outside launchkit)
    for pid in processes_with(marker):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: named(marker) == 0)
    r = run_cli("prune", "--older-than", "0s", "--yes", env=env)
    assert r.code == 0, r.stderr
    assert not links[1].is_symlink() and data.is_dir()
