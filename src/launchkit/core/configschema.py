"""The config keys and the shape of read config (layers, merged values); shared by launchkit.config
(which reads the files and the environment) and launchkit.core.configmodel (which validates).

Import-free on purpose: `run --help` reads config to show where a default came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Config key -> type description. Keys are the `run` option names with `_` (a `-` is accepted too).
KEYS: dict[str, str] = {
    "workspace": "str",
    "aws_config_secret": "str",
    "aws_credentials_secret": "str",
    "google_credentials_secret": "str",
    "budget": "str",
    "groups": "list",
    "clusters": "list",
    "gpu_types": "list",
    "interconnect": "str",
    "tags": "list",
    "cpus": "float",
    "gpus": "int",
    "memory": "str",
    "shared_memory": "str",
    "beaker_image": "str",
    "docker_image": "str",
    "env": "dict",
    "env_secrets": "dict",
    "env_not_secret": "list",
    "auto_secrets": "bool",
    "git_token_secret": "str",
    "slack_webhook_secret": "str",
    "notify_secret": "str",
    "results": "str",
    "task_name": "str",
    "priority": "str",
    "task_timeout": "duration",
    "min_runtime": "duration",
    "preemptible": "bool",
    "retries": "int",
    "retry_on": "list",
    "replicas": "int",
    "profile": "str",
    "presets": "list",
    "exec_method": "str",
    "runtime_dir": "str",
    "pre_setup": "str",
    "post_setup": "str",
    "install": "str",
    "python_manager": "str",
    "conda_file": "str",
    "conda_env": "str",
    "uv_venv": "str",
    "no_python": "bool",
    "no_preflight": "bool",
    "system_python": "bool",
    "python_version": "str",
    "uv_extras": "list",
    "uv_all_extras": "bool",
    "uv_groups": "list",
    "uv_all_groups": "bool",
    "uv_no_default_groups": "bool",
    "torch_backend": "str",
    "uv_cache_dir": "str",
    "backend": "str",
    "beaker_timeout": "duration",  # not a `run` option: --beaker-timeout (global), docs/beaker.md
    "profiles": "profiles",  # [tool.launchkit.profiles.NAME] tables, checked by launchkit.core.profiles
}

ENV_PREFIX = "LAUNCHKIT_"
PROJECT_LABEL = "pyproject.toml"
GANTRY_LABEL = "pyproject.toml [tool.gantry]"  # gantry's table, read when there is no [tool.launchkit]
USER_LABEL = "user config"


@dataclass
class Layer:
    """One source of defaults: its label for messages, the file (if any), and the raw values."""

    label: str
    path: str | None
    values: dict[str, Any] = field(default_factory=dict)

    def where(self, key: str) -> str:
        if self.label == GANTRY_LABEL:
            return f"{key!r} in {self.path} [tool.gantry]"
        return (
            f"{key!r} in {self.path} [tool.launchkit]"
            if self.label == PROJECT_LABEL
            else (f"{key!r} in {self.path}" if self.path else f"{ENV_PREFIX}{key.upper()}")
        )


@dataclass
class Config:
    """Merged defaults: key -> (value, layer it came from). Higher layers win."""

    layers: list[Layer]
    values: dict[str, tuple[Any, Layer]] = field(default_factory=dict)

    def get(self, key: str) -> Any:
        return self.values[key][0] if key in self.values else None

    def source(self, key: str) -> str | None:
        return self.values[key][1].label if key in self.values else None
