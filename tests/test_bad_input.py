"""Every user mistake: one line on stderr naming the bad value (and a fix), exit code 2, no traceback."""

from __future__ import annotations

import pytest

from conftest import run_cli
from inproc import run_main

CMD = ["--", "python", "train.py"]

# (id, arguments before the command (None: the args are complete), text the one-line error must contain)
CASES: list[tuple[str, list[str], str]] = [
    ("missing-separator", ["run", "--dry-run", "python", "train.py"], "after `--`"),
    ("missing-separator-no-args", ["run", "--dry-run"], "after `--`"),
    ("empty-command", ["run", "--dry-run", "--"], "empty"),
    ("empty-first-arg", ["run", "--dry-run", "--", ""], "empty"),
    ("extra-before-separator", ["run", "--dry-run", "--allow-dirty", "false", *CMD], "'false'"),
    ("extra-two-tokens", ["run", "--dry-run", "oops", "again", *CMD], "'oops'"),
    ("duration-unit", ["run", "--task-timeout", "5x", *CMD], "'5x'"),
    ("duration-negative", ["run", "--task-timeout", "-5m", *CMD], "'-5m'"),
    ("duration-zero", ["run", "--task-timeout", "0", *CMD], "'0'"),
    ("duration-word", ["run", "--min-runtime", "soon", *CMD], "'soon'"),
    ("duration-trailing-number", ["run", "--synchronized-start-timeout", "1h30", *CMD], "'1h30'"),
    ("size-unit", ["run", "--memory", "10GX", *CMD], "'10GX'"),
    ("size-zero", ["run", "--memory", "0", *CMD], "'0'"),
    ("size-negative", ["run", "--memory", "-1GiB", *CMD], "'-1GiB'"),
    ("size-word", ["run", "--shared-memory", "lots", *CMD], "'lots'"),
    ("gpus-negative", ["run", "--gpus", "-1", *CMD], "--gpus -1"),
    ("gpus-not-int", ["run", "--gpus", "two", *CMD], "'two'"),
    ("replicas-zero", ["run", "--replicas", "0", *CMD], "--replicas 0"),
    ("replicas-negative", ["run", "--replicas", "-2", *CMD], "--replicas -2"),
    ("cpus-zero", ["run", "--cpus", "0", *CMD], "--cpus 0"),
    ("retries-negative", ["run", "--retries", "-1", *CMD], "--retries -1"),
    ("env-no-name", ["run", "--env", "=value", *CMD], "'=value'"),
    ("env-unset-local", ["run", "--env", "LK_SURELY_UNSET_VAR", *CMD], "LK_SURELY_UNSET_VAR"),
    ("env-bad-name", ["run", "--env", "1BAD=x", *CMD], "'1BAD'"),
    ("env-twice", ["run", "--env", "A=1", "--env", "A=2", *CMD], "'A'"),
    ("env-reserved", ["run", "--env", "LAUNCHKIT_RUN_ID=x", *CMD], "'LAUNCHKIT_RUN_ID'"),
    ("env-secret-no-name", ["run", "--env-secret", "=SECRET", *CMD], "'=SECRET'"),
    ("env-secret-empty-secret", ["run", "--env-secret", "NAME=", *CMD], "'NAME='"),
    ("env-secret-bad-secret", ["run", "--env-secret", "NAME=has space", *CMD], "'has space'"),
    ("env-and-secret-clash", ["run", "--env", "TOKEN=x", "--env-secret", "TOKEN", *CMD], "'TOKEN'"),
    ("dataset-no-mount", ["run", "--dataset", "mydata", *CMD], "'mydata'"),
    ("dataset-relative-mount", ["run", "--dataset", "mydata:data", *CMD], "'data'"),
    ("dataset-no-name", ["run", "--dataset", ":/data", *CMD], "':/data'"),
    ("dataset-read-write", ["run", "--dataset", "mydata:/data:rw", *CMD], "'mydata:/data:rw'"),
    ("mount-no-target", ["run", "--mount", "/host", *CMD], "'/host'"),
    ("mount-relative-target", ["run", "--mount", "/host:data", *CMD], "'data'"),
    ("mount-relative-host", ["run", "--mount", "host:/data", *CMD], "'host'"),
    ("weka-no-target", ["run", "--weka", "bucket", *CMD], "'bucket'"),
    ("weka-relative-target", ["run", "--weka", "bucket:weka", *CMD], "'weka'"),
    ("duplicate-mount-path", ["run", "--dataset", "a:/data", "--weka", "b:/data", *CMD], "'/data'"),
    (
        "runtime-mount-path",
        ["run", "--dataset", "a:/launchkit", *CMD],
        "'/launchkit' is where launchkit's runtime",
    ),
    ("upload-missing", ["run", "--upload", "no/such/dir:/data", *CMD], "'no/such/dir'"),
    (
        "both-images",
        ["run", "--beaker-image", "org/img", "--docker-image", "python:3.12", *CMD],
        "--docker-image",
    ),
    ("hostname-with-cluster", ["run", "--hostname", "node1", "--cluster", "ai2/jupiter", *CMD], "'node1'"),
    ("hostname-with-gpu-type", ["run", "--hostname", "node1", "--gpu-type", "h100", *CMD], "--gpu-type"),
    ("priority-unknown", ["run", "--priority", "super", *CMD], "'super'"),
    ("exec-method-unknown", ["run", "--exec-method", "fork", *CMD], "'fork'"),
    ("interconnect-unknown", ["run", "--interconnect", "ethernet", *CMD], "'ethernet'"),
    ("backend-unknown", ["run", "--backend", "slurm", *CMD], "'slurm'"),
    ("local-and-backend", ["run", "--local", "--backend", "beaker", *CMD], "'beaker'"),
    ("two-launchers", ["run", "--torchrun", "--ray", *CMD], "--ray"),
    ("all-and-no-extras", ["run", "--uv-all-extras", "--uv-no-extras", *CMD], "--uv-all-extras"),
    ("extra-and-all-extras", ["run", "--uv-extra", "gpu", "--uv-all-extras", *CMD], "'gpu'"),
    ("no-python-and-system", ["run", "--no-python", "--system-python", *CMD], "--system-python"),
    ("no-python-and-extra", ["run", "--no-python", "--uv-extra", "gpu", *CMD], "--uv-extra"),
    ("system-python-and-version", ["run", "--system-python", "--python-version", "3.12", *CMD], "'3.12'"),
    ("python-version-bad", ["run", "--python-version", "three", *CMD], "'three'"),
    ("python-version-too-old", ["run", "--python-version", "3.7", *CMD], "'3.7'"),
    ("python-version-too-old-patch", ["run", "--python-version", "3.6.15", *CMD], "'3.6.15'"),
    ("uv-cache-relative", ["run", "--uv-cache-dir", "cache", *CMD], "'cache'"),
    ("uv-cache-and-env", ["run", "--uv-cache-dir", "/c", "--env", "UV_CACHE_DIR=/d", *CMD], "UV_CACHE_DIR"),
    ("results-relative", ["run", "--results", "out", *CMD], "'out'"),
    ("name-with-space", ["run", "--name", "my exp", *CMD], "'my exp'"),
    ("task-name-bad", ["run", "--task-name", "a/b", *CMD], "'a/b'"),
    ("preemptible-and-min-runtime", ["run", "--preemptible", "--min-runtime", "1h", *CMD], "--min-runtime"),
    ("profile-and-no-profile", ["run", "--profile", "jupiter", "--no-profile", *CMD], "'jupiter'"),
    ("unknown-option", ["run", "--gpuz", "1", *CMD], "--gpuz"),
    ("option-missing-value", ["run", "--cluster"], "--cluster"),
    ("unknown-command", ["launch", *CMD], "launch"),
]


@pytest.mark.parametrize("args,expected", [pytest.param(a, e, id=i) for i, a, e in CASES])
def test_bad_input_is_one_line_exit_2(repo, args, expected):
    r = run_main(*args, cwd=repo.path)
    assert r.code == 2, (r.code, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ")
    assert expected in lines[0], lines[0]
    assert "Traceback" not in r.stderr
    assert r.stdout == ""


def test_at_least_40_cases():
    assert len(CASES) >= 40


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,expected",
    [
        (["run", "--dry-run", "--allow-dirty", "false", *CMD], "'false'"),
        (["run", "--memory", "10GX", *CMD], "'10GX'"),
        (["run", "--gpus", "abc", *CMD], "'abc'"),
        (["run", "--dry-run"], "after `--`"),
        (["run", "--hostname", "n1", "--cluster", "c", *CMD], "'n1'"),
    ],
)
def test_bad_input_through_the_real_cli(repo, args, expected):
    r = run_cli(*args, cwd=repo.path, timeout=60)
    assert r.code == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and expected in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


BAD_CONFIG = [
    ("unknown-key", 'worksapce = "ai2/x"\n', "'worksapce'", "did you mean 'workspace'"),
    ("wrong-type", 'gpus = "many"\n', "'gpus'", "integer"),
    ("list-expected", 'clusters = "ai2/jupiter"\n', "'clusters'", "list"),
    ("bad-duration", 'task_timeout = "5 minutes"\n', "'task_timeout'", "'5 minutes'"),
    ("bad-priority", 'priority = "asap"\n', "'priority'", "'asap'"),
    ("env-not-table", 'env = ["A=1"]\n', "'env'", "table"),
]


@pytest.mark.parametrize("body,key,detail", [pytest.param(b, k, d, id=i) for i, b, k, d in BAD_CONFIG])
def test_malformed_project_config_names_the_key(repo, body, key, detail):
    repo.commit({"pyproject.toml": "[project]\nname = 'x'\n\n[tool.launchkit]\n" + body})
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 2, r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and key in line and detail in line and "pyproject.toml" in line, line


def test_tool_launchkit_not_a_table(repo):
    repo.commit({"pyproject.toml": "[tool]\nlaunchkit = 3\n"})
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 2 and "[tool.launchkit] must be a table" in r.stderr


def test_invalid_toml_in_pyproject(repo):
    repo.commit({"pyproject.toml": "[tool.launchkit\nworkspace = 1\n"})
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 2 and "not valid TOML" in r.stderr and r.stderr.count("\n") == 1


def test_bad_user_config_names_the_file(repo, tmp_path):
    cfg = tmp_path / "user.toml"
    cfg.write_text('budgett = "ai2/b"\n')
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path, env={"LAUNCHKIT_CONFIG": str(cfg)})
    assert r.code == 2 and str(cfg) in r.stderr and "did you mean 'budget'" in r.stderr


def test_bad_environment_default_names_the_variable(repo):
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path, env={"LAUNCHKIT_PRIORITY": "asap"})
    assert r.code == 2 and "LAUNCHKIT_PRIORITY" in r.stderr and "'asap'" in r.stderr


@pytest.mark.parametrize("flag", ["HF_TOKEN", "WANDB_API_KEY=abc", "MY_SERVICE_PASSWORD=x"])
def test_secret_looking_env_is_refused(repo, flag):
    r = run_main(
        "run",
        "--dry-run",
        "--env",
        flag,
        "--",
        "python",
        "train.py",
        cwd=repo.path,
        env={"HF_TOKEN": "hf_do_not_print_me"},
    )
    assert r.code == 2 and "--env-secret" in r.stderr and "hf_do_not_print_me" not in r.stderr + r.stdout
    assert r.stderr.count("\n") == 1
