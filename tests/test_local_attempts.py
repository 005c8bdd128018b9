"""A local run as replicas x attempts (issue 32, item 5): a replica that fails is named with its own
exit code and its siblings are stopped for it (propagateFailure); `--retries` makes new attempts, and
a run whose retry succeeds succeeded. follow, why, list --json and logs --replica/--attempt all tell
it from the run model (core/runs.py). Real supervisors and jobs; each job waits on the state it needs
(a file another replica made), never on time."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from lk_helpers import FAST_ENV, launched_id, processes_with, wait_finished
from mn_helpers import mn_bin  # noqa: F401 - a fixture (skips without a CPU torch)
from timescale import scaled

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

PY = sys.executable
NO_PY = ("--local", "--no-python")

# Replica 0 starts and waits; replica 1 fails once replica 0 runs (it is then stopped for it).
REPLICA_FAILS = """
import os, sys, time
flag = sys.argv[1]
if os.environ["BEAKER_REPLICA_RANK"] == "0":
    open(flag, "w").close()
    print("replica 0 is up", flush=True)
    time.sleep(300)
while not os.path.exists(flag):
    time.sleep(0.01)
print("replica 1 gives up", flush=True)
sys.exit(7)
"""

# The first attempt exits 3 (and leaves a mark outside the run); the next one finds it and succeeds.
FAILS_ONCE = """
import os, sys
mark = sys.argv[1]
print("attempt with", os.environ["BEAKER_JOB_ID"], flush=True)
if not os.path.exists(mark):
    open(mark, "w").close()
    print("first attempt fails", flush=True)
    sys.exit(3)
print("second attempt works", flush=True)
"""


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lkstate")}


def _json(*args: str, env: dict[str, str]) -> dict:
    r = run_cli(*args, "--json", env=env, timeout=60)
    assert r.code == 0, r.stderr
    return json.loads(r.stdout)


def test_a_failing_replica_is_named_with_its_exit_code(repo, env, tmp_path):
    flag = str(tmp_path / "replica-0-up")
    r = run_cli(
        "run", *NO_PY, "--replicas", "2", "--propagate-failure", "--follow",
        "--", PY, "-c", REPLICA_FAILS, flag, cwd=repo.path, env=env, timeout=120,
    )  # fmt: skip
    run_id = launched_id(r.stderr)
    told = "replica 1 of 2 failed with exit code 7 (replica 0 was stopped for it)"
    assert r.code == 7, r.stderr
    assert f"{run_id} {told}" in r.stderr, r.stderr
    assert f"`launchkit logs {run_id} --replica 1 --tail 50`" in r.stderr, r.stderr
    assert "[0] replica 0 is up" in r.stdout and "[1] replica 1 gives up" in r.stdout

    why = run_cli("why", run_id, env=env, timeout=60)
    assert why.code == 0 and why.stdout.startswith(f"{run_id} {told}; "), why.stdout
    listed = next(x for x in _json("list", "--local", env=env) if x["id"] == run_id)
    assert (listed["status"], listed["exit_code"], listed["end"]["line"]) == ("failed", 7, told), listed
    assert listed["message"] == told
    logs = run_cli("logs", run_id, "--replica", "1", env=env, timeout=60)
    assert logs.code == 0 and logs.stdout.endswith("replica 1 gives up\n"), logs.stdout
    assert "replica 0" not in logs.stdout
    rec = json.loads((Path(env["LAUNCHKIT_LOCAL_HOME"]) / "runs" / run_id / "status.json").read_text())
    jobs = {j["replica"]: j for j in rec["jobs"]}
    assert (jobs[1]["status"], jobs[1]["exit_code"]) == ("failed", 7)
    assert (jobs[0]["status"], jobs[0]["stopped_for"]) == ("canceled", 1)
    assert jobs[0]["finished"] >= jobs[1]["finished"] >= jobs[1]["started"]


def test_without_propagate_failure_the_other_replica_runs_on(repo, env, tmp_path):
    """Beaker's default without --propagate-failure: the failed replica does not stop the others.
    Replica 0 goes on once replica 1's job is over (its process group gone: the supervisor has seen
    its end), and succeeds."""
    script = """
import os, sys, time
up, gone = sys.argv[1], sys.argv[2]
if os.environ["BEAKER_REPLICA_RANK"] == "1":
    while not os.path.exists(up):
        time.sleep(0.01)
    with open(gone + ".tmp", "w") as f:
        f.write(str(os.getpgid(0)))
    os.rename(gone + ".tmp", gone)
    print("replica 1 gives up", flush=True)
    sys.exit(7)
open(up, "w").close()
while not os.path.exists(gone):
    time.sleep(0.01)
group = int(open(gone).read())
while True:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        break
    time.sleep(0.01)
print("replica 0 done", flush=True)
"""
    r = run_cli(
        "run", *NO_PY, "--replicas", "2", "--follow",
        "--", PY, "-c", script, str(tmp_path / "up"), str(tmp_path / "gone"), cwd=repo.path, env=env, timeout=120,
    )  # fmt: skip
    run_id = launched_id(r.stderr)
    assert r.code == 7, r.stderr
    assert "[0] replica 0 done" in r.stdout, r.stdout
    assert f"{run_id} replica 1 of 2 failed with exit code 7;" in r.stderr, r.stderr
    assert "stopped for it" not in r.stderr


def test_a_retry_is_an_attempt_and_its_success_is_the_run_s(repo, env, tmp_path):
    mark = str(tmp_path / "tried")
    r = run_cli(
        "run", *NO_PY, "--retries", "2", "--follow",
        "--", PY, "-c", FAILS_ONCE, mark, cwd=repo.path, env=env, timeout=120,
    )  # fmt: skip
    run_id = launched_id(r.stderr)
    assert r.code == 0, r.stderr
    # both attempts' lines, in order, and the retry said between them
    assert r.stdout.index("first attempt fails") < r.stdout.index("second attempt works"), r.stdout
    assert f"attempt with {run_id}-0\n" in r.stdout and f"attempt with {run_id}-0-attempt-2\n" in r.stdout
    assert "attempt 1 failed with exit code 3; it is retried (retry 1 of 2)" in r.stderr, r.stderr
    end = next(line for line in r.stderr.splitlines() if line.startswith(f"{run_id} succeeded"))
    assert end.startswith(f"{run_id} succeeded after 1 retry (attempt 1: exit code 3); "), end

    why = run_cli("why", run_id, env=env, timeout=60)
    assert why.code == 0 and why.stdout.splitlines()[0] == end, why.stdout
    listed = next(x for x in _json("list", "--local", env=env) if x["id"] == run_id)
    assert (listed["status"], listed["exit_code"], listed["attempts"]) == ("succeeded", 0, 2)
    assert end == f"{run_id} {listed['end']['line']}; {listed['end']['fix']}", listed

    # following it again, ended (text and --json alike): its retry is told as past
    for json_flag in ((), ("--json",)):
        again = run_cli("follow", run_id, *json_flag, env=env, timeout=60)
        assert again.code == 0, again.stderr
        assert "attempt 1 failed with exit code 3; it was retried (retry 1 of 2)" in again.stderr, (
            again.stderr
        )
        assert "it is retried" not in again.stderr, again.stderr
    assert f"`launchkit logs {run_id} --attempt 1`" in end
    first = run_cli("logs", run_id, "--attempt", "1", env=env, timeout=60)
    assert first.code == 0 and first.stdout.endswith("first attempt fails\n"), first.stdout
    newest = run_cli("logs", run_id, env=env, timeout=60)  # the newest attempt's, as on Beaker
    assert newest.code == 0 and newest.stdout.endswith("second attempt works\n"), newest.stdout
    assert "first attempt fails" not in newest.stdout
    assert run_cli("logs", run_id, "--attempt", "2", env=env, timeout=60).stdout == newest.stdout
    missing = run_cli("logs", run_id, "--attempt", "3", env=env, timeout=60)
    assert missing.code != 0 and "no attempt 3" in missing.stderr and "1..2" in missing.stderr
    # each attempt had its own dirs, as a Beaker retry has a fresh node and result dataset
    r = run_cli("results", run_id, env=env, timeout=60)
    assert "attempt-2" in r.stdout + r.stderr, r.stdout + r.stderr


def test_when_every_attempt_fails_each_is_shown_and_the_last_decides(repo, env):
    code = "import os, sys; print('try', os.environ['BEAKER_JOB_ID'], flush=True); sys.exit(3)"
    r = run_cli(
        "run", *NO_PY, "--retries", "1", "--follow", "--", PY, "-c", code, cwd=repo.path, env=env, timeout=120
    )
    run_id = launched_id(r.stderr)
    assert r.code == 3, r.stderr
    assert f"try {run_id}-0\n" in r.stdout and f"try {run_id}-0-attempt-2\n" in r.stdout, r.stdout
    line = f"{run_id} failed with exit code 3 (attempt 2 of 2; attempt 1: exit code 3)"
    assert line in r.stderr, r.stderr
    assert wait_finished(run_id, env)["exit_code"] == 3


def test_a_replica_retried_with_its_siblings(repo, env, tmp_path):
    """propagateFailure and retries: replica 1 fails, replica 0 is stopped for it, and both run again
    as attempt 2 (a multi-node job only works with every replica back); that attempt succeeds."""
    script = """
import os, sys, time
flag, mark = sys.argv[1], sys.argv[2]
rank = os.environ["BEAKER_REPLICA_RANK"]
print("replica", rank, "as", os.environ["BEAKER_JOB_ID"], flush=True)
if os.path.exists(mark):
    sys.exit(0)
if rank == "0":
    open(flag, "w").close()
    time.sleep(300)
while not os.path.exists(flag):
    time.sleep(0.01)
open(mark, "w").close()
sys.exit(7)
"""
    flag, mark = str(tmp_path / "up"), str(tmp_path / "failed-once")
    r = run_cli(
        "run", *NO_PY, "--replicas", "2", "--propagate-failure", "--retries", "1", "--follow",
        "--", PY, "-c", script, flag, mark, cwd=repo.path, env=env, timeout=120,
    )  # fmt: skip
    run_id = launched_id(r.stderr)
    assert r.code == 0, r.stderr
    for rank in (0, 1):
        assert f"[{rank}] replica {rank} as {run_id}-{rank}-attempt-2" in r.stdout, r.stdout
    assert "replica 1 of 2: attempt 1 failed with exit code 7; it is retried (retry 1 of 1)" in r.stderr
    end = next(line for line in r.stderr.splitlines() if line.startswith(f"{run_id} succeeded"))
    assert end.startswith(f"{run_id} succeeded after 1 retry (replica 1 of 2 attempt 1: exit code 7)"), end


TORCHRUN_REPLICA_FAILS = """
import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
print(f"rank {dist.get_rank()} of {dist.get_world_size()} joined", flush=True)
dist.barrier()
if os.environ["BEAKER_REPLICA_RANK"] == "1":
    print("replica 1 fails", flush=True)
    os._exit(7)
time.sleep(300)  # replica 0 is stopped for replica 1's failure
"""


def test_torchrun_two_replicas_replica_1_fails(repo, env, mn_bin):  # noqa: F811 - a fixture
    """The issue's case: a 2-replica --torchrun job (propagateFailure by default) whose replica 1
    fails ends with replica 1's exit code (torchrun's own for its failed worker) and says so."""
    repo.commit({"job.py": TORCHRUN_REPLICA_FAILS})
    r = run_cli(
        "run", *NO_PY, "--replicas", "2", "--torchrun", "--follow", "--", "python", "job.py",
        cwd=repo.path, env={**env, "PATH": os.pathsep.join([str(mn_bin), os.environ["PATH"]])}, timeout=300,
    )  # fmt: skip
    run_id = launched_id(r.stderr)
    rec = json.loads((Path(env["LAUNCHKIT_LOCAL_HOME"]) / "runs" / run_id / "status.json").read_text())
    jobs = {j["replica"]: j for j in rec["jobs"]}
    code = jobs[1]["exit_code"]
    assert code not in (None, 0) and r.code == code, r.stdout + r.stderr
    assert (jobs[0]["status"], jobs[0]["stopped_for"]) == ("canceled", 1)
    told = f"replica 1 of 2 failed with exit code {code} (replica 0 was stopped for it)"
    assert f"{run_id} {told}" in r.stderr, r.stderr
    assert "[1] replica 1 fails" in r.stdout and "[0] rank 0 of 2 joined" in r.stdout, r.stdout
    why = run_cli("why", run_id, env=env, timeout=60)
    assert why.stdout.startswith(f"{run_id} {told}; ") and "--replica 1 --tail 50" in why.stdout
    listed = next(x for x in _json("list", "--local", env=env) if x["id"] == run_id)
    assert (listed["exit_code"], listed["end"]["line"]) == (code, told)


def test_stop_during_a_retry_ends_the_run_with_no_more_attempts(repo, env, tmp_path, marker):
    script = """
import os, sys, time
mark = sys.argv[1]
if not os.path.exists(mark):
    open(mark, "w").close()
    sys.exit(3)
print("attempt 2 is up", flush=True)
time.sleep(300)
"""
    r = run_cli(
        "run", *NO_PY, "--retries", "3", "--", PY, "-c", script, str(tmp_path / "tried"), marker,
        cwd=repo.path, env=env, timeout=60,
    )  # fmt: skip
    run_id = launched_id(r.stderr)
    deadline = time.monotonic() + scaled(60)
    while "attempt 2 is up" not in run_cli("logs", run_id, env=env, timeout=60).stdout:
        assert time.monotonic() < deadline, "attempt 2 never started"
    assert processes_with(marker)
    r = run_cli("stop", "--yes", run_id, env=env, timeout=60)
    assert r.code == 0 and "canceled" in r.stderr, r.stderr
    assert processes_with(marker) == []
    listed = wait_finished(run_id, env)
    assert (listed["status"], listed["attempts"]) == ("canceled", 2), listed
    assert not (
        Path(env["LAUNCHKIT_LOCAL_HOME"]) / "runs" / run_id / "logs" / "replica-0.attempt-3.log"
    ).exists()
