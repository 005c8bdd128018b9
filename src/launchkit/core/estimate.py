"""When a job waiting for nodes could start, with its basis, or why there is no estimate (no I/O).

A job waits for nodes when no node of its clusters has its GPUs free together. What the platform lists
bounds when some will: every job running on those nodes ends at the latest when it reaches its task
timeout (its own `--task-timeout`, else the cluster's maximum), counted from when it started. The jobs
ahead of it in line (the queue position: same kind of node, same or higher priority) take the room
that frees first, each the first that fits it; the job then needs the next (position k: a later
freeing). The answer is an upper bound given that basis: jobs may end sooner, a job of higher priority
may arrive, and lower-priority preemptible jobs may be preempted for it sooner (fact sheet 11.3).

No estimate, with the reason, when the room it needs depends on GPUs with no known end: a running job
without a timeout on a cluster without a maximum, GPUs the listing does not account for, a job not
started yet (its start, and so its end, is not known), cordoned nodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

NS = 1_000_000_000


@dataclass(frozen=True)
class Holder:
    """A job holding GPUs on a node: it ends at the latest at `ends_by` (ns; None: no known end),
    because of `basis` (`its --task-timeout 4h`, `ai2/jupiter's max task timeout 2d`), or why not."""

    name: str
    gpus: int
    ends_by: int | None
    basis: str
    preemptible: bool = False  # of lower priority and preemptible now: Beaker may preempt it for the job


@dataclass(frozen=True)
class NodeNow:
    """A node of the job's clusters as listed now: its GPUs and the jobs holding them; GPUs held that no
    listed job accounts for are a holder with no known end (`unlisted`)."""

    name: str
    gpus: int
    holders: tuple[Holder, ...] = ()
    unlisted: int = 0
    cordoned: bool = False


class Estimate(BaseModel):
    """`why`'s estimate: when (ns; `at_utc` as said), on what basis, and what could make it sooner."""

    model_config = ConfigDict(frozen=True)

    at: int
    at_utc: str  # "14:40 UTC" (with the date when not today)
    basis: str
    sooner: str | None = None


@dataclass(frozen=True)
class Answer:
    estimate: Estimate | None = None
    reason: str | None = None  # no estimate: why


def _clock(ns: int, now: int) -> str:
    day = time.strftime("%Y-%m-%d", time.gmtime(ns / NS))
    same = day == time.strftime("%Y-%m-%d", time.gmtime(now / NS))
    return time.strftime("%H:%M" if same else "%Y-%m-%d %H:%M", time.gmtime(ns / NS)) + " UTC"


def _free_at(node: NodeNow, t: int) -> int:
    """GPUs of `node` free at time `t` (ns) if every holder with a known end ends by then."""
    held = node.unlisted + sum(h.gpus for h in node.holders if h.ends_by is None or h.ends_by > t)
    return max(0, node.gpus - held)


def _fits(free: list[int], gpus: int, replicas: int, host_networking: bool) -> bool:
    if host_networking or gpus <= 0:
        return sum(1 for f in free if f >= gpus) >= replicas
    return sum(f // gpus for f in free) >= replicas


def _place(free: list[int], gpus: int, replicas: int, host_networking: bool) -> list[int]:
    """Nodes (indices) that take the replicas, the fullest that fits first (best fit)."""
    left, used = list(free), []
    for _ in range(replicas):
        ok = [i for i, f in enumerate(left) if f >= gpus and not (host_networking and i in used)]
        i = min(ok, key=lambda i: (left[i], i))
        left[i] -= gpus
        used.append(i)
    return used


def start_estimate(
    *,
    gpus: int,
    replicas: int,
    host_networking: bool,
    nodes: list[NodeNow],
    ahead: list[int],
    now: int,
) -> Answer:
    """When `replicas` replicas of `gpus` GPUs each could all be placed on `nodes`, after the jobs
    `ahead` (their GPUs, in line order) took the room that fits them first; `now` in ns (the caller's
    clock). The module docstring says what it assumes."""
    usable = [n for n in nodes if not n.cordoned and n.gpus >= gpus]
    if not usable:
        cordoned = [n.name for n in nodes if n.cordoned and n.gpus >= gpus]
        if cordoned:
            return Answer(reason="the nodes that could take it are cordoned (no known return)")
        return Answer(reason="no node of its clusters is big enough for it")
    times = sorted({now, *(max(now, h.ends_by) for n in usable for h in n.holders if h.ends_by is not None)})
    taken = [0] * len(usable)  # GPUs the jobs ahead took, per node (held for good: an upper bound)
    placed_ahead = 0
    for need in ahead:
        for t in times:
            free = [max(0, _free_at(n, t) - taken[i]) for i, n in enumerate(usable)]
            if _fits(free, need, 1, False):
                taken[_place(free, need, 1, False)[0]] += need
                placed_ahead += 1
                break  # one that never fits in the known horizon takes none of it
    for t in times:
        free = [max(0, _free_at(n, t) - taken[i]) for i, n in enumerate(usable)]
        if not _fits(free, gpus, replicas, host_networking):
            continue
        chosen = _place(free, gpus, replicas, host_networking)
        return Answer(estimate=_said(usable, chosen, t, now, len(ahead), placed_ahead))
    return Answer(reason=_why_not(usable, ahead))


def _said(usable: list[NodeNow], chosen: list[int], t: int, now: int, ahead: int, placed: int) -> Estimate:
    """The estimate at `t`: the holder whose end frees the room (the latest of those it waits for)."""
    ending = [
        (h, usable[i].name) for i in dict.fromkeys(chosen) for h in usable[i].holders if h.ends_by is not None
    ]
    freeing = [(h, name) for h, name in ending if max(now, h.ends_by or 0) == t]
    after = (
        f" after the {ahead} job{'s' if ahead != 1 else ''} ahead of it take the room that frees first"
        if (ahead and placed)
        else ""
    )
    if t <= now or not freeing:
        basis = f"its listed nodes have room for it now{after}; Beaker has not placed it yet"
    else:
        h, node = freeing[0]
        others = (
            f" (and {len(freeing) - 1} more job{'s' if len(freeing) > 2 else ''} then)"
            if len(freeing) > 1
            else ""
        )
        basis = f"{node} frees its GPUs at the latest when job {h.name} reaches {h.basis}{others}{after}"
    soon = sum(1 for n in usable for h in n.holders if h.preemptible)
    sooner = (
        f"it may start sooner: {soon} lower-priority preemptible job{'s' if soon != 1 else ''} hold GPUs "
        "there, which Beaker may preempt for it"
        if soon
        else None
    )
    return Estimate(at=max(t, now), at_utc=_clock(max(t, now), now), basis=basis, sooner=sooner)


def _why_not(usable: list[NodeNow], ahead: list[int]) -> str:
    """Why the known ends never make room: what holds the GPUs with no known end."""
    unknown = [h for n in usable for h in n.holders if h.ends_by is None]
    unlisted = sum(n.unlisted for n in usable)
    parts = []
    if unknown:
        named = ", ".join(dict.fromkeys(h.name for h in unknown[:3]))
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        parts.append(f"{len(unknown)} job{'s' if len(unknown) != 1 else ''} holding its nodes' GPUs "
                     f"{'have' if len(unknown) != 1 else 'has'} no known end ({named}{more}: "
                     f"{unknown[0].basis})")  # fmt: skip
    if unlisted:
        parts.append(f"{unlisted} GPUs of its nodes are held by jobs Beaker does not list")
    reason = "; ".join(parts) or "the GPUs its nodes free with a known end are not enough for it"
    if ahead:
        reason += f" (the {len(ahead)} job{'s' if len(ahead) != 1 else ''} ahead of it take the room first)"
    return reason
