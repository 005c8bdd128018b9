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
from launchkit.runtime.node.environment.pyenv import InstallFailed
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


# ---------------------------------------------------------------------------------------------- poetry
# A poetry project's groups, selectable as PEP 735 groups are (issue 31): the job's `uv pip install` gets
# their requirements, and the launch-time preflight resolves the same ones (one planner: runtime/node/environment/plan.py).
POETRY = """\
[tool.poetry]
name = "demo"
version = "0.1.0"

[tool.poetry.dependencies]
python = "^3.8"

[tool.poetry.dev-dependencies]
pytest = "^7.2"

[tool.poetry.group.test.dependencies]
hypothesis = "~6.1"
coverage = { version = ">= 7.0, < 8", extras = ["toml"], python = "^3.9" }
local = { path = "libs/local", develop = true }
wheel = { path = "wheels/w-1.0-py3-none-any.whl", markers = "sys_platform == 'linux'" }
tool = { git = "https://example.com/tool.git", tag = "v1", subdirectory = "py" }

[tool.poetry.group.docs]
optional = true

[tool.poetry.group.docs.dependencies]
mkdocs = "1.5.*"
zero = "^0.0.3"
"""


def _poetry_plan(tmp_path, pyproject=POETRY, **kw):
    from launchkit.runtime.node.environment.plan import plan_for

    (tmp_path / "pyproject.toml").write_text(pyproject)
    return plan_for(str(tmp_path), **kw)


def test_poetry_groups_as_uv_means_groups(tmp_path):
    """The default groups are poetry's (`poetry install`; uv's after `uvx migrate-to-uv`): every group
    not marked optional, `dev-dependencies` as `dev`; named, all and none as for PEP 735 groups."""
    assert _poetry_plan(tmp_path).poetry_groups == ["dev", "test"]
    assert _poetry_plan(tmp_path, groups=["docs"]).poetry_groups == ["docs", "dev", "test"]
    assert _poetry_plan(tmp_path, groups=["dev"], no_default=True).poetry_groups == ["dev"]
    assert _poetry_plan(tmp_path, all_groups=True).poetry_groups == ["dev", "test", "docs"]
    uv_default = POETRY + '\n[tool.uv]\ndefault-groups = ["docs"]\n'
    assert _poetry_plan(tmp_path, uv_default).poetry_groups == ["docs"]
    missing = _poetry_plan(tmp_path, groups=["nope"], no_default=True)
    assert (missing.groups, missing.poetry_groups) == (["nope"], [])  # uv names the missing group
    plan = _poetry_plan(tmp_path, groups=["docs"], no_default=True)
    assert plan.project is False and plan.kind() == "groups"  # no [build-system]: not a project


def test_poetry_dependencies_become_pep_508_requirements(tmp_path):
    plan = _poetry_plan(tmp_path, all_groups=True)
    assert plan.group_requirements == [
        "pytest>=7.2,<8",
        "hypothesis>=6.1,<6.2",
        'coverage[toml]>=7.0,<8 ; python_version >= "3.9" and python_version < "4"',
        f"-e {tmp_path / 'libs/local'}",
        f"wheel @ file://{tmp_path}/wheels/w-1.0-py3-none-any.whl ; (sys_platform == 'linux')",
        "tool @ git+https://example.com/tool.git@v1#subdirectory=py",
        "mkdocs==1.5.*",
        "zero>=0.0.3,<0.0.4",
    ]
    assert plan.group_args()[3:5] == ["-e", str(tmp_path / "libs/local")]
    from packaging.requirements import Requirement

    for line in plan.group_requirements:  # each one a valid PEP 508 requirement
        if not line.startswith("-e "):
            Requirement(line)


@pytest.mark.parametrize(
    ("constraint", "pep440"),
    [
        ("^1.2.3", ">=1.2.3,<2"),
        ("^0.2.3", ">=0.2.3,<0.3"),
        ("^0.0", ">=0.0,<0.1"),
        ("^0", ">=0,<1"),
        ("~1.2.3", ">=1.2.3,<1.3"),
        ("~1", ">=1,<2"),
        ("~=1.4", "~=1.4"),
        ("1.2.3", "==1.2.3"),
        ("*", ""),
        (">=1.2 <1.5", ">=1.2,<1.5"),
        ("!=1.3,>1", "!=1.3,>1"),
    ],
)
def test_poetry_version_constraints(tmp_path, constraint, pep440):
    text = f'[tool.poetry.group.g.dependencies]\npkg = "{constraint}"\n'
    assert _poetry_plan(tmp_path, text, groups=["g"]).group_requirements == [f"pkg{pep440}"]


def test_a_poetry_constraint_with_no_pep_508_form_is_refused(tmp_path, repo):
    from launchkit.runtime.node.environment.plan import PlanError

    text = '[tool.poetry.group.dev.dependencies]\npytest = "^6 || ^7"\n'
    with pytest.raises(PlanError, match=r"poetry group 'dev': pytest = '\^6 \|\| \^7': '\|\|'"):
        _poetry_plan(tmp_path, text)
    # at launch: exit 3 before a submit; in the job: the install step fails with that line
    from launchkit.application import Application
    from launchkit.errors import PreconditionError
    from launchkit.pyenv import check_job_environment
    from test_runtime_env import plan

    with pytest.raises(PreconditionError, match=r"pytest = '\^6 \|\| \^7'"):
        check_job_environment(Application(), str(tmp_path), "3.12", extras=[], all_extras=False, groups=[])
    with pytest.raises(InstallFailed):
        plan(tmp_path / "job", {"pyproject.toml": text})
    assert "[launchkit] error: poetry group 'dev': pytest" in (tmp_path / "job/install.log").read_text()


def test_the_job_installs_a_poetry_group_with_the_project(tmp_path):
    from test_runtime_env import plan

    files = {"pyproject.toml": POETRY + '[build-system]\nrequires = ["poetry-core"]\n'}
    kind, commands, log = plan(tmp_path, files, groups=["docs"], no_default_groups=True)
    assert (kind, commands) == (
        "project",
        [["uv", "pip", "install", ".", "mkdocs==1.5.*", "zero>=0.0.3,<0.0.4"]],
    )
    assert "dependency groups: docs (poetry)" in log.text()


@pytest.mark.slow
def test_uv_group_dev_of_a_poetry_project_works_in_the_job(repo, tmp_path):
    """The issue's case: `--uv-group dev` said the group does not exist, in the job."""
    make_wheel(repo.path / "wheels")
    pyproject = (
        '[tool.poetry]\nname = "demo"\nversion = "0.1.0"\n'
        '[tool.poetry.dev-dependencies]\ntinydep = { path = "wheels/tinydep-0.1.0-py3-none-any.whl" }\n'
        "[tool.poetry.group.docs]\noptional = true\n"
        '[tool.poetry.group.docs.dependencies]\nnosuchpkg-lk = "^1"\n'
        '[build-system]\nrequires = []\nbuild-backend = "lkbackend"\nbackend-path = ["_build"]\n'
    )
    sha = repo.commit({"pyproject.toml": pyproject, "_build/lkbackend.py": BACKEND}, "poetry project")
    asked = _job(tmp_path / "a", repo, sha, LAUNCHKIT_UV_GROUPS="dev", LAUNCHKIT_UV_NO_DEFAULT_GROUPS="1")
    assert asked.returncode == 0 and "tinydep 42" in asked.stdout, asked.stderr
    default = _job(tmp_path / "b", repo, sha)  # dev is not optional: installed as `poetry install` does
    assert default.returncode == 0 and "tinydep 42" in default.stdout, default.stderr
    off = _job(tmp_path / "c", repo, sha, LAUNCHKIT_UV_NO_DEFAULT_GROUPS="1")
    assert off.returncode != 0 and "No module named 'tinydep'" in off.stderr


def test_the_preflight_resolves_the_poetry_groups_the_job_installs(tmp_path, monkeypatch):
    from launchkit.application import Application
    from launchkit.errors import PreconditionError
    from launchkit.pyenv import check_job_environment

    folder = tmp_path / "index"
    make_wheel(folder, version="0.1.0")
    monkeypatch.setenv("UV_FIND_LINKS", str(folder))
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    root = tmp_path / "p"
    root.mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "demo"\nversion = "0"\ndependencies = []\n'
        '[tool.poetry.group.dev.dependencies]\ntinydep = "^0.1"\n'
        '[tool.poetry.group.gpu]\noptional = true\n[tool.poetry.group.gpu.dependencies]\ntinydep = "^9"\n'
    )

    def check(**kw):
        kw.setdefault("groups", [])
        check_job_environment(Application(), str(root), "3.12", extras=[], all_extras=False, **kw)

    check()  # dev resolves; gpu is optional, not installed, not checked
    check(groups=["dev"], no_default_groups=True)
    with pytest.raises(PreconditionError, match="tinydep"):
        check(groups=["gpu"])
    with pytest.raises(PreconditionError, match="tinydep"):
        check(all_groups=True)


# ------------------------------------------------------------------------------------------------- PDM
# PDM's dev groups (`[tool.pdm.dev-dependencies]`) are poetry's idea (issue 45): installed by default as
# `pdm install` does, selectable as uv groups are, their lines PEP 508 already.
PDM = """\
[project]
name = "marko-like"
version = "0.1.0"
requires-python = ">=3.8"

[tool.pdm.dev-dependencies]
test = ["pytest>=7", "sub @ file:///${PROJECT_ROOT}/libs/sub"]
lint = ["-e file:///${PROJECT_ROOT}/libs/own#egg=own", "-e ./libs/rel"]
"""


def test_pdm_dev_groups_as_uv_means_groups(tmp_path):
    assert _poetry_plan(tmp_path, PDM).poetry_groups == ["test", "lint"]  # `pdm install`: every dev group
    assert _poetry_plan(tmp_path, PDM, groups=["lint"], no_default=True).poetry_groups == ["lint"]
    assert _poetry_plan(tmp_path, PDM, no_default=True).poetry_groups == []
    plan = _poetry_plan(tmp_path, PDM, all_groups=True)
    assert plan.group_requirements == [
        "pytest>=7",
        f"sub @ file://{tmp_path}/libs/sub",
        f"-e {tmp_path / 'libs/own'}",
        f"-e {tmp_path / 'libs/rel'}",
    ]
    assert plan.group_args()[2:] == ["-e", str(tmp_path / "libs/own"), "-e", str(tmp_path / "libs/rel")]


def test_a_group_the_project_lacks_is_refused_at_launch(repo):
    """Before: `--uv-group docs` failed only inside the job, uv's error as the install step (exit 106)."""
    from inproc import run_main

    repo.commit({"pyproject.toml": PDM})
    r = run_main("run", "--local", "--uv-group", "docs", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 2 and r.stderr.count("\n") == 1, r.stderr
    assert (
        "--uv-group docs: pyproject.toml has no dependency group 'docs' (its groups: test, lint)" in r.stderr
    )
    r = run_main(
        "run", "--dry-run", "--offline", "--uv-group", "lint", "--", "python", "train.py", cwd=repo.path
    )
    assert r.code == 0, r.stderr  # PDM's own groups are groups
    pep735 = '[project]\nname = "x"\nversion = "0"\n[dependency-groups]\ndev = ["pytest"]\n[tool.uv]\ndev-dependencies = []\n'
    repo.commit({"pyproject.toml": pep735})
    r = run_main(
        "run", "--dry-run", "--offline", "--uv-group", "dev", "--", "python", "train.py", cwd=repo.path
    )
    assert r.code == 0, r.stderr
    r = run_main(
        "run", "--dry-run", "--offline", "--uv-group", "tests", "--", "python", "train.py", cwd=repo.path
    )
    assert r.code == 2 and "(its groups: dev)" in r.stderr, r.stderr


@pytest.mark.slow
def test_the_dev_group_of_a_pdm_project_is_installed_in_the_job(repo, tmp_path):
    """The issue's case (marko): `No module named pytest`, its dev tools in [tool.pdm.dev-dependencies]."""
    make_wheel(repo.path / "wheels")
    pyproject = (
        '[project]\nname = "demo"\nversion = "0.1.0"\n'
        "[tool.pdm.dev-dependencies]\n"
        'test = ["tinydep @ file:///${PROJECT_ROOT}/wheels/tinydep-0.1.0-py3-none-any.whl"]\n'
        '[build-system]\nrequires = []\nbuild-backend = "lkbackend"\nbackend-path = ["_build"]\n'
    )
    sha = repo.commit({"pyproject.toml": pyproject, "_build/lkbackend.py": BACKEND}, "pdm project")
    default = _job(tmp_path / "a", repo, sha)  # as `pdm install`: the dev groups too
    assert default.returncode == 0 and "tinydep 42" in default.stdout, default.stderr
    asked = _job(tmp_path / "b", repo, sha, LAUNCHKIT_UV_GROUPS="test", LAUNCHKIT_UV_NO_DEFAULT_GROUPS="1")
    assert asked.returncode == 0 and "tinydep 42" in asked.stdout, asked.stderr
    off = _job(tmp_path / "c", repo, sha, LAUNCHKIT_UV_NO_DEFAULT_GROUPS="1")
    assert off.returncode != 0 and "No module named 'tinydep'" in off.stderr
