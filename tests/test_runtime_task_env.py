"""What a task's spec leaves out, its job still gets (runtime/entrypoint.sh: lk_task_env): the spec is
built by core/spec.py, its env given to the real entrypoint, and the command prints what it sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.core.spec import build_spec, run_id
from lk_helpers import entrypoint

pytestmark = pytest.mark.slow  # the entrypoint for real: a clone, processes

SHOW_ENV = [sys.executable, "-c", "import json, os; print('ENV:' + json.dumps(dict(os.environ)))"]
# a stand-in torchrun: the launcher's process prints the environment it was given
TORCHRUN = "#!/usr/bin/env python3\nimport json, os\nprint('ENV:' + json.dumps(dict(os.environ)))\n"


def _seen(out: str) -> dict[str, str]:
    return json.loads(next(x for x in out.splitlines() if x.startswith("ENV:"))[4:])


def _task_env(request, git, index: int) -> dict[str, str]:
    task = build_spec(request, git).tasks[index]
    return {e.name: e.value for e in task.env_vars if e.value is not None}


def _head(repo) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo.path, capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()


def test_sweep_values_label_and_defaults_reach_the_command(repo, tmp_path):
    git = GitState(remote_url=str(repo.remote), commit=_head(repo))
    request = build_request({"sweep": ["lr=1e-4,3e-4", "seed=1,2"], "no_python": True}, SHOW_ENV, environ={})
    env = _task_env(request, git, 1)
    assert "LAUNCHKIT_SWEEP_LR" not in env and "LAUNCHKIT_TASK_LABEL" not in env  # not in the spec...
    r = entrypoint(tmp_path, str(repo.remote), git.commit, SHOW_ENV, env)
    assert r.returncode == 0, r.stderr
    seen = _seen(r.stdout)
    # ...but in the job, as before: one variable a sweep key, and the label follow/logs print
    assert seen["LAUNCHKIT_SWEEP_LR"] == "1e-4" and seen["LAUNCHKIT_SWEEP_SEED"] == "2"
    assert seen["LAUNCHKIT_SWEEP"] == seen["LAUNCHKIT_TASK_LABEL"] == "lr=1e-4,seed=2"
    assert seen["LAUNCHKIT_EXEC_METHOD"] == "exec"  # the entrypoint's default, exported


def test_a_task_of_several_commands_is_labelled_by_its_name(repo, tmp_path):
    git = GitState(remote_url=str(repo.remote), commit=_head(repo))
    request = build_request({"multi": True, "no_python": True}, [*SHOW_ENV, "--", "true"], environ={})
    env = _task_env(request, git, 0)
    assert "LAUNCHKIT_TASK_LABEL" not in env
    r = entrypoint(tmp_path, str(repo.remote), git.commit, SHOW_ENV, env)
    assert r.returncode == 0, r.stderr
    seen = _seen(r.stdout)
    assert seen["LAUNCHKIT_TASK_LABEL"] == seen["LAUNCHKIT_TASK_NAME"] == "main__0"
    assert not [k for k in seen if k.startswith("LAUNCHKIT_SWEEP")]


def test_the_rendezvous_id_is_the_run_id(repo, tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "torchrun").write_text(TORCHRUN)
    (stubs / "torchrun").chmod(0o755)
    git = GitState(remote_url=str(repo.remote), commit=_head(repo))
    request = build_request({"torchrun": True, "no_python": True}, ["python", "train.py"], environ={})
    env = _task_env(request, git, 0)
    assert "LAUNCHKIT_RDZV_ID" not in env
    env["PATH"] = os.pathsep.join([str(stubs), os.environ["PATH"]])
    r = entrypoint(tmp_path / "job", str(repo.remote), git.commit, ["python", "train.py"], env)
    assert r.returncode == 0, r.stderr
    seen = _seen(r.stdout)
    assert seen["LAUNCHKIT_RDZV_ID"] == run_id(request, git) == env["LAUNCHKIT_RUN_ID"]
    assert seen["LAUNCHKIT_RDZV_PORT"] == env["LAUNCHKIT_RDZV_PORT"]
