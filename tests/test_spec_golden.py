"""Golden YAML for representative `run --dry-run` invocations, plus round-trips through beaker-py.

The repository is built deterministically (fixed dates, fixed remote URL), so commit SHAs are stable.
The per-task bootstrap and the runtime dataset's name are replaced by placeholders (they change with
the runtime's files, and are checked here against `bootstrap()` and `runtime_dataset_name()`). Rewrite with: uv run pytest --update-goldens
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from inproc import run_main
from launchkit.core.beaker_types import spec_types
from launchkit.core.spec import dump_yaml
from launchkit.runtime import ENTRYPOINT_NAME, RUNTIME_MOUNT, bootstrap, runtime_dataset_name

GOLDEN = Path(__file__).parent / "golden"
SCRIPT_PLACEHOLDER = "<bootstrap: launchkit.runtime.bootstrap()>"
DATASET_PLACEHOLDER = "<runtime dataset: launchkit.runtime.runtime_dataset_name()>"
REMOTE = "https://github.com/example-org/example-repo.git"
FIXED = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00"}
CONFIG = """[project]
name = "example"
version = "0.1.0"

[tool.launchkit]
workspace = "ai2/example"
budget = "ai2/example-budget"
clusters = ["ai2/jupiter", "ai2/titan"]
docker_image = "ghcr.io/example-org/train:2026.01"
uv_cache_dir = "/weka/oe-training-default/uv-cache"
torch_backend = "cu128"

[tool.launchkit.env]
WANDB_PROJECT = "example"

[tool.launchkit.env_secrets]
WANDB_API_KEY = "example_WANDB_API_KEY"
HF_TOKEN = "example_HF_TOKEN"
"""

CASES: dict[str, list[str]] = {
    "minimal": ["--", "python", "train.py"],
    "resources": [
        "--gpus",
        "8",
        "--cpus",
        "32",
        "--memory",
        "256GiB",
        "--shared-memory",
        "10.24gb",
        "--",
        "python",
        "train.py",
        "--lr",
        "3e-4",
    ],
    "constraints": [
        "--cluster",
        "ai2/jupiter",
        "--cluster",
        "ai2/*-h100",
        "--gpu-type",
        "h100",
        "--tag",
        "fast",
        "--interconnect",
        "ib",
        "--gpus",
        "1",
        "--",
        "python",
        "train.py",
    ],
    "hostnames": ["--hostname", "node-1.example.org", "--hostname", "node-2.example.org", "--", "nvidia-smi"],
    "inputs": [
        "--dataset",
        "example-org/tokens:/data",
        "--dataset",
        "01HXYZ:shards/000:/shards",
        "--mount",
        "/net/nfs:/nfs:ro",
        "--weka",
        "oe-training-default:/weka/oe:rw",
        "--env",
        "A=1",
        "--env",
        'QUOTED=it\'s "here"',
        "--env-secret",
        "HF_TOKEN",
        "--env-secret",
        "WANDB_API_KEY=my_wandb",
        "--git-token-secret",
        "my_github_token",
        "--results",
        "/out",
        "--",
        "python",
        "train.py",
    ],
    "task": [
        "--task-name",
        "train",
        "--priority",
        "high",
        "--task-timeout",
        "2h30m",
        "--min-runtime",
        "1h",
        "--no-auto-resume",
        "--retries",
        "3",
        "--",
        "python",
        "train.py",
    ],
    "workload": [
        "--name",
        "exp-1",
        "--description",
        "A first run: baseline",
        "--workspace",
        "ai2/ws",
        "--budget",
        "ai2/budget",
        "--group",
        "ai2/sweep-1",
        "--group",
        "ai2/baselines",
        "--beaker-image",
        "example-org/train-image",
        "--",
        "python",
        "train.py",
    ],
    "multinode": [
        "--replicas",
        "4",
        "--gpus",
        "8",
        "--leader-selection",
        "--host-networking",
        "--propagate-failure",
        "--propagate-preemption",
        "--synchronized-start-timeout",
        "5m",
        "--torchrun",
        "--",
        "python",
        "-m",
        "example.train",
    ],
    "python": [
        "--python-version",
        "3.12",
        "--uv-extra",
        "train",
        "--uv-extra",
        "eval",
        "--torch-backend",
        "cu128",
        "--uv-cache-dir",
        "/weka/uv",
        "--pre-setup",
        "echo 'pre' && nvidia-smi",
        "--post-setup",
        "scripts/setup.sh",
        "--exec-method",
        "bash",
        "--",
        "python",
        "train.py",
    ],
    "no-python": ["--no-python", "--docker-image", "ubuntu:24.04", "--", "bash", "-c", "echo $HOME; ls -la"],
    "system-python": [
        "--system-python",
        "--install",
        "pip install -e .[all]",
        "--not-preemptible",
        "--",
        "python",
        "train.py",
    ],
    "tricky-argv": [
        "--",
        "python",
        "-c",
        "import sys; print(sys.argv)",
        "a b",
        "$HOME",
        "'single'",
        '"double"',
        "multi\nline",
        "trailing space ",
        "ünïcødé ✓",
        "--flag=1",
        "",
        "*",
        "\\n",
    ],
    "config": ["--workspace", "ai2/override", "--env", "WANDB_PROJECT=override", "--", "python", "train.py"],
}


@pytest.fixture(scope="module")
def golden_repo(tmp_path_factory):
    """A repository whose commits (and so SHAs) are identical on every machine and every run."""
    env = {
        **os.environ,
        **FIXED,
        "GIT_AUTHOR_NAME": "Test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "Test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(tmp_path_factory.mktemp("home")),
    }
    repos = {}
    for kind in ("plain", "config"):
        work = tmp_path_factory.mktemp(kind) / "example-repo"
        work.mkdir()

        def g(*args: str, work: Path = work) -> str:
            return subprocess.run(
                ["git", *args], cwd=work, env=env, check=True, capture_output=True, text=True, timeout=60
            ).stdout.strip()

        g("init", "-q", "-b", "main")
        (work / "train.py").write_text("import sys\nprint('train', sys.argv[1:])\n")
        if kind == "config":
            (work / "pyproject.toml").write_text(CONFIG)
        g("add", "-A")
        g("commit", "-q", "-m", "example")
        g("remote", "add", "origin", REMOTE)
        g("update-ref", "refs/remotes/origin/main", "HEAD")  # as after a push; no network
        g("branch", "-q", "--set-upstream-to=origin/main")
        repos[kind] = work
    return repos


def normalised(spec_yaml: str) -> tuple[str, dict]:
    data = yaml.safe_load(spec_yaml)
    for task in data["tasks"]:
        assert task["command"] == ["bash", "-c", bootstrap(), ENTRYPOINT_NAME]
        task["command"][2] = SCRIPT_PLACEHOLDER
        runtime = task["datasets"][0]
        assert runtime == {
            "source": {"beaker": runtime_dataset_name()},
            "mountPath": RUNTIME_MOUNT,
            "mode": "readonly",
        }
        runtime["source"]["beaker"] = DATASET_PLACEHOLDER
    return dump_yaml(data), data


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case, golden_repo, request):
    cwd = golden_repo["config" if case == "config" else "plain"]
    r = run_main("run", "--dry-run", *CASES[case], cwd=cwd)
    assert r.code == 0, r.stderr
    text, _ = normalised(r.stdout)
    path = GOLDEN / f"{case}.yaml"
    if request.config.getoption("--update-goldens"):
        path.write_text(text)
    assert path.exists(), f"missing {path}: run pytest --update-goldens"
    assert text == path.read_text(), f"{case}: spec changed (pytest --update-goldens if intended)"


@pytest.mark.filterwarnings(
    "ignore:The 'preemptible' field is deprecated:DeprecationWarning"
)  # beaker-py's parser
@pytest.mark.parametrize("case", sorted(CASES))
def test_round_trips_through_beaker_py(case, golden_repo):
    cwd = golden_repo["config" if case == "config" else "plain"]
    data = yaml.safe_load(run_main("run", "--dry-run", *CASES[case], cwd=cwd).stdout)
    spec = spec_types().BeakerExperimentSpec.from_json(data)
    assert _undo_host_path_bug(spec.to_json()) == data


def _undo_host_path_bug(data: dict) -> dict:
    """beaker-py 2.8.1: BeakerDataMount.from_json keeps `source` as a dict with snake_case keys, so a
    `hostPath` source comes back as `host_path` (see test_beaker_py_host_path_bug)."""
    for task in data["tasks"]:
        for mount in task.get("datasets") or []:
            if "host_path" in mount["source"]:
                mount["source"]["hostPath"] = mount["source"].pop("host_path")
    return data


@pytest.mark.xfail(strict=True, reason="beaker-py 2.8.1 BeakerDataMount.from_json does not parse `source`")
def test_beaker_py_host_path_bug():
    data = {
        "version": "v2",
        "tasks": [
            {
                "name": "main",
                "image": {"docker": "x"},
                "context": {},
                "datasets": [{"source": {"hostPath": "/h"}, "mountPath": "/m"}],
            }
        ],
    }
    out = spec_types().BeakerExperimentSpec.from_json(data).to_json()
    assert out["tasks"][0]["datasets"] == data["tasks"][0]["datasets"]


def test_argv_arrives_unchanged(golden_repo):
    data = yaml.safe_load(
        run_main("run", "--dry-run", *CASES["tricky-argv"], cwd=golden_repo["plain"]).stdout
    )
    assert data["tasks"][0]["arguments"] == CASES["tricky-argv"][1:]


@pytest.mark.slow
def test_byte_identical_across_processes(golden_repo):
    from conftest import run_cli

    first = run_cli("run", "--dry-run", *CASES["multinode"], cwd=golden_repo["plain"], timeout=60)
    second = run_cli("run", "--dry-run", *CASES["multinode"], cwd=golden_repo["plain"], timeout=60)
    assert first.code == 0 and first.stdout == second.stdout
    assert "LAUNCHKIT_RDZV_PORT" in first.stdout


@pytest.mark.slow
def test_dry_run_stdout_is_only_yaml_and_save_spec_matches(golden_repo, tmp_path):
    from conftest import run_cli

    out = tmp_path / "spec.yaml"
    r = run_cli(
        "run",
        "--dry-run",
        "--save-spec",
        str(out),
        "--",
        "python",
        "train.py",
        cwd=golden_repo["plain"],
        timeout=60,
    )
    assert r.code == 0
    assert out.read_text() == r.stdout
    assert isinstance(yaml.safe_load(r.stdout), dict)
    assert "dry run" in r.stderr and "spec saved" in r.stderr


def test_save_spec_to_an_unwritable_path(golden_repo, tmp_path):
    r = run_main(
        "run",
        "--dry-run",
        "--save-spec",
        str(tmp_path / "no" / "such" / "spec.yaml"),
        "--",
        "x",
        cwd=golden_repo["plain"],
    )
    assert r.code == 2 and "--save-spec" in r.stderr


def test_goldens_cover_at_least_ten_invocations():
    assert len(CASES) >= 10
    assert {p.stem for p in GOLDEN.glob("*.yaml")} == set(CASES)
