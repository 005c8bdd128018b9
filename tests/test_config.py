"""Defaults from [tool.launchkit], the user config file and LAUNCHKIT_* variables; the command line wins."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from inproc import run_main

CMD = ["--", "python", "train.py"]


def _env(spec: dict) -> dict:
    return {e["name"]: e.get("value", {"secret": e.get("secret")}) for e in spec["tasks"][0]["envVars"]}


def _project(repo, body: str) -> None:
    repo.commit({"pyproject.toml": "[project]\nname = 'demo'\nversion = '0'\n\n[tool.launchkit]\n" + body})


def test_precedence_cli_over_env_over_project_over_user(repo, tmp_path):
    user = tmp_path / "config.toml"
    user.write_text(
        'workspace = "ai2/user"\nbudget = "ai2/user-budget"\npriority = "low"\ngpu_types = ["a100"]\n'
    )
    _project(repo, 'workspace = "ai2/project"\nbudget = "ai2/project-budget"\n')
    env = {"LAUNCHKIT_CONFIG": str(user), "LAUNCHKIT_WORKSPACE": "ai2/env"}
    spec = yaml.safe_load(
        run_main("run", "--dry-run", "--budget", "ai2/cli", *CMD, cwd=repo.path, env=env).stdout
    )
    assert spec["budget"] == "ai2/cli"  # command line > project > user
    assert spec["tasks"][0]["context"]["priority"] == "low"  # only the user file sets it
    assert _env(spec)["LAUNCHKIT_CONSTRAINT_GPU_TYPES"] == "a100"
    # the workspace is not in the spec; it is checked through help below and by the request
    import os

    from launchkit.config import load_config

    old = os.getcwd()
    os.chdir(repo.path)
    try:
        cfg = load_config(environ=env)
    finally:
        os.chdir(old)
    assert cfg.get("workspace") == "ai2/env" and cfg.source("workspace") == "environment"
    assert cfg.get("budget") == "ai2/project-budget" and cfg.source("budget") == "pyproject.toml"


def test_project_config_found_from_a_subdirectory(repo):
    _project(repo, 'docker_image = "ghcr.io/org/img:1"\ntask_timeout = "2h"\nclusters = ["ai2/jupiter"]\n')
    (repo.path / "src" / "pkg").mkdir(parents=True)
    spec = yaml.safe_load(run_main("run", "--dry-run", *CMD, cwd=repo.path / "src" / "pkg").stdout)
    task = spec["tasks"][0]
    assert task["image"] == {"docker": "ghcr.io/org/img:1"}
    assert task["timeout"] == 7200 * 10**9
    assert task["constraints"]["cluster"] == ["ai2/jupiter"]


def test_cli_list_replaces_config_list_and_env_merges_by_name(repo):
    _project(
        repo,
        'clusters = ["ai2/a", "ai2/b"]\n[tool.launchkit.env]\nA = "1"\nB = "2"\n'
        '[tool.launchkit.env_secrets]\nHF_TOKEN = "my_hf"\n',
    )
    spec = yaml.safe_load(
        run_main(
            "run",
            "--dry-run",
            "--cluster",
            "ai2/c",
            "--env",
            "B=3",
            "--env-secret",
            "WANDB_API_KEY",
            *CMD,
            cwd=repo.path,
        ).stdout
    )
    task = spec["tasks"][0]
    assert task["constraints"]["cluster"] == ["ai2/c"]
    env = _env(spec)
    assert env["A"] == "1" and env["B"] == "3"
    assert env["HF_TOKEN"] == {"secret": "my_hf"} and env["WANDB_API_KEY"] == {"secret": "WANDB_API_KEY"}


def test_cli_image_beats_config_image_of_the_other_kind(repo):
    _project(repo, 'beaker_image = "org/img"\n')
    spec = yaml.safe_load(
        run_main("run", "--dry-run", "--docker-image", "ubuntu:24.04", *CMD, cwd=repo.path).stdout
    )
    assert spec["tasks"][0]["image"] == {"docker": "ubuntu:24.04"}


def test_dash_keys_are_accepted(repo):
    _project(repo, 'task-name = "train"\nuv-extras = ["gpu"]\n')
    spec = yaml.safe_load(run_main("run", "--dry-run", *CMD, cwd=repo.path).stdout)
    assert spec["tasks"][0]["name"] == "train"
    assert _env(spec)["LAUNCHKIT_UV_EXTRAS"] == "gpu"


def test_uv_no_extras_overrides_config(repo):
    _project(repo, "uv_all_extras = true\n")
    on = _env(yaml.safe_load(run_main("run", "--dry-run", *CMD, cwd=repo.path).stdout))
    off = _env(yaml.safe_load(run_main("run", "--dry-run", "--uv-no-extras", *CMD, cwd=repo.path).stdout))
    assert on["LAUNCHKIT_UV_ALL_EXTRAS"] == "1" and "LAUNCHKIT_UV_ALL_EXTRAS" not in off


def test_runtime_contract_vars_are_not_config(repo):
    """Inside a job LAUNCHKIT_TASK_NAME etc. are set; a nested launchkit must not take them as defaults."""
    spec = yaml.safe_load(
        run_main(
            "run",
            "--dry-run",
            *CMD,
            cwd=repo.path,
            env={"LAUNCHKIT_TASK_NAME": "outer", "LAUNCHKIT_PYTHON_VERSION": "3.9"},
        ).stdout
    )
    assert spec["tasks"][0]["name"] == "main" and "LAUNCHKIT_PYTHON_VERSION" not in _env(spec)


def test_help_shows_where_defaults_come_from(repo, tmp_path):
    user = tmp_path / "config.toml"
    user.write_text('budget = "ai2/mine"\n')
    _project(repo, 'workspace = "ai2/foo"\nclusters = ["ai2/jupiter", "ai2/titan"]\n')
    r = run_cli(
        "run",
        "--help",
        cwd=repo.path,
        env={"LAUNCHKIT_CONFIG": str(user), "COLUMNS": "200", "LAUNCHKIT_GPU_TYPES": "h100"},
    )
    assert r.code == 0
    text = " ".join(r.stdout.split())
    assert "[default: ai2/foo (from pyproject.toml)]" in text
    assert "[default: ai2/jupiter, ai2/titan (from pyproject.toml)]" in text
    assert "[default: ai2/mine (from user config)]" in text
    assert "[default: h100 (from environment)]" in text


def test_help_renders_with_a_broken_config(repo):
    _project(repo, "gpus = [\n")
    r = run_cli("run", "--help", cwd=repo.path)
    assert r.code == 0 and "--gpus" in r.stdout


def test_zero_and_false_on_the_command_line_beat_the_config(repo):
    _project(repo, "retries = 3\npreemptible = true\n")
    spec = yaml.safe_load(
        run_main("run", "--dry-run", "--retries", "0", "--not-preemptible", *CMD, cwd=repo.path).stdout
    )
    assert "retry" not in spec and spec["tasks"][0]["context"] == {"preemptible": False}
    _project(repo, "gpus = 8\n")
    spec = yaml.safe_load(run_main("run", "--dry-run", "--gpus", "0", *CMD, cwd=repo.path).stdout)
    assert spec["tasks"][0]["resources"]["gpuCount"] == 0  # gantry's meaning: no GPUs


@pytest.mark.parametrize("xdg", [None, "", "  ", "/abs/cfg", "rel/cfg", "~/cfg", "./cfg"])
def test_user_config_path_is_platformdirs_answer(monkeypatch, xdg):
    """The user config file is where platformdirs puts launchkit's config dir (the XDG spec: a relative
    XDG_CONFIG_HOME is ignored), though launchkit answers on Linux without importing it."""
    import platformdirs

    from launchkit.config import user_config_path

    if xdg is None:
        monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_CONFIG_HOME", xdg)
    monkeypatch.delenv("LAUNCHKIT_CONFIG", raising=False)
    assert user_config_path() == Path(platformdirs.user_config_dir("launchkit")) / "config.toml"
