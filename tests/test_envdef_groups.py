"""Dependency groups (PEP 735) as uv means them: --uv-group, --uv-all-groups, --uv-no-default-groups,
[tool.uv] default-groups; in the uv.lock path (`uv sync`) and the no-lock path (`uv pip install`)."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import run_cli
from launchkit.core.parse import build_request
from launchkit.core.spec import build_spec
from launchkit.errors import UsageError
from lk_helpers import FAST_ENV, entrypoint, make_wheel
from test_spec import GIT, env_of, spec_for

PROBE = ["python", "-c", "import tinydep; print('tinydep', tinydep.VALUE)"]


# ---------------------------------------------------------------------------------------------- fast
def test_group_options_reach_the_spec():
    env = env_of(spec_for(uv_group=["test", "docs"], uv_no_default_groups=True))
    assert env["LAUNCHKIT_UV_GROUPS"] == "test docs" and env["LAUNCHKIT_UV_NO_DEFAULT_GROUPS"] == "1"
    assert env_of(spec_for(uv_all_groups=True))["LAUNCHKIT_UV_ALL_GROUPS"] == "1"
    plain = env_of(spec_for())
    assert not {"LAUNCHKIT_UV_GROUPS", "LAUNCHKIT_UV_ALL_GROUPS", "LAUNCHKIT_UV_NO_DEFAULT_GROUPS"} & set(
        plain
    )


def test_group_keys_from_the_config(tmp_path):
    from launchkit.config import load_config

    (tmp_path / "pyproject.toml").write_text(
        '[tool.launchkit]\nuv-groups = ["test"]\nuv-no-default-groups = true\n'
    )
    request = build_request({}, ["python", "x"], config=load_config(tmp_path, environ={}), environ={})
    env = env_of(build_spec(request, GIT).to_json())
    assert env["LAUNCHKIT_UV_GROUPS"] == "test" and env["LAUNCHKIT_UV_NO_DEFAULT_GROUPS"] == "1"


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"uv_group": ["te st"]}, "'te st'"),
        ({"uv_group": ["-x"]}, "'-x': is not a dependency group name"),
        ({"uv_group": ["test"], "uv_all_groups": True}, "--uv-all-groups cannot be combined with --uv-group"),
        ({"uv_group": ["test"], "no_python": True}, "--no-python cannot be combined with --uv-group"),
        ({"uv_all_groups": True, "python_manager": "conda"}, "conda cannot be combined with --uv-all-groups"),
    ],
)
def test_bad_group_options_are_refused(given, said):
    with pytest.raises(UsageError) as e:
        build_request(given, ["python", "x"], environ={})
    assert said in str(e.value)


# ---------------------------------------------------------------------------------------------- jobs
# An in-tree PEP 517 backend: the project builds offline, with no build tool from an index.
BACKEND = """\
import base64, hashlib, os, zipfile

def _wheel(directory):
    dist = "demo-0.1.0.dist-info"
    files = {
        dist + "/METADATA": "Metadata-Version: 2.1\\nName: demo\\nVersion: 0.1.0\\n",
        dist + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[dist + "/RECORD"] = "\\n".join(record + [dist + "/RECORD,,"]) + "\\n"
    name = "demo-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return name

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory)

build_editable = build_wheel
"""


def _grouped_project(repo, *, uv_table: str = "", lock: bool = False) -> str:
    """A rich/structlog-like layout: the test tool (tinydep here) lives only in a `test` group."""
    make_wheel(repo.path / "wheels")
    pyproject = (
        '[project]\nname = "demo"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = []\n'
        '[dependency-groups]\ntest = ["tinydep"]\ndocs = []\n'
        '[build-system]\nrequires = []\nbuild-backend = "lkbackend"\nbackend-path = ["_build"]\n'
        f"[tool.uv]\n{uv_table}"
        '[tool.uv.sources]\ntinydep = { path = "wheels/tinydep-0.1.0-py3-none-any.whl" }\n'
    )
    sha = repo.commit({"pyproject.toml": pyproject, "_build/lkbackend.py": BACKEND}, "grouped project")
    if lock:
        env = {**os.environ, **FAST_ENV}
        env.pop("VIRTUAL_ENV", None)
        subprocess.run(["uv", "lock", "-q"], cwd=repo.path, check=True, timeout=120, env=env)
        sha = repo.commit({}, "lock")
    return sha


def _job(tmp, repo, sha, **env: str):
    return entrypoint(tmp, str(repo.remote), sha, PROBE, {"UV_CACHE_DIR": None, **env}, timeout=240)


@pytest.mark.slow
@pytest.mark.parametrize("lock", [False, True], ids=["pip", "uv.lock"])
def test_group_is_installed_only_when_asked(repo, tmp_path, lock):
    sha = _grouped_project(repo, lock=lock)
    without = _job(tmp_path / "a", repo, sha)
    assert without.returncode != 0 and "No module named 'tinydep'" in without.stderr
    with_group = _job(tmp_path / "b", repo, sha, LAUNCHKIT_UV_GROUPS="test")
    assert with_group.returncode == 0, with_group.stderr
    assert "tinydep 42" in with_group.stdout
    all_groups = _job(tmp_path / "c", repo, sha, LAUNCHKIT_UV_ALL_GROUPS="1")
    assert all_groups.returncode == 0 and "tinydep 42" in all_groups.stdout, all_groups.stderr


@pytest.mark.slow
@pytest.mark.parametrize("lock", [False, True], ids=["pip", "uv.lock"])
def test_tool_uv_default_groups_are_honoured(repo, tmp_path, lock):
    sha = _grouped_project(repo, uv_table='default-groups = ["test"]\n', lock=lock)
    r = _job(tmp_path / "a", repo, sha)
    assert r.returncode == 0 and "tinydep 42" in r.stdout, r.stderr
    off = _job(tmp_path / "b", repo, sha, LAUNCHKIT_UV_NO_DEFAULT_GROUPS="1")
    assert off.returncode != 0 and "No module named 'tinydep'" in off.stderr


@pytest.mark.slow
def test_local_run_with_uv_group(repo):
    """The issue's case: `launchkit run --local -- python -c "import tinydep"` needs `--uv-group test`."""
    _grouped_project(repo)
    env = {**FAST_ENV}
    args = ("run", "--local", "--follow")
    r = run_cli(*args, "--", *PROBE, cwd=repo.path, env=env, timeout=300)
    assert r.code != 0 and "No module named 'tinydep'" in r.stdout + r.stderr
    r = run_cli(*args, "--uv-group", "test", "--", *PROBE, cwd=repo.path, env=env, timeout=300)
    assert r.code == 0, r.stderr
    assert "tinydep 42" in r.stdout


def test_beaker_group_with_local_says_it_has_no_effect(repo):
    r = run_cli(
        "run", "--local", "--dry-run", "--group", "mygroup", "--no-python", "--", "true", cwd=repo.path
    )
    assert r.code == 0, r.stderr
    assert "--group has no effect with --local" in r.stderr
