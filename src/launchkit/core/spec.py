"""Launch request + git state -> beaker-py `BeakerExperimentSpec`. Pure: no I/O, no network.

The runtime travels once: its files are a dataset mounted read-only in every task (launchkit.runtime),
each task's command is a short bootstrap (`bash -c <bootstrap> launchkit-entrypoint`), and the user's
argv is the task's `arguments`, unchanged. The mount names the dataset `launchkit.runtime.
runtime_dataset_name()`; a backend resolves it (Beaker: the dataset's id, made once).
Everything that looks random (run id, rendezvous port) is derived from the inputs, so the same
invocation always yields byte-identical YAML. Names (workspace, image, clusters, datasets) stay
unresolved; the Beaker backend resolves them at submit time.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from launchkit import __version__
from launchkit.core import retrying
from launchkit.core.beaker_types import spec_types
from launchkit.core.contract import (
    DEFAULT_EXEC_METHOD,
    DEFAULT_RESULTS_DIR,
    DEFAULT_RUNTIME_DIR,
    DESCRIPTION_MARKER,
    ENV_AWS_CONFIG,
    ENV_AWS_CREDENTIALS,
    ENV_CONDA_ENV,
    ENV_CONDA_FILE,
    ENV_CONSTRAINT_GPU_TYPES,
    ENV_CONSTRAINT_TAGS,
    ENV_EXEC_METHOD,
    ENV_GIT_BRANCH,
    ENV_GIT_COMMIT,
    ENV_GIT_REMOTE,
    ENV_GIT_TAG,
    ENV_GIT_TAG_COMMIT,
    ENV_GIT_TAG_DISTANCE,
    ENV_GIT_TOKEN,
    ENV_GOOGLE_CREDENTIALS,
    ENV_INSTALL_CMD,
    ENV_INTERCONNECT,
    ENV_LAUNCHER,
    ENV_NO_PYTHON,
    ENV_POST_SETUP,
    ENV_PRE_SETUP,
    ENV_PYTHON_MANAGER,
    ENV_PYTHON_VERSION,
    ENV_RESULTS_DIR,
    ENV_RUN_ID,
    ENV_RUNTIME_DIR,
    ENV_SKIP_NCCL_SETUP,
    ENV_SYSTEM_PYTHON,
    ENV_TASK_NAME,
    ENV_UV_ALL_EXTRAS,
    ENV_UV_ALL_GROUPS,
    ENV_UV_CACHE_DIR,
    ENV_UV_EXTRAS,
    ENV_UV_GROUPS,
    ENV_UV_NO_DEFAULT_GROUPS,
    ENV_UV_TORCH_BACKEND,
    ENV_UV_VENV,
    ENV_VERSION,
)
from launchkit.core.gitstate import GitState
from launchkit.core.multinode import ENV_RDZV_PORT, derive_port, task_additions
from launchkit.core.presets import ENV_PRESET_SECRETS, encode_secrets
from launchkit.core.profiles import ProfileSelection, job_tags
from launchkit.core.request import Launcher, LaunchRequest, PythonManager
from launchkit.core.run_options import LAUNCH_ONLY
from launchkit.core.specview import SpecView
from launchkit.core.tasks import expand_tasks
from launchkit.core.units import format_size, to_nanoseconds
from launchkit.core.yamlout import dump
from launchkit.runtime import ENTRYPOINT_NAME, RUNTIME_MOUNT, bootstrap, runtime_dataset_name
from launchkit.runtime.node import policy

# The image used when neither the command line nor a config names one: gantry 3.7.0's default, so a
# gantry line means the same job. CUDA base with uv, conda, git and the MLNX OFED user-space drivers
# that InfiniBand NCCL needs on multi-node jobs (a plain python image has none of them).
DEFAULT_BEAKER_IMAGE = "beaker-py/gantry"


def run_id(request: LaunchRequest, git: GitState) -> str:
    """A stable id for this invocation: same inputs, same id."""
    payload = json.dumps(
        {
            "request": request.model_dump(mode="json", exclude=set(LAUNCH_ONLY), exclude_defaults=True),
            "remote": git.remote_url,
            "commit": git.commit,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def beaker_image(request: LaunchRequest) -> str | None:
    """The Beaker image the request's tasks run (None: a Docker image)."""
    return request.beaker_image or (None if request.docker_image else DEFAULT_BEAKER_IMAGE)


def with_marker(description: str | None) -> str:
    """The description with launchkit's marker, which `launchkit list` looks for."""
    text = description or ""
    return text if DESCRIPTION_MARKER in text else f"{text} {DESCRIPTION_MARKER}".strip()


def decided_at_submit(request: LaunchRequest, git: GitState, spec: SpecView | None = None) -> list[str]:
    """What the Beaker backend settles when it submits, which an offline spec cannot show."""
    parts = []
    filters = [f"--cluster {c}" for c in request.clusters] + [f"--gpu-type {g}" for g in request.gpu_types]
    filters += [f"tag {t}" for t in cluster_tags(request)]
    if filters:
        parts.append(f"cluster constraint ({', '.join(filters)})")
    if image := beaker_image(request):
        parts.append(f"Beaker image id of {image}")
    if not request.budget:
        parts.append("budget (the workspace's)")
    view = spec or SpecView({})
    if request.auto_secrets and view.has_env(ENV_PRESET_SECRETS):
        parts.append("which preset secrets the workspace has")
    if git.github_repo and not request.git_token_secret:
        parts.append(f"GITHUB_TOKEN secret for {git.github_repo}")
    if request.groups:
        parts.append("group ids")
    parts += upload_note(request)
    return parts + runtime_note(view)


def runtime_note(spec: SpecView) -> list[str]:
    """The runtime dataset a spec mounts by name, not by id: offline, no launch from this machine
    made or found it yet (backends remember the id); prepared, it does not exist yet and submit creates
    it (named `<runtime_dataset_name()>-<workspace id>`)."""
    sources = {v for t in spec.tasks for m in t.mounts for v in m.sources()}
    return [
        f"runtime dataset id ({name}; created once per launchkit version)"
        for name in sorted(sources)
        if name.startswith(runtime_dataset_name())
    ]


def upload_note(request: LaunchRequest) -> list[str]:
    """The `--upload` datasets, which only a real submit creates (or reuses): never a dry run."""
    if not request.uploads:
        return []
    return [f"dataset ids of {len(request.uploads)} --upload(s) (uploaded if need be)"]


def upload_dataset_name(local_path: str) -> str:
    """The placeholder an `--upload` is mounted as in the spec (derived from the absolute local path, so
    the spec stays pure and deterministic). At submit the Beaker backend replaces it with the id of the
    content-addressed dataset (backends/beaker/upload.py); the local backend links the path instead."""
    return f"launchkit-upload-{hashlib.sha256(local_path.encode()).hexdigest()[:12]}"


def cluster_tags(request: LaunchRequest) -> list[str]:
    """Tags a cluster must have: the requested ones (profiles.job_tags), and storage:weka for --weka."""
    tags = job_tags(request)
    if request.weka and not request.hostnames and "storage:weka" not in tags:
        tags.append("storage:weka")
    return list(dict.fromkeys(tags))


@dataclass
class TaskParts:
    """The task being assembled: env vars in order (by name) plus the other task fields."""

    env: dict[str, Any] = field(default_factory=dict)  # name -> BeakerEnvVar
    fields: dict[str, Any] = field(default_factory=dict)  # BeakerTaskSpec keyword arguments

    def set_env(self, name: str, value: str | None) -> None:
        if value is not None:
            self.env[name] = spec_types().BeakerEnvVar(name=name, value=value)

    def set_secret(self, name: str, secret: str) -> None:
        self.env[name] = spec_types().BeakerEnvVar(name=name, secret=secret)


def _python_env(request: LaunchRequest, parts: TaskParts) -> None:
    if request.no_python:  # --install still runs (gantry 3.0+), in place of the Python setup
        parts.set_env(ENV_NO_PYTHON, "1")
        parts.set_env(ENV_INSTALL_CMD, request.install)
        return
    if request.system_python:
        parts.set_env(ENV_SYSTEM_PYTHON, "1")
    parts.set_env(ENV_PYTHON_VERSION, request.python_version)
    parts.set_env(ENV_INSTALL_CMD, request.install)
    if request.python_manager is PythonManager.conda:
        parts.set_env(ENV_PYTHON_MANAGER, request.python_manager.value)
        parts.set_env(ENV_CONDA_FILE, request.conda_file)
        parts.set_env(ENV_CONDA_ENV, request.conda_env)
        return
    parts.set_env(ENV_UV_VENV, request.uv_venv)
    if request.uv_extras:
        parts.set_env(ENV_UV_EXTRAS, " ".join(request.uv_extras))
    if request.uv_all_extras:
        parts.set_env(ENV_UV_ALL_EXTRAS, "1")
    if request.uv_groups:
        parts.set_env(ENV_UV_GROUPS, " ".join(request.uv_groups))
    if request.uv_all_groups:
        parts.set_env(ENV_UV_ALL_GROUPS, "1")
    if request.uv_no_default_groups:
        parts.set_env(ENV_UV_NO_DEFAULT_GROUPS, "1")
    parts.set_env(ENV_UV_TORCH_BACKEND, request.torch_backend)
    parts.set_env(ENV_UV_CACHE_DIR, request.uv_cache_dir)


def runtime_mount() -> Any:
    """The runtime's files, read-only, where the bootstrap looks for them (launchkit.runtime)."""
    t = spec_types()
    return t.BeakerDataMount(
        source=t.BeakerDataSource(beaker=runtime_dataset_name()), mount_path=RUNTIME_MOUNT, mode="readonly"
    )


def _datasets(request: LaunchRequest) -> list[Any]:
    t = spec_types()
    mounts = [runtime_mount()]
    mounts += [
        t.BeakerDataMount(
            source=t.BeakerDataSource(beaker=d.dataset),
            mount_path=d.mount_path,
            sub_path=d.sub_path,
            mode=d.mode,
        )
        for d in request.datasets
    ]
    mounts += [
        t.BeakerDataMount(
            source=t.BeakerDataSource(host_path=m.host_path), mount_path=m.mount_path, mode=m.mode
        )
        for m in request.mounts
    ]
    mounts += [
        t.BeakerDataMount(source=t.BeakerDataSource(weka=w.bucket), mount_path=w.mount_path, mode=w.mode)
        for w in request.weka
    ]
    mounts += [
        t.BeakerDataMount(
            source=t.BeakerDataSource(beaker=upload_dataset_name(u.local_path)), mount_path=u.mount_path
        )
        for u in request.uploads
    ]
    mounts += [
        t.BeakerDataMount(source=t.BeakerDataSource(secret=m.secret), mount_path=m.mount_path)
        for m in request.secret_mounts
    ]
    return mounts


def build_spec(
    request: LaunchRequest,
    git: GitState,
    *,
    user_profiles: dict[str, Any] | None = None,
    selection: ProfileSelection | None = None,
) -> Any:
    """Return a `beaker.types.BeakerExperimentSpec` for the request.

    `user_profiles`: the `[tool.launchkit.profiles]` config table (launchkit.core.profiles);
    `selection`: their resolution for this request, when the caller has it already."""
    t = spec_types()
    rid = run_id(request, git)
    parts = TaskParts()

    # --- the entrypoint contract (docs/runtime.md)
    parts.set_env(ENV_VERSION, __version__)
    parts.set_env(ENV_RUN_ID, rid)
    parts.set_env(ENV_GIT_REMOTE, git.remote_url)
    parts.set_env(ENV_GIT_COMMIT, git.commit)
    parts.set_env(ENV_GIT_BRANCH, git.branch)
    if git.version_tag:
        tag, tagged, distance = git.version_tag
        parts.set_env(ENV_GIT_TAG, tag)
        parts.set_env(ENV_GIT_TAG_COMMIT, tagged)
        parts.set_env(ENV_GIT_TAG_DISTANCE, str(distance))
    parts.set_env(ENV_TASK_NAME, request.task_name)
    # the entrypoint's defaults are not spelled out in every task (it exports them)
    for name, value, default in (
        (ENV_RESULTS_DIR, request.results_dir, DEFAULT_RESULTS_DIR),
        (ENV_RUNTIME_DIR, request.runtime_dir, DEFAULT_RUNTIME_DIR),
        (ENV_EXEC_METHOD, request.exec_method.value, DEFAULT_EXEC_METHOD),
    ):
        parts.set_env(name, value if value != default else None)
    # the run's policy, encoded once (runtime/node/policy.py): retries, the watchdog, who posts
    parts.set_env(policy.ENV, retrying.policy(request).encode())
    if request.slack_webhook_secret:  # by name only: the runtime posts (runtime/node/launch/notify.py)
        parts.set_secret(policy.ENV_WEBHOOK, request.slack_webhook_secret)
    if request.notify_secret:  # by name only, as the webhook's
        parts.set_secret(policy.ENV_NOTIFY, request.notify_secret)
    parts.set_env(ENV_PRE_SETUP, request.pre_setup)
    parts.set_env(ENV_POST_SETUP, request.post_setup)
    _python_env(request, parts)
    if request.launcher is not Launcher.none:
        parts.set_env(ENV_LAUNCHER, request.launcher.value)
    if request.skip_nccl_setup:
        parts.set_env(ENV_SKIP_NCCL_SETUP, "1")
    parts.set_env(ENV_INTERCONNECT, request.interconnect)
    if request.gpu_types:
        parts.set_env(ENV_CONSTRAINT_GPU_TYPES, ",".join(request.gpu_types))
    tags = cluster_tags(request)
    if tags:
        parts.set_env(ENV_CONSTRAINT_TAGS, ",".join(tags))
    if request.git_token_secret:
        parts.set_secret(ENV_GIT_TOKEN, request.git_token_secret)
    for env_name, secret in (
        (ENV_AWS_CONFIG, request.aws_config_secret),
        (ENV_AWS_CREDENTIALS, request.aws_credentials_secret),
        (ENV_GOOGLE_CREDENTIALS, request.google_credentials_secret),
    ):
        if secret:
            parts.set_secret(env_name, secret)

    # --- the task
    context = t.BeakerTaskContext(
        priority=request.priority.value if request.priority else None,
        min_runtime=to_nanoseconds(request.min_runtime) if request.min_runtime is not None else None,
        auto_resume=retrying.auto_resume(request),
    )
    # Beaker still takes `preemptible` (gantry 3.7.0 sends it too); beaker-py serialises it but warns
    # when it is passed to the constructor, so it is set afterwards.
    context.preemptible = request.preemptible
    constraints = None
    if request.clusters or request.hostnames:
        constraints = t.BeakerConstraints(
            cluster=list(request.clusters) or None, hostname=list(request.hostnames) or None
        )
    image = t.BeakerImageSource(beaker=beaker_image(request), docker=request.docker_image)
    resources = None
    if any(v is not None for v in (request.cpus, request.gpus, request.memory, request.shared_memory)):
        resources = t.BeakerTaskResources(
            cpu_count=request.cpus,
            gpu_count=request.gpus,
            memory=format_size(request.memory) if request.memory else None,
            shared_memory=format_size(request.shared_memory) if request.shared_memory else None,
        )
    sst = request.synchronized_start_timeout
    parts.fields.update(
        name=request.task_name,
        image=image,
        context=context,
        constraints=constraints,
        command=["bash", "-c", bootstrap(), ENTRYPOINT_NAME],
        arguments=list(request.command),
        datasets=_datasets(request),
        result=t.BeakerResultSpec(path=request.results_dir),
        resources=resources,
        replicas=request.replicas if request.replicas > 1 else None,
        leader_selection=bool(request.leader_selection),
        host_networking=bool(request.host_networking),
        propagate_failure=request.propagate_failure,
        propagate_preemption=request.propagate_preemption,
        synchronized_start_timeout=to_nanoseconds(sst) if sst is not None else None,
        timeout=to_nanoseconds(request.task_timeout) if request.task_timeout is not None else None,
    )

    apply_profiles_and_multinode(request, rid, parts, user_profiles, selection)

    tasks = []
    variants = expand_tasks(request)
    user_names = {e.name for e in request.env} | {s.name for s in request.env_secrets}
    for v in variants:  # one task per --multi command and --sweep combination (core/tasks.py)
        task_parts = TaskParts(env=dict(parts.env), fields=dict(parts.fields))
        task_parts.set_env(ENV_TASK_NAME, v.name)
        for name, value in v.env:
            task_parts.set_env(name, value)
        if len(variants) > 1 and ENV_RDZV_PORT in parts.env and ENV_RDZV_PORT not in user_names:
            task_parts.set_env(ENV_RDZV_PORT, str(derive_port(f"{rid}/{v.name}")))  # tasks may share a node
        # --- the user's own env last, so it is visible at the end of the list; secrets by name only
        for e in request.env:
            task_parts.set_env(e.name, e.value)
        for s in request.env_secrets:
            task_parts.set_secret(s.name, s.secret)
        task_parts.fields.update(name=v.name, arguments=list(v.command))
        tasks.append(t.BeakerTaskSpec(env_vars=list(task_parts.env.values()), **task_parts.fields))
    return t.BeakerExperimentSpec(
        description=with_marker(request.description),
        budget=request.budget,
        tasks=tasks,
        groups=list(request.groups) or None,
        retry=t.BeakerRetrySpec(allowed_task_retries=n) if (n := retrying.task_retries(request)) else None,
    )


def apply_profiles_and_multinode(
    request: LaunchRequest,
    rid: str,
    parts: TaskParts,
    user_profiles: dict[str, Any] | None = None,
    selection: ProfileSelection | None = None,
) -> None:
    """Cluster profiles and multi-node launchers (launchkit.core.multinode): the profile's env and
    mounts, the launcher's rendezvous env, and the replica defaults."""
    t = spec_types()
    extra = task_additions(request, rid, user_profiles, selection)
    for name, value in extra.env:
        parts.set_env(name, value)
    if extra.secrets:
        parts.set_env(ENV_PRESET_SECRETS, encode_secrets(extra.secrets))
    mounts = [
        t.BeakerDataMount(source=t.BeakerDataSource(host_path=m.host_path), mount_path=m.mount_path)
        for m in extra.mounts
    ]
    mounts += [
        t.BeakerDataMount(source=t.BeakerDataSource(weka=w.bucket), mount_path=w.mount_path)
        for w in extra.weka
    ]
    if mounts:
        parts.fields["datasets"] = (parts.fields.get("datasets") or []) + mounts
    parts.fields.update(extra.task_fields)


def split_experiments(submission: Any) -> list[tuple[str, SpecView]]:
    """`--sweep-experiments`: [(experiment name, spec)], one experiment per task of the submission's
    spec, named `<name>-<task name>`."""
    spec: SpecView = submission.spec
    return [(f"{submission.name}-{task.name}", spec.with_tasks([task])) for task in spec.tasks]


def spec_to_yaml(spec: Any) -> str:
    """Deterministic, readable YAML for a spec: the interesting fields first, the entrypoint script
    (a block scalar) last."""
    return spec_json_to_yaml(SpecView(spec.to_json()))


def spec_json_to_yaml(spec: SpecView) -> str:
    """`spec_to_yaml` for a typed spec past `build_spec`, e.g. a resolved one."""
    return dump_yaml(spec.printable())


def dump_yaml(data: Any) -> str:
    return dump(data)
