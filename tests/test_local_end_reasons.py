"""Why a local run ended (issue 22, item 4), for the reasons that exist locally: exit code, a kill
for memory (SIGKILL, exit 137), canceled, timeout. Real processes: slow tier."""

from __future__ import annotations

import sys

import pytest

from conftest import run_cli
from lk_helpers import FAST_ENV, launched_id, wait_finished

PY = sys.executable
NO_PY = ("--local", "--no-python")
pytestmark = pytest.mark.slow


def _launch(repo, *code: str, extra: tuple[str, ...] = ()) -> str:
    r = run_cli("run", *NO_PY, *extra, "--", PY, "-c", "\n".join(code), cwd=repo.path, env=FAST_ENV)
    assert r.code == 0, r.stderr
    return launched_id(r.stderr)


def _why(run_id: str) -> str:
    r = run_cli("why", run_id, env=FAST_ENV, timeout=60)
    assert r.code == 0, r.stderr
    return r.stdout.splitlines()[0]  # the end; then where its time went


def test_local_exit_code_and_memory_kill(repo):
    bad = _launch(repo, "import sys; sys.exit(7)")
    oom = _launch(repo, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    r = run_cli("follow", bad, env=FAST_ENV, timeout=60)
    assert r.code == 7 and f"{bad} failed with exit code 7" in r.stderr, r.stderr
    assert wait_finished(oom, FAST_ENV)["exit_code"] == 137
    assert _why(bad).startswith(f"{bad} failed with exit code 7")
    line = _why(oom)
    assert "out of memory" in line and "--memory" in line, line
    r = run_cli("list", "--local", env={**FAST_ENV, "COLUMNS": "200"}, timeout=60)  # whole reasons
    assert "out of memory" in next(x for x in r.stdout.splitlines() if oom in x)


def _memory_cgroup_possible() -> bool:
    from launchkit.backends.local.memlimit import MemoryLimit

    limit = MemoryLimit.make("probe-test", 1 << 30, None)
    if limit is None:
        return False
    limit.remove()
    return True


@pytest.mark.skipif(not _memory_cgroup_possible(), reason="no memory cgroup can be made here (root, Linux)")
def test_local_memory_limit_is_enforced_and_the_oom_kill_told(repo):
    """--memory holds a local run as it holds a Beaker task: over it, the kernel kills the job, and the
    end line says so for certain (the memory controller's own OOM-kill count), with the limit."""
    hog = _launch(repo, "x = bytearray(400 * 1024 * 1024)", "print('survived')", extra=("--memory", "100MiB"))
    r = run_cli("follow", hog, env=FAST_ENV, timeout=60)
    assert r.code == 137 and "survived" not in r.stdout, r.stderr
    assert "killed for using too much memory (limit 100MiB)" in r.stderr, r.stderr
    assert "killed for using too much memory (limit 100MiB)" in _why(hog)
    fits = _launch(repo, "x = bytearray(50 * 1024 * 1024)", "print('survived')", extra=("--memory", "1GiB"))
    r = run_cli("follow", fits, env=FAST_ENV, timeout=60)
    assert r.code == 0 and "survived" in r.stdout, r.stderr


def test_local_canceled_and_timeout(repo):
    run_id = _launch(repo, "import time; time.sleep(60)")
    r = run_cli("stop", run_id, "--yes", env=FAST_ENV, timeout=60)
    assert r.code == 0, r.stderr
    assert "canceled by you" in _why(run_id)
    r = run_cli(
        "run", *NO_PY, "--timeout", "1", "--", PY, "-c", "import time; time.sleep(60)",
        cwd=repo.path, env=FAST_ENV, timeout=90,
    )  # fmt: skip
    assert r.code == 124, r.stderr
    timed = launched_id(r.stderr)
    line = f"{timed} stopped by launchkit following it: --timeout 1s passed; raise that limit"
    assert line in r.stderr, r.stderr
    assert wait_finished(timed, FAST_ENV)["end"]["by"] == "launchkit"  # never told as the user's
    assert _why(timed).startswith(line), _why(timed)
    r = run_cli("list", "--local", env={**FAST_ENV, "COLUMNS": "200"}, timeout=60)
    assert "stopped by launchkit following it: --timeout 1s" in next(
        x for x in r.stdout.splitlines() if timed in x
    )


STALLS = (
    "import sys, time",
    "print('[step=1/100] loss=3.2', flush=True)",
    "while True:",
    "    print('NCCL WARN still here', flush=True); time.sleep(0.05)",
)


def test_an_unfollowed_job_that_stalls_is_stopped_by_its_runtime_and_told_as_launchkits(repo):
    """Nobody follows: the job's runtime ends it, and why/list/follow tell launchkit's stop with its cause."""
    stalled = _launch(repo, *STALLS, extra=("--stall-timeout", "2s", "--stall-grace", "0s"))
    silent = _launch(
        repo, "import time; print('hi', flush=True); time.sleep(600)", extra=("--inactive-timeout", "2s")
    )
    assert wait_finished(stalled, FAST_ENV)["exit_code"] == 124
    line = _why(stalled)
    assert line.startswith(f"{stalled} stopped by launchkit: no progress for 2s (last: step=1/100 at "), line
    assert "--stall-timeout" in line and "canceled" not in line and "by you" not in line, line
    assert wait_finished(silent, FAST_ENV)["exit_code"] == 124
    quiet = "stopped by launchkit: no output for 2s (--inactive-timeout)"
    assert _why(silent).startswith(f"{silent} {quiet}")
    r = run_cli("list", "--local", env={**FAST_ENV, "COLUMNS": "200"}, timeout=60)  # whole reasons
    assert "stopped by launchkit: no progress" in next(x for x in r.stdout.splitlines() if stalled in x)
    assert quiet in next(x for x in r.stdout.splitlines() if silent in x)
    r = run_cli("follow", stalled, env=FAST_ENV, timeout=60)
    assert r.code == 124 and "stopped by launchkit: no progress for 2s" in r.stderr, r.stderr
    r = run_cli("follow", silent, env=FAST_ENV, timeout=60)
    assert r.code == 124 and f"{silent} {quiet}" in r.stderr and "canceled" not in r.stderr, r.stderr
