"""--dataset-secret and the cloud-credential secrets: names only in the spec, files inside the job."""

from __future__ import annotations

import stat

import pytest
import yaml

from conftest import run_cli
from fakebeaker.scenarios import BASIC_SECRETS
from lk_helpers import entrypoint

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

NO_PY = {"LAUNCHKIT_NO_PYTHON": "1"}
SHOW = (
    'for v in AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE GOOGLE_APPLICATION_CREDENTIALS; do echo "$v=${!v}"; done;'
    ' cat "$AWS_CONFIG_FILE" "$AWS_SHARED_CREDENTIALS_FILE" "$GOOGLE_APPLICATION_CREDENTIALS";'
    ' env | grep -c "^LAUNCHKIT_\\(AWS\\|GOOGLE\\)" || true'
)


def test_spec_holds_secret_names_only(repo):
    r = run_cli(
        "run", "--dry-run",
        "--dataset-secret", "SSH_KEY:/root/.ssh/id_ed25519",
        "--aws-config-secret", "AWS_CFG",
        "--aws-credentials-secret", "AWS_CREDS",
        "--google-credentials-secret", "GCP_SA",
        "--", "python", "t.py",
        cwd=repo.path,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    task = yaml.safe_load(r.stdout)["tasks"][0]
    assert {"mountPath": "/root/.ssh/id_ed25519", "source": {"secret": "SSH_KEY"}} in task["datasets"]
    env = {e["name"]: e for e in task["envVars"]}
    assert env["LAUNCHKIT_AWS_CONFIG"] == {"name": "LAUNCHKIT_AWS_CONFIG", "secret": "AWS_CFG"}
    assert env["LAUNCHKIT_AWS_CREDENTIALS"]["secret"] == "AWS_CREDS"
    assert env["LAUNCHKIT_GOOGLE_CREDENTIALS"]["secret"] == "GCP_SA"


def test_bad_dataset_secret_is_one_clear_line(repo):
    r = run_cli("run", "--dry-run", "--dataset-secret", "SSH_KEY", "--", "x", cwd=repo.path)
    assert r.code == 2 and "--dataset-secret" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("run", "--dry-run", "--aws-config-secret", "bad name", "--", "x", cwd=repo.path)
    assert r.code == 2 and "--aws-config-secret" in r.stderr


def test_beaker_checks_the_secrets_exist(repo, fake_beaker):
    args = ["run", "--workspace", "ai2/launchkit", "--name", "creds"]
    r = run_cli(*args, "--aws-config-secret", "NOPE", "--", "x", cwd=repo.path)
    assert r.code == 3 and "NOPE" in r.stderr
    r = run_cli(
        *args, "--aws-config-secret", "HF_TOKEN", "--dataset-secret", "GITHUB_TOKEN:/etc/gh", "--", "x",
        cwd=repo.path,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    exp = next(e for e in fake_beaker.state.experiments.values() if e.name == "creds")
    for value in BASIC_SECRETS.values():
        assert value not in r.stderr + r.stdout + repr(exp.spec)


def test_entrypoint_writes_credential_files_and_hides_the_values(repo, tmp_path):
    commit = repo.commit({"a.txt": "a"}, "a")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **NO_PY,
        "HOME": str(home),
        "LAUNCHKIT_AWS_CONFIG": "[default]\nregion = us-west-2",
        "LAUNCHKIT_AWS_CREDENTIALS": "[default]\naws_secret_access_key = s3cr3t",
        "LAUNCHKIT_GOOGLE_CREDENTIALS": '{"type": "service_account"}',
    }
    r = entrypoint(tmp_path, str(repo.remote), commit, ["bash", "-c", SHOW], env)
    assert r.returncode == 0, r.stderr
    creds = tmp_path / "runtime" / "credentials"
    assert f"AWS_CONFIG_FILE={creds / 'aws-config'}" in r.stdout
    assert "region = us-west-2" in r.stdout and "s3cr3t" in r.stdout and "service_account" in r.stdout
    assert r.stdout.strip().endswith("0")  # the value variables are gone from the command's env
    assert "s3cr3t" not in r.stderr
    for f in creds.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert not (home / ".aws").exists()  # not a Beaker job: the user's home is left alone

    r = entrypoint(tmp_path, str(repo.remote), commit, ["true"], {**env, "BEAKER_JOB_KIND": "batch"})
    assert r.returncode == 0, r.stderr
    assert (home / ".aws" / "credentials").read_text().strip().endswith("s3cr3t")
    assert (home / ".google" / "credentials.json").is_symlink()
