"""Beaker's scheduling data: why a queued job waits, whether a request could ever fit, and where a
replica of N GPUs can start now (`find-gpus --gpus N`).

beaker-py 2.8.1's protocol has `ListJobEvents`, `GetEffectiveEntityAllocation` and
`ListEffectiveAllocations` (fact sheet 10.15), but its high-level clients (`beaker.job`, `.cluster`,
`.workspace`) do not wrap them. This module is the one place that calls them, through the generated stub
(`client.service.<RPC>`, our Connection's guarded stub: deadline, retries) and beaker-py's own
`rpc_request` (its credentials and error mapping), through `unwrapped.py`, where beaker-py's private
API is used.
Everything else (clusters, nodes, summarized events) goes through beaker-py's public clients.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from beaker import beaker_pb2 as pb2
from beaker import exceptions as bx

from launchkit.backends.beaker import resolve as rs
from launchkit.backends.beaker import unwrapped
from launchkit.backends.beaker.client import Connection
from launchkit.backends.protocol import WaitReason
from launchkit.core.estimate import Estimate, Holder, NodeNow, start_estimate
from launchkit.core.fit import Ask, ClusterSize, NodeSize, never_fits, start_rows, typed_nodes
from launchkit.core.phases import Wait
from launchkit.core.specview import SpecView, TaskView
from launchkit.core.units import span
from launchkit.errors import PreconditionError

NS = 1_000_000_000
EVENTS = 20  # newest job events read for a queued job (one page)
_UNSUPPORTED = (grpc.RpcError, bx.BeakerError, NotImplementedError)


def _rpc(conn: Connection, name: str, response: Any, request: Any) -> Any:
    return unwrapped.rpc(conn.beaker.job, name, response, request)


def job_events(conn: Connection, job_id: str) -> list[str]:
    """The job's newest event messages, newest first (ListJobEvents, one page)."""
    return [m for _, m in timed_events(conn, job_id)]


def timed_events(conn: Connection, job_id: str) -> list[tuple[int, str]]:
    """The job's newest events as (ns when made, message), newest first (ListJobEvents, one page)."""
    req = pb2.ListJobEventsRequest(
        options=pb2.ListJobEventsRequest.Opts(
            job_id=job_id,
            page_size=EVENTS,
            sort_clause=pb2.ListJobEventsRequest.Opts.SortClause(
                sort_order=pb2.SORT_ORDER_DESCENDING, created={}
            ),
        )
    )
    resp = _rpc(conn, "ListJobEvents", pb2.ListJobEventsResponse, req)
    return [(e.created.ToNanoseconds(), e.message or e.status) for e in resp.job_events]


def effective_slot_limit(conn: Connection, *, workspace_id: str, cluster_id: str = "") -> int | None:
    """The workspace's effective slot limit (on a cluster), or None when Beaker has none to tell."""
    req = pb2.GetEffectiveEntityAllocationRequest(workspace_id=workspace_id, cluster_id=cluster_id)
    try:
        resp = _rpc(conn, "GetEffectiveEntityAllocation", pb2.GetEffectiveEntityAllocationResponse, req)
    except _UNSUPPORTED:
        return None
    return int(resp.allocation.effective_slot_limit) if resp.HasField("allocation") else None


def allocations(
    conn: Connection, *, workspace_id: str = "", budget_id: str = ""
) -> dict[str, tuple[str, int]]:
    """Cluster id -> (its name, the effective slot limit) of the workspace's or budget's allocations."""
    out: dict[str, tuple[str, int]] = {}
    req = pb2.ListEffectiveAllocationsRequest(
        options=pb2.ListEffectiveAllocationsRequest.Opts(
            workspace_id=workspace_id or None, budget_id=budget_id or None, page_size=100
        )
    )
    try:
        while True:
            resp = _rpc(conn, "ListEffectiveAllocations", pb2.ListEffectiveAllocationsResponse, req)
            for ea in resp.effective_allocations:
                c = ea.allocation.cluster
                out[c.id] = (c.full_name or c.id, int(ea.effective_slot_limit))
            if not resp.next_page_token:
                return out
            req = pb2.ListEffectiveAllocationsRequest(next_page_token=resp.next_page_token)
    except _UNSUPPORTED:
        return out


# -- why a queued job waits ------------------------------------------------------------------------
# Observed wording (open-instruct #1807): 'excluded by slot limit (workspace "ai2/x" using 64/64 allowed
# unallocated slots, the job requires at least 8 slots)' and 'N nodes do not have enough slots available'.
_SLOTS = re.compile(r'workspace "(?P<ws>[^"]+)" using (?P<used>\d+)/(?P<limit>\d+)', re.IGNORECASE)
_NEED = re.compile(r"at least (?P<need>\d+) slots?", re.IGNORECASE)
_NODES = re.compile(r"(?P<n>\d+) nodes? do(?:es)? not have enough", re.IGNORECASE)


ORDER = ("slot_limit", "budget", "cordoned", "priority", "no_node")  # at one time: the most specific first


def explain(messages: list[str], *, gpus: int, workspace: str, times: list[int] | None = None) -> WaitReason:
    """Why a job waits, from its event messages (newest first; `times`: when each was made): the newest
    message that names a reason (the workspace's slot limit, a budget without an allocation on the
    cluster, cordoned nodes, priority, or no node with enough free GPUs); of messages made at the same
    time, the most specific (ORDER). The reason can change while a job waits (fact sheet 11.1): an
    older event's reason is stale."""
    stamps = times if times is not None and len(times) == len(messages) else list(range(len(messages), 0, -1))
    found: list[tuple[int, WaitReason]] = []
    for msg, ts in zip(messages, stamps, strict=True):
        if found and ts != found[0][0]:
            break  # an older pass: the newest one with a reason decides
        if (reason := reason_of(msg, gpus=gpus, workspace=workspace)) is not None:
            found.append((ts, reason))
    if found:
        return min((r for _, r in found), key=lambda r: ORDER.index(r.kind))
    latest = f" (latest event: {messages[0]})" if messages else ""
    return WaitReason(kind="queued", line=f"waiting for Beaker to place it{latest}")


def reason_of(msg: str, *, gpus: int, workspace: str) -> WaitReason | None:
    """The reason one event message names, None when it names none."""
    low = msg.lower()
    find = f"`launchkit find-gpus --gpus {gpus}`" if gpus else "`launchkit find-gpus`"
    if "slot limit" in low:
        m, need = _SLOTS.search(msg), _NEED.search(msg)
        ws = m.group("ws") if m else workspace
        used = f"{m.group('used')}/{m.group('limit')}" if m else "all its"
        wanted = f" (it needs {need.group('need')})" if need else ""
        return WaitReason(
            kind="slot_limit",
            line=f"{ws} uses {used} unallocated slots{wanted}",
            fix="wait, lower --gpus, or launch in another workspace (--workspace)",
        )
    if "allocation" in low or "budget" in low:
        return WaitReason(
            kind="budget",
            line=f"its budget may not use this cluster ({msg})",
            fix=f"launch on a cluster of the budget ({find}), or use --priority low (preemptible, "
            "any cluster)",
        )
    if "cordon" in low:
        return WaitReason(
            kind="cordoned",
            line=f"the nodes that could take it are cordoned ({msg})",
            fix=f"wait for them to return, or choose another --cluster ({find})",
        )
    if "priority" in low:
        return WaitReason(
            kind="priority",
            line=f"higher-priority jobs go first ({msg})",
            fix="wait, raise --priority if the workspace allows it, or choose another --cluster",
        )
    if "not have enough" in low:
        m = _NODES.search(msg)
        nodes = f"none of {m.group('n')} nodes" if m else "no node"
        together = f"{gpus} free GPUs together" if gpus else "room for it"
        return WaitReason(
            kind="no_node",
            line=f"{nodes} of its clusters has {together} now",
            fix=f"wait, lower --gpus, or see where it can start now: {find}",
        )
    return None


def short_words(msg: str, *, gpus: int) -> tuple[str, str] | None:
    """(kind, a few words) for the waiting history: `slot limit 64/64`, `no node with 8 free GPUs`."""
    reason = reason_of(msg, gpus=gpus, workspace="")
    if reason is None:
        return None
    if reason.kind == "slot_limit":
        m = _SLOTS.search(msg)
        return reason.kind, "slot limit" + (f" {m.group('used')}/{m.group('limit')}" if m else "")
    if reason.kind == "no_node":
        return reason.kind, f"no node with {gpus} free GPUs" if gpus else "no node with room"
    return reason.kind, _SHORT[reason.kind]


_SHORT = {  # the waiting history's words for a reason (WaitReason.kind)
    "budget": "budget not allowed on the cluster",
    "cordoned": "cordoned nodes",
    "priority": "higher-priority jobs",
}


def waiting_reason(conn: Connection, job: Any, *, nodes: bool = True) -> WaitReason | None:
    """Why a queued job (never scheduled, not canceled) waits; None for any other job (or none). One
    ListJobEvents; with a budget reason also the budget's allocations (to name its clusters); with
    `nodes`, when no node has room, its clusters' nodes (one ListNodes each) to name cordoned ones."""
    if job is None:
        return None
    s = job.status
    if s.HasField("scheduled") or s.HasField("canceled") or s.HasField("finalized"):
        return None
    try:
        timed = timed_events(conn, job.id)
    except _UNSUPPORTED:  # a server without ListJobEvents: the summarized ones beaker-py wraps
        timed = [(t, m) for _, t, m in reversed(summarized(conn, job))]
    gpus = int(job.container_spec.resource_request.gpu_count)
    workspace = job.workspace_reference or "the workspace"
    reason = explain([m for _, m in timed], gpus=gpus, workspace=workspace, times=[t for t, _ in timed])
    if reason.kind == "budget" and job.budget_id:
        names = sorted(name for name, _ in allocations(conn, budget_id=job.budget_id).values())
        if names:
            fix = f"launch on one of the budget's clusters ({', '.join(names[:6])}), or use --priority low"
            reason = reason.model_copy(update={"fix": fix})
    if reason.kind == "slot_limit" and "all its" in reason.line:
        limit = effective_slot_limit(conn, workspace_id=job.workspace_id)
        if limit:
            line = reason.line.replace("all its", f"all {limit} of its")
            reason = reason.model_copy(update={"line": line})
    if nodes and gpus and reason.kind in ("no_node", "cordoned", "queued"):
        reason = cordoned_reason(conn, job, gpus, reason)
    return reason


def summarized(conn: Connection, job: Any) -> list[tuple[int, int, str]]:
    """The job's summarized events (beaker-py's public client, one call) as (earliest, latest ns,
    message), by their latest occurrence, oldest first."""
    from beaker.types import BeakerSortOrder

    events = conn.beaker.job.list_summarized_events(job, sort_order=BeakerSortOrder.ascending)
    out = [
        (
            ev.earliest_occurrence.ToNanoseconds(),
            ev.latest_occurrence.ToNanoseconds(),
            ev.latest_message or ev.status,
        )
        for ev in events
    ]
    return sorted(out, key=lambda e: e[1])


def wait_history(events: list[tuple[int, int, str]], *, gpus: int, until: int | None) -> list[Wait]:
    """A job's waiting history from its summarized events (earliest, latest, message): each reason holds
    from its first to its last occurrence; where two hold at once the more specific one (ORDER) is
    told, then the other for the rest; the last holds until `until` (when it was scheduled; None: it
    still waits). One `Wait` per change of reason."""
    spans: dict[str, list[Any]] = {}  # kind -> [first, last, words of its newest]
    for earliest, latest, msg in sorted(events, key=lambda e: e[1]):
        if (said := short_words(msg, gpus=gpus)) is None:
            continue
        kind, words = said
        span = spans.setdefault(kind, [earliest, latest, words])
        span[0], span[1], span[2] = min(span[0], earliest), max(span[1], latest), words
    if not spans:
        return []
    points = sorted({p for f, la, _ in spans.values() for p in (f, la)})
    segments: list[list[Any]] = []  # [kind, start, end]
    for a, b in zip(points, points[1:] or points, strict=False):
        active = [k for k, (f, la, _) in spans.items() if f <= a and la >= b]
        if not active:
            if segments:
                segments[-1][2] = b  # a gap between two reasons: the earlier one is told until the next
            continue
        kind = min(active, key=ORDER.index)
        if segments and segments[-1][0] == kind:
            segments[-1][2] = b
        else:
            segments.append([kind, a, b])
    if until is not None:
        segments[-1][2] = max(until, segments[-1][2])
    last = len(segments) - 1
    return [
        Wait(kind=k, words=spans[k][2], start=a, end=b if (i < last or until is not None) else None)
        for i, (k, a, b) in enumerate(segments)
    ]


def elsewhere(conn: Connection, job: Any) -> str | None:
    """The counterfactual for a job waiting for nodes, from `find-gpus --gpus N`'s data (the org's
    clusters with their free GPUs, and their nodes; one listing more for fewer GPUs): `would start now
    on ai2/ceres`, else `would start now with --gpus 4 on ai2/jupiter`, else None. The workspace's slot
    limit is not weighed (a job it holds is told that reason instead)."""
    gpus = int(job.container_spec.resource_request.gpu_count)
    group = job.system_details.replica_group_details
    replicas = max(1, int(group.size)) if job.system_details.HasField("replica_group_details") else 1
    if gpus <= 0:
        return None
    mine = set(_queue_key(job)[1])
    for ask in (gpus, *(g for g in (gpus // 2, gpus // 4) if 0 < g < gpus)):
        rows = find_starts(
            conn, None, gpus=ask, replicas=replicas * (gpus // ask), gpu_types=None, include_all=False
        )
        now = [r["cluster"] for r in rows if r["start"] == "now"]
        if ask == gpus:
            now = [c for c in now if c not in mine]  # its own clusters have no room: that is why it waits
        if now:
            where = ", ".join(now[:3])
            if ask == gpus:
                return f"would start now on {where} (--cluster {now[0]})"
            return f"would start now with --gpus {ask} --replicas {replicas * (gpus // ask)} on {where}"
    return None


QUEUE_SCAN = 200  # the org's queued jobs read for a queued job's position (pages of the listing)


def position(conn: Connection, job: Any) -> tuple[int, int, bool]:
    """A queued job's place in line (`queue_ahead`): (jobs ahead of it, jobs read, whether cut)."""
    ahead, read, cut = queue_ahead(conn, job)
    return len(ahead), read, cut


def queue_ahead(conn: Connection, job: Any) -> tuple[list[int], int, bool]:
    """A queued job's place in line, from what Beaker lists (the org's unscheduled jobs, newest
    QUEUE_SCAN): (the GPUs of each job ahead of it, in line order; jobs read; whether the listing was
    cut there). Ahead: a job that waits for the same kind of node (a cluster constraint in common, or
    none on either side; GPUs if it needs GPUs) at a higher priority, or at the same priority made
    before it."""
    return _ahead_of(conn, _queue_key(job), job.id)


def _ahead_of(
    conn: Connection, mine: tuple[int, frozenset[str], int, int], own: str = ""
) -> tuple[list[int], int, bool]:
    ahead: list[tuple[int, int, int]] = []  # (-priority, created, GPUs)
    read = 0
    listed = conn.beaker.job.list(org=conn.org(), scheduled=False, finalized=False)
    for other in itertools.islice(listed, QUEUE_SCAN):
        read += 1
        if other.id == own or other.status.HasField("canceled"):
            continue
        theirs = _queue_key(other)
        if mine[2] and not theirs[2]:
            continue  # a CPU-only job does not hold GPUs back
        if mine[1] and theirs[1] and not mine[1] & theirs[1]:
            continue  # other clusters
        if theirs[0] > mine[0] or (theirs[0] == mine[0] and theirs[3] < mine[3]):
            ahead.append((-theirs[0], theirs[3], theirs[2]))
    return [gpus for *_, gpus in sorted(ahead)], read, read >= QUEUE_SCAN


RUNNING_SCAN = 500  # jobs read per cluster for a start estimate (more: the rest count as unlisted)


def no_estimate(reason: WaitReason | None) -> str | None:
    """Why a queued job has no start estimate, for a wait no listing bounds; None for a wait for nodes
    (`nodes_now` and core/estimate.py decide)."""
    kind = reason.kind if reason is not None else "queued"
    return {
        "no_node": None,
        "slot_limit": "the workspace's slot limit holds it: slots free when the workspace's other jobs end "
        "or are stopped, which no listing bounds",
        "budget": "its budget may not use the cluster: waiting does not change that",
        "cordoned": "the nodes that could take it are cordoned: Beaker lists no time they return",
        "priority": "higher-priority jobs go first: Beaker lists no time they are placed",
        "synchronized": "its replicas start together: the placed ones wait for the rest to be placed",
    }.get(kind, "Beaker has not said why it waits")


def nodes_now(conn: Connection, job: Any, now: int) -> list[NodeNow] | str:
    """The nodes of a queued job's clusters as listed now (the org's clusters and their nodes, as
    `why` read them; one ListJobs of the jobs on each cluster): each node's GPUs and the jobs holding
    them, each with when it ends at the latest (its start plus its task timeout, else the cluster's
    maximum). A string: why there is no basis (a job without a cluster constraint)."""
    key = _queue_key(job)
    return _nodes_of(conn, key[1], key[0], now, job.id)


def _nodes_of(
    conn: Connection, wanted: frozenset[str], mine: int, now: int, own: str = ""
) -> list[NodeNow] | str:
    if not wanted:
        return "it may land on any cluster (no --cluster): launchkit does not read every cluster's jobs"
    chosen = [
        c
        for c in rs.org_clusters(conn)
        if c.id in wanted or {w.lower() for w in wanted} & set(rs.cluster_names(c))
    ]
    if not chosen:
        return "its clusters are not listed"
    shaped = sizes(conn, chosen, occupancy=True)

    def listed(c: Any) -> list[Any]:
        found = conn.beaker.job.list(org=conn.org(), scheduled_on_cluster=c, finalized=False)
        return list(itertools.islice(found, RUNNING_SCAN))

    try:
        with ThreadPoolExecutor(max_workers=min(8, len(chosen))) as pool:
            running = list(pool.map(listed, chosen))
    except _UNSUPPORTED as e:  # fail open: `why` says the rest
        return f"Beaker did not list the jobs on its clusters ({type(e).__name__})"
    out = []
    for c, size, jobs in zip(chosen, shaped, running, strict=True):
        occupied = c.HasField("cluster_occupancy")
        by_node: dict[str, list[Holder]] = {}
        for j in jobs:
            if j.id == own or not j.assignment_details.node_id:
                continue
            holder = _holder(j, c, mine, now)
            by_node.setdefault(j.assignment_details.node_id, []).append(holder)
        for node, seen in zip(conn.nodes.get(c.id, []), size.nodes, strict=False):
            holders = tuple(by_node.get(node.id, []))
            held = sum(h.gpus for h in holders)
            unlisted = max(0, seen.gpus - seen.free - held) if occupied and not seen.cordoned else 0
            out.append(NodeNow(seen.name, seen.gpus, holders, unlisted=unlisted, cordoned=seen.cordoned))
    return out or "Beaker lists no node of its clusters (a cloud cluster scaled down, say)"


def _holder(j: Any, cluster: Any, mine: int, now: int) -> Holder:
    """A job on a node as core/estimate.py sees it: its GPUs and when it ends at the latest."""
    name = j.name or j.id
    gpus = len(j.assignment_details.resource_assignment.gpus) or int(
        j.container_spec.resource_request.gpu_count
    )
    st, sd = j.status, j.system_details
    priority = int(sd.priority) or int(pb2.JOB_PRIORITY_NORMAL)
    if st.HasField("exited") or st.HasField("canceled"):
        return Holder(name, gpus, now, "its end (it is stopping)")
    if not st.HasField("started"):
        return Holder(name, gpus, None, "it has not started yet")
    started = st.started.ToNanoseconds()
    protected = sd.min_runtime.ToNanoseconds() if sd.HasField("min_runtime") else 0
    preemptible = priority < mine and started + protected <= now
    own = sd.timeout.ToNanoseconds() if sd.HasField("timeout") else 0
    top = cluster.max_task_timeout.ToNanoseconds() if cluster.HasField("max_task_timeout") else 0
    if own > 0 and (top <= 0 or own <= top):
        return Holder(name, gpus, started + own, f"its --task-timeout {span(own / NS)}", preemptible)
    if top > 0:
        limit = f"{rs.cluster_full_name(cluster)}'s max task timeout {span(top / NS)}"
        return Holder(name, gpus, started + top, limit, preemptible)
    where = rs.cluster_full_name(cluster)
    return Holder(name, gpus, None, f"no task timeout Beaker lists, and {where} has no maximum", preemptible)


def _queue_key(job: Any) -> tuple[int, frozenset[str], int, int]:
    """(priority, cluster constraint values, GPUs, created ns) of a job; unspecified priority is normal."""
    sd = job.system_details
    priority = int(sd.priority) or int(pb2.JOB_PRIORITY_NORMAL)
    clusters = frozenset(
        v
        for c in sd.placement_constraints
        if c.type == pb2.JOB_PLACEMENT_CONSTRAINT_TYPE_CLUSTER
        for v in c.values
    )
    gpus = int(job.container_spec.resource_request.gpu_count)
    return priority, clusters, gpus, job.status.created.ToNanoseconds()


def synchronized_wait(jobs: list[Any], reason: WaitReason | None) -> WaitReason | None:
    """Why a replica group that starts together waits (`synchronizedStartTimeout`, fact 11.11): how many
    replicas are placed and wait (`ready`), how many are not placed yet (`reason`: why, from the first of
    them), and until when the placed ones wait (the first placement plus the timeout, by Beaker's clock;
    what Beaker does then is not public). None when no replica of `jobs` (each replica's newest) is
    placed and waiting."""
    group = [j for j in jobs if j.system_details.replica_group_details.HasField("synchronized_start_timeout")]
    ready = [j for j in group if j.status.HasField("ready") and not j.status.HasField("started")]
    unplaced = [j for j in group if not j.status.HasField("scheduled")]
    if not ready or not unplaced:
        return None
    timeout = group[0].system_details.replica_group_details.synchronized_start_timeout.ToSeconds()
    first = min(j.status.ready.ToSeconds() for j in ready)
    until = dt.datetime.fromtimestamp(first + timeout, dt.UTC).strftime("%H:%M:%S UTC")
    line = (
        f"its replicas start together: {len(ready)} of {len(group)} placed and waiting, {len(unplaced)} "
        f"not placed yet; the placed ones wait up to {span(timeout)} (synchronized start, until {until})"
    )
    if reason is not None and reason.kind != "queued":
        line += f"; not placed: {reason.line}"
    return WaitReason(kind="synchronized", line=line, fix=reason.fix if reason is not None else None)


def cordoned_reason(conn: Connection, job: Any, gpus: int, reason: WaitReason) -> WaitReason:
    """`reason` naming the cordoned nodes of the job's clusters that could take it (fact 11.13: Beaker's
    events may only say `N nodes do not have enough slots available`; `find-gpus` shows them)."""
    wanted = {
        v.lower()
        for c in job.system_details.placement_constraints
        if c.type == pb2.JOB_PLACEMENT_CONSTRAINT_TYPE_CLUSTER
        for v in c.values
    }
    if not wanted:
        return reason  # anywhere: not every cluster's nodes are listed for one line
    chosen = [c for c in rs.org_clusters(conn) if c.id.lower() in wanted or wanted & set(rs.cluster_names(c))]
    fit = [n for size in sizes(conn, chosen) for n in size.nodes if n.gpus >= gpus]
    cordoned = [n.name for n in fit if n.cordoned]
    if not cordoned:
        return reason
    named = ", ".join(cordoned[:5]) + (f" and {len(cordoned) - 5} more" if len(cordoned) > 5 else "")
    find = f"`launchkit find-gpus --gpus {gpus}`"
    if len(cordoned) == len(fit):
        return WaitReason(
            kind="cordoned",
            line=f"every node of its clusters that could take it is cordoned: {named}",
            fix=f"wait for them to return, or choose another --cluster ({find})",
        )
    return reason.model_copy(update={"line": f"{reason.line}; cordoned: {named}"})


LIST_REASONS = 5  # `list`: queued rows (the newest) whose wait is explained
_QUEUED = {pb2.STATUS_SUBMITTED, pb2.STATUS_QUEUED, pb2.STATUS_READY_TO_START}


def list_reasons(conn: Connection, rows: list[Any], org: Any) -> dict[str, WaitReason | None]:
    """Experiment id -> why it waits, for the newest LIST_REASONS queued workloads of `list` (no call
    without one): their jobs from the first page of the org's unscheduled jobs, then the newest one's
    events; a workspace's slot limit holds every queued job of that workspace that needs slots (their
    rows need no call), any other reason is read for each row at once. `launchkit why ID` explains the
    rest."""
    queued = [wl for wl in rows if wl.status in _QUEUED and wl.experiment.tasks][:LIST_REASONS]
    want = {wl.experiment.tasks[0].id: wl.experiment.id for wl in queued}
    if not want:
        return {}
    found: dict[str, Any] = {}
    for job in itertools.islice(conn.beaker.job.list(org=org, scheduled=False, finalized=False), 50):
        if job.task_id in want:
            found.setdefault(want[job.task_id], job)
    if not found:
        return {}
    (first_id, first), *others = found.items()
    out = {first_id: waiting_reason(conn, first, nodes=False)}
    rest = []
    for eid, job in others:
        same = slot_limit_for(out[first_id], first, job)  # the same full workspace: no call
        if same is not None:
            out[eid] = same
        else:
            rest.append((eid, job))
    if rest:
        with ThreadPoolExecutor(max_workers=len(rest)) as pool:
            reasons = pool.map(lambda job: waiting_reason(conn, job, nodes=False), (j for _, j in rest))
            out.update(zip((e for e, _ in rest), reasons, strict=True))
    return out


class WaitTeller:
    """`follow`: the line saying why a job waits, from the summarized events just read (no call), once
    each time the reason changes."""

    def __init__(self) -> None:
        self.said: WaitReason | None = None

    def line(self, job: Any, events: list[Any]) -> str | None:
        if job.status.HasField("scheduled") or job.status.HasField("canceled"):
            return None
        newest = sorted(events, key=lambda ev: ev.latest_occurrence.ToNanoseconds(), reverse=True)
        messages = [ev.latest_message or ev.status for ev in newest]
        times = [ev.latest_occurrence.ToNanoseconds() for ev in newest]
        gpus = int(job.container_spec.resource_request.gpu_count)
        reason = explain(
            messages, gpus=gpus, workspace=job.workspace_reference or "the workspace", times=times
        )
        if reason.kind == "queued" or (self.said is not None and reason.kind == self.said.kind):
            return None  # a change of reason is told once (not its numbers: 64/64, then 63/64)
        self.said = reason
        return f"waiting: {reason.text()}"


def slot_limit_for(reason: WaitReason | None, held: Any, job: Any) -> WaitReason | None:
    """`job`'s reason when `held`, of the same workspace, waits for the workspace's slot limit and `job`
    needs slots too (the limit is the workspace's: it holds both); None otherwise (ask Beaker)."""
    gpus = int(job.container_spec.resource_request.gpu_count)
    if reason is None or reason.kind != "slot_limit" or job.workspace_id != held.workspace_id or gpus <= 0:
        return None
    line = _NEED_LINE.sub(f"(it needs {gpus})", reason.line)
    return reason.model_copy(update={"line": line})


_NEED_LINE = re.compile(r"\(it needs \d+\)")


# -- node sizes: the fit check and find-gpus --gpus ------------------------------------------------
def sizes(conn: Connection, clusters: list[Any], *, occupancy: bool = False) -> list[ClusterSize]:
    """The clusters as core.fit sees them: each node's GPU type and count, cordoned or not, and (with
    `occupancy`: clusters listed with it) its free GPUs."""
    rs.node_gpu_types(conn, clusters)  # lists each cluster's nodes once (cached on the connection)
    nodes = conn.nodes
    out = []
    for c in clusters:
        free: dict[str, int] = {}
        if occupancy and c.HasField("cluster_occupancy"):
            free = {o.node_id: o.slot_counts.available for o in c.cluster_occupancy.node_occupancies}
        shown = []
        for n in nodes[c.id]:
            cordoned = n.HasField("cordon_details") and n.cordon_details.HasField("cordoned")
            gpus = int(n.node_resources.slot_details.gpu_count or len(n.node_resources.gpu_ids))
            shown.append(
                NodeSize(
                    name=n.hostname or n.id,
                    gpu_type=rs.gpu_type_name(n.node_resources.gpu_type),
                    gpus=gpus,
                    free=0 if cordoned else int(free.get(n.id, 0)),
                    cordoned=cordoned,
                )
            )
        if not shown and c.HasField("node_shape") and c.node_shape.gpu_count:  # a cloud cluster's shape
            shape = c.node_shape
            count = max(1, int(c.expected_node_count or 1))
            kind = rs.gpu_type_name(shape.gpu_type)
            shown = [NodeSize(f"{c.name} (shape)", kind, int(shape.gpu_count)) for _ in range(count)]
        out.append(ClusterSize(rs.cluster_full_name(c), tuple(shown), known=bool(shown)))
    return out


def _ask(task: TaskView, gpu_types: list[str]) -> Ask:
    return Ask(
        gpus=task.gpus or 0,
        replicas=task.replicas,
        gpu_types=tuple(gpu_types),
        host_networking=task.host_networking,
    )


def check_fit(conn: Connection, view: SpecView, ws: Any) -> list[str]:
    """Before anything is made: refuse (exit 3) a task no node of its clusters could ever take, naming
    the largest fit and the clusters that would take it; warnings (returned) for a workspace already at
    its slot limit. A task without a cluster constraint may land on any cluster that takes batch jobs:
    it is checked against all of them (one with hostnames is not checked)."""
    gpu_types = view.env_list(rs.ENV_GPU_TYPES)
    seen: set[tuple[Any, ...]] = set()
    need = 0
    for task in view.tasks:
        ask = _ask(task, gpu_types)
        need += ask.gpus * ask.replicas
        key = (ask, tuple(task.clusters))
        if task.hostnames or ask.gpus <= 0 or key in seen:
            continue
        seen.add(key)
        every = [c for c in rs.org_clusters(conn) if rs.takes_batch_jobs(c)]  # listed once, by resolve
        by_name = {rs.cluster_full_name(c): c for c in every}
        chosen = [by_name[n] for n in task.clusters if n in by_name] if task.clusters else every
        label = None if task.clusters else "any cluster that takes batch jobs"
        problem = never_fits(ask, sizes(conn, chosen), [], label=label)
        if problem is None:
            continue
        others = [c for c in every if rs.cluster_full_name(c) not in task.clusters]
        problem = never_fits(ask, sizes(conn, chosen), sizes(conn, others), label=label) or problem
        raise PreconditionError(problem[0] + "; nothing was created", hint=problem[1])
    preemptible = any(t.preemptible for t in view.tasks)
    return [w for w in [slot_warning(ws, need, preemptible=preemptible)] if w]


def start_now(conn: Connection, view: SpecView, ws: Any) -> tuple[str, ...] | None:
    """The plan's `start_now` (core/plan.py), from what check_fit just read (no call): the clusters of
    the tasks where every replica could start now, by the free GPUs the cluster list carries; () when
    none (the workspace's slot limit, or no node with room); None when not known (a task without
    clusters or GPUs, or clusters whose nodes were not listed)."""
    every = {rs.cluster_full_name(c): c for c in (conn.clusters or [])}
    gpu_types = view.env_list(rs.ENV_GPU_TYPES)
    if not view.tasks or any(not t.clusters or not t.gpus for t in view.tasks):
        return None
    need = sum((t.gpus or 0) * t.replicas for t in view.tasks)
    if slot_warning(ws, need, preemptible=any(t.preemptible for t in view.tasks)) is not None:
        return ()  # the workspace's slot limit holds it wherever it lands
    found: dict[str, None] = {}
    for task in view.tasks:
        chosen = [every[n] for n in task.clusters if n in every]
        if len(chosen) < len(task.clusters) or any(c.id not in conn.nodes for c in chosen):
            return None  # not read by check_fit: not known without another call
        if not all(c.HasField("cluster_occupancy") for c in chosen):
            return None
        rows = start_rows(_ask(task, gpu_types), sizes(conn, chosen, occupancy=True))
        now = [r.cluster.name for r in rows if not r.blocker]
        if not now:
            return ()
        found.update(dict.fromkeys(now))
    return tuple(found)


def room_warning(
    view: SpecView, now: tuple[str, ...] | None, conn: Connection | None = None, clock_ns: int = 0
) -> str | None:
    """At submit: a warning when no cluster of the job has room for it now (it will queue), with the
    wait that implies when the jobs on its clusters bound it (`implied_wait`, with `conn`)."""
    if now != () or not view.tasks:
        return None
    task = max(view.tasks, key=lambda t: t.gpus or 0)
    where = ", ".join(dict.fromkeys(c for t in view.tasks for c in t.clusters))
    wait = implied_wait(conn, task, clock_ns) if conn is not None else None
    until = f", by ~{wait.at_utc} at the latest ({wait.basis})" if wait is not None else ""
    return (
        f"no node of {where} has {task.gpus} free GPUs now: the job will queue until one frees up{until} "
        f"(`launchkit find-gpus --gpus {task.gpus}` shows where it would start now)"
    )


def implied_wait(conn: Connection, task: TaskView, now: int) -> Estimate | None:
    """A job of `task` submitted now: when it would start at the latest (core/estimate.py), from the jobs
    on its clusters (one ListJobs each) and the queue (one listing); None without a basis. Only read
    when the job will queue (the warning's case)."""
    if not task.clusters or not task.gpus:
        return None
    priority = getattr(pb2, f"JOB_PRIORITY_{(task.priority or 'normal').upper()}", pb2.JOB_PRIORITY_NORMAL)
    wanted = frozenset(task.clusters)
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            nodes_f = pool.submit(_nodes_of, conn, wanted, int(priority), now)
            ahead_f = pool.submit(_ahead_of, conn, (int(priority), wanted, task.gpus, now))
            nodes, (ahead, _, _) = nodes_f.result(), ahead_f.result()
    except _UNSUPPORTED:
        return None
    if isinstance(nodes, str):
        return None
    networked, replicas = task.host_networking, task.replicas
    answer = start_estimate(
        gpus=task.gpus, replicas=replicas, host_networking=networked, nodes=nodes, ahead=ahead, now=now
    )
    return answer.estimate


def slot_warning(ws: Any, need: int, *, preemptible: bool = False) -> str | None:
    """A warning when the workspace already uses its slot limit (the job will queue, not fail)."""
    limit = ws.slot_limit_preemptible if preemptible else ws.slot_limit_non_preemptible
    used = ws.assigned_slots_preemptible if preemptible else ws.assigned_slots_non_preemptible
    if not limit or used + need <= limit:
        return None
    name = ws.name if "/" in ws.name else f"{ws.owner_org.name}/{ws.name}"
    return (
        f"workspace {name} uses {used}/{limit} unallocated slots: this job ({need} more) will wait until "
        "slots free up; to start sooner launch in another workspace (--workspace) or ask for fewer GPUs"
    )


def find_starts(
    conn: Connection,
    ws: Any | None,
    *,
    gpus: int,
    replicas: int,
    gpu_types: list[str] | None,
    include_all: bool,
) -> list[dict[str, Any]]:
    """`find-gpus --gpus N [--replicas R]`: per cluster (and node) where a replica of N GPUs can start
    now, with the workspace's effective slot limit and its budget's clusters; soonest first."""
    from beaker.types import BeakerSortOrder

    clusters = [
        c
        for c in conn.beaker.cluster.list(
            org=conn.org(),
            sort_field="free_gpus",
            sort_order=BeakerSortOrder.descending,
            include_cluster_occupancy=True,
        )
        if rs.takes_batch_jobs(c)
    ]
    limits: dict[str, tuple[str, int]] = {}
    budget: set[str] | None = None
    if ws is not None:
        with ThreadPoolExecutor(max_workers=2) as pool:
            lim_f = pool.submit(allocations, conn, workspace_id=ws.id)
            bud_f = pool.submit(allocations, conn, budget_id=ws.budget_id) if ws.budget_id else None
            limits = lim_f.result()
            budget = set(bud_f.result()) if bud_f else None
    ask = Ask(gpus=gpus, replicas=replicas, gpu_types=tuple(gpu_types or ()), host_networking=replicas > 1)
    shaped = []
    for c, size in zip(clusters, sizes(conn, clusters, occupancy=True), strict=True):
        limit = limits[c.id][1] if c.id in limits else (ws.slot_limit_non_preemptible if ws else 0)
        shaped.append(
            ClusterSize(
                size.name,
                size.nodes,
                slot_limit=limit or None,
                slots_used=int(ws.assigned_slots_non_preemptible) if ws else 0,
                budget_allocated=None if budget is None else c.id in budget,
            )
        )
    rows = []
    for r in start_rows(ask, shaped):
        size = r.cluster
        typed = typed_nodes(ask, size.nodes)
        if not typed or (r.blocker == "never fits" and not include_all):
            continue
        rows.append(
            {
                "cluster": size.name,
                "start": _START.get(r.blocker, r.blocker),
                "replicas_now": 0 if r.blocker == "slot limit" else r.replicas_now,  # that would start
                "nodes_ready": len(r.nodes_now),
                "free_gpus": sum(n.free for n in size.nodes),
                "largest_node": max((n.gpus for n in typed), default=0),
                "cordoned_nodes": sum(1 for n in size.nodes if n.cordoned),
                "slots": f"{size.slots_used}/{size.slot_limit}" if size.slot_limit is not None else "",
                "budget": {None: "", True: "allocated", False: "unallocated"}[size.budget_allocated],
                "gpu_types": sorted({n.gpu_type for n in size.nodes if n.gpu_type}),
                "nodes": [
                    {"node": n.name, "gpu_type": n.gpu_type, "free_gpus": n.free, "gpus": n.gpus}
                    for n in sorted(r.nodes_now if not r.blocker else [], key=lambda n: (-n.free, n.name))
                ],
            }
        )
    return rows


_START = {
    "": "now",
    "busy": "when nodes free up",
    "cordoned": "when cordoned nodes return",
    "slot limit": "after the workspace's slot limit",
    "never fits": "never",
}
