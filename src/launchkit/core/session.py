"""A task spec (as `run` builds it) -> `beaker session create` arguments. Pure: no I/O.

No Beaker API creates a session (fact sheet 8.1); the closed-source `beaker` CLI does. Its flags, as
used in the wild (fact sheet 8.3 and public scripts): --workspace, --name, --budget, --priority,
--gpus, --cpus, --memory, --shared-memory, --cluster, --hostname, --image beaker://ID | docker://IMAGE,
--env K=V, --secret-env K=SECRET, --mount beaker://DATASET=/path | src=weka|hostpath|secret,ref=R,dst=/path,
--timeout, --port, --detach, --bare, `-- command`.
"""

from __future__ import annotations

from typing import Any

from launchkit.core.contract import ENV_AWS_CONFIG, ENV_AWS_CREDENTIALS, ENV_GOOGLE_CREDENTIALS
from launchkit.core.specview import TaskView
from launchkit.errors import UsageError
from launchkit.runtime import RUNTIME_MOUNT

# A session runs no entrypoint, so the LAUNCHKIT_* variables that drive it are left out, and the
# cloud-credential secrets the entrypoint would write to files are mounted as files by Beaker instead
# (secret mounts), with the standard variable naming each file.
CREDENTIALS_DIR = "/launchkit-credentials"
_CREDENTIAL_FILES = {
    ENV_AWS_CONFIG: ("aws-config", "AWS_CONFIG_FILE"),
    ENV_AWS_CREDENTIALS: ("aws-credentials", "AWS_SHARED_CREDENTIALS_FILE"),
    ENV_GOOGLE_CREDENTIALS: ("google-credentials.json", "GOOGLE_APPLICATION_CREDENTIALS"),
}


def _mount(m: dict[str, Any]) -> str:
    source, dst = m.get("source") or {}, m["mountPath"]
    if m.get("subPath"):
        raise UsageError(
            f"--dataset {source.get('beaker')}:{m['subPath']}:{dst}: sessions cannot mount part of a dataset",
            hint="mount the whole dataset",
        )
    if source.get("beaker"):
        return f"beaker://{source['beaker']}={dst}"
    for kind, key in (("weka", "weka"), ("hostpath", "hostPath"), ("secret", "secret")):
        if source.get(key):
            return f"src={kind},ref={source[key]},dst={dst}"
    raise UsageError(f"the mount at {dst} cannot be given to a session", hint="drop it")


def session_argv(
    spec: dict[str, Any],
    *,
    workspace: str | None,
    name: str | None,
    ports: list[int],
    detach: bool,
    bare: bool,
    command: list[str],
) -> list[str]:
    """`beaker session create ...` for the spec's single task (secrets by name only)."""
    tasks = spec.get("tasks") or []
    task = tasks[0]
    if len(tasks) > 1 or int(task.get("replicas") or 1) > 1:
        raise UsageError("a session is one container on one node", hint="drop --replicas for sessions")
    for port in ports:
        if not 1 <= port <= 65535:
            raise UsageError(f"--port {port} is not a port number", hint="give a port from 1 to 65535")
    argv = ["beaker", "session", "create"]
    if workspace:
        argv += ["--workspace", workspace]
    if name:
        argv += ["--name", name]
    if spec.get("budget"):
        argv += ["--budget", spec["budget"]]
    if (task.get("context") or {}).get("priority"):
        argv += ["--priority", task["context"]["priority"]]
    res = task.get("resources") or {}
    for key, flag in (
        ("gpuCount", "--gpus"),
        ("cpuCount", "--cpus"),
        ("memory", "--memory"),
        ("sharedMemory", "--shared-memory"),
    ):
        if res.get(key) is not None:
            argv += [flag, f"{res[key]:g}" if isinstance(res[key], float) else str(res[key])]
    constraints = task.get("constraints") or {}
    for cluster in constraints.get("cluster") or []:
        argv += ["--cluster", cluster]
    for host in constraints.get("hostname") or []:
        argv += ["--hostname", host]
    image = task.get("image") or {}
    if image.get("beaker"):
        argv += ["--image", f"beaker://{image['beaker']}"]
    elif image.get("docker"):
        argv += ["--image", f"docker://{image['docker']}"]

    # no entrypoint runs in a session: no runtime dataset either
    mounts = [_mount(m) for m in task.get("datasets") or [] if m["mountPath"] != RUNTIME_MOUNT]
    for env in TaskView(task).env:
        if env.name in _CREDENTIAL_FILES and env.secret:
            file_name, variable = _CREDENTIAL_FILES[env.name]
            path = f"{CREDENTIALS_DIR}/{file_name}"
            mounts.append(f"src=secret,ref={env.secret},dst={path}")
            argv += ["--env", f"{variable}={path}"]
            continue
        if env.name.startswith("LAUNCHKIT_"):
            continue
        if env.secret:
            argv += ["--secret-env", f"{env.name}={env.secret}"]
        else:
            argv += ["--env", f"{env.name}={env.value or ''}"]
    for mount in mounts:
        argv += ["--mount", mount]
    if task.get("timeout"):
        argv += ["--timeout", f"{int(task['timeout']) // 1_000_000_000}s"]
    for port in ports:
        argv += ["--port", str(port)]
    if detach:
        argv.append("--detach")
    if bare:
        argv.append("--bare")
    if command:
        argv += ["--", *command]
    return argv
