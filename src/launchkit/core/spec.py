"""Launch request + git state -> beaker-py `BeakerExperimentSpec`. Pure: no I/O, no network.

The spec is self-contained: the entrypoint script rides in the task's command
(`bash -c <script> launchkit-entrypoint`), and the user's argv is the task's `arguments`, unchanged.
Everything that looks random (run id, rendezvous port) is derived from the inputs, so the same
invocation always yields byte-identical YAML.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from launchkit import __version__
from launchkit.core.beaker_types import spec_types
from launchkit.core.gitstate import GitState
from launchkit.core.request import LaunchRequest
from launchkit.core.units import format_size
from launchkit.runtime import ENTRYPOINT_NAME, entrypoint_script

# Environment contract between the spec and the entrypoint (docs/runtime.md).
ENV_VERSION = "LAUNCHKIT_VERSION"
ENV_RUN_ID = "LAUNCHKIT_RUN_ID"
ENV_GIT_REMOTE = "LAUNCHKIT_GIT_REMOTE"
ENV_GIT_COMMIT = "LAUNCHKIT_GIT_COMMIT"
ENV_GIT_BRANCH = "LAUNCHKIT_GIT_BRANCH"
ENV_TASK_NAME = "LAUNCHKIT_TASK_NAME"
ENV_RUNTIME_DIR = "LAUNCHKIT_RUNTIME_DIR"
ENV_EXEC_METHOD = "LAUNCHKIT_EXEC_METHOD"
ENV_RESULTS_DIR = "RESULTS_DIR"


def run_id(request: LaunchRequest, git: GitState) -> str:
    """A stable id for this invocation: same inputs, same id."""
    payload = json.dumps(
        {"request": request.model_dump(mode="json", exclude={"dry_run", "save_spec", "follow", "yes"}),
         "remote": git.remote_url, "commit": git.commit},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def build_spec(request: LaunchRequest, git: GitState) -> Any:
    """Return a `beaker.types.BeakerExperimentSpec` for the request (first cut)."""
    t = spec_types()
    env: list[Any] = []

    def put(name: str, value: str | None) -> None:
        if value is not None:
            env.append(t.BeakerEnvVar(name=name, value=value))

    put(ENV_VERSION, __version__)
    put(ENV_RUN_ID, run_id(request, git))
    put(ENV_GIT_REMOTE, git.remote_url)
    put(ENV_GIT_COMMIT, git.commit)
    put(ENV_GIT_BRANCH, git.branch)
    put(ENV_TASK_NAME, request.task_name)
    put(ENV_RESULTS_DIR, request.results_dir)
    put(ENV_RUNTIME_DIR, request.runtime_dir)
    put(ENV_EXEC_METHOD, request.exec_method.value)
    for e in request.env:
        put(e.name, e.value)
    for s in request.env_secrets:
        env.append(t.BeakerEnvVar(name=s.name, secret=s.secret))

    image = t.BeakerImageSource(beaker=request.beaker_image, docker=request.docker_image)
    if not (request.beaker_image or request.docker_image):
        image = t.BeakerImageSource(docker="python:3.11")
    resources = t.BeakerTaskResources(
        cpu_count=request.cpus,
        gpu_count=request.gpus,
        memory=format_size(request.memory) if request.memory else None,
        shared_memory=format_size(request.shared_memory) if request.shared_memory else None,
    )
    task = t.BeakerTaskSpec(
        name=request.task_name,
        image=image,
        context=t.BeakerTaskContext(priority=request.priority.value if request.priority else None),
        command=["bash", "-c", entrypoint_script(), ENTRYPOINT_NAME],
        arguments=list(request.command),
        env_vars=env,
        result=t.BeakerResultSpec(path=request.results_dir),
        resources=resources,
        replicas=request.replicas if request.replicas > 1 else None,
    )
    return t.BeakerExperimentSpec(
        description=request.description, budget=request.budget, tasks=[task],
        groups=list(request.groups) or None,
    )


def spec_to_yaml(spec: Any) -> str:
    """Deterministic YAML for a spec (block scalars for multi-line strings such as the script)."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
        style = "|" if "\n" in data and not _needs_quotes(data) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)

    _Dumper.add_representer(str, _str)
    return yaml.dump(spec.to_json(), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=4096)


def _needs_quotes(s: str) -> bool:
    # Block scalars cannot hold trailing spaces on lines, tabs mixed weirdly, or control characters.
    return any(line != line.rstrip(" ") for line in s.split("\n")) or any(
        ord(c) < 32 and c not in "\n\t" for c in s
    )
