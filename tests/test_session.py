"""`launchkit session`: run's resources, profile env, mounts and secrets handed to `beaker session create`
(a stand-in `beaker` on PATH records its argv), checked against the fake Beaker first."""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import run_cli
from fakebeaker.scenarios import BASIC_SECRETS
from inproc import run_main

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

WS = "ai2/launchkit"


@pytest.fixture
def beaker_cli(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    stub = bin_dir / "beaker"
    stub.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\nsys.exit(7)\n"
    )
    stub.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return env, record


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]


def test_session_hands_runs_resources_to_the_beaker_cli(repo, fake_beaker, beaker_cli, tmp_path):
    env, record = beaker_cli
    data = tmp_path / "code"
    data.mkdir()
    (data / "__init__.py").write_bytes(b"")
    r = run_cli(
        "session", "--workspace", WS, "--name", "dev", "--cluster", "jup*", "--gpus", "2", "--memory", "64GiB",
        "--env", "MODE=debug", "--env-secret", "GH=GITHUB_TOKEN", "--aws-credentials-secret", "HF_TOKEN",
        "--dataset-secret", "GITHUB_TOKEN:/etc/gh-token", "--weka", "oe-data:/data", "--upload", f"{data}:/code",
        "--port", "8888", "--detach", "--preset", "ai2-oe",
        "--", "bash", "-l",
        cwd=repo.path, env=env, timeout=120,
    )  # fmt: skip
    assert r.code == 7, r.stderr  # the beaker CLI's own exit code
    argv = json.loads(record.read_text())
    assert argv[:2] == ["session", "create"]
    assert _pairs(argv, "--workspace") == [WS] and _pairs(argv, "--name") == ["dev"]
    assert _pairs(argv, "--gpus") == ["2"] and _pairs(argv, "--memory") == ["64GiB"]
    assert _pairs(argv, "--cluster") == ["ai2/jupiter"]  # resolved like run
    envs, secrets, mounts = _pairs(argv, "--env"), _pairs(argv, "--secret-env"), _pairs(argv, "--mount")
    assert "MODE=debug" in envs
    assert any(e.startswith("HF_HOME=/weka/") for e in envs), envs  # the ai2-oe preset's env
    assert "GH=GITHUB_TOKEN" in secrets and "WANDB_API_KEY=alice_WANDB_API_KEY" in secrets  # its secrets
    assert "AWS_SHARED_CREDENTIALS_FILE=/launchkit-credentials/aws-credentials" in envs
    assert "src=secret,ref=HF_TOKEN,dst=/launchkit-credentials/aws-credentials" in mounts
    assert "src=secret,ref=GITHUB_TOKEN,dst=/etc/gh-token" in mounts
    assert "src=weka,ref=oe-data,dst=/data" in mounts
    ds = next(d for d in fake_beaker.state.datasets.values() if d.name.startswith("launchkit-upload-"))
    assert f"beaker://{ds.id}=/code" in mounts and ds.files["__init__.py"] == b""
    assert _pairs(argv, "--port") == ["8888"] and "--detach" in argv
    assert argv[-3:] == ["--", "bash", "-l"]
    assert not any(a.startswith("LAUNCHKIT_GIT") for a in envs)
    for value in BASIC_SECRETS.values():
        assert value not in " ".join(argv) + r.stderr + r.stdout
    assert not any(e.name == "dev" for e in fake_beaker.state.experiments.values())  # no experiment


def test_missing_secret_is_refused_before_the_cli_runs(repo, fake_beaker, beaker_cli):
    env, record = beaker_cli
    r = run_cli("session", "--workspace", WS, "--env-secret", "X=NOPE", cwd=repo.path, env=env, timeout=90)
    assert r.code == 3 and "NOPE" in r.stderr and not record.exists()


def test_without_the_beaker_cli_one_line_and_exit_3(repo, tmp_path):
    bin_dir = tmp_path / "empty-bin"
    bin_dir.mkdir()
    r = run_cli("session", "--gpus", "1", cwd=repo.path, env={"PATH": str(bin_dir)}, timeout=60)
    assert r.code == 3, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "beaker` CLI" in lines[0] and "install" in lines[0]


def test_dry_run_prints_the_command_offline(repo):
    r = run_cli("session", "--dry-run", "--gpus", "1", "--replicas", "1", "--", "python", cwd=repo.path)
    assert r.code == 0, r.stderr
    assert r.stdout.startswith("beaker session create --gpus 1 ") and r.stdout.rstrip().endswith("-- python")
    r = run_cli("session", "--dry-run", "--replicas", "2", cwd=repo.path)
    assert r.code == 2 and "one node" in r.stderr
    r = run_cli("session", "--local", cwd=repo.path)
    assert r.code == 2 and "Beaker only" in r.stderr


def test_what_only_a_launched_job_does_is_refused_for_a_session(repo):
    """A session runs the image's shell, not launchkit's runtime: an option it would silently drop
    (posting, the watchdog, retries) is refused naming it; --sweep is named as what to drop."""
    for given in (
        ["--notify-url", "https://example.com/events"], ["--notify-secret", "EVENTS_URL"],
        ["--slack-webhook-secret", "SLACK"], ["--stall-timeout", "5m"], ["--retries", "2"],
        ["--retry-on", "preemption"], ["--require-resume"], ["--timeout", "1h"],
    ):  # fmt: skip
        r = run_main("session", "--dry-run", *given, cwd=repo.path)
        assert (
            r.code == 2 and r.stderr == f"error: {given[0]} is for `launchkit run` (drop it for sessions)\n"
        ), (
            given,
            r.stderr,
        )
    r = run_main("session", "--dry-run", "--sweep", "lr=1,2", cwd=repo.path)
    assert r.code == 2 and "drop --multi/--sweep for sessions" in r.stderr, r.stderr
