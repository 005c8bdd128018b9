"""The local backend on the fast tier: the CLI in this process (tests/inproc.py), the backend's methods
called directly, and real supervisors running real bash jobs (--no-python: no uv, no clone of a venv).
Waits are on events: follow returns when the run ends; a job says it is up through a file."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import signal
import time
from pathlib import Path

import pytest

from inproc import run_main
from lk_helpers import FAST_ENV, launched_id, processes_with, supervisor_gone
from timescale import scaled

pytestmark = pytest.mark.timeout(360)

NO_PY = ("--local", "--no-python")


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "lkstate"
    monkeypatch.setenv("LAUNCHKIT_LOCAL_HOME", str(home))
    for name, value in FAST_ENV.items():
        monkeypatch.setenv(name, value)
    return home


def launch(repo, *args: str) -> str:
    r = run_main("run", *NO_PY, *args, cwd=repo.path)
    assert r.code == 0, r.stderr
    return launched_id(r.stderr)


def backend():
    from launchkit.backends.local.backend import LocalBackend

    return LocalBackend()


def wait_for_file(path: Path, timeout: float = 60) -> None:
    """Until the job creates `path` (the timeout only ends a hang)."""
    deadline = time.monotonic() + scaled(timeout)
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


TWO_REPLICAS = (
    'echo "replica $BEAKER_REPLICA_RANK says hi"; printf "\\xff raw\\n"; '
    'echo "r$BEAKER_REPLICA_RANK" > "$RESULTS_DIR/out.txt"; '
    'if [ "$BEAKER_REPLICA_RANK" = 1 ]; then echo failing >&2; exit 7; fi'
)


def test_a_run_of_two_replicas_through_every_command(repo, state, tmp_path):
    r = run_main(
        "run",
        *NO_PY,
        "--replicas",
        "2",
        "--name",
        "two",
        "--follow",
        "--",
        "bash",
        "-c",
        TWO_REPLICAS,
        cwd=repo.path,
    )
    run_id = launched_id(r.stderr)
    assert r.code == 7, r.stderr
    assert "[0] replica 0 says hi" in r.stdout and "[1] replica 1 says hi" in r.stdout

    b = backend()
    run = b.get(run_id)
    assert (run.status.value, run.exit_code, run.replicas, run.name) == ("failed", 7, 2, "two")
    assert run.end is not None and "replica 1" in run.end.line and "exit code 7" in run.end.line, run.end

    # logs: raw bytes, per replica, head/tail/since/timestamps
    r = run_main("logs", run_id, "--replica", "1")
    assert r.code == 0 and "replica 1 says hi" in r.stdout and "replica 0" not in r.stdout
    assert "\udcff raw" in r.stdout  # the job's byte, not decoded
    everything = run_main("logs", run_id).stdout
    assert everything.count("says hi") == 2 and "[0] " in everything and "[1] " in everything
    assert run_main("logs", run_id, "--tail", "1").stdout.count("\n") == 1
    assert run_main("logs", run_id, "--tail", "0").stdout == ""
    zero = run_main("logs", run_id, "--replica", "0").stdout
    assert "replica 0 says hi\n" in zero and "[0]" not in zero  # one replica: no prefix
    assert run_main("logs", run_id, "--head", "1", "--replica", "0").stdout == zero.splitlines(True)[0]
    stamped = run_main("logs", run_id, "--timestamps", "--replica", "0").stdout.splitlines()
    assert all(dt.datetime.fromisoformat(line.split(" ", 1)[0]).year > 2000 for line in stamped)
    assert run_main("logs", run_id, "--since", "2999-01-01T00:00:00").stdout == ""
    assert run_main("logs", run_id, "--since", "1h").stdout == everything
    r = run_main("logs", run_id, "--replica", "5")
    assert r.code == 4 and "has no replica 5" in r.stderr and "0..1" in r.stderr
    r = run_main("logs", run_id, "--attempt", "2")
    assert r.code == 4 and "has no attempt 2" in r.stderr and "drop --attempt" in r.stderr
    out_dir = tmp_path / "logs"
    assert run_main("logs", run_id, "-o", f"{out_dir}/").code == 0
    assert sorted(os.listdir(out_dir)) and all((out_dir / f).stat().st_size for f in os.listdir(out_dir))

    # follow of an ended run: its output, then its exit code
    r = run_main("follow", run_id, "--replica", "0")
    assert r.code == 7 and "replica 0 says hi" in r.stdout and "replica 1" not in r.stdout

    # why, list, results
    r = run_main("why", run_id, "--json")
    assert r.code == 0 and json.loads(r.stdout)["end"]["exit_code"] in (7, None)
    listed = json.loads(run_main("list", "--local", "--json").stdout)
    assert [(x["id"], x["status"], x["exit_code"]) for x in listed] == [(run_id, "failed", 7)]
    assert json.loads(run_main("list", "--local", "--json", "--status", "succeeded").stdout) == []
    table = run_main("list", "--local").stdout.splitlines()
    assert table[0].split()[:3] == ["ID", "NAME", "STATUS"] and run_id in table[1]
    r = run_main("results", run_id, "-o", str(tmp_path / "res"))
    assert r.code == 0, r.stderr
    assert (tmp_path / "res/replica-0/out.txt").read_text() == "r0\n"
    assert (tmp_path / "res/replica-1/out.txt").read_text() == "r1\n"
    assert b.results_location(run).endswith("replica-*/results")
    assert len(b.download_results(run, None)) == 2
    assert b.size(run) > 0
    assert b.latest().id == run_id  # type: ignore[union-attr]

    # prune: an ended run, once old enough (and its supervisor gone)
    supervisor_gone(state / "runs" / run_id)
    r = run_main("prune", "--older-than", "0s", "--dry-run")
    assert r.code == 0 and run_id in r.stdout + r.stderr
    assert (state / "runs" / run_id).is_dir()
    r = run_main("prune", "--older-than", "0s", "--yes")
    assert r.code == 0, r.stderr
    assert not (state / "runs" / run_id).exists()
    r = run_main("logs", run_id)
    assert r.code == 4 and "no local run" in r.stderr


def test_stop_ends_the_run_and_every_process(repo, state, tmp_path, marker):
    up = tmp_path / "up"
    job = f"sleep 300 & touch {up}; exec -a {marker} sleep 300"
    run_id = launch(repo, "--", "bash", "-c", job)
    wait_for_file(up)
    b = backend()
    assert b.get(run_id).status.value == "running"
    listed = json.loads(run_main("list", "--local", "--json", "--status", "running").stdout)
    assert [x["id"] for x in listed] == [run_id]
    r = run_main("prune", "--older-than", "0s", "--yes")
    assert r.code == 0 and (state / "runs" / run_id).is_dir()  # a running run is never pruned
    with pytest.raises(Exception, match="is running"):
        b.remove(b.get(run_id))
    r = run_main("stop", run_id)  # no terminal and no --yes: refused at once
    assert r.code == 2 and "--yes" in r.stderr
    r = run_main("stop", "--yes", run_id)
    assert r.code == 0 and "canceled" in r.stderr, r.stderr
    assert processes_with(marker) == []
    run = b.get(run_id)
    assert run.status.value == "canceled" and run.end is not None and "launchkit stop" in run.end.line
    assert b.stop(run).status.value == "canceled"  # stopping an ended run changes nothing
    r = run_main("why", run_id)
    assert r.code == 0 and "canceled" in r.stdout


def test_a_run_whose_supervisor_died_is_lost_and_stop_ends_what_it_left(repo, state, tmp_path, marker):
    up = tmp_path / "up"
    run_id = launch(repo, "--", "bash", "-c", f"touch {up}; exec -a {marker} sleep 300")
    wait_for_file(up)
    rec = json.loads((state / "runs" / run_id / "status.json").read_text())
    os.kill(rec["supervisor_pid"], signal.SIGKILL)
    b = backend()
    deadline = time.monotonic() + scaled(60)
    while (run := b.get(run_id)).status.value != "lost":
        assert time.monotonic() < deadline, run
        time.sleep(0.01)
    assert "died before the run ended" in (run.message or "") and "still running" in (run.message or "")
    assert run.end is not None and f"launchkit stop {run_id}" in (run.end.fix or "")
    r = run_main("follow", run_id)
    assert r.code == 5 and "is lost" in r.stderr
    assert b.prunable(dt.timedelta(0)) == []  # its job still runs: not prunable
    r = run_main("stop", "--yes", run_id)
    assert r.code == 0, r.stderr
    assert processes_with(marker) == []
    run = b.get(run_id)
    assert run.status.value == "canceled" and "after its supervisor died" in (run.message or "")
    assert [x.id for x in b.prunable(dt.timedelta(0))] == [run_id]


def test_a_secret_comes_from_the_launching_shell(repo, state, monkeypatch):
    r = run_main("run", *NO_PY, "--env-secret", "TOKEN=LK_TEST_SECRET", "--", "true", cwd=repo.path)
    assert r.code == 3 and "LK_TEST_SECRET is not set" in r.stderr
    assert not list(state.glob("runs/local-*"))
    monkeypatch.setenv("LK_TEST_SECRET", "s3cret-value")
    run_id = launch(repo, "--env-secret", "TOKEN=LK_TEST_SECRET", "--", "bash", "-c", 'echo "token=$TOKEN"')
    r = run_main("follow", run_id)
    assert r.code == 0 and "token=***" in r.stdout and "s3cret" not in r.stdout
    assert "token=s3cret-value" in run_main("logs", "--no-mask", run_id).stdout
    assert backend().secret_values(backend().get(run_id)) == {"LK_TEST_SECRET": "s3cret-value"}
    assert not any(
        "s3cret" in p.read_text(errors="replace") for p in (state / "runs" / run_id).rglob("*.json")
    )


def test_refusals_before_anything_runs(repo, state, tmp_path, monkeypatch):
    r = run_main("list", "--local", "--author", "bob")
    assert r.code == 2 and "local runs are all yours" in r.stderr
    r = run_main("run", *NO_PY, "--gpus", "1", "--", "true", cwd=repo.path)
    assert r.code == 2 and "--gpus 1: this machine has" in r.stderr, r.stderr
    r = run_main("results", "local-nope")
    assert r.code == 4 and "no local run 'local-nope'" in r.stderr

    # bash older than 5.1 (macOS's 3.2): one line with the fix
    from launchkit.backends.local.backend import check_bash
    from launchkit.errors import PreconditionError

    old = tmp_path / "oldbash"
    old.mkdir()
    (old / "bash").write_text('#!/bin/sh\necho "3 2"\n')
    (old / "bash").chmod(0o755)
    monkeypatch.setenv("PATH", f"{old}:{os.environ['PATH']}")
    with pytest.raises(PreconditionError, match=r"needs bash 5.1 or newer, but .*oldbash/bash is 3.2"):
        check_bash(tmp_path / "memo")
    assert not (tmp_path / "memo").exists()


def test_a_bash_memo_skips_the_check_until_bash_changes(tmp_path):
    from launchkit.backends.local.backend import check_bash

    memo = tmp_path / "memo"
    check_bash(memo)
    first = memo.read_text()
    assert first and os.path.realpath(first.split()[0]).endswith("bash")
    memo.write_text("stale\n")
    check_bash(memo)
    assert memo.read_text() == first


def test_find_gpus_and_the_gpu_check_read_nvidia_smi(repo, tmp_path, monkeypatch, state):
    from launchkit.backends.local.backend import check_gpus
    from launchkit.core.specview import TaskView
    from launchkit.errors import UsageError

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--query-gpu=index,name*) printf "0, NVIDIA H100, 81559, 3, 0\\n1, NVIDIA H100, 81559, 80000, 97\\n" ;;\n'
        '*-L*) printf "GPU 0: NVIDIA H100 (UUID: a)\\nGPU 1: NVIDIA H100 (UUID: b)\\n" ;; esac\n'
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    rows = backend().find_gpus()
    assert [(r["index"], r["name"], r["memory_used_mib"], r["utilization_pct"]) for r in rows] == [
        (0, "NVIDIA H100", 3, 0),
        (1, "NVIDIA H100", 80000, 97),
    ]
    r = run_main("find-gpus", "--local", "--json")
    assert r.code == 0 and [g["index"] for g in json.loads(r.stdout)] == [0, 1], r.stdout + r.stderr
    assert check_gpus(TaskView({"resources": {}})) is None
    assert check_gpus(TaskView({"resources": {"gpuCount": 2}})) == 2
    with pytest.raises(UsageError, match="--gpus 3: this machine has 2 GPUs"):
        check_gpus(TaskView({"resources": {"gpuCount": 3}}))
    # each replica its own GPU; --gpus 0 hides them all
    show = 'echo "gpus=$CUDA_VISIBLE_DEVICES count=${BEAKER_ASSIGNED_GPU_COUNT:-}"'
    r = run_main(
        "run", *NO_PY, "--gpus", "1", "--replicas", "2", "--follow", "--", "bash", "-c", show, cwd=repo.path
    )
    assert r.code == 0 and "[0] gpus=0 count=1" in r.stdout and "[1] gpus=1 count=1" in r.stdout, r.stdout
    r = run_main("run", *NO_PY, "--gpus", "0", "--follow", "--", "bash", "-c", show, cwd=repo.path)
    assert r.code == 0 and "gpus= count=0" in r.stdout, r.stdout


def test_follow_writes_what_a_running_job_writes_until_it_ends(repo, state, tmp_path):
    go = tmp_path / "go"
    run_id = launch(
        repo, "--", "bash", "-c", f"echo first; until [ -e {go} ]; do sleep 0.01; done; echo second; exit 3"
    )

    class Out(io.BytesIO):
        def write(self, data: bytes) -> int:  # the first line seen: let the job go on
            if b"first" in data:
                go.touch()
            return super().write(data)

    b = backend()
    out = Out()
    assert b.follow(b.get(run_id), out) == 3
    assert out.getvalue().endswith(b"first\nsecond\n")
    out = Out()
    assert b.follow(b.get(run_id), out, tail=1) == 3
    assert out.getvalue() == b"second\n"


def test_an_upload_is_linked_for_the_run_and_unlinked_after(repo, state, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("uploaded\n")
    mount = tmp_path / "mnt" / "data"
    r = run_main(
        "run", *NO_PY, "--upload", f"{data}:{mount}", "--follow", "--", "bash", "-c", f"cat {mount}/x.txt",
        cwd=repo.path,
    )  # fmt: skip
    assert r.code == 0 and "uploaded" in r.stdout, r.stderr
    supervisor_gone(state / "runs" / launched_id(r.stderr))  # its last step removes the link
    assert not mount.exists() and not mount.is_symlink()  # the link launchkit made is gone with the run
    assert json.loads((state / "upload-links.json").read_text()) == {}
    mount.parent.mkdir(parents=True, exist_ok=True)
    mount.write_text("in the way")
    r = run_main("run", *NO_PY, "--upload", f"{data}:{mount}", "--", "true", cwd=repo.path)
    assert r.code == 3 and f"a local run cannot put it at {mount}" in r.stderr, r.stderr
    assert mount.read_text() == "in the way"


def test_a_failed_replica_stops_its_sibling_and_both_run_again(repo, state, tmp_path, monkeypatch):
    monkeypatch.setenv("LAUNCHKIT_CGROUP", "0")  # the run's processes found through the recorded tree
    ready, failed = tmp_path / "ready0", tmp_path / "failed1"
    job = (
        f'if [ ! -e {failed} ]; then if [ "$BEAKER_REPLICA_RANK" = 0 ]; then touch {ready}; exec sleep 300; fi; '
        f"until [ -e {ready} ]; do sleep 0.01; done; touch {failed}; exit 3; fi; "
        'echo "ok $BEAKER_REPLICA_RANK"'
    )
    r = run_main(
        "run", *NO_PY, "--replicas", "2", "--propagate-failure", "--retries", "1", "--follow",
        "--", "bash", "-c", job, cwd=repo.path,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert "[0] ok 0" in r.stdout and "[1] ok 1" in r.stdout
    run_id = launched_id(r.stderr)
    run = backend().get(run_id)
    assert run.status.value == "succeeded" and run.attempts == 2
    assert (
        run.end is not None and "--attempt 1" in (run.end.fix or "") and "--replica 1" in (run.end.fix or "")
    )
    assert run_main("logs", run_id, "--attempt", "1", "--replica", "1").stdout.count("ok") == 0
    assert run_main("logs", run_id, "--attempt", "2", "--replica", "0").stdout.endswith("ok 0\n")
    rec = json.loads((state / "runs" / run_id / "status.json").read_text())
    assert rec["cgroup"] is None
    first = {(j["replica"], j["attempt"]): j["status"] for j in rec["jobs"]}
    assert first == {(0, 1): "canceled", (1, 1): "failed", (0, 2): "succeeded", (1, 2): "succeeded"}


def test_the_task_timeout_stops_the_run_and_says_which(repo, state):
    r = run_main(
        "run", *NO_PY, "--task-timeout", "1s", "--memory", "256MiB", "--follow",
        "--", "bash", "-c", "echo up; exec sleep 300", cwd=repo.path,
    )  # fmt: skip
    run_id = launched_id(r.stderr)
    run = backend().get(run_id)
    assert run.status.value == "canceled" and "--task-timeout 1s passed" in (run.message or ""), run
    assert run.end is not None and "raise the timeout" in (run.end.fix or ""), run.end
    rec = json.loads((state / "runs" / run_id / "status.json").read_text())
    assert rec["memory"] == "256MiB" and isinstance(rec["memory_enforced"], bool)


def _ended_run(state: Path, run_id: str, status: str = "succeeded") -> None:
    """A run directory as a finished supervisor leaves it (no process)."""
    from launchkit.backends.local import record

    rdir = state / "runs" / run_id
    rdir.mkdir(parents=True)
    rec = record.new(run_id, run_id, 1)
    rec.update(status=status, exit_code=0 if status == "succeeded" else 1, finished=rec["created"])
    record.write(rdir, rec)


def test_runs_db_is_rebuilt_from_the_run_directories(state):
    from launchkit.backends.local.store import Store

    warnings: list[str] = []
    _ended_run(state, "local-a")
    _ended_run(state, "local-b", "failed")
    old = state / "runs" / "local-old"  # from an older launchkit: a spec, no record
    old.mkdir()
    (old / "spec.json").write_text(json.dumps({"description": "older", "tasks": [{"replicas": 2}]}))
    (state / "runs" / "local-junk").mkdir()  # neither: not a run
    store = Store(state, warn=warnings.append)
    assert warnings == ["runs.db was missing; rebuilt it from 3 run directories"]
    rows = {row["id"]: row for row in store.runs(limit=None)}
    assert sorted(rows) == ["local-a", "local-b", "local-old"]
    assert (rows["local-old"]["status"], rows["local-old"]["replicas"], rows["local-old"]["name"]) == (
        "lost",
        2,
        "older",
    )
    assert [r["id"] for r in store.runs(limit=None, statuses=["failed"])] == ["local-b"]
    assert [r["id"] for r in store.runs(limit=None, text="-a")] == ["local-a"]
    assert store.runs(limit=None, since=time.time() + 60) == []
    store.delete("local-a")
    assert store.run("local-a") is None and store.run("local-b") is not None
    store.db.close()

    # an unreadable runs.db is set aside (kept) and rebuilt
    (state / "runs.db").write_bytes(b"this is not a database" * 100)
    for stale in ("runs.db-wal", "runs.db-shm"):
        (state / stale).unlink(missing_ok=True)
    warnings.clear()
    store = Store(state, warn=warnings.append)
    assert (
        len(warnings) == 1
        and "runs.db was unreadable" in warnings[0]
        and "kept as runs.db.corrupt-" in warnings[0]
    )
    assert sorted(r["id"] for r in store.runs(limit=None)) == ["local-a", "local-b", "local-old"]
    assert list(state.glob("runs.db.corrupt-*"))


def test_a_state_dir_that_is_a_file_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "afile"
    path.write_text("x")
    monkeypatch.setenv("LAUNCHKIT_LOCAL_HOME", str(path))
    r = run_main("list", "--local")
    assert r.code == 2 and f"LAUNCHKIT_LOCAL_HOME={path} is a file, not a directory" in r.stderr, r.stderr
