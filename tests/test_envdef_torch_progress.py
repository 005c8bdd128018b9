"""Local runs without a GPU take the CPU torch build; long installs print progress."""

from __future__ import annotations

import re

import pytest
import yaml

from conftest import git
from inproc import run_main
from launchkit.application import Application
from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.launch import local_torch_backend
from lk_helpers import entrypoint


def _request(*, local: bool = True, **given):
    return build_request({"local": local, **given}, ["python", "train.py"], environ={})


def _git(root=None) -> GitState:
    return GitState(remote_url="https://h/o/r.git", commit="a" * 40, repo_root=str(root) if root else None)


def test_local_run_without_a_gpu_takes_cpu_torch(capsys):
    app = Application()
    assert local_torch_backend(app, _request(), _git(), here=True, gpu=False).torch_backend == "cpu"
    assert local_torch_backend(app, _request(), _git(), here=True, gpu=True).torch_backend is None
    chosen = _request(torch_backend="cu128")
    assert local_torch_backend(app, chosen, _git(), here=True, gpu=False).torch_backend == "cu128"
    by_env = _request(env=["UV_TORCH_BACKEND=cu126"])
    assert local_torch_backend(app, by_env, _git(), here=True, gpu=False).torch_backend is None
    beaker = _request(local=False)
    assert local_torch_backend(app, beaker, _git(), here=False, gpu=False).torch_backend is None
    assert (
        local_torch_backend(app, _request(no_python=True), _git(), here=True, gpu=False).torch_backend is None
    )


def test_a_lock_with_torch_is_not_changed_but_said(tmp_path, capsys):
    (tmp_path / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "torch"\nversion = "2.9.0"\n')
    out = local_torch_backend(Application(), _request(), _git(tmp_path), here=True, gpu=False)
    assert out.torch_backend is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "uv.lock fixes which torch build" in err


def test_local_dry_run_spec_has_the_cpu_backend(repo, monkeypatch):
    monkeypatch.setattr("launchkit.jobchecks.has_gpu", lambda root="/": False)
    r = run_main("run", "--local", "--dry-run", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0, r.stderr
    env = {e["name"]: e.get("value") for e in yaml.safe_load(r.stdout)["tasks"][0]["envVars"]}
    assert env["UV_TORCH_BACKEND"] == "cpu"


@pytest.mark.slow
def test_a_long_install_prints_progress(repo, tmp_path):
    sha = git(repo.path, "rev-parse", "HEAD")
    env = {
        "LAUNCHKIT_INSTALL_CMD": "echo fetching wheels; sleep 4.6",  # (2 ticks need ~2.1 s: a margin for load)
        "LAUNCHKIT_PROGRESS_SECONDS": "1",
    }
    r = entrypoint(tmp_path, str(repo.remote), sha, ["echo", "ran"], env, timeout=120)
    assert r.returncode == 0, r.stderr
    ticks = re.findall(r"\[launchkit\] install: (\d+)s so far \(fetching wheels\)", r.stderr)
    assert len(ticks) >= 2 and ticks == sorted(ticks), r.stderr
    assert r.stdout.strip() == "ran"
    # nothing ticks once the install is over
    assert "so far" not in r.stderr.split("install[custom]")[-1]
