"""Multi-node wiring: replica defaults, launcher env, W&B resume, and the profile parts, for the spec.

`task_additions(request, run_id, user_profiles)` is the one call `core/spec.py` makes: it returns the
extra env vars, mounts and `BeakerTaskSpec` fields. Pure: no I/O. The runtime half lives in
runtime/node/launch/launchers.py (the launchers) and runtime/nccl.sh (`lk_cluster_setup`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict

from launchkit.core.contract import ENV_RESUMABLE, ENV_UV_CACHE_DIR, ENV_UV_LINK_MODE
from launchkit.core.profiles import ProfileSelection, resolve_profiles
from launchkit.core.request import HostMount, Launcher, LaunchRequest, WekaMount
from launchkit.core.units import to_nanoseconds
from launchkit.errors import UsageError

# Spec -> entrypoint contract (docs/multi-node.md). LAUNCHKIT_LAUNCHER and LAUNCHKIT_SKIP_NCCL_SETUP
# are set by core/spec.py itself.
RDZV_PORT_BASE, RDZV_PORT_SPAN = 29000, 1000


def derive_port(rid: str) -> int:
    """A rendezvous port in 29000-29999 derived from the run id (deterministic, spread out)."""
    return RDZV_PORT_BASE + int(hashlib.sha256(rid.encode()).hexdigest()[:8], 16) % RDZV_PORT_SPAN


ENV_RDZV_PORT = "LAUNCHKIT_RDZV_PORT"  # torchrun master, accelerate main process, Ray head
ENV_RDZV_ID = "LAUNCHKIT_RDZV_ID"  # not in the spec: the entrypoint sets it to LAUNCHKIT_RUN_ID

DEFAULT_SYNC_START_TIMEOUT = 300.0  # seconds (5m): gantry's, the floor
SYNC_START_PER_REPLICA = 90.0  # seconds per replica: more replicas take longer to be placed together
MAX_SYNC_START_TIMEOUT = 5400.0  # 90m: what OLMo-core sets for every multi-node launch (the cap)


def sync_start_default(replicas: int) -> float:
    """The synchronized-start timeout (seconds) for `replicas` replicas when the user gives none: 90 s
    per replica, at least gantry's 5m and at most OLMo-core's 90m (2-3 replicas 5m, 8 12m, 16 24m,
    60+ 90m): a 64-node job is not canceled because its last node took six minutes to free up."""
    return min(MAX_SYNC_START_TIMEOUT, max(DEFAULT_SYNC_START_TIMEOUT, SYNC_START_PER_REPLICA * replicas))


class TaskAdditions(BaseModel):
    model_config = ConfigDict(frozen=True)

    env: list[tuple[str, str]] = []
    mounts: list[HostMount] = []
    weka: list[WekaMount] = []
    secrets: dict[str, str] = {}  # presets' env name -> secret name, added at submit if it exists
    task_fields: dict[str, Any] = {}  # BeakerTaskSpec keyword arguments
    selection: ProfileSelection


def replica_fields(request: LaunchRequest) -> dict[str, Any]:
    """The replica settings as gantry 3.7.0 sets them (launch.py), a launcher standing for --torchrun:

    - leader selection: on for replicas with a launcher, unless host networking is turned off;
    - host networking: on for replicas with leader selection;
    - failure/preemption propagation and a synchronized start (sync_start_default: 5m to 90m by the
      replica count): on for replicas with a launcher and leader selection.
    So `--replicas N` alone turns none of them on. What the user says always wins."""
    multi = request.replicas > 1
    launcher = request.launcher is not Launcher.none
    leader = request.leader_selection
    if leader is None:
        leader = multi and launcher and request.host_networking is not False
    host = request.host_networking
    if host is None:
        host = multi and leader
    fields: dict[str, Any] = {"leader_selection": leader, "host_networking": host}
    failure, preemption, timeout = (
        request.propagate_failure,
        request.propagate_preemption,
        request.synchronized_start_timeout,
    )
    if multi and launcher and leader:
        failure = True if failure is None else failure
        preemption = True if preemption is None and failure else preemption
        timeout = sync_start_default(request.replicas) if timeout is None else timeout
    if failure is not None:
        fields["propagate_failure"] = failure
    if preemption is not None:
        fields["propagate_preemption"] = preemption
    if timeout is not None:
        fields["synchronized_start_timeout"] = to_nanoseconds(timeout)
    return fields


def launcher_env(request: LaunchRequest, run_id: str) -> list[tuple[str, str]]:
    env: list[tuple[str, str]] = []
    if request.launcher is not Launcher.none:  # also single-node: Ray's head and accelerate use the port
        env += [(ENV_RDZV_PORT, str(derive_port(run_id)))]
    if request.resumable:
        # WANDB_RUN_ID comes from the experiment id inside the job (runtime/entrypoint.sh): fresh for
        # every launch, the same for every retry and preemption restart of that experiment.
        env += [(ENV_RESUMABLE, "1"), ("WANDB_RESUME", "allow")]
    return env


def task_additions(
    request: LaunchRequest,
    run_id: str,
    user_profiles: dict[str, Any] | None = None,
    selection: ProfileSelection | None = None,
) -> TaskAdditions:
    """Everything profiles and multi-node wiring add to the task. The user's `--env` wins.
    `selection`: the request's profiles, resolved already (default: resolved here)."""
    selection = selection or resolve_profiles(request, user_profiles)
    user_names = {e.name for e in request.env} | {s.name for s in request.env_secrets}
    if request.uv_cache_dir or ENV_UV_CACHE_DIR in user_names:
        # the user's own uv cache wins over a profile's shared one, and uv picks the link mode for it
        user_names |= {ENV_UV_CACHE_DIR, ENV_UV_LINK_MODE}
    env = [(n, v) for n, v in selection.spec_env() + launcher_env(request, run_id) if n not in user_names]
    taken = (
        {m.mount_path for m in request.mounts}
        | {w.mount_path for w in request.weka}
        | {d.mount_path for d in request.datasets}
        | {u.mount_path for u in request.uploads}
        | {s.mount_path for s in request.secret_mounts}
    )
    preset = selection.preset
    # a preset's mount wins over the profile's at the same path; the user's own wins over both
    mounts = {m.mount_path: m for m in [*selection.mounts, *preset.mounts]}
    weka = {w.mount_path: w for w in [*selection.weka, *preset.weka] if w.mount_path not in mounts}
    return TaskAdditions(
        env=env,
        mounts=[m for p, m in mounts.items() if p not in taken],
        weka=[w for p, w in weka.items() if p not in taken],
        secrets={n: s for n, s in preset.secrets.items() if n not in user_names},
        task_fields=replica_fields(request),
        selection=selection,
    )


def added_line(
    request: LaunchRequest,
    user_profiles: dict[str, Any] | None = None,
    selection: ProfileSelection | None = None,
) -> str | None:
    """One line naming everything launchkit adds to the job beyond what the user typed: the cluster
    profile (its env, mounts and runtime setup) and each preset's parts. None when nothing is added."""
    extra = task_additions(request, "", user_profiles, selection)
    sel = extra.selection
    names = {n for n, _ in extra.env}
    paths = {m.mount_path for m in extra.mounts} | {w.mount_path for w in extra.weka}
    parts = []
    profile_items = [f"{k}={v}" for k, v in sel.env.items() if k in names and k not in sel.preset.env]
    profile_items += [f"mount {m.host_path}:{m.mount_path}" for m in sel.mounts if m.mount_path in paths]
    profile_items += [f"weka {w.bucket}:{w.mount_path}" for w in sel.weka if w.mount_path in paths]
    runtime = sel.runtime_summary()
    if sel.applied and (profile_items or runtime):
        parts.append(
            f"profile {sel.applied}"
            + (f" ({runtime})" if runtime else "")
            + (": " + ", ".join(profile_items) if profile_items else "")
        )
    elif runtime:
        parts.append(f"profile chosen on the node among {', '.join(sel.candidates)} ({runtime})")
    if request.synchronized_start_timeout is None and "synchronized_start_timeout" in extra.task_fields:
        wait = sync_start_default(request.replicas)
        parts.append(
            f"synchronized start: up to {wait / 60:g}m for all {request.replicas} replicas "
            "(--synchronized-start-timeout to change)"
        )
    for name, part in sel.preset_parts.items():
        kept = part.model_copy(
            update={
                "env": {k: v for k, v in part.env.items() if k in names and sel.preset.env[k] == v},
                "mounts": [m for m in part.mounts if m.mount_path in paths],
                "weka": [w for w in part.weka if w.mount_path in paths],
                "secrets": {k: v for k, v in part.secrets.items() if k in extra.secrets},
            }
        )
        parts.append(f"preset {name}" + (": " + ", ".join(kept.items()) if kept else " (nothing here)"))
    return "launchkit added: " + "; ".join(parts) if parts else None


def check_combinations(request: LaunchRequest) -> None:
    """Reject launcher/replica combinations that cannot work (one-line usage errors, exit 2).

    Every launcher works with both exec methods: the entrypoint's bash method keeps the argv intact.
    `--torchrun` across replicas without leader selection is gantry's: each replica runs its own
    single-node torchrun. Ray and accelerate (launchkit's) need a head to join."""
    launcher = request.launcher
    if launcher is Launcher.none:
        return
    leader = replica_fields(request)["leader_selection"]
    if request.replicas > 1 and launcher is not Launcher.torchrun and not leader:
        role = (
            "workers cannot find the head" if launcher is Launcher.ray else "replicas cannot find the leader"
        )
        raise UsageError(
            f"--{launcher.value} with --replicas {request.replicas} and no leader selection: {role}",
            hint="drop --no-leader-selection/--no-host-networking",
        )
