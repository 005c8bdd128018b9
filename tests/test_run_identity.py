"""A run's identity, both ways (issue 36 item 2): what is declared launch-only beside the option table
(`core/run_options.LAUNCH_ONLY`) changes neither the run id (nor so the rendezvous port) nor the spec;
every other request field changes the spec (and with it the run id), unless it is exempt below with
the reason it is part of the run's identity without being part of its spec. Fast: in-process, no git.

A new option lands here on its own: its field gets a sample value by its type (`_sample`); when that
sample does not change the spec, the field is either launch-only (add it to LAUNCH_ONLY) or an
exemption here, with its reason.
"""

from __future__ import annotations

import json
import types
import typing
from enum import Enum
from typing import Any

import pytest
from pydantic import SecretStr

from launchkit.core import request
from launchkit.core.gitstate import GitState
from launchkit.core.multinode import ENV_RDZV_PORT
from launchkit.core.parse import build_request
from launchkit.core.request import (
    DatasetMount,
    EnvSecret,
    ExecMethod,
    HostMount,
    Launcher,
    LaunchRequest,
    Priority,
    PythonManager,
    SecretMount,
    SweepAxis,
    Upload,
    WekaMount,
)
from launchkit.core.run_options import LAUNCH_ONLY
from launchkit.core.spec import build_spec, run_id
from launchkit.core.specview import EnvVar, SpecView

GIT = GitState(remote_url="https://github.com/o/r.git", commit="a" * 40, branch="main")
# a multi-node torchrun job: the rendezvous port (derived from the run id) is in its spec
PLAIN = build_request(
    {"cluster": ["ai2/jupiter"], "gpus": 1, "replicas": 2, "torchrun": True}, ["python", "a.py"], environ={}
)

# Launch-only fields: a value other than the default for each (placed_clusters: where the backend
# placed `--cluster ai2/jupiter`).
LAUNCH_ONLY_SAMPLES: dict[str, Any] = {
    "dry_run": True,
    "offline": True,
    "save_spec": "spec.yaml",
    "follow": True,
    "show_logs": False,
    "timeout": 60,
    "start_timeout": 60,
    "yes": True,
    "backend": "local",
    "local": True,
    "placed_clusters": ["ai2/jupiter"],
    "slack_webhook_url": SecretStr("https://hooks.slack.com/services/T/B/x"),
    "allow_dirty": True,
    "no_preflight": True,
    "json_output": True,
}

# Part of the run's identity, not of its spec (field -> why): another value is another run of the same
# job, or the same job reached another way.
EXEMPT: dict[str, str] = {
    "name": "the run's name (Submission.name): another name, another run",
    "workspace": "where the run goes (Submission.workspace): another workspace, another run",
    "auto_secrets": "which secrets the backend adds when it resolves the spec (prepare), after build_spec",
    "sweep_experiments": "one run per --sweep combination instead of one (launch.submit splits the spec)",
    "multi": "how the command line was split: set with `commands`, which is the job's part",
    "ref": "read into the git state (the commit the spec carries) before the spec is built",
    "branch": "read into the git state (the commit the spec carries) before the spec is built",
    "remote": "read into the git state (the remote URL the spec carries) before the spec is built",
    "uv_no_extras": "parsed into uv_all_extras/uv_extras (core/parse.py), which are the job's part",
}

# Samples for fields whose type alone does not say what changes the spec; the value given, or
# (request changes for the field to take effect, the field's value).
SAMPLES: dict[str, Any] = {
    "command": ["python", "b.py"],
    "commands": [["python", "a.py"], ["python", "b.py"]],
    "multi": ({"commands": [["python", "a.py"], ["python", "b.py"]]}, True),
    "sweep": [SweepAxis(key="lr", values=["1", "2"])],
    "sweep_experiments": ({"sweep": [SweepAxis(key="lr", values=["1", "2"])]}, True),
    "interconnect": "ib",
    "clusters": ["ai2/titan"],
    "memory": 2**30,
    "shared_memory": 2**30,
    "datasets": [DatasetMount(dataset="ai2/d", mount_path="/d")],
    "mounts": [HostMount(host_path="/h", mount_path="/h")],
    "weka": [WekaMount(bucket="oe-training-default", mount_path="/weka/oe-training-default")],
    "uploads": [Upload(local_path="/tmp/x", mount_path="/x")],
    "env": [request.EnvVar(name="A", value="1")],
    "env_secrets": [EnvSecret(name="A", secret="S")],
    "secret_mounts": [SecretMount(secret="S", mount_path="/s")],
    "git_token_secret": "MY_TOKEN",
    "ref": "v1",
    "branch": "other",
    "remote": "https://github.com/o/fork.git",
    "results_dir": "/out",
    "task_name": "other",
    "task_timeout": 3600.0,
    "min_runtime": 60.0,
    "synchronized_start_timeout": 60.0,
    "replicas": 3,
    # on by default for the plain request's 2 replicas with a launcher
    "host_networking": False,
    "leader_selection": False,
    "propagate_failure": False,
    "propagate_preemption": False,
    "launcher": Launcher.accelerate,
    "presets": ["ai2-oe"],
    "profile": "ai2-weka",
    "python_manager": ({"conda_env": "base"}, PythonManager.conda),
    "conda_file": ({"python_manager": PythonManager.conda}, "environment.yml"),
    "conda_env": ({"python_manager": PythonManager.conda}, "base"),
    "python_version": "3.12",
    "torch_backend": "cu128",
    "uv_cache_dir": "/weka/uv-cache",
    "progress_patterns": ["loss="],
    "retry_on": ({}, ("preemption", "failure")),
    "retry_exit_codes": ({"retry_on": ("exit",)}, (29, 75)),
    "stall_auto": ({}, (60.0, 3600.0)),
    "runtime_dir": "/other-runtime",
    "exec_method": ExecMethod.bash,
    "priority": Priority.high,
}


def _sample(field: str) -> tuple[dict[str, Any], Any]:
    """(prerequisite changes, a value other than the default) for request field `field`."""
    given = SAMPLES.get(field)
    if isinstance(given, tuple):
        return given
    if given is not None:
        return {}, given
    info = LaunchRequest.model_fields[field]
    kind = info.annotation
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # X | None
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    if kind is bool:
        return {}, not getattr(PLAIN, field, info.default)
    if kind is int:
        return {}, 3
    if kind is float:
        return {}, 7.0
    if kind is str:
        return {}, "sample"
    if isinstance(kind, type) and issubclass(kind, Enum):
        return {}, next(m for m in kind if m != info.default)
    if typing.get_origin(kind) is list and typing.get_args(kind) == (str,):
        return {}, ["sample"]
    raise AssertionError(f"{field}: add a sample value to SAMPLES (its type is {kind})")


def _changed(field: str, base: LaunchRequest = PLAIN) -> tuple[LaunchRequest, LaunchRequest]:
    """(the request with the field's prerequisites, the same with the field's sample value)."""
    before, value = _sample(field)
    base = base.model_copy(update=before)
    return base, base.model_copy(update={field: value})


def _spec(request: LaunchRequest) -> dict[str, Any]:
    return SpecView(build_spec(request, GIT).to_json()).to_json()


def _job(request: LaunchRequest) -> str:
    """The spec without what derives from the run id (the id itself, the rendezvous port): the job."""
    spec = SpecView(build_spec(request, GIT).to_json())
    if spec.env_value(ENV_RDZV_PORT):
        for task in spec.tasks:
            task.set_env(EnvVar(ENV_RDZV_PORT, "<port>"))
    return json.dumps(spec.to_json()).replace(run_id(request, GIT), "<run id>")


def _port(request: LaunchRequest) -> str | None:
    return SpecView(build_spec(request, GIT).to_json()).env_value(ENV_RDZV_PORT)


def test_the_declarations_name_request_fields():
    fields = set(LaunchRequest.model_fields)
    assert set(LAUNCH_ONLY_SAMPLES) == LAUNCH_ONLY <= fields
    assert set(EXEMPT) <= fields - LAUNCH_ONLY
    assert _port(PLAIN)  # the plain request has a rendezvous port to change


@pytest.mark.parametrize("field", sorted(LAUNCH_ONLY_SAMPLES))
def test_launch_only_fields_change_neither_the_run_id_nor_the_job(field):
    """What is declared launch-only is left out of the run id, so it must not change the job either:
    the spec (and its rendezvous port) is the same, byte for byte."""
    value = LAUNCH_ONLY_SAMPLES[field]
    assert value != LaunchRequest.model_fields[field].default
    changed = PLAIN.model_copy(update={field: value})
    assert run_id(changed, GIT) == run_id(PLAIN, GIT)
    assert _spec(changed) == _spec(PLAIN)
    assert _port(changed) == _port(PLAIN)


@pytest.mark.parametrize("field", sorted(set(LaunchRequest.model_fields) - LAUNCH_ONLY))
def test_every_other_field_is_the_run_s_identity(field):
    """A field not declared launch-only changes the run id, and (unless exempt, with its reason) the
    spec: a field that changes neither belongs in LAUNCH_ONLY."""
    base, changed = _changed(field)
    assert changed != base, f"{field}: its sample is its default"
    assert run_id(changed, GIT) != run_id(base, GIT), f"{field} is not in the run id: add it to LAUNCH_ONLY?"
    if field in EXEMPT:
        assert _job(changed) == _job(base), f"{field} changes the spec: it need not be exempt"
        return
    assert _job(changed) != _job(base), (
        f"{field} changes the run id but not the spec: add it to run_options.LAUNCH_ONLY, or exempt it "
        "here with the reason it is part of the run's identity"
    )


def test_the_rendezvous_port_follows_the_run_id():
    base, changed = _changed("env")
    assert run_id(changed, GIT) != run_id(base, GIT) and _port(changed) != _port(base)


def test_an_unknown_field_type_asks_for_a_sample(monkeypatch):
    monkeypatch.setitem(
        LaunchRequest.model_fields, "odd", types.SimpleNamespace(annotation=object, default=None)
    )
    with pytest.raises(AssertionError, match="odd: add a sample"):
        _sample("odd")
