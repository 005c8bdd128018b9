"""Ready-made scenarios: `basic` (small, for tests), `demo` (40 clusters, 200 workloads, a 200k-line log,
for benchmarks), and `load_yaml` for a scenario file (see README)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from .state import NS, Experiment, State

BASIC_SECRETS = {
    "HF_TOKEN": "hf_fake_secret_value_0001",
    "WANDB_API_KEY": "wandb_shared_secret_0002",
    "alice_WANDB_API_KEY": "wandb_alice_secret_0003",
    "GITHUB_TOKEN": "ghp_fake_secret_0004",
}


def basic(state: State) -> State:
    """Org ai2; users alice (token-alice, the default) and bob (token-bob); workspace ai2/launchkit with
    budget ai2/oe-default, maximum priority high and secrets; workspace ai2/no-budget; image alice/base;
    seven clusters with short canonical names (jupiter, saturn, ceres, holmes, phobos, interactive, triton)."""
    s = state
    s.add_user("alice", "token-alice")
    s.add_user("bob", "token-bob")
    s.add_budget("ai2/oe-default")
    s.add_workspace(
        "ai2/launchkit",
        budget="ai2/oe-default",
        author="alice",
        description="launchkit tests",
        secrets=BASIC_SECRETS,
    )
    s.add_workspace("ai2/no-budget", author="bob")
    s.add_image("alice/base", docker_tag="ghcr.io/example/base:latest")
    s.add_user("beaker-py", "token-beaker-py")  # owner of gantry's default image (gantry constants.py)
    s.add_image("beaker-py/gantry", docker_tag="ghcr.io/allenai/beaker-gantry:latest")
    s.workspaces[s.find_workspace("ai2/launchkit").id].max_priority = "high"  # "urgent" answers 400
    h100, a100, l40s, b300 = "NVIDIA_H100", "NVIDIA_A100_80GB", "NVIDIA_L40S", "NVIDIA_B300"
    # Canonical names are the short ones; the old long names survive as bare aliases (fact sheet 1.1-1.4).
    s.add_cluster(
        "ai2/jupiter",
        aliases=["jupiter-cirrascale-2"],
        tags=["interconnect:ib", "storage:weka"],
        nodes=[{"gpu_type": h100, "assigned": a} for a in (8, 4, 0, 8)],
    )
    s.add_cluster(
        "ai2/saturn",
        aliases=["saturn-cirrascale"],
        tags=["storage:weka"],
        nodes=[
            {"gpu_type": a100, "assigned": 6},
            {"gpu_type": a100, "assigned": 8},
            {"gpu_type": l40s, "assigned": 0},
            {"gpu_type": l40s, "assigned": 2},
        ],
    )
    s.add_cluster(
        "ai2/ceres",
        aliases=["ceres-cirrascale"],
        tags=["interconnect:ib", "storage:weka"],
        nodes=[{"gpu_type": h100, "assigned": 8} for _ in range(2)],
    )
    # New in July 2026 (B300, InfiniBand, Weka); no old name. augusta (GCP, TCPXO) was decommissioned.
    s.add_cluster(
        "ai2/holmes",
        tags=["interconnect:ib", "storage:weka"],
        nodes=[{"gpu_type": b300, "assigned": 0, "cordoned": True}, {"gpu_type": b300, "assigned": 2}],
    )
    s.add_cluster(
        "ai2/phobos", aliases=["phobos-cirrascale"], tags=["cpu-only"], nodes=[{"gpu_type": None, "gpus": 0}]
    )
    s.add_cluster(  # sessions only: max_task_timeout = 0 takes no batch jobs (fact 1.7)
        "ai2/interactive", aliases=["sessions"], max_task_timeout=0, nodes=[{"gpu_type": h100, "assigned": 0}]
    )
    s.add_cluster(
        "ai2/triton",
        aliases=["triton-cirrascale"],
        max_task_timeout=2 * 86400 * NS,
        nodes=[{"gpu_type": l40s, "assigned": 3}],
    )
    return s


GPU_CHOICES = [
    "NVIDIA_H100",
    "NVIDIA_A100_80GB",
    "NVIDIA_L40S",
    "NVIDIA_H200",
    "NVIDIA_B200",
    "NVIDIA_A100_40GB",
]


def demo(
    state: State,
    *,
    clusters: int = 40,
    workloads: int = 200,
    other_workloads: int = 20,
    log_lines: int = 200_000,
    seed: int = 7,
) -> State:
    """Benchmark scenario on top of `basic`: `clusters` more clusters `ai2/bench-NN` (4-12 nodes, every
    fifth with mixed GPU types, random occupancy, a few taking no batch jobs), `workloads` experiments
    `bench-NNN` in ai2/launchkit over the last ~4 days by alice and bob whose tasks carry both
    GANTRY_VERSION and LAUNCHKIT_VERSION (so both tools list all of them), `other_workloads` plain ones
    `other-NNN`, and a finished experiment `alice/follow-200k` whose job logged `log_lines` lines."""
    basic(state)
    rnd = random.Random(seed)
    s = state
    for i in range(clusters):
        main = GPU_CHOICES[i % len(GPU_CHOICES)]
        other = GPU_CHOICES[(i + 1) % len(GPU_CHOICES)]
        nodes = []
        for k in range(rnd.randint(4, 12)):
            gpu = other if (i % 5 == 0 and k % 3 == 2) else main
            nodes.append(
                {"gpu_type": gpu, "assigned": rnd.choice([0, 2, 4, 8, 8, 8]), "cordoned": rnd.random() < 0.05}
            )
        s.add_cluster(
            f"ai2/bench-{i:02d}",
            aliases=[f"bench-{i:02d}-cirrascale"],
            tags=["interconnect:ib"] if i % 2 else [],
            max_task_timeout=0 if i % 13 == 12 else None,
            nodes=nodes,
        )
    now = s.clock()
    statuses = ["running", "succeeded", "failed", "queued", "succeeded", "canceled"]
    tools = {"GANTRY_VERSION": "3.7.0", "LAUNCHKIT_VERSION": "0.1.0"}
    for i in range(workloads + other_workloads):
        tagged = i < workloads
        exp = s.add_experiment(
            "ai2/launchkit",
            f"bench-{i:03d}" if tagged else f"other-{i - workloads:03d}",
            author="alice" if i % 3 else "bob",
            description=f"benchmark workload {i}",
            env=tools if tagged else {},
            created=now - (workloads + other_workloads - i) * 1800 * NS,
        )
        drive(s, exp, statuses[i % len(statuses)], lines=[f"workload {i} line {k}" for k in range(3)])
    big = s.add_experiment("ai2/launchkit", "follow-200k", author="alice", description="200k log lines")
    job = s.start_job(big)
    s.append_synthetic_logs(job, log_lines)
    s.finish_job(job, 0)
    return s


def drive(
    s: State,
    exp: Experiment,
    status: str,
    *,
    exit_code: int | None = None,
    lines: list[str] | None = None,
    synthetic_lines: int = 0,
) -> None:
    """Move every task's job of `exp` to `status` (queued, running, succeeded, failed, canceled, preempted)."""
    for task in exp.tasks:
        job = task.latest_job
        assert job is not None
        if status == "queued":
            continue
        s.start_job(job)
        if lines:
            s.append_logs(job, lines)
        if synthetic_lines:
            s.append_synthetic_logs(job, synthetic_lines)
        if status == "succeeded":
            s.finish_job(job, 0 if exit_code is None else exit_code)
        elif status == "failed":
            s.finish_job(job, 1 if exit_code is None else exit_code)
        elif status == "canceled":
            s.cancel_job(job)
        elif status == "preempted":
            s.preempt_job(job)
        elif status != "running":
            raise ValueError(f"unknown status {status!r}")


def load_yaml(path: str | Path, state: State) -> dict[str, Any]:
    """Build `state` from a scenario file; returns server options found in it (e.g. latency)."""
    import yaml

    doc = yaml.safe_load(Path(path).read_text()) or {}
    if doc.get("options"):
        from .state import Options

        state.options = Options.parse({**vars(state.options), **doc["options"]})
    if doc.get("scenario"):
        build(doc["scenario"], state, **(doc.get("scenario_options") or {}))
    s = state
    for u in doc.get("users") or []:
        s.add_user(u["name"], u.get("token"), org=u.get("org", "ai2"))
    for b in doc.get("budgets") or []:
        s.add_budget(b)
    for w in doc.get("workspaces") or []:
        ws = s.add_workspace(
            w["name"],
            budget=w.get("budget"),
            author=w.get("author"),
            description=w.get("description", ""),
            secrets=w.get("secrets"),
        )
        ws.max_priority = w.get("max_priority")
        ws.slot_limit = w.get("slot_limit")
    for i in doc.get("images") or []:
        s.add_image(i["name"], workspace=i.get("workspace"), docker_tag=i.get("docker_tag", ""))
    for c in doc.get("clusters") or []:
        nodes = []
        for n in c.get("nodes") or []:
            n = dict(n)
            nodes += [n] * int(n.pop("count", 1))
        timeout = c.get("max_task_timeout")
        s.add_cluster(
            c["name"],
            aliases=c.get("aliases") or [],
            tags=c.get("tags") or [],
            max_task_timeout=None if timeout is None else int(timeout * NS),
            nodes=nodes,
        )
    now = s.clock()
    for e in doc.get("experiments") or []:
        exp = s.add_experiment(
            e["workspace"],
            e["name"],
            author=e["author"],
            description=e.get("description", ""),
            task_names=e.get("tasks") or ["main"],
            env=e.get("env"),
            replicas=e.get("replicas", 1),
            created=now - int(e["created_ago"] * NS) if "created_ago" in e else None,
        )
        drive(
            s,
            exp,
            e.get("status", "queued"),
            exit_code=e.get("exit_code"),
            lines=e.get("logs"),
            synthetic_lines=int(e.get("synthetic_logs", 0)),
        )
    return {k: doc[k] for k in ("latency", "default_user", "default_workspace") if k in doc}


SCENARIOS = {"basic": basic, "demo": demo, "empty": lambda s, **kw: s}


def build(name: str, state: State, **options: Any) -> State:
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; one of {sorted(SCENARIOS)}")
    return SCENARIOS[name](state, **options)
