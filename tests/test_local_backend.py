"""The local backend end to end: `launchkit run --local` and follow/logs/stop/list/find-gpus, as real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from inproc import run_main
from lk_helpers import FAST_ENV, launched_id, processes_with, sigint_default, uv_lock_project, wait_finished
from timescale import scaled

PY = sys.executable  # an interpreter with no launchkit on its path would do as well
NO_PY = ("--local", "--no-python")


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("uv-cache-local"))


@pytest.fixture
def env(uv_cache) -> dict[str, str]:
    return {**FAST_ENV, "UV_CACHE_DIR": uv_cache}


def launch(repo, env, *args: str, cmd: list[str]) -> str:
    r = run_cli("run", *args, "--", *cmd, cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    return launched_id(r.stderr)


@pytest.mark.slow
def test_run_follow_prints_output_and_succeeds(repo, env):
    r = run_cli("run", *NO_PY, "--follow", "--", PY, "train.py", "a b", "$HOME", cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    assert "args ['a b', '$HOME']" in r.stdout
    assert "setup done in" in r.stdout  # the entrypoint's timing line is part of the job's log
    assert "succeeded" in r.stderr


@pytest.mark.slow
def test_runs_commit_without_push(repo, env):
    repo.commit({"train.py": "print('unpushed version')\n"}, "not pushed", push=False)
    r = run_cli("run", *NO_PY, "--follow", "--", PY, "train.py", cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    assert "unpushed version" in r.stdout


@pytest.mark.slow
def test_runs_a_repository_without_remote(repo, env):
    subprocess.run(["git", "remote", "remove", "origin"], cwd=repo.path, check=True, timeout=30)
    r = run_cli("run", *NO_PY, "--follow", "--", PY, "train.py", "x", cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    assert "args ['x']" in r.stdout
    # the Beaker path still insists on a remote
    r = run_cli("run", "--dry-run", "--", PY, "train.py", cwd=repo.path, env=env)
    assert r.code == 2 and "no remote" in r.stderr


@pytest.mark.slow
def test_exit_code_7_propagates_to_follow(repo, env):
    run_id = launch(repo, env, *NO_PY, cmd=[PY, "-c", "import sys; print('bye'); sys.exit(7)"])
    r = run_cli("follow", run_id, env=env)
    assert r.code == 7, r.stderr
    assert "bye" in r.stdout and "exit code 7" in r.stderr
    info = wait_finished(run_id, env)
    assert info["status"] == "failed" and info["exit_code"] == 7
    r = run_cli("follow", "--latest", "--local", env=env)
    assert r.code == 7


@pytest.mark.slow
def test_multi_replica_env_and_per_replica_logs(repo, env, tmp_path):
    script = (
        "import os; e = os.environ; print('rank', e['BEAKER_REPLICA_RANK'], 'of', e['BEAKER_REPLICA_COUNT'], "
        "e['BEAKER_LEADER_REPLICA_HOSTNAME'], e['BEAKER_ASSIGNED_GPU_COUNT'], e['RESULTS_DIR'], "
        "e['LAUNCHKIT_RUNTIME_DIR'], e['BEAKER_JOB_ID'])"
    )
    run_id = launch(repo, env, *NO_PY, "--replicas", "2", cmd=[PY, "-c", script])
    assert wait_finished(run_id, env)["status"] == "succeeded"
    out = tmp_path / "out"
    r = run_cli("logs", run_id, "-o", str(out) + "/", env=env)
    assert r.code == 0, r.stderr
    seen = set()
    for rank in (0, 1):
        text = (out / f"{run_id}-replica-{rank}.log").read_text()
        line = next(x for x in text.splitlines() if x.startswith("rank"))
        _, r_, _, count, leader, gpus, results, runtime, job = line.split()
        assert (r_, count, leader, gpus) == (str(rank), "2", "127.0.0.1", "0")
        seen.add((results, runtime, job))
    assert len(seen) == 2  # each replica has its own dirs and job id
    r = run_cli("logs", run_id, env=env)
    assert "[0] rank 0 of 2" in r.stdout and "[1] rank 1 of 2" in r.stdout


@pytest.mark.slow
def test_uv_lock_project_runs_locally(repo, env):
    uv_lock_project(repo, env)
    r = run_cli(
        "run",
        "--local",
        "--follow",
        "--",
        "python",
        "-c",
        "import tinydep; print('dep', tinydep.VALUE)",
        cwd=repo.path,
        env=env,
    )
    assert r.code == 0, r.stdout + r.stderr
    assert "dep 42" in r.stdout and "install[uv.lock]" in r.stdout


@pytest.mark.slow
def test_install_failure_fails_the_local_job(repo, env):
    repo.commit({"requirements.txt": "./wheels/missing-0.1-py3-none-any.whl\n"}, "broken")
    r = run_cli(
        "run", "--local", "--follow", "--", "python", "-c", "print('SHOULD NOT RUN')", cwd=repo.path, env=env
    )
    assert r.code == 106, r.stderr
    assert "SHOULD NOT RUN" not in r.stdout.replace("print('SHOULD NOT RUN')", "")
    assert (
        "setup failed before your command ran: installing the project's dependencies failed (exit 106)"
        in (r.stderr)
    )


@pytest.mark.slow
@pytest.mark.parametrize("code", [100, 106, 109])
def test_a_command_exiting_with_a_setup_code_is_told_as_its_own(repo, env, code):
    """The end reason reads whether the command started (the runtime's line before it, in the log),
    not the code alone: a command of the user's that exits 100-109 is its own exit code."""
    r = run_cli(
        "run", *NO_PY, "--follow", "--", PY, "-c", f"import sys; print('ran'); sys.exit({code})",
        cwd=repo.path, env=env,
    )  # fmt: skip
    assert r.code == code and "ran" in r.stdout, r.stderr
    assert f"failed with exit code {code}" in r.stderr and "setup" not in r.stderr, r.stderr
    why = run_cli("why", launched_id(r.stderr), env=env)
    assert why.stdout.split(" ", 1)[1].startswith(f"failed with exit code {code}"), why.stdout


@pytest.mark.slow
def test_logs_are_raw_bytes_with_head_tail_since(repo, env, tmp_path):
    script = (
        "import sys; w = sys.stdout.buffer.write\n"
        "for i in range(1, 6): w(b'line %d\\n' % i)\n"
        "w(b'\\xff\\xfe not utf-8 \\x1b[31m' + b'x' * 300 + b'\\n'); w(b'no newline at end')"
    )
    run_id = launch(repo, env, *NO_PY, cmd=[PY, "-c", script])
    wait_finished(run_id, env)

    def logs(*args: str) -> bytes:
        return subprocess.run(
            [sys.executable, "-m", "launchkit", "logs", run_id, *args],
            capture_output=True,
            timeout=60,
            env={**os.environ, **env},
        ).stdout

    raw = logs()
    odd = b"\xff\xfe not utf-8 \x1b[31m" + b"x" * 300 + b"\n"
    assert odd in raw  # not decoded, not wrapped
    assert raw.endswith(b"no newline at end")
    assert logs("--tail", "2") == odd + b"no newline at end"
    assert logs("--head", "3").endswith(b"line 1\nline 2\n")
    f = tmp_path / "one.log"
    assert run_cli("logs", run_id, "-o", str(f), "--since", "1h", env=env).code == 0
    assert f.read_bytes() == raw
    assert run_cli("logs", run_id, "--since", "2999-01-01T00:00:00", env=env).stdout == ""
    assert run_cli("logs", run_id, "--since", "soon", env=env).code == 2


@pytest.mark.slow
def test_stop_ends_the_whole_process_tree(repo, env, marker):
    sleeper = f"{PY} -c 'import time; time.sleep(300)' {marker}"
    script = (
        f"{sleeper} & setsid {sleeper} & "  # a child, and one that escapes the process group
        f"{PY} -c 'import time; print(\"started\", flush=True); time.sleep(300)' {marker}"
    )
    run_id = launch(repo, env, *NO_PY, "--replicas", "2", cmd=["bash", "-c", script + "; wait", marker])
    deadline = time.monotonic() + scaled(60)
    while time.monotonic() < deadline and run_cli("logs", run_id, env=env).stdout.count("started") < 2:
        time.sleep(0.2)
    assert len(processes_with(marker)) >= 8  # 2 x (bash + 3 pythons)
    r = run_cli("stop", run_id, env=env)  # stdin is not a TTY and no --yes: refuse, fast
    assert r.code == 2 and "--yes" in r.stderr
    r = run_cli("stop", "--yes", run_id, env=env)
    assert r.code == 0, r.stderr
    assert "canceled" in r.stderr
    assert processes_with(marker) == []  # stop returns once the tree is gone
    info = wait_finished(run_id, env)
    assert info["status"] == "canceled"


@pytest.mark.slow
def test_job_outlives_the_cli_and_can_be_followed_later(repo, env):
    launch(repo, env, *NO_PY, cmd=[PY, "-c", "import time; time.sleep(1.5); print('late line')"])
    r = run_cli("follow", "--local", "--latest", env=env)
    assert r.code == 0 and "late line" in r.stdout


# A job that runs until the test lets it end (`go`, argv[1], exists), or argv[2] seconds (fails open).
HELD_JOB = (
    "import os, sys, time\n"
    "print('tick', flush=True)\n"
    "deadline = time.monotonic() + float(sys.argv[2])\n"
    "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:\n"
    "    time.sleep(0.05)\n"
    "print('done')\n"
)


@pytest.mark.slow
def test_ctrl_c_detaches_follow_and_the_job_keeps_running(repo, env, tmp_path):
    """The job runs until the test has seen follow detach: a busy machine cannot end it first."""
    import signal

    go = tmp_path / "go"
    run_id = launch(repo, env, *NO_PY, cmd=[PY, "-c", HELD_JOB, str(go), str(scaled(600))])
    p = subprocess.Popen(
        [sys.executable, "-m", "launchkit", "follow", run_id],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_default,
    )
    try:
        for line in p.stdout:
            if "tick" in line:
                break
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)  # a hang guard (~0.4 s on an idle machine)
    finally:
        p.kill()
    assert p.returncode == 130, err
    assert f"launchkit follow {run_id}" in err
    runs = {x["id"]: x for x in json.loads(run_cli("list", "--local", "--json", env=env).stdout)}
    assert runs[run_id]["status"] in ("starting", "running")  # detached, not stopped
    go.touch()
    info = wait_finished(run_id, env)
    assert info["status"] == "succeeded"
    assert "done" in run_cli("logs", run_id, env=env).stdout


@pytest.mark.slow
def test_ten_concurrent_runs_are_all_recorded(repo, env):
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "launchkit",
                "run",
                *NO_PY,
                "--name",
                f"c{i}",
                "--",
                PY,
                "-c",
                f"import sys; print('run {i}'); sys.exit({i % 3})",
            ],
            cwd=repo.path,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(10)
    ]
    ids = {}
    for i, p in enumerate(procs):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        ids[launched_id(err)] = i
    assert len(ids) == 10
    for run_id, i in ids.items():
        info = wait_finished(run_id, env)
        assert info["exit_code"] == i % 3 and info["name"] == f"c{i}"
        assert info["status"] == ("succeeded" if i % 3 == 0 else "failed")
    listed = json.loads(run_cli("list", "--local", "--json", "--limit", "50", env=env).stdout)
    assert {x["id"] for x in listed} >= set(ids)
    created = [x["created"] for x in listed]
    assert created == sorted(created, reverse=True)
    failed = json.loads(run_cli("list", "--local", "--json", "--status", "failed", env=env).stdout)
    assert {x["id"] for x in failed} == {k for k, i in ids.items() if i % 3}
    table = run_cli("list", "--local", "--limit", "3", env=env).stdout.splitlines()
    assert table[0].split() == ["ID", "NAME", "STATUS", "EXIT", "CREATED", "REASON"] and len(table) == 4


@pytest.mark.slow
def test_bad_references_are_one_line_errors(env):
    r = run_cli("logs", "local-nope", env=env)
    assert r.code == 4 and r.stderr.startswith("error: no local run")
    assert run_cli("follow", env=env).code == 2
    assert run_cli("list", "--local", "--status", "bogus", env=env).code == 2


@pytest.mark.slow
def test_local_secret_comes_from_the_environment(repo, env):
    missing = run_cli(
        "run", *NO_PY, "--env-secret", "TOKEN=LK_TEST_SECRET", "--", "true", cwd=repo.path, env=env
    )
    assert missing.code == 3 and "LK_TEST_SECRET" in missing.stderr
    r = run_cli(
        "run",
        *NO_PY,
        "--follow",
        "--env-secret",
        "TOKEN=LK_TEST_SECRET",
        "--",
        "bash",
        "-c",
        'echo "token=$TOKEN"',
        cwd=repo.path,
        env={**env, "LK_TEST_SECRET": "v4lue"},
    )
    assert r.code == 0 and "token=***" in r.stdout and "v4lue" not in r.stdout  # masked (issue 31)
    run_id = launched_id(r.stderr)
    masked = run_cli("logs", run_id, env={**env, "LK_TEST_SECRET": "v4lue"})
    assert masked.code == 0 and "token=***" in masked.stdout and "v4lue" not in masked.stdout
    shown = run_cli("logs", "--no-mask", run_id, env=env)
    assert shown.code == 0 and "token=v4lue" in shown.stdout
    from launchkit.backends.local.store import home

    root = str(home())  # under this test's XDG_STATE_HOME
    for folder, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as f:
                assert b"v4lue" not in f.read() or name.endswith(".log"), name


argv_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=10)


@pytest.mark.slow
def test_argv_round_trip_end_to_end(repo, env):
    """Arbitrary argv lists reach the user process's sys.argv unchanged (CLI -> spec -> supervisor -> bash)."""
    printer = "import json, sys; print('ARGV:' + json.dumps(sys.argv[1:]))"

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(argv_text, min_size=1, max_size=5))
    def check(args: list[str]) -> None:
        r = run_cli("run", *NO_PY, "--follow", "--", PY, "-c", printer, *args, cwd=repo.path, env=env)
        assert r.code == 0, r.stderr
        line = next(x for x in r.stdout.splitlines() if x.startswith("ARGV:"))
        assert json.loads(line[5:]) == args

    check()


def test_author_filter_is_refused_for_local_runs(env):
    r = run_main("list", "--local", "--author", "bob", env=env)
    assert r.code == 2 and "--author" in r.stderr and r.stderr.count("\n") == 1
