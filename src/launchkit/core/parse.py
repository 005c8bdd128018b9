"""Turn raw option values (strings from argv or config) into a `LaunchRequest`.

All user-facing validation messages are produced here or in the request model, and surface as
one-line usage errors.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import ValidationError

from launchkit.core.request import (
    DatasetMount, EnvSecret, EnvVar, HostMount, LaunchRequest, Launcher, Upload, WekaMount,
)
from launchkit.errors import UsageError


def _split_env(item: str, environ: dict[str, str]) -> EnvVar:
    name, sep, value = item.partition("=")
    if not name:
        raise UsageError(f"--env {item!r} has no name", hint="use --env NAME=VALUE or --env NAME")
    if not sep:
        if name not in environ:
            raise UsageError(f"--env {name}: {name} is not set here", hint=f"use --env {name}=VALUE")
        value = environ[name]
    return EnvVar(name=name, value=value)


def _split_mount(flag: str, item: str) -> tuple[str, str]:
    src, sep, target = item.rpartition(":")
    if not sep or not src or not target:
        raise UsageError(f"{flag} {item!r} is malformed", hint=f"use {flag} SOURCE:/absolute/mount/path")
    if not target.startswith("/"):
        raise UsageError(f"{flag} {item!r}: mount target {target!r} is relative",
                         hint="give an absolute path such as /data")
    return src, target


def build_request(given: dict[str, Any], command: list[str] | None,
                  environ: dict[str, str] | None = None) -> LaunchRequest:
    """First cut; the foundation issue completes the surface and config merging."""
    environ = dict(os.environ if environ is None else environ)
    if command is None:
        raise UsageError("the command must come after `--`", hint="e.g. launchkit run -- python train.py")
    if not command:
        raise UsageError("the command after `--` is empty", hint="e.g. launchkit run -- python train.py")
    fields: dict[str, Any] = {"command": command}
    simple = ("name", "description", "workspace", "budget", "interconnect", "cpus", "gpus", "memory",
              "shared_memory", "beaker_image", "docker_image", "ref", "branch", "remote", "task_name",
              "priority", "task_timeout", "min_runtime", "preemptible", "retries", "replicas",
              "leader_selection", "host_networking", "propagate_failure", "propagate_preemption",
              "synchronized_start_timeout", "profile", "exec_method", "pre_setup", "post_setup",
              "install", "python_version", "torch_backend", "uv_cache_dir", "save_spec",
              "git_token_secret")
    for key in simple:
        if given.get(key) is not None:
            fields[key] = given[key]
    for key, field in (("group", "groups"), ("cluster", "clusters"), ("gpu_type", "gpu_types"),
                       ("tag", "tags"), ("hostname", "hostnames"), ("uv_extra", "uv_extras")):
        if given.get(key):
            fields[field] = list(given[key])
    for flag in ("allow_dirty", "dry_run", "follow", "yes", "no_auto_resume", "resumable", "no_profile",
                 "skip_nccl_setup", "no_python", "system_python", "uv_all_extras"):
        if given.get(flag):
            fields[flag] = True
    if given.get("no_auto_secrets"):
        fields["auto_secrets"] = False
    if given.get("results"):
        fields["results_dir"] = given["results"]
    if given.get("local"):
        fields["backend"] = "local"
    elif given.get("backend"):
        fields["backend"] = given["backend"]
    launchers = [n for n in ("torchrun", "accelerate", "ray") if given.get(n)]
    if len(launchers) > 1:
        raise UsageError(f"--{launchers[0]} and --{launchers[1]} cannot be combined", hint="pick one launcher")
    if launchers:
        fields["launcher"] = Launcher(launchers[0])
    fields["env"] = [_split_env(e, environ) for e in given.get("env") or []]
    secrets = []
    for item in given.get("env_secret") or []:
        name, _, secret = item.partition("=")
        secrets.append(EnvSecret(name=name, secret=secret or name))
    fields["env_secrets"] = secrets
    fields["mounts"] = [HostMount(host_path=s, mount_path=t)
                        for s, t in (_split_mount("--mount", m) for m in given.get("mount") or [])]
    fields["weka"] = [WekaMount(bucket=s, mount_path=t)
                      for s, t in (_split_mount("--weka", m) for m in given.get("weka") or [])]
    fields["uploads"] = [Upload(local_path=s, mount_path=t)
                         for s, t in (_split_mount("--upload", m) for m in given.get("upload") or [])]
    datasets = []
    for item in given.get("dataset") or []:
        src, target = _split_mount("--dataset", item)
        ds, _, sub = src.partition(":")
        datasets.append(DatasetMount(dataset=ds, mount_path=target, sub_path=sub or None))
    fields["datasets"] = datasets
    try:
        request = LaunchRequest(**fields)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        raise UsageError(f"{loc}: {msg}" if loc else msg) from None
    from launchkit.core.multinode import check_combinations

    check_combinations(request)  # launcher/replica/profile conflicts (multi-node work)
    return request
