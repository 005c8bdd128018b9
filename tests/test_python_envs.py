"""Python environments beyond a fresh uv venv: requirements-only repositories, --uv-venv, conda (with a
stand-in `conda` program), a stale uv.lock refused at launch, and --resumable's W&B run id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import run_cli
from lk_helpers import entrypoint, launched_id, make_wheel, uv_lock_project, wait_finished

NO_PY = {"LAUNCHKIT_NO_PYTHON": "1"}
SHOW = ["python", "-c", "import sys, tinydep; print(tinydep.VALUE, sys.prefix)"]


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("uv-cache-envs"))


def _install_log(tmp: Path) -> str:
    return next((tmp / "results/.launchkit/logs").glob("*_install.log")).read_text()


# ---------------------------------------------------------------------------------------------- uv
@pytest.mark.slow
def test_tool_only_pyproject_installs_the_requirements(repo, tmp_path, uv_cache):
    """A pyproject.toml with only [tool.ruff] is not a project: `uv pip install .` failed (exit 106)."""
    make_wheel(repo.path / "wheels", value="5")
    sha = repo.commit(
        {
            "pyproject.toml": "[tool.ruff]\nline-length = 100\n",
            "requirements.txt": "./wheels/tinydep-0.1.0-py3-none-any.whl\n",
        },
        "tool-only pyproject",
    )
    r = entrypoint(tmp_path, str(repo.remote), sha, SHOW, {"UV_CACHE_DIR": uv_cache})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "5" and "install[requirements.txt]" in r.stderr


def _image_venv(path: Path, uv_cache: str) -> Path:
    """A venv as an image would ship it, with a package of its own (`imagepkg`)."""
    env = {**os.environ, "UV_CACHE_DIR": uv_cache, "UV_OFFLINE": "1"}
    env.pop("VIRTUAL_ENV", None)
    subprocess.run(["uv", "venv", "-q", str(path)], check=True, timeout=120, env=env)
    wheel = make_wheel(path.parent / "image-wheels", name="imagepkg", value="img")
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", str(path / "bin/python"), str(wheel)],
        check=True,
        timeout=120,
        env=env,
    )
    return path


@pytest.mark.slow
def test_uv_venv_installs_into_the_images_venv_and_keeps_its_packages(repo, tmp_path, uv_cache):
    env = {"UV_CACHE_DIR": uv_cache, "UV_OFFLINE": "1"}
    sha = uv_lock_project(repo, env)
    venv = _image_venv(tmp_path / "image-venv", uv_cache)
    argv = ["python", "-c", "import sys, tinydep, imagepkg; print(tinydep.VALUE, imagepkg.VALUE, sys.prefix)"]
    r = entrypoint(tmp_path / "job", str(repo.remote), sha, argv, {**env, "LAUNCHKIT_UV_VENV": str(venv)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["42", "img", str(venv)]
    assert "--inexact" in _install_log(tmp_path / "job")
    assert not (tmp_path / "job/runtime/.venv").exists()


def test_uv_venv_that_is_not_a_venv_fails_the_setup(repo, tmp_path):
    sha = repo.commit({"requirements.txt": ""}, "reqs")
    marker = tmp_path / "ran"
    r = entrypoint(
        tmp_path, str(repo.remote), sha, ["touch", str(marker)], {"LAUNCHKIT_UV_VENV": "/nope/venv"}
    )
    assert r.returncode == 105, r.stderr
    assert "LAUNCHKIT_UV_VENV=/nope/venv is not a virtual environment" in r.stderr and not marker.exists()


# ---------------------------------------------------------------------------------------------- conda
CONDA = textwrap.dedent(
    """\
    #!{python}
    # A stand-in for conda: records its argv; environments are plain venvs (with pip).
    import json, os, subprocess, sys
    base = {base!r}
    with open({log!r}, "a") as f:
        f.write(json.dumps(sys.argv[1:]) + "\\n")
    args = sys.argv[1:]
    def prefix():
        given = [a.split("=", 1)[1] for a in args if a.startswith("--prefix=")]
        return given[0] if given else args[args.index("-p") + 1]
    if args[:2] == ["info", "--base"]:
        print(base)
    elif args[:1] == ["shell.bash"] and args[1] == "activate":
        p = args[2]
        print(f'export PATH="{{p}}/bin:$PATH"; export CONDA_PREFIX="{{p}}"; export CONDA_SHLVL=1')
    elif args[:2] == ["env", "create"] or args[:1] == ["create"]:
        subprocess.run([sys.executable, "-m", "venv", prefix()], check=True)
    elif args[:2] == ["env", "update"]:
        pass
    else:
        sys.exit("conda stand-in: unexpected " + " ".join(args))
    """
)


@pytest.fixture
def conda(tmp_path) -> tuple[Path, Path, Path]:
    """(bin dir with the stand-in `conda`, its argv log, its base prefix)."""
    bin_dir, base = tmp_path / "conda-bin", tmp_path / "conda-base"
    bin_dir.mkdir()
    (base / "envs").mkdir(parents=True)
    log = tmp_path / "conda-argv.log"
    (bin_dir / "conda").write_text(CONDA.format(python=sys.executable, base=str(base), log=str(log)))
    (bin_dir / "conda").chmod(0o755)
    return bin_dir, log, base


def _path_with(bin_dir: Path) -> str:
    own = os.path.join(sys.prefix, "bin")
    return os.pathsep.join([str(bin_dir), *(p for p in os.environ["PATH"].split(os.pathsep) if p != own)])


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


CONDA_SHOW = [
    "python",
    "-c",
    "import os, sys, tinydep; print(tinydep.VALUE, sys.prefix, os.environ['CONDA_PREFIX'])",
]


@pytest.mark.slow
def test_conda_file_creates_an_env_and_installs_the_requirements(repo, tmp_path, conda):
    bin_dir, log, _ = conda
    make_wheel(repo.path / "wheels", value="9")
    sha = repo.commit(
        {
            "environment.yml": "name: demo\ndependencies:\n  - python=3.11\n  - pip\n",
            "requirements.txt": "./wheels/tinydep-0.1.0-py3-none-any.whl\n",
        },
        "conda env",
    )
    env = {
        "PATH": _path_with(bin_dir),
        "LAUNCHKIT_PYTHON_MANAGER": "conda",
        "LAUNCHKIT_CONDA_FILE": "environment.yml",
        "PIP_NO_INDEX": "1",
    }
    r = entrypoint(tmp_path / "job", str(repo.remote), sha, CONDA_SHOW, env, timeout=240)
    assert r.returncode == 0, r.stderr
    prefix = str(tmp_path / "job/runtime/.conda-env")
    assert r.stdout.split() == ["9", prefix, prefix]
    calls = _calls(log)
    assert ["env", "create", f"--prefix={prefix}", "--file=environment.yml"] in calls
    assert ["shell.bash", "activate", prefix] in calls
    assert "install[requirements.txt]" in r.stderr and "conda " in r.stderr  # the timing line
    assert not (tmp_path / "job/runtime/.venv").exists()  # no uv venv on the conda path


@pytest.mark.slow
def test_conda_env_by_name_is_updated_from_the_file(repo, tmp_path, conda):
    bin_dir, log, base = conda
    subprocess.run([sys.executable, "-m", "venv", str(base / "envs/train")], check=True, timeout=120)
    sha = repo.commit({"environment.yml": "dependencies: [pip]\n"}, "conda env")
    env = {
        "PATH": _path_with(bin_dir),
        "LAUNCHKIT_PYTHON_MANAGER": "conda",
        "LAUNCHKIT_CONDA_ENV": "train",
        "LAUNCHKIT_CONDA_FILE": "environment.yml",
    }
    r = entrypoint(
        tmp_path / "job", str(repo.remote), sha, ["python", "-c", "import sys; print(sys.prefix)"], env
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(base / "envs/train")
    assert ["env", "update", f"--prefix={base / 'envs/train'}", "--file=environment.yml"] in _calls(log)
    env["LAUNCHKIT_CONDA_ENV"] = "missing"
    r = entrypoint(tmp_path / "job2", str(repo.remote), sha, ["true"], env)
    assert r.returncode == 105 and "conda environment missing not found" in r.stderr, r.stderr


def test_conda_without_conda_in_the_image_says_so(repo, tmp_path):
    sha = repo.commit({"requirements.txt": ""}, "reqs")
    r = entrypoint(tmp_path, str(repo.remote), sha, ["true"], {"LAUNCHKIT_PYTHON_MANAGER": "conda"})
    assert r.returncode == 105, r.stderr
    assert "the image has no conda" in r.stderr


@pytest.mark.slow
def test_conda_options_in_the_spec(repo):
    repo.commit({"envs/environment.yml": "dependencies: [pip]\n", "sub/x.txt": "x"}, "env file")
    r = run_cli(
        "run", "--dry-run", "--conda-file", "../envs/environment.yml", "--conda-env", "base", "--", "python", "t.py",
        cwd=repo.path / "sub",
    )  # fmt: skip
    assert r.code == 0, r.stderr
    env = {e["name"]: e.get("value") for e in yaml.safe_load(r.stdout)["tasks"][0]["envVars"]}
    assert env["LAUNCHKIT_PYTHON_MANAGER"] == "conda"
    assert env["LAUNCHKIT_CONDA_FILE"] == "envs/environment.yml" and env["LAUNCHKIT_CONDA_ENV"] == "base"
    for args, message in (
        (["--conda-file", "nope.yml"], "no such file"),
        (["--python-manager", "uv", "--conda-env", "base"], "needs conda"),
        (["--conda-env", "base", "--uv-venv", "/opt/venv"], "cannot be combined with --uv-venv"),
        (["--uv-venv", "venv"], "not an absolute path"),
    ):
        r = run_cli("run", "--dry-run", *args, "--", "python", "t.py", cwd=repo.path)
        assert r.code == 2 and message in r.stderr, (args, r.stderr)


@pytest.mark.slow
def test_runtime_dir_and_uv_venv_in_the_spec(repo):
    r = run_cli(
        "run", "--dry-run", "--runtime-dir", "/workspace/", "--uv-venv", "/opt/venv", "--", "t", cwd=repo.path
    )
    assert r.code == 0, r.stderr
    env = {e["name"]: e.get("value") for e in yaml.safe_load(r.stdout)["tasks"][0]["envVars"]}
    assert env["LAUNCHKIT_RUNTIME_DIR"] == "/workspace" and env["LAUNCHKIT_UV_VENV"] == "/opt/venv"


# ---------------------------------------------------------------------------------------------- uv.lock
@pytest.mark.slow
def test_a_stale_uv_lock_is_refused_at_launch(repo, uv_cache):
    env = {"UV_CACHE_DIR": uv_cache, "UV_OFFLINE": "1"}
    uv_lock_project(repo, env)
    r = run_cli("run", "--dry-run", "--", "python", "t.py", cwd=repo.path, env=env)
    assert r.code == 0, r.stderr
    text = (
        (repo.path / "pyproject.toml").read_text().replace('dependencies = ["tinydep"]', "dependencies = []")
    )
    repo.commit({"pyproject.toml": text}, "drop the dependency, forget to lock")
    r = run_cli("run", "--dry-run", "--", "python", "t.py", cwd=repo.path, env=env)
    assert r.code == 3, r.stderr
    assert "uv.lock does not match pyproject.toml" in r.stderr and "run `uv lock`" in r.stderr
    assert "Traceback" not in r.stderr and not r.stdout
    r = run_cli(
        "run", "--dry-run", "--install", "pip install .", "--", "python", "t.py", cwd=repo.path, env=env
    )
    assert r.code == 0, r.stderr  # a custom install is the user's business


# ---------------------------------------------------------------------------------------------- W&B
def _wandb_id(tmp: Path, repo, sha: str, **env: str) -> str:
    show = ["sh", "-c", 'echo "$WANDB_RUN_ID $WANDB_RESUME"']
    r = entrypoint(
        tmp,
        str(repo.remote),
        sha,
        show,
        {**NO_PY, "LAUNCHKIT_RESUMABLE": "1", "WANDB_RESUME": "allow", **env},
    )
    assert r.returncode == 0, r.stderr
    run_id, resume = r.stdout.split()
    assert resume == "allow"
    return run_id


@pytest.mark.slow
def test_resumable_wandb_id_is_stable_per_experiment_and_task(repo, tmp_path):
    sha = repo.commit({"same.txt": "x"}, "same")
    a = _wandb_id(tmp_path / "1", repo, sha, BEAKER_EXPERIMENT_ID="01EXPA", LAUNCHKIT_TASK_NAME="main")
    retry = _wandb_id(tmp_path / "2", repo, sha, BEAKER_EXPERIMENT_ID="01EXPA", LAUNCHKIT_TASK_NAME="main")
    other_launch = _wandb_id(
        tmp_path / "3", repo, sha, BEAKER_EXPERIMENT_ID="01EXPB", LAUNCHKIT_TASK_NAME="main"
    )
    other_task = _wandb_id(tmp_path / "4", repo, sha, BEAKER_EXPERIMENT_ID="01EXPA", LAUNCHKIT_TASK_NAME="t2")
    assert a == retry and a.startswith("lk-") and len({a, other_launch, other_task}) == 3
    given = _wandb_id(tmp_path / "5", repo, sha, BEAKER_EXPERIMENT_ID="01EXPA", WANDB_RUN_ID="mine")
    assert given == "mine"


@pytest.mark.slow
def test_two_local_launches_of_the_same_command_get_two_wandb_ids(repo):
    ids = []
    for _ in range(2):
        r = run_cli(
            "run",
            "--local",
            "--no-python",
            "--resumable",
            "--",
            "sh",
            "-c",
            "echo wandb=$WANDB_RUN_ID",
            cwd=repo.path,
        )
        assert r.code == 0, r.stderr
        run = launched_id(r.stderr)
        assert wait_finished(run, {})["status"] == "succeeded"
        out = run_cli("logs", run, timeout=60).stdout
        ids.append(next(line for line in out.splitlines() if line.startswith("wandb=")))
    assert ids[0] != ids[1] and all(len(i) > len("wandb=lk-") for i in ids)
