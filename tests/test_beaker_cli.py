"""Beaker commands through the CLI (subprocesses) against the fake Beaker server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from conftest import git, run_cli
from fakebeaker.scenarios import BASIC_SECRETS
from fakebeaker.state import AutoRun
from lk_helpers import sigint_default, unreachable_beaker_config

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

WS = "ai2/launchkit"


def _no_secret_values(*texts: str) -> None:
    for text in texts:
        for value in BASIC_SECRETS.values():
            assert value not in text


def test_run_without_credentials_says_how_to_fix_it(repo):
    # a remote a node can clone (a local path is refused first), as the commit's origin/main
    git(repo.path, "remote", "set-url", "origin", "https://github.com/acme/proj.git")
    r = run_cli("run", "--", "python", "train.py", cwd=repo.path, timeout=60)
    assert r.code == 3, r.stderr
    assert "no Beaker credentials" in r.stderr and "--dry-run" in r.stderr and "--local" in r.stderr
    assert "Traceback" not in r.stderr


def test_run_submits_once_with_url_and_no_secret_values(repo, fake_beaker):
    fake_beaker.faults.unavailable(1, "CreateExperiment")
    r = run_cli(
        "run",
        "--workspace",
        WS,
        "--name",
        "cli-run",
        "--cluster",
        "jup*",
        "--gpu-type",
        "h100",
        "--env-secret",
        "GH=GITHUB_TOKEN",
        "--",
        "python",
        "train.py",
        cwd=repo.path,
        timeout=90,
    )
    assert r.code == 0, r.stderr
    exps = [e for e in fake_beaker.state.experiments.values() if e.name == "cli-run"]
    assert len(exps) == 1
    exp = exps[0]
    assert f"/ex/{exp.id}" in r.stdout + r.stderr
    task = exp.spec["tasks"][0]
    assert task["constraints"]["cluster"] == ["ai2/jupiter"]  # canonical: short name
    env = {e["name"]: e for e in task["envVars"]}
    assert env["GH"]["secret"] == "GITHUB_TOKEN"
    assert "WANDB_API_KEY" not in env and "BEAKER_TOKEN" not in env  # no preset asked for them (issue 19)
    _no_secret_values(r.stdout, r.stderr, repr(exp.spec))


def test_run_no_auto_secrets(repo, fake_beaker):
    r = run_cli(
        "run",
        "--workspace",
        WS,
        "--name",
        "plain",
        "--no-auto-secrets",
        "--",
        "python",
        "train.py",
        cwd=repo.path,
        timeout=90,
    )
    assert r.code == 0, r.stderr
    exp = next(e for e in fake_beaker.state.experiments.values() if e.name == "plain")
    assert not any(e.get("secret") for e in exp.spec["tasks"][0]["envVars"])


def test_run_says_exactly_what_is_wrong(repo, fake_beaker):
    r = run_cli(
        "run",
        "--workspace",
        WS,
        "--env-secret",
        "X=MISSING_ONE",
        "--",
        "python",
        "train.py",
        cwd=repo.path,
        timeout=90,
    )
    assert r.code == 3 and "MISSING_ONE" in r.stderr and "launchkit secret set" in r.stderr, r.stderr
    r = run_cli(
        "run",
        "--workspace",
        WS,
        "--cluster",
        "sessions",
        "--",
        "python",
        "train.py",
        cwd=repo.path,
        timeout=90,
    )
    assert r.code == 2 and "'sessions'" in r.stderr and "no batch jobs" in r.stderr, r.stderr
    r = run_cli(
        "run", "--workspace", WS, "--gpu-type", "a10g", "--", "python", "train.py", cwd=repo.path, timeout=90
    )
    assert r.code == 3 and "a10g" in r.stderr, r.stderr
    r = run_cli("run", "--workspace", "ai2/nope", "--", "python", "train.py", cwd=repo.path, timeout=90)
    assert r.code == 4 and "ai2/nope" in r.stderr, r.stderr
    assert not fake_beaker.state.experiments_of(author="alice")


def test_run_follow_exits_with_the_job_exit_code(repo, fake_beaker):
    fake_beaker.state.set_auto(
        AutoRun(start_after=0.1, run_for=0.3, exit_code=3, lines=["hello \xff", "done"])
    )
    r = run_cli(
        "run",
        "--workspace",
        WS,
        "--name",
        "followed",
        "--follow",
        "--",
        "python",
        "train.py",
        cwd=repo.path,
        timeout=90,
    )
    assert r.code == 3, r.stderr
    assert r.stdout.splitlines()[-2:] == ["hello \xff", "done"]


@pytest.mark.timeout(300)  # a hang past the deadline fails here (not the suite's 900 s)
def test_unreachable_server_fails_within_the_deadline(tmp_path, repo):
    cfg = unreachable_beaker_config(tmp_path)
    r = run_cli(
        "--beaker-timeout",
        "3",
        "run",
        "--",
        "python",
        "train.py",
        cwd=repo.path,
        env={"BEAKER_CONFIG": str(cfg)},
        timeout=60,
    )
    assert r.code == 5 and "did not answer within 3s" in r.stderr, r.stderr
    r = run_cli(
        "open", "--latest", env={"BEAKER_CONFIG": str(cfg), "LAUNCHKIT_BEAKER_TIMEOUT": "2"}, timeout=60
    )
    assert r.code == 5 and "did not answer within 2s" in r.stderr, r.stderr


def test_secret_set_reads_stdin_and_never_prints_the_value(fake_beaker):
    value = "s3cr3t-value-\N{SNOWMAN}"
    r = run_cli("secret", "set", "MY_TOKEN", "--workspace", WS, input=value + "\n", timeout=60)
    assert r.code == 0, r.stderr
    assert fake_beaker.state.find_workspace(WS).secrets["MY_TOKEN"].value == value.encode()
    r2 = run_cli("secret", "list", "--workspace", WS, timeout=60)
    assert r2.code == 0 and "MY_TOKEN" in r2.stdout.split() and "HF_TOKEN" in r2.stdout.split()
    for out in (r.stdout, r.stderr, r2.stdout, r2.stderr):
        assert value not in out
    _no_secret_values(r2.stdout, r2.stderr)
    r = run_cli("secret", "set", "EMPTY", "--workspace", WS, input="", timeout=60)
    assert r.code == 2 and "empty" in r.stderr
    r = run_cli("secret", "set", "bad name!", input="x", timeout=60)
    assert r.code == 2


def test_secret_set_from_a_file(fake_beaker, tmp_path):
    key = tmp_path / "key.json"
    key.write_text('{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIE\\n"}\n')
    r = run_cli("secret", "set", "GCP_KEY", "--workspace", WS, "--from-file", str(key), timeout=60)
    assert r.code == 0, r.stderr
    stored = fake_beaker.state.find_workspace(WS).secrets["GCP_KEY"].value
    assert stored == key.read_bytes()[:-1]  # one final newline dropped, as from stdin
    assert "MIIE" not in r.stdout + r.stderr
    for args, words in (
        (("--from-file", str(tmp_path / "none")), "--from-file"),
        (("--from-file", str(tmp_path)), "is a directory, not a regular file"),
    ):
        bad = run_cli("secret", "set", "X", "--workspace", WS, *args, timeout=60)
        assert bad.code == 2 and words in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    (tmp_path / "empty").write_text("\n")
    bad = run_cli("secret", "set", "X", "--workspace", WS, "--from-file", str(tmp_path / "empty"), timeout=60)
    assert bad.code == 2 and "empty value" in bad.stderr
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    bad = run_cli("secret", "set", "X", "--workspace", WS, "--from-file", str(tmp_path / "bin"), timeout=60)
    assert bad.code == 2 and "not UTF-8" in bad.stderr
    piped = run_cli("secret", "set", "P", "--workspace", WS, "--from-file", "-", input="v4l\n", timeout=60)
    assert piped.code == 0 and fake_beaker.state.find_workspace(WS).secrets["P"].value == b"v4l"


# ---------------------------------------------------------------------------------------------- observe
def run_bytes(*args: str, timeout: float = 60, input: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launchkit", *args],
        capture_output=True,
        timeout=timeout,
        input=input,
        env=os.environ.copy(),
        check=False,
    )


def _finished(fake, name, lines, *, author="alice", code=0, replicas=1):
    exp = fake.state.add_experiment(WS, name, author=author, replicas=replicas, description="x [launchkit]")
    for rank, t in enumerate(exp.tasks):
        fake.state.append_logs(t.latest_job, [line.replace(b"{r}", str(rank).encode()) for line in lines])
        fake.state.finish_job(t.latest_job, code if rank == len(exp.tasks) - 1 else 0)
    return exp


RAW = [b"\xff\xfe not utf-8 {r}", b"y" * 205, b"[bold]{r}[/bold]"]


def test_follow_raw_bytes_exit_code_and_latest_is_mine(fake_beaker):
    mine = _finished(fake_beaker, "mine", RAW, code=3)
    _finished(fake_beaker, "theirs", [b"bob's line"], author="bob", code=0)  # newer, not mine
    r = run_bytes("follow", mine.id)
    assert r.returncode == 3, r.stderr
    assert r.stdout == b"".join(line.replace(b"{r}", b"0") + b"\n" for line in RAW)  # no wrapping at 80
    r = run_bytes("follow", "--latest")
    assert r.returncode == 3 and b"bob's line" not in r.stdout
    r = run_bytes("follow", "--latest", "--author", "bob")
    assert r.returncode == 0 and r.stdout == b"bob's line\n"


def test_follow_replicas(fake_beaker):
    exp = _finished(fake_beaker, "multi", [b"hi {r}"], replicas=2, code=5)
    r = run_bytes("follow", exp.id, "--all-replicas")
    assert r.returncode == 5 and sorted(r.stdout.splitlines()) == [b"[0] hi 0", b"[1] hi 1"]
    r = run_bytes("follow", exp.id, "--replica", "1")
    assert r.returncode == 5 and r.stdout == b"hi 1\n"


def test_follow_ctrl_c_detaches_and_prints_how_to_resume(fake_beaker):
    exp = fake_beaker.state.add_experiment(WS, "long", author="alice")
    fake_beaker.state.start_job(exp)
    fake_beaker.state.append_logs(exp, ["started"])
    p = subprocess.Popen(
        [sys.executable, "-m", "launchkit", "follow", exp.id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
        preexec_fn=sigint_default,
    )
    try:
        assert p.stdout.readline() == b"started\n"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)  # a hang guard (~0.4 s on an idle machine), as _interrupt_on's
    finally:
        p.kill()
    assert p.returncode == 130
    assert f"launchkit follow {exp.id}".encode() in err
    assert fake_beaker.state.find_experiment(exp.id).tasks[0].latest_job.canceled is None  # still running


def test_logs_options(fake_beaker, tmp_path):
    exp = _finished(fake_beaker, "logged", [b"a{r}", b"b{r}", b"c{r}"], replicas=2)
    assert run_bytes("logs", exp.id, "--replica", "1").stdout == b"a1\nb1\nc1\n"
    assert run_bytes("logs", exp.id, "--tail", "1").stdout == b"[0] c0\n[1] c1\n"
    assert run_bytes("logs", exp.id, "--head", "2", "--replica", "0").stdout == b"a0\nb0\n"
    assert run_bytes("logs", exp.id, "--since", "1h", "--replica", "0").stdout == b"a0\nb0\nc0\n"
    assert run_bytes("logs", exp.id, "--task", "main", "--replica", "0").stdout == b"a0\nb0\nc0\n"
    assert run_bytes("logs", exp.id, "--all", "--replica", "0").stdout == b"a0\nb0\nc0\n"
    assert run_bytes("logs", exp.id, "--task", "nope").returncode == 4
    r = run_bytes("logs", exp.id, "-o", str(tmp_path / "one.log"), "--replica", "1")
    assert r.returncode == 0 and (tmp_path / "one.log").read_bytes() == b"a1\nb1\nc1\n"
    r = run_bytes("logs", exp.id, "-o", str(tmp_path / "dir") + os.sep)
    assert r.returncode == 0
    assert sorted(p.name for p in (tmp_path / "dir").iterdir()) == [
        f"{exp.id}-replica-0.log",
        f"{exp.id}-replica-1.log",
    ]


def test_beaker_timeout_from_config_file(tmp_path):
    cfg = unreachable_beaker_config(tmp_path)
    user_cfg = tmp_path / "launchkit.toml"
    user_cfg.write_text('beaker_timeout = "2s"\n')
    env = {"BEAKER_CONFIG": str(cfg), "LAUNCHKIT_CONFIG": str(user_cfg)}
    r = run_cli("list", env=env, timeout=60)
    assert r.code == 5 and "did not answer within 2s" in r.stderr, r.stderr
    user_cfg.write_text('beaker_timeout = "soon"\n')
    r = run_cli("list", env=env, timeout=60)
    assert r.code == 2 and "beaker_timeout" in r.stderr, r.stderr


def test_logs_into_a_closed_pipe_is_quiet(fake_beaker):
    exp = fake_beaker.state.add_experiment(WS, "chatty", author="alice")
    fake_beaker.state.append_synthetic_logs(exp, 50_000)
    fake_beaker.state.finish_job(exp, 0)
    for cmd in (["logs", exp.id], ["follow", exp.id]):
        p = subprocess.Popen(
            [sys.executable, "-m", "launchkit", *cmd],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=os.environ.copy(),
        )
        try:
            assert p.stdout.readline().startswith(b"line 000000")
            p.stdout.close()  # like `| head -1`
            err = p.stderr.read()
            p.wait(30)
        finally:
            p.kill()
        assert p.returncode == 141, (cmd, err)
        assert b"error" not in err and b"Traceback" not in err
