"""A task spec (as `run` builds it) -> `beaker session create` arguments. Pure: no I/O.

No Beaker API creates a session (fact sheet 8.1); the closed-source `beaker` CLI does. Its flags, as
used in the wild (fact sheet 8.3 and public scripts): --workspace, --name, --budget, --priority,
--gpus, --cpus, --memory, --shared-memory, --cluster, --hostname, --image beaker://ID | docker://IMAGE,
--env K=V, --secret-env K=SECRET, --mount beaker://DATASET=/path | src=weka|hostpath|secret,ref=R,dst=/path,
--timeout, --port, --detach, --bare, `-- command`.
"""

from __future__ import annotations

from launchkit.core.contract import ENV_AWS_CONFIG, ENV_AWS_CREDENTIALS, ENV_GOOGLE_CREDENTIALS
from launchkit.core.specview import Mount, SpecView
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


def _mount(m: Mount) -> str:
    dst = m.mount_path
    if m.sub_path:
        raise UsageError(
            f"--dataset {m.beaker}:{m.sub_path}:{dst}: sessions cannot mount part of a dataset",
            hint="mount the whole dataset",
        )
    if m.beaker:
        return f"beaker://{m.beaker}={dst}"
    for kind, ref in (("weka", m.weka), ("hostpath", m.host_path), ("secret", m.secret)):
        if ref:
            return f"src={kind},ref={ref},dst={dst}"
    raise UsageError(f"the mount at {dst} cannot be given to a session", hint="drop it")


def session_argv(
    spec: SpecView,
    *,
    workspace: str | None,
    name: str | None,
    ports: list[int],
    detach: bool,
    bare: bool,
    command: list[str],
) -> list[str]:
    """`beaker session create ...` for the spec's single task (secrets by name only)."""
    tasks = spec.tasks
    task = tasks[0]
    if len(tasks) > 1:
        raise UsageError("a session is one container: one command", hint="drop --multi/--sweep for sessions")
    if task.replicas > 1:
        raise UsageError("a session is one container on one node", hint="drop --replicas for sessions")
    for port in ports:
        if not 1 <= port <= 65535:
            raise UsageError(f"--port {port} is not a port number", hint="give a port from 1 to 65535")
    argv = ["beaker", "session", "create"]
    if workspace:
        argv += ["--workspace", workspace]
    if name:
        argv += ["--name", name]
    if spec.budget:
        argv += ["--budget", spec.budget]
    if task.priority:
        argv += ["--priority", task.priority]
    resources: tuple[tuple[float | str | None, str], ...] = (
        (task.gpus, "--gpus"),
        (task.cpus, "--cpus"),
        (task.memory, "--memory"),
        (task.shared_memory, "--shared-memory"),
    )
    for value, flag in resources:
        if value is not None:
            argv += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    for cluster in task.clusters:
        argv += ["--cluster", cluster]
    for host in task.hostnames:
        argv += ["--hostname", host]
    if task.beaker_image:
        argv += ["--image", f"beaker://{task.beaker_image}"]
    elif task.docker_image:
        argv += ["--image", f"docker://{task.docker_image}"]

    # no entrypoint runs in a session: no runtime dataset either
    mounts = [_mount(m) for m in task.mounts if m.mount_path != RUNTIME_MOUNT]
    for env in task.env:
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
    if task.timeout_ns:
        argv += ["--timeout", f"{task.timeout_ns // 1_000_000_000}s"]
    for port in ports:
        argv += ["--port", str(port)]
    if detach:
        argv.append("--detach")
    if bare:
        argv.append("--bare")
    if command:
        argv += ["--", *command]
    return argv
