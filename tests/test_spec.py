"""Spec builder details not covered by the goldens."""

from __future__ import annotations

import yaml

from inproc import run_main
from launchkit.core.gitstate import GitState
from launchkit.core.multinode import derive_port
from launchkit.core.parse import build_request
from launchkit.core.spec import build_spec, run_id, upload_dataset_name
from launchkit.runtime import ENTRYPOINT_NAME, bootstrap

GIT = GitState(remote_url="https://example.com/o/r.git", commit="a" * 40, branch="main")


def spec_for(*args: str, **given) -> dict:
    request = build_request(
        {k.replace("-", "_"): v for k, v in given.items()},
        list(args) or ["python", "x"],
        environ={"HOME_VALUE": "/home/me"},
    )
    return build_spec(request, GIT).to_json()


def env_of(spec: dict) -> dict:
    return {e["name"]: e.get("value", e.get("secret")) for e in spec["tasks"][0]["envVars"]}


def test_bootstrap_is_the_command_and_argv_is_separate():
    task = spec_for("python", "train.py", "a b")["tasks"][0]
    assert task["command"] == ["bash", "-c", bootstrap(), ENTRYPOINT_NAME]
    assert task["arguments"] == ["python", "train.py", "a b"]


def test_python_contract_vars():
    env = env_of(
        spec_for(
            python_version="3.12",
            install="make install",
            uv_extra=["a", "b"],
            torch_backend="cpu",
            uv_cache_dir="/c",
            pre_setup="echo pre",
            post_setup="post.sh",
            system_python=False,
        )
    )
    assert env["LAUNCHKIT_PYTHON_VERSION"] == "3.12" and env["LAUNCHKIT_INSTALL_CMD"] == "make install"
    assert (
        env["LAUNCHKIT_UV_EXTRAS"] == "a b"
        and env["UV_TORCH_BACKEND"] == "cpu"
        and env["UV_CACHE_DIR"] == "/c"
    )
    assert env["LAUNCHKIT_PRE_SETUP"] == "echo pre" and env["LAUNCHKIT_POST_SETUP"] == "post.sh"
    assert "LAUNCHKIT_NO_PYTHON" not in env
    no_py = env_of(spec_for(no_python=True))
    assert no_py["LAUNCHKIT_NO_PYTHON"] == "1" and "LAUNCHKIT_UV_ALL_EXTRAS" not in no_py
    assert env_of(spec_for(system_python=True, uv_all_extras=True))["LAUNCHKIT_SYSTEM_PYTHON"] == "1"


def test_secret_values_never_appear(repo):
    r = run_main(
        "run",
        "--dry-run",
        "--env-secret",
        "MY_TOKEN",
        "--",
        "python",
        "x",
        cwd=repo.path,
        env={"MY_TOKEN": "s3cr3t-value"},
    )
    assert r.code == 0 and "s3cr3t-value" not in r.stdout + r.stderr
    assert {"name": "MY_TOKEN", "secret": "MY_TOKEN"} in yaml.safe_load(r.stdout)["tasks"][0]["envVars"]


def test_env_name_copies_the_local_value():
    assert env_of(spec_for(env=["HOME_VALUE"]))["HOME_VALUE"] == "/home/me"


def test_upload_becomes_a_named_dataset(repo):
    (repo.path / "data").mkdir()
    (repo.path / "data" / "x.txt").write_text("x")
    r = run_main("run", "--dry-run", "--upload", "data:/inputs", "--", "python", "x", cwd=repo.path)
    assert r.code == 0, r.stderr
    mount = yaml.safe_load(r.stdout)["tasks"][0]["datasets"][1]  # after the runtime's
    assert mount == {
        "source": {"beaker": upload_dataset_name(str(repo.path / "data"))},
        "mountPath": "/inputs",
    }


def test_run_id_and_port_are_derived_from_the_inputs():
    r1 = build_request({}, ["python", "a"])
    r2 = build_request({}, ["python", "b"])
    assert run_id(r1, GIT) == run_id(build_request({"dry_run": True}, ["python", "a"]), GIT)
    assert run_id(r1, GIT) != run_id(r2, GIT)
    ports = {derive_port(run_id(build_request({}, ["python", str(i)]), GIT)) for i in range(50)}
    assert all(29000 <= p <= 29999 for p in ports) and len(ports) > 30


def test_weka_adds_the_storage_tag_and_interconnect_its_tag():
    env = env_of(spec_for(weka=["b:/w"], interconnect="ib", tag=["x"]))
    assert env["LAUNCHKIT_CONSTRAINT_TAGS"] == "x,interconnect:ib,storage:weka"
    assert env["LAUNCHKIT_INTERCONNECT"] == "ib"


def test_no_constraints_without_filters():
    assert "constraints" not in spec_for()["tasks"][0]
