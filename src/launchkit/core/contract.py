"""The environment contract between the spec, the backends and the entrypoint (docs/runtime.md).

Import-free, so the local supervisor and the Beaker backend can share the names cheaply.
"""

# In the description of every experiment launchkit makes; `launchkit list` shows only those.
DESCRIPTION_MARKER = "[launchkit]"

ENV_VERSION = "LAUNCHKIT_VERSION"
ENV_RUN_ID = "LAUNCHKIT_RUN_ID"
ENV_GIT_REMOTE = "LAUNCHKIT_GIT_REMOTE"
ENV_GIT_COMMIT = "LAUNCHKIT_GIT_COMMIT"
ENV_GIT_BRANCH = "LAUNCHKIT_GIT_BRANCH"
# The nearest version tag of the commit: the job recreates it, so `git describe` (setuptools-scm,
# hatch-vcs, versioneer) gives the version it gives at launch without fetching every tag.
ENV_GIT_TAG = "LAUNCHKIT_GIT_TAG"
ENV_GIT_TAG_COMMIT = "LAUNCHKIT_GIT_TAG_COMMIT"
ENV_GIT_TAG_DISTANCE = "LAUNCHKIT_GIT_TAG_DISTANCE"
ENV_TASK_NAME = "LAUNCHKIT_TASK_NAME"
ENV_RUNTIME_DIR = "LAUNCHKIT_RUNTIME_DIR"
ENV_EXEC_METHOD = "LAUNCHKIT_EXEC_METHOD"
# The run's policy (retries, the watchdog, progress patterns, Slack) is one variable of its own:
# runtime/node/policy.py (ENV, and ENV_WEBHOOK for the webhook's secret).
ENV_RESULTS_DIR = "RESULTS_DIR"
# The entrypoint's defaults (runtime/entrypoint.sh, which exports them): a spec spells out only others.
DEFAULT_RESULTS_DIR = "/results"
DEFAULT_RUNTIME_DIR = "/launchkit-runtime"
DEFAULT_EXEC_METHOD = "exec"
ENV_PRE_SETUP = "LAUNCHKIT_PRE_SETUP"
ENV_POST_SETUP = "LAUNCHKIT_POST_SETUP"
ENV_NO_PYTHON = "LAUNCHKIT_NO_PYTHON"
ENV_SYSTEM_PYTHON = "LAUNCHKIT_SYSTEM_PYTHON"
ENV_PYTHON_VERSION = "LAUNCHKIT_PYTHON_VERSION"
ENV_INSTALL_CMD = "LAUNCHKIT_INSTALL_CMD"
ENV_UV_EXTRAS = "LAUNCHKIT_UV_EXTRAS"
ENV_UV_ALL_EXTRAS = "LAUNCHKIT_UV_ALL_EXTRAS"
ENV_UV_GROUPS = "LAUNCHKIT_UV_GROUPS"  # space-separated dependency group names
ENV_UV_ALL_GROUPS = "LAUNCHKIT_UV_ALL_GROUPS"
ENV_UV_NO_DEFAULT_GROUPS = "LAUNCHKIT_UV_NO_DEFAULT_GROUPS"
ENV_PYTHON_MANAGER = "LAUNCHKIT_PYTHON_MANAGER"  # conda (uv when unset)
ENV_CONDA_FILE = "LAUNCHKIT_CONDA_FILE"
ENV_CONDA_ENV = "LAUNCHKIT_CONDA_ENV"
ENV_UV_VENV = "LAUNCHKIT_UV_VENV"
ENV_RESUMABLE = "LAUNCHKIT_RESUMABLE"  # the entrypoint sets WANDB_RUN_ID from the experiment id
ENV_UV_TORCH_BACKEND = "UV_TORCH_BACKEND"
ENV_UV_CACHE_DIR = "UV_CACHE_DIR"
ENV_UV_LINK_MODE = "UV_LINK_MODE"  # set by a profile's shared uv cache
ENV_LAUNCHER = "LAUNCHKIT_LAUNCHER"
ENV_SKIP_NCCL_SETUP = "LAUNCHKIT_SKIP_NCCL_SETUP"
ENV_GIT_TOKEN = "LAUNCHKIT_GIT_TOKEN"
# Cluster filters the Beaker backend applies when resolving `constraints.cluster` (Beaker has no
# spec field for them); also informative inside the job.
ENV_INTERCONNECT = "LAUNCHKIT_INTERCONNECT"
ENV_CONSTRAINT_GPU_TYPES = "LAUNCHKIT_CONSTRAINT_GPU_TYPES"
ENV_CONSTRAINT_TAGS = "LAUNCHKIT_CONSTRAINT_TAGS"
# Cloud credentials from secrets (--aws-config-secret, ...): the entrypoint writes each to a file.
ENV_AWS_CONFIG = "LAUNCHKIT_AWS_CONFIG"
ENV_AWS_CREDENTIALS = "LAUNCHKIT_AWS_CREDENTIALS"
ENV_GOOGLE_CREDENTIALS = "LAUNCHKIT_GOOGLE_CREDENTIALS"
# Where --slack-webhook-url comes from when not given (gantry's name accepted too).
SLACK_WEBHOOK_ENV = ("LAUNCHKIT_SLACK_WEBHOOK_URL", "GANTRY_SLACK_WEBHOOK_URL")

# Names launchkit sets itself (the contract above): refused on every path a user names a variable by
# (--env, --env-secret, --env-file, config, presets, profiles, mason's --env/--secret, the Python API).
RESERVED_ENV_PREFIX = "LAUNCHKIT_"
RESERVED_ENV = frozenset({ENV_RESULTS_DIR})


def reserved_env(name: str) -> bool:
    """Whether `name` is a variable launchkit sets itself (a user's would replace launchkit's)."""
    return name.startswith(RESERVED_ENV_PREFIX) or name in RESERVED_ENV
