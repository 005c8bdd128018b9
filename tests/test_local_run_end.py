"""A local run ends with its command (issue 45, item 6: "one run ended 78 s after its command finished").

Measured from the run's own timestamps, not a wall clock around the test: the command writes the time of
its last act into its results, and the run's record says when its job and the run ended. What the
command leaves running (a child that keeps its stdout open, one in a session of its own that ignores
SIGTERM) is ended with it, and the job's log says what was ended. A busy machine stretches every step
alike: the bounds are scaled (tests/timescale.py) and many times what an idle machine takes (~0.1 s,
and the 2 s the supervisor grants a leftover that ignores SIGTERM).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from lk_helpers import FAST_ENV, launched_id, processes_with, wait_children, wait_finished
from timescale import scaled

# The command: a child that inherits its stdout (so the output pipe stays open after it exits), another
# in a session of its own that ignores SIGTERM, then its own end time as its last act.
COMMAND = """
import os, subprocess, sys, time
marker = sys.argv[1]
subprocess.Popen(["bash", "-c", "sleep 600; :", marker])
subprocess.Popen(["bash", "-c", 'trap "" TERM; sleep 600; :', marker], start_new_session=True)
print("command done", flush=True)
with open(os.path.join(os.environ["RESULTS_DIR"], "end"), "w") as f:
    f.write(repr(time.time()))
"""


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    return {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lkstate")}


@pytest.mark.parametrize("how", [[], ["--stall-timeout", "5m"]], ids=["exec", "watchdog"])
def test_a_local_run_ends_with_its_command_and_ends_what_it_left(repo, env, marker, how):
    repo.commit({"leaves.py": COMMAND})
    r = run_cli(
        "run", "--local", "--no-python", *how, "--", "python3", "leaves.py", marker, cwd=repo.path, env=env
    )
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    assert wait_finished(run_id, env)["status"] == "succeeded"
    rdir = Path(env["LAUNCHKIT_LOCAL_HOME"]) / "runs" / run_id
    rec = json.loads((rdir / "status.json").read_text())
    command_end = float((rdir / "replica-0" / "results" / "end").read_text())
    job_end, run_end = rec["jobs"][0]["finished"], rec["finished"]
    # the job (the runtime, when it watches) ends with the command: before, the watchdog looked for the
    # command's end once a second, then waited a second for the output the child it left held open
    assert job_end - command_end < scaled(1.9), (command_end, job_end)
    # the run ends with the job: its leftovers are ended (the one ignoring SIGTERM after 2 s)
    assert run_end - job_end < scaled(3.5), (job_end, run_end)
    assert not processes_with(marker)
    out = run_cli("logs", run_id, env=env).stdout
    assert out.splitlines()[-2:][0] == "command done", out
    last = out.splitlines()[-1]
    assert last.startswith("[launchkit] ended what the command left running: "), out
    assert "sleep (pid " in last and "bash (pid " in last, last


def test_the_end_of_a_run_reads_no_other_process(marker, monkeypatch):
    """Where the run's processes are all found without it (its cgroup; its supervisor's descendants, as
    subreaper), ending them reads no other process's environment: such a read blocks while that
    process is stuck in the kernel (a page fault on a hung network filesystem, on a shared login node),
    and the run's end waited for it."""
    import subprocess

    import psutil

    from launchkit.backends.local import procs

    root = subprocess.Popen(["bash", "-c", "sleep 600 & sleep 600 & wait; :", marker])
    try:
        wait_children(root.pid, ["sleep", "sleep"])

        def machine_wide(*_a, **_k):
            raise AssertionError("every process's environment was read")

        ending = procs.RunProcs("local-x", [], root=root.pid)
        with monkeypatch.context() as m:
            m.setattr(psutil, "process_iter", machine_wide)
            count, left = ending.end(1, scan=False)
        assert count == 2 and left == [] and ending.found[0].startswith("sleep (pid "), ending.found
        assert root.wait(timeout=60) == 0  # its children ended, the bash waiting for them returns
    finally:
        root.kill()
        root.wait(timeout=60)


def test_the_runtimes_own_record_writer_is_ended_unnamed(marker):
    """A record the runtime writes in the background (steplog.RECORD_WRITER: `uv pip freeze` where the
    venv's metadata cannot say it) may outlive a short command: it is ended with the run but never named
    among what the command left running (the job's log said `uv (pid N)`, `bash (pid N)` of pyenv's
    shims, for a plain `python -c` run)."""
    import os
    import subprocess

    from launchkit.backends.local import procs
    from launchkit.runtime.node.environment.steplog import RECORD_WRITER

    root = subprocess.Popen(
        ["bash", "-c", "sleep 600 & wait; :", marker], env={**os.environ, RECORD_WRITER: "1"}
    )
    left = subprocess.Popen(["bash", "-c", "sleep 600; :", marker])
    try:
        wait_children(root.pid, ["sleep"])  # both forked before the end is looked for
        wait_children(left.pid, ["sleep"])
        ending = procs.RunProcs("local-x", [], root=os.getpid())
        count, alive = ending.end(1, scan=False)
        names = ending.found
        assert count >= 3 and alive == [], (count, alive)
        assert [n for n in names if f"(pid {left.pid})" in n], names  # the command's leftover is named
        assert not [n for n in names if f"(pid {root.pid})" in n], names  # the record writer is not
    finally:
        for p in (root, left):
            p.kill()
            p.wait(timeout=60)


def test_a_short_command_in_a_venv_leaves_nothing_named_and_its_record_written(repo, env):
    """A `python -c` run in the job's uv venv: its record of what got installed is read from the venv's
    metadata (no uv racing the command's end), and the job's log ends with the command's own line."""
    r = run_cli("run", "--local", "--", "python", "-c", "print('the end')", cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    assert wait_finished(run_id, env)["status"] == "succeeded"
    out = run_cli("logs", run_id, env=env).stdout
    assert out.splitlines()[-1] == "the end" and "left running" not in out, out
    rdir = Path(env["LAUNCHKIT_LOCAL_HOME"]) / "runs" / run_id
    assert (rdir / "replica-0" / "results" / ".launchkit" / "requirements.txt").is_file()
