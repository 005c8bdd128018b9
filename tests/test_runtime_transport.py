"""The runtime travels once, not per task (issue 24 item 2): spec sizes, the bootstrap, the runtime
dataset made once and reused (fake Beaker), the same files for local runs."""

from __future__ import annotations

import hashlib
import subprocess

import pytest

from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.core.spec import build_spec, spec_to_yaml
from launchkit.runtime import (
    ENTRYPOINT_NAME,
    ENV_ENTRYPOINT_DIR,
    RUNTIME_MOUNT,
    bootstrap,
    materialise,
    runtime_dataset_name,
    runtime_files,
)

GIT = GitState(remote_url="https://github.com/example-org/example-repo.git", commit="a" * 40, branch="main")
WS = "ai2/launchkit"
ONE_TASK_MAX = 16 * 1024
PER_TASK_MAX = 2 * 1024


def _yaml(*sweep: str) -> str:
    given = {"sweep": list(sweep)} if sweep else {}
    request = build_request(
        given, ["python", "train.py", "--lr", "{lr}"] if sweep else ["python", "x"], environ={}
    )
    return spec_to_yaml(build_spec(request, GIT))


def test_one_task_spec_is_small():
    text = _yaml()
    assert len(text.encode()) <= ONE_TASK_MAX, len(text.encode())
    assert f"beaker: {runtime_dataset_name()}" in text and f"mountPath: {RUNTIME_MOUNT}" in text


def test_each_further_task_adds_at_most_2kb():
    values = ",".join(f"{i}e-5" for i in range(1, 101))
    one, hundred = len(_yaml("lr=1e-5").encode()), len(_yaml(f"lr={values}").encode())
    assert (hundred - one) / 99 <= PER_TASK_MAX, (one, hundred)
    assert one <= ONE_TASK_MAX


def test_the_runtime_is_not_in_the_spec():
    text = _yaml()
    entry = runtime_files()["entrypoint.sh"].decode()
    assert entry[2000:2200] not in text  # a piece of the script: only the bootstrap travels


def _boot(directory, *argv: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", ENV_ENTRYPOINT_DIR: str(directory), **(extra_env or {})}
    return subprocess.run(
        ["bash", "-c", bootstrap(), ENTRYPOINT_NAME, *argv],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


def test_bootstrap_runs_the_materialised_entrypoint(tmp_path):
    directory = materialise(tmp_path / "rt")
    assert materialise(tmp_path / "rt") == directory  # written once, then reused
    assert {p.name for p in directory.iterdir()} == set(runtime_files())
    r = _boot(directory, "python", "x")
    # the entrypoint ran: its input check (step 1) misses the git inputs -> 100, naming them
    assert r.returncode == 100, r.stderr
    assert "LAUNCHKIT_GIT_REMOTE" in r.stderr and "no runtime at" not in r.stderr


def test_bootstrap_refuses_a_missing_or_different_runtime(tmp_path):
    r = _boot(tmp_path / "nothing", "python", "x")
    assert r.returncode == 100 and f"no runtime at {tmp_path}/nothing/entrypoint.sh" in r.stderr
    assert runtime_dataset_name() in r.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "entrypoint.sh").write_text("echo should-not-run\n")
    r = _boot(other, "python", "x")
    assert r.returncode == 100 and "is not the runtime this spec was made for" in r.stderr
    assert "should-not-run" not in r.stdout


def test_local_backend_gets_the_files_instead_of_the_mount(tmp_path):
    from launchkit.backends.local.runtime_files import use_runtime

    spec = build_spec(build_request({}, ["python", "x"], environ={}), GIT).to_json()
    directory = use_runtime(tmp_path, spec)
    task = spec["tasks"][0]
    assert directory is not None and not task.get("datasets")
    assert {"name": ENV_ENTRYPOINT_DIR, "value": str(directory)} in task["envVars"]
    for name, data in runtime_files().items():
        assert (directory / name).read_bytes() == data


# --------------------------------------------------------------------------- the runtime dataset on Beaker
@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _prepare(name: str = "rt"):
    from launchkit.application import Application
    from launchkit.backends import Submission
    from launchkit.backends.beaker import BeakerBackend

    spec = build_spec(build_request({}, ["python", "x"], environ={}), GIT).to_json()
    spec["tasks"][0]["image"] = {"docker": "python:3.11"}
    b = BeakerBackend(Application(verbosity=-1), timeout=30, workspace=WS)
    try:
        return b.prepare(Submission(name=name, spec=spec, workspace=WS)).spec
    finally:
        b.close()


def _dataset_calls(fake) -> dict[str, int]:
    return {k: n for k, n in fake.calls.items() if "Dataset" in k}


def test_runtime_dataset_made_once_verified_and_reused(fake_beaker, isolated_cache):
    first = _prepare()
    made = [d for d in fake_beaker.state.datasets.values() if d.name.startswith(runtime_dataset_name())]
    assert len(made) == 1 and made[0].committed is not None
    ds = made[0]
    ws = fake_beaker.state.find_workspace(WS)
    assert ds.name == f"{runtime_dataset_name()}-{ws.id}"
    assert {p: hashlib.sha256(b).digest() for p, b in ds.files.items()} == {
        p: hashlib.sha256(b).digest() for p, b in runtime_files().items()
    }
    mount = first["tasks"][0]["datasets"][0]
    assert mount == {"source": {"beaker": ds.id}, "mountPath": RUNTIME_MOUNT, "mode": "readonly"}

    fake_beaker.reset_calls()
    second = _prepare()
    assert second["tasks"][0]["datasets"][0] == mount  # the same id: reused
    assert _dataset_calls(fake_beaker) == {"GetDataset": 1}, dict(fake_beaker.calls)  # one lookup


def test_runtime_dataset_found_by_name_without_the_local_cache(fake_beaker, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "one"))
    first = _prepare()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "two"))  # another machine
    fake_beaker.reset_calls()
    assert _prepare()["tasks"][0]["datasets"] == first["tasks"][0]["datasets"]
    assert fake_beaker.calls["CreateDataset"] == 0 and fake_beaker.calls["UploadDatasetFile"] == 0


def test_a_deleted_runtime_dataset_is_made_again(fake_beaker, isolated_cache):
    first = _prepare()["tasks"][0]["datasets"][0]["source"]["beaker"]
    del fake_beaker.state.datasets[first]
    again = _prepare()["tasks"][0]["datasets"][0]["source"]["beaker"]
    assert again != first and again in fake_beaker.state.datasets
