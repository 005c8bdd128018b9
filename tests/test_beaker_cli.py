"""Beaker commands through the CLI (subprocesses) against the fake Beaker server."""

from __future__ import annotations

import socket
import time

from conftest import run_cli
from fakebeaker.scenarios import BASIC_SECRETS
from fakebeaker.state import AutoRun

WS = "ai2/launchkit"


def _no_secret_values(*texts: str) -> None:
    for text in texts:
        for value in BASIC_SECRETS.values():
            assert value not in text


def test_run_without_credentials_says_how_to_fix_it(repo):
    r = run_cli("run", "--", "python", "train.py", cwd=repo.path, timeout=60)
    assert r.code == 3, r.stderr
    assert "no Beaker credentials" in r.stderr and "--dry-run" in r.stderr and "--local" in r.stderr
    assert "Traceback" not in r.stderr


def test_run_submits_once_with_url_and_no_secret_values(repo, fake_beaker):
    fake_beaker.faults.unavailable(1, "CreateExperiment")
    r = run_cli("run", "--workspace", WS, "--name", "cli-run", "--env-secret", "GH=GITHUB_TOKEN", "--", "python", "train.py", cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    exps = [e for e in fake_beaker.state.experiments.values() if e.name == "cli-run"]
    assert len(exps) == 1
    exp = exps[0]
    assert f"/ex/{exp.id}" in r.stdout + r.stderr
    task = exp.spec["tasks"][0]
    env = {e["name"]: e for e in task["envVars"]}
    assert env["GH"]["secret"] == "GITHUB_TOKEN" and env["WANDB_API_KEY"]["secret"] == "alice_WANDB_API_KEY"
    _no_secret_values(r.stdout, r.stderr, repr(exp.spec))


def test_run_no_auto_secrets(repo, fake_beaker):
    r = run_cli("run", "--workspace", WS, "--name", "plain", "--no-auto-secrets", "--", "python", "train.py",
                cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    exp = next(e for e in fake_beaker.state.experiments.values() if e.name == "plain")
    assert not any(e.get("secret") for e in exp.spec["tasks"][0]["envVars"])


def test_run_says_exactly_what_is_wrong(repo, fake_beaker):
    r = run_cli("run", "--workspace", WS, "--env-secret", "X=MISSING_ONE", "--", "python", "train.py",
                cwd=repo.path, timeout=90)
    assert r.code == 3 and "MISSING_ONE" in r.stderr and "launchkit secret set" in r.stderr, r.stderr
    r = run_cli("run", "--workspace", "ai2/nope", "--", "python", "train.py", cwd=repo.path, timeout=90)
    assert r.code == 4 and "ai2/nope" in r.stderr, r.stderr
    assert not fake_beaker.state.experiments_of(author="alice")


def test_run_follow_exits_with_the_job_exit_code(repo, fake_beaker):
    fake_beaker.state.set_auto(AutoRun(start_after=0.1, run_for=0.3, exit_code=3, lines=["hello \xff", "done"]))
    r = run_cli("run", "--workspace", WS, "--name", "followed", "--follow", "--", "python", "train.py",
                cwd=repo.path, timeout=90)
    assert r.code == 3, r.stderr
    assert r.stdout.splitlines()[-2:] == ["hello \xff", "done"]


def test_unreachable_server_fails_within_the_deadline(tmp_path, repo):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cfg = tmp_path / "config.yml"
    cfg.write_text(f"user_token: t\nagent_address: https://127.0.0.1:{port}\nrpc_address: 127.0.0.1:{port}\n"
                   "default_workspace: ai2/x\n")
    t = time.monotonic()
    r = run_cli("--beaker-timeout", "3", "run", "--", "python", "train.py", cwd=repo.path,
                env={"BEAKER_CONFIG": str(cfg)}, timeout=60)
    assert r.code == 5 and "did not answer within 3s" in r.stderr, r.stderr
    assert time.monotonic() - t < 15
    r = run_cli("open", "--latest", env={"BEAKER_CONFIG": str(cfg), "LAUNCHKIT_BEAKER_TIMEOUT": "2"}, timeout=60)
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


def test_open_prints_urls_without_a_tty(fake_beaker):
    exp = fake_beaker.state.add_experiment(WS, "opened", author="alice")
    bob = fake_beaker.state.add_experiment(WS, "bobs", author="bob")
    r = run_cli("open", exp.id, timeout=60)
    assert r.code == 0 and r.stdout.strip().endswith(f"/ex/{exp.id}"), r.stderr
    r = run_cli("open", "--latest", timeout=60)
    assert r.code == 0 and r.stdout.strip().endswith(f"/ex/{exp.id}"), r.stderr  # never bob's newer one
    assert bob.id not in r.stdout
    r = run_cli("open", WS, timeout=60)
    assert r.code == 0 and r.stdout.strip().endswith(f"/ws/{WS}"), r.stderr
    r = run_cli("open", "jupiter-cirrascale-2", timeout=60)
    assert r.code == 0 and r.stdout.strip().endswith("/orgs/ai2/clusters/jupiter-cirrascale-2"), r.stderr
    r = run_cli("open", "no-such-thing", timeout=60)
    assert r.code == 4 and "no-such-thing" in r.stderr
