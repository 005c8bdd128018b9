"""The launch request: every `run` option, parsed and validated in one place.

The CLI builds a `LaunchRequest` from argv + config; nothing downstream re-parses user strings.
Validation errors become one-line usage errors (exit 2) in `launchkit.core.parse`.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from launchkit.core.contract import reserved_env


class Priority(str, Enum):
    low = "low"
    normal = "normal"
    high = "high"
    urgent = "urgent"
    immediate = "immediate"


class ExecMethod(str, Enum):
    exec = "exec"
    bash = "bash"


class Launcher(str, Enum):
    """How the user command is wired across replicas (see docs/multi-node.md)."""

    none = "none"
    torchrun = "torchrun"
    accelerate = "accelerate"
    ray = "ray"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EnvVar(_Model):
    name: str
    value: str


class EnvSecret(_Model):
    """An env var whose value comes from a Beaker secret. Only names are ever stored."""

    name: str
    secret: str


MountMode = Literal["readonly", "readwrite"]


class DatasetMount(_Model):
    dataset: str
    mount_path: str
    sub_path: str | None = None
    mode: MountMode | None = None


class HostMount(_Model):
    host_path: str
    mount_path: str
    mode: MountMode | None = None


class WekaMount(_Model):
    bucket: str
    mount_path: str
    mode: MountMode | None = None


class SecretMount(_Model):
    """A Beaker secret mounted as a file (`--dataset-secret`). Only the secret's name is stored."""

    secret: str
    mount_path: str


class SweepAxis(_Model):
    """One `--sweep KEY=V1,V2`: a key and its values, in order."""

    key: str
    values: list[str] = Field(min_length=1)


class PythonManager(str, Enum):
    uv = "uv"
    conda = "conda"


class Upload(_Model):
    local_path: str
    mount_path: str


class LaunchRequest(_Model):
    """Everything `launchkit run` was asked to do. Immutable once built."""

    # --- the command
    command: list[str] = Field(min_length=1)
    commands: list[list[str]] = []  # --multi: every command (the first is `command`)
    multi: bool = False
    sweep: list[SweepAxis] = []
    sweep_experiments: bool = False  # one experiment per grid point instead of one task each

    # --- workload
    name: str | None = None
    description: str | None = None
    workspace: str | None = None
    budget: str | None = None
    groups: list[str] = []

    # --- constraints
    clusters: list[str] = []  # names, aliases or globs; resolved by the Beaker backend
    # the clusters the backend resolved the constraints to (Capability.placement), set before the
    # spec is built: profiles are chosen from these, not from the patterns (not part of the job's id)
    placed_clusters: list[str] = []
    gpu_types: list[str] = []
    interconnect: Literal["ib", "tcpxo"] | None = None
    tags: list[str] = []
    hostnames: list[str] = []

    # --- resources (per replica)
    cpus: float | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, ge=0)  # 0: no GPUs (gantry)
    memory: int | None = Field(default=None, gt=0)  # bytes
    shared_memory: int | None = Field(default=None, gt=0)  # bytes

    # --- inputs
    beaker_image: str | None = None
    docker_image: str | None = None
    datasets: list[DatasetMount] = []
    mounts: list[HostMount] = []
    weka: list[WekaMount] = []
    uploads: list[Upload] = []
    env: list[EnvVar] = []
    env_secrets: list[EnvSecret] = []
    auto_secrets: bool = True  # add well-known secrets (HF_TOKEN, ...) the workspace has
    git_token_secret: str | None = None  # secret holding a token for private repositories
    secret_mounts: list[SecretMount] = []  # --dataset-secret
    aws_config_secret: str | None = None  # secrets written to files by the entrypoint
    aws_credentials_secret: str | None = None
    google_credentials_secret: str | None = None

    # --- git
    ref: str | None = None
    branch: str | None = None
    remote: str | None = None
    allow_dirty: bool = False

    # --- outputs
    results_dir: str = "/results"

    # --- task
    task_name: str = "main"
    priority: Priority | None = None
    task_timeout: float | None = Field(default=None, gt=0)  # seconds
    min_runtime: float | None = Field(default=None, ge=0)  # seconds
    no_auto_resume: bool = False
    preemptible: bool | None = None
    retries: int | None = Field(default=None, ge=0)
    retry_on: tuple[str, ...] = ()  # --retry-on causes (core/retrying.py), in its CAUSES order
    retry_exit_codes: tuple[int, ...] = ()  # --retry-on exit:29,75 (the cause `exit`)
    require_resume: bool = False  # stop an attempt that restarted below the last one's step

    # --- multi-node (defaults refined by launchkit.core.profiles / multinode)
    replicas: int = Field(default=1, ge=1)
    leader_selection: bool | None = None
    host_networking: bool | None = None
    propagate_failure: bool | None = None
    propagate_preemption: bool | None = None
    synchronized_start_timeout: float | None = None  # seconds
    launcher: Launcher = Launcher.none
    resumable: bool = False
    presets: list[str] = []  # env presets (core/profiles.PRESETS), e.g. vllm
    profile: str | None = None  # explicit cluster profile name
    no_profile: bool = False
    skip_nccl_setup: bool = False

    # --- runtime
    exec_method: ExecMethod = ExecMethod.exec
    pre_setup: str | None = None
    post_setup: str | None = None
    runtime_dir: str = "/launchkit-runtime"

    # --- python
    install: str | None = None
    python_manager: PythonManager = PythonManager.uv
    conda_file: str | None = None  # repository-relative path of an environment file
    conda_env: str | None = None  # name or absolute prefix of an existing conda env in the image
    uv_venv: str | None = None  # absolute path of an existing venv in the image
    no_python: bool = False
    no_preflight: bool = False  # launch-time only: skip the Linux resolution before a Beaker submit
    system_python: bool = False
    python_version: str | None = None
    uv_extras: list[str] = []
    uv_all_extras: bool = False
    uv_no_extras: bool = False
    uv_groups: list[str] = []  # PEP 735 dependency groups
    uv_all_groups: bool = False
    uv_no_default_groups: bool = False
    torch_backend: str | None = None
    uv_cache_dir: str | None = None

    # --- launch behaviour (not part of the spec)
    backend: str | None = None  # --backend / config `backend`; None: the registry's default
    local: bool = False  # --local: the backend that runs jobs on this machine
    dry_run: bool = False
    offline: bool = False  # --dry-run without asking Beaker
    save_spec: str | None = None
    follow: bool = False  # wait for the job (--follow, --timeout N, gantry's --show-logs)
    show_logs: bool = True  # while waiting, stream the logs (--no-follow/--no-logs: wait silently)
    timeout: float | None = None  # seconds to wait before stopping the job; None: until it ends
    start_timeout: float | None = None  # while waiting: stop the job if not started by then
    # the runtime's watchdog (runtime/node/launch/watchdog.py), where the job runs, followed or not
    inactive_timeout: float | None = None  # stop the job after this long without output
    inactive_soft_timeout: float | None = None  # warn after this long without output
    stall_timeout: float | None = None  # stop the job after this long without a progress line
    stall_auto: tuple[float, float] | None = None  # --stall-timeout auto: (floor, cap) seconds
    stall_grace: float | None = None  # extra time before the first progress line (None: 10 min)
    progress_patterns: list[str] = Field(default_factory=list)  # regexes; empty: the runtime's defaults
    yes: bool = False
    json_output: bool = False  # `run --json`: one JSON object on stdout (the plan, then the run or the spec)
    slack_webhook_url: SecretStr | None = None  # a credential: never shown (SecretStr masks it)
    slack_webhook_secret: str | None = None  # the secret holding the webhook the job's runtime posts with
    notify_url: str | None = None  # --notify-url: the events' URL, in the spec (plain: not a credential)
    notify_secret: str | None = None  # --notify-secret: the secret holding the events' URL

    @model_validator(mode="after")
    def _consistent(self) -> LaunchRequest:
        """Backstop for direct construction; launchkit.core.parse gives the user-facing messages."""
        if self.beaker_image and self.docker_image:
            raise ValueError("--beaker-image and --docker-image cannot be used together: pick one")
        if self.hostnames and (self.clusters or self.gpu_types or self.tags or self.interconnect):
            raise ValueError(
                "--hostname cannot be combined with --cluster/--gpu-type/--tag/--interconnect: drop one"
            )
        for name in [e.name for e in self.env] + [s.name for s in self.env_secrets]:
            if reserved_env(name):
                raise ValueError(f"{name} is set by launchkit itself: use the matching `run` option instead")
        return self
