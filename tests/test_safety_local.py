"""Issue 21 (local backend): a job's processes are found without trusting the job, credentials go
with the run, and local jobs don't inherit the user's credentials. Real processes."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from conftest import run_cli
from lk_helpers import FAST_ENV, launched_id, wait_finished
from test_local_reliability import gone, named, supervisor_pid, wait_for

NO_PY = ("--local", "--no-python")


def cgroup_usable() -> bool:
    from launchkit.backends.local import procs

    own = procs.own_cgroup()
    if own is None:
        return False
    probe = os.path.join(own, f"launchkit-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    os.rmdir(probe)
    return True


TRACKING = [
    pytest.param(
        "1", id="cgroup", marks=pytest.mark.skipif(not cgroup_usable(), reason="no writable cgroup v2")
    ),
    pytest.param("0", id="process-tree"),
]


@pytest.fixture
def state(tmp_path) -> Path:
    return tmp_path / "lkstate"


@pytest.fixture
def env(state) -> dict[str, str]:
    return {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(state)}


def launch(repo, env, *args: str, cmd: list[str]) -> str:
    r = run_cli("run", *args, "--", *cmd, cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    return launched_id(r.stderr)


def listed(env) -> dict[str, dict]:
    r = run_cli("list", "--local", "--json", "--limit", "1000", env=env)
    assert r.code == 0, r.stderr
    return {x["id"]: x for x in json.loads(r.stdout)}


def kill_named(marker: str) -> None:
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        if (p.info["cmdline"] or [""])[0] == marker:
            try:
                p.kill()
            except psutil.Error:
                pass


@pytest.mark.slow
@pytest.mark.parametrize("cgroup", TRACKING)
def test_a_scrubbed_job_of_a_dead_supervisor_is_neither_pruned_nor_missed_by_stop(
    repo, env, state, marker, cgroup
):
    """`env -i` drops the run's marker variable and the job has its own session: after the
    supervisor is killed, prune keeps the run and stop ends the job (and says so only once it is)."""
    env = {**env, "LAUNCHKIT_CGROUP": cgroup}
    # the job forks a child in a new session too, after the supervisor has recorded its tree
    job = f"(sleep 1; setsid bash -c 'exec -a {marker} sleep 300') & exec -a {marker} sleep 300"
    run_id = launch(repo, env, *NO_PY, cmd=["env", "-i", "bash", "-c", job])
    try:
        wait_for(lambda: named(marker) == 2)
        pid = supervisor_pid(state, run_id)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: gone(pid))

        info = listed(env)[run_id]
        assert info["status"] == "lost"
        assert "nothing of it is left running" not in info["message"]
        assert "2 of its processes are still running" in info["message"], info["message"]
        r = run_cli("prune", "--older-than", "0s", "--yes", env=env)
        assert r.code == 0, r.stderr
        assert (state / "runs" / run_id).is_dir()  # its checkout, results and logs are kept

        r = run_cli("stop", "--yes", run_id, env=env)
        assert r.code == 0 and "canceled" in r.stderr, r.stderr
        assert named(marker) == 0
        assert listed(env)[run_id]["status"] == "canceled"
        r = run_cli("prune", "--older-than", "0s", "--yes", env=env)
        assert r.code == 0 and not (state / "runs" / run_id).exists(), r.stderr
    finally:
        kill_named(marker)


@pytest.mark.slow
@pytest.mark.parametrize("cgroup", TRACKING)
def test_a_lost_run_whose_processes_are_gone_says_so_and_is_pruned(repo, env, state, marker, cgroup):
    env = {**env, "LAUNCHKIT_CGROUP": cgroup}
    run_id = launch(repo, env, *NO_PY, cmd=["env", "-i", "bash", "-c", f"exec -a {marker} sleep 300"])
    try:
        wait_for(lambda: named(marker) == 1)
        pid = supervisor_pid(state, run_id)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: gone(pid))
        kill_named(marker)
        wait_for(lambda: named(marker) == 0)
        info = listed(env)[run_id]
        assert info["status"] == "lost" and "nothing of it is left running" in info["message"]
        r = run_cli("prune", "--older-than", "0s", "--yes", env=env)
        assert r.code == 0 and not (state / "runs" / run_id).exists(), r.stderr
    finally:
        kill_named(marker)


# ---- credentials go with the run; the user's shell credentials don't reach the job

AWS = "[default]\naws_secret_access_key = lk-safety-s3cr3t"
SHELL_CREDENTIALS = {
    "BEAKER_TOKEN": "lk-beaker-tok",
    "GITHUB_TOKEN": "lk-github-tok",
    "MY_HOOK": "https://hooks.slack.com/services/T0/B0/lkslack",
    "DB_URL": "postgres://u:lkdbpass@db/x",
}


def credentials_dir(state: Path, run_id: str) -> Path:
    return state / "runs" / run_id / "replica-0" / "runtime" / "credentials"


def aws_run(repo, env, script: str) -> str:
    return launch(repo, env, *NO_PY, "--aws-credentials-secret", "LK_AWS", cmd=["bash", "-c", script])


@pytest.mark.slow
@pytest.mark.parametrize("code", [0, 3])
def test_credential_files_are_removed_when_the_run_ends(repo, env, state, code):
    env = {**env, "LK_AWS": AWS}
    run_id = aws_run(repo, env, f'test -s "$AWS_SHARED_CREDENTIALS_FILE" && echo have-creds; exit {code}')
    info = wait_finished(run_id, env)
    assert info["status"] == ("succeeded" if code == 0 else "failed")
    r = run_cli("logs", run_id, env=env)
    assert "have-creds" in r.stdout  # the job had them
    assert not credentials_dir(state, run_id).exists()


@pytest.mark.slow
def test_credential_files_go_with_stop_and_with_a_dead_supervisor(repo, env, state, marker):
    env = {**env, "LK_AWS": AWS}
    script = f'test -s "$AWS_SHARED_CREDENTIALS_FILE" && exec -a {marker} sleep 300'
    stopped = aws_run(repo, env, script)
    wait_for(lambda: named(marker) == 1)
    assert credentials_dir(state, stopped).is_dir()
    assert run_cli("stop", "--yes", stopped, env=env).code == 0
    assert not credentials_dir(state, stopped).exists()

    lost = aws_run(repo, env, script)
    try:
        wait_for(lambda: named(marker) == 1)
        pid = supervisor_pid(state, lost)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: gone(pid))
        assert listed(env)[lost]["status"] == "lost"
        assert credentials_dir(state, lost).is_dir()  # the job still runs and may read them
        kill_named(marker)
        wait_for(lambda: named(marker) == 0)
        r = run_cli("stop", "--yes", lost, env=env)
        assert r.code == 0, r.stderr
        assert not credentials_dir(state, lost).exists()
    finally:
        kill_named(marker)


@pytest.mark.slow
def test_a_local_job_inherits_no_credentials_from_the_shell(repo, env):
    env = {**env, **SHELL_CREDENTIALS, "LK_PLAIN": "kept", "LK_PASSED": "lk-passed"}
    run_id = launch(repo, env, *NO_PY, "--env-secret", "GITHUB_TOKEN", cmd=["env"])
    assert wait_finished(run_id, env)["status"] == "succeeded"
    out = run_cli("logs", "--no-mask", run_id, env=env).stdout
    assert "LK_PLAIN=kept" in out
    assert "GITHUB_TOKEN=lk-github-tok" in out  # passed explicitly
    assert "GITHUB_TOKEN=***" in run_cli("logs", run_id, env=env).stdout  # and masked by default
    for name, value in SHELL_CREDENTIALS.items():
        if name != "GITHUB_TOKEN":
            assert value not in out, name


# ---- fast: the rules themselves


@pytest.mark.parametrize(
    ("name", "value", "dropped"),
    [
        ("BEAKER_TOKEN", "x", True),
        ("GITHUB_TOKEN", "x", True),
        ("AWS_ACCESS_KEY_ID", "x", True),
        ("AWS_SECRET_ACCESS_KEY", "x", True),
        ("NOTIFY", "https://hooks.slack.com/services/T0/B0/x", True),
        ("DB", "postgres://u:pw@db/x", True),
        ("ANYTHING", "hf_" + "a" * 30, True),
        ("PATH", "/usr/bin", False),
        ("HF_HOME", "/cache/hf", False),
        ("MAX_TOKENS", "4096", False),
        ("UV_INDEX_URL", "https://pypi.org/simple", False),
    ],
)
def test_which_variables_of_the_shell_a_local_job_does_not_get(name, value, dropped):
    from launchkit.backends.local.supervisor import is_credential

    assert is_credential(name, value) is dropped


def test_a_recorded_cgroup_is_used_only_if_it_is_the_runs_own(tmp_path):
    """status.json is writable by the job: a `cgroup` pointing at any other cgroup (the root, the
    user's session) must never be what `stop` kills."""
    from launchkit.backends.local import procs

    own = procs.own_cgroup()
    run_id = "local-20260101-000000-abcdef"
    assert procs.run_cgroup(run_id, None) is None
    assert procs.run_cgroup(run_id, 5) is None
    assert procs.run_cgroup(run_id, str(tmp_path / f"launchkit-{run_id}")) is None  # not a cgroup fs
    if own is not None:
        assert procs.run_cgroup(run_id, own) is None  # the supervisor's own (or the root) cgroup
        assert procs.run_cgroup(run_id, os.path.join(own, "launchkit-local-other")) is None
        rec = {"id": run_id, "cgroup": own, "ranks": {"0": {"pgid": "1; rm"}}}
        assert procs.RunProcs.of(tmp_path, rec).cgroup is None


def test_a_recorded_pid_counts_only_with_its_start_time(tmp_path):
    import psutil

    from launchkit.backends.local import procs

    me = psutil.Process()
    procs.write_tree(str(tmp_path), [(me.pid, me.create_time()), (me.ppid(), 1.0)])
    found = [p.pid for p in procs._recorded(procs.read_tree(tmp_path))]
    assert found == [me.pid]  # the parent's recorded start time is wrong: a reused pid, not ours


def test_credential_cleanup_never_follows_a_planted_link(tmp_path):
    from launchkit.backends.local.cleanup import remove_credentials

    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine\n")
    runtime = tmp_path / "run" / "replica-0" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "credentials").symlink_to(precious)
    real = tmp_path / "run" / "replica-1" / "runtime" / "credentials"
    real.mkdir(parents=True)
    (real / "aws-credentials").write_text("s3cr3t\n")
    (real / "link").symlink_to(precious / "keep.txt")
    remove_credentials(tmp_path / "run")
    assert (precious / "keep.txt").read_text() == "mine\n"
    assert not (runtime / "credentials").is_symlink() and not real.exists()
