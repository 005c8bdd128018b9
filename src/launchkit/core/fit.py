"""Where a request of N GPUs per replica can ever fit, and where it can start now: pure, no I/O.

A backend describes its clusters as `ClusterSize`s (each node's GPU type, GPU count, free GPUs, and
whether it is cordoned); `never_fits` is the refusal before anything is made (a replica needs its GPUs
on ONE node; with host networking every replica needs a node of its own), `start_rows` ranks clusters
by what would start soonest for `find-gpus --gpus N`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class NodeSize:
    name: str
    gpu_type: str  # e.g. "NVIDIA H100" ("" for a CPU-only node)
    gpus: int
    free: int = 0  # GPUs free now (0 on a cordoned node)
    cordoned: bool = False


@dataclass(frozen=True)
class ClusterSize:
    name: str  # org/name
    nodes: tuple[NodeSize, ...]
    slot_limit: int | None = None  # the workspace's effective slot limit here (None: none known)
    slots_used: int = 0  # the workspace's slots in use that count against it
    budget_allocated: bool | None = None  # the budget has an allocation here (None: not known)
    known: bool = True  # False: its nodes are not known (none listed, e.g. a cloud cluster scaled to 0)


@dataclass(frozen=True)
class Ask:
    gpus: int  # per replica
    replicas: int = 1
    gpu_types: tuple[str, ...] = ()  # substrings, any of them (as --gpu-type)
    host_networking: bool = False  # one replica per node


def unknown_gpu_types(wanted: list[str], known: list[str]) -> tuple[str, str] | None:
    """(the problem, its fix) when no GPU type asked for (substrings, as --gpu-type) is any node's type;
    `known`: every type the clusters have. None when one of them is."""
    if not wanted or any(w.lower() in k.lower() for w in wanted for k in known):
        return None
    asked = " or ".join(repr(w) for w in wanted)
    return (
        f"--gpu-type {asked}: no cluster has that GPU type",
        f"the types there are: {', '.join(known) or 'none'}",
    )


def typed_nodes(ask: Ask, nodes: tuple[NodeSize, ...]) -> list[NodeSize]:
    """The nodes of the GPU type asked for (all of them when none is)."""
    wanted = [g.lower() for g in ask.gpu_types]
    return [n for n in nodes if not wanted or any(w in n.gpu_type.lower() for w in wanted)]


def replicas_ever(ask: Ask, cluster: ClusterSize) -> int:
    """How many replicas of `ask` the cluster could hold at once when empty (cordoned nodes count: they
    come back)."""
    nodes = [n for n in typed_nodes(ask, cluster.nodes) if n.gpus >= ask.gpus]
    if ask.host_networking:
        return len(nodes)
    return sum(n.gpus // ask.gpus for n in nodes) if ask.gpus else len(nodes)


def fits_ever(ask: Ask, cluster: ClusterSize) -> bool:
    return replicas_ever(ask, cluster) >= ask.replicas


def largest_gpus(ask: Ask, clusters: list[ClusterSize]) -> int:
    return max((n.gpus for c in clusters for n in typed_nodes(ask, c.nodes)), default=0)


def never_fits(
    ask: Ask, chosen: list[ClusterSize], others: list[ClusterSize], *, label: str | None = None
) -> tuple[str, str] | None:
    """(the problem, its fix) when no chosen cluster could ever take the request; None when one could.
    `others`: the rest of the clusters, named in the fix when they would take it; `label`: how to name
    the chosen ones (default: their names)."""
    if ask.gpus <= 0 or not chosen or any(not c.known or fits_ever(ask, c) for c in chosen):
        return None  # a cluster whose nodes are unknown might take it: never refused on a guess
    names = label or ", ".join(c.name for c in chosen)
    takers = [c.name for c in others if c.known and fits_ever(ask, c)]
    elsewhere = f"{', '.join(takers[:6])} would take it" if takers else "no cluster would take it whole"
    types = " or ".join(ask.gpu_types)
    if ask.gpu_types and not any(typed_nodes(ask, c.nodes) for c in chosen):
        have = sorted({n.gpu_type for c in chosen for n in c.nodes if n.gpu_type})
        return (
            f"--gpu-type {types}: no node of {names} has that GPU type "
            f"(they have {', '.join(have) or 'none'})",
            f"{elsewhere}: pass it as --cluster, or drop --gpu-type",
        )
    largest = largest_gpus(ask, chosen)
    if ask.gpus > largest:
        split = ask.gpus // largest if largest and ask.gpus % largest == 0 else None
        how = (
            f"split it: --gpus {largest} --replicas {split * ask.replicas} with --torchrun"
            if split
            else f"ask for at most --gpus {largest}"
        )
        return (
            f"--gpus {ask.gpus}: no node of {names} has {ask.gpus} GPUs; the largest fit is {largest} GPUs "
            f"per replica{f' of type {types}' if types else ''}",
            f"{elsewhere}; {how}",
        )
    most = max(replicas_ever(ask, c) for c in chosen)
    one_each = " with host networking (one replica per node)" if ask.host_networking else ""
    return (
        f"--replicas {ask.replicas}: {names} can hold at most {most} replicas of {ask.gpus} GPUs{one_each}; "
        f"the largest fit is --replicas {most}",
        f"{elsewhere}; or lower --replicas",
    )


@dataclass
class StartRow:
    """One cluster for `find-gpus --gpus N`: where a replica of N GPUs can start now."""

    cluster: ClusterSize
    replicas_now: int  # replicas that could start now (free GPUs together on one node)
    nodes_now: list[NodeSize] = field(default_factory=list)
    blocker: str = ""  # why not now: "" (it can), "slot limit", "busy", "cordoned", "never fits"

    @property
    def rank(self) -> tuple[int, int, int]:
        order = {"": 0, "busy": 1, "cordoned": 2, "slot limit": 3, "never fits": 4}
        free = sum(n.free for n in self.cluster.nodes)
        return (order.get(self.blocker, 9), -self.replicas_now, -free)


def _held(ask: Ask, nodes: list[NodeSize]) -> int:
    return len(nodes) if ask.host_networking else sum(n.gpus // max(ask.gpus, 1) for n in nodes)


def start_rows(ask: Ask, clusters: list[ClusterSize]) -> list[StartRow]:
    """Every cluster with what would start there now, soonest first: those that can start every replica
    now, then those waiting for busy nodes, cordoned nodes, the workspace's slot limit, then those it
    never fits."""
    rows = []
    for c in clusters:
        typed = [n for n in typed_nodes(ask, c.nodes) if n.gpus >= ask.gpus]
        now = [n for n in typed if not n.cordoned and n.free >= ask.gpus]
        count = len(now) if ask.host_networking else sum(n.free // max(ask.gpus, 1) for n in now)
        need = ask.gpus * ask.replicas
        if not fits_ever(ask, c):
            blocker = "never fits"
        elif c.slot_limit is not None and c.slots_used + need > c.slot_limit:
            blocker = "slot limit"
        elif count >= ask.replicas:
            blocker = ""
        elif count + _held(ask, [n for n in typed if n.cordoned]) >= ask.replicas:
            blocker = "cordoned"  # it would start now on the cordoned nodes
        else:
            blocker = "busy"
        rows.append(StartRow(c, count, now, blocker))
    rows.sort(key=lambda r: (r.rank, r.cluster.name))
    return rows
