"""Scheduling in the fake: slot limits with effective allocations, job events, cordoned nodes, node
sizes and the impossible-to-schedule cancel (fact sheet 4.14, 10.11, 10.15; README "Scheduling").

Wired into the fake by small hooks: `State._new_job` calls `on_new_job`, `Impl` inherits the three RPCs
(`SchedulingRpcs`), `Convert.workspace` fills the workspace's slot usage (`workspace_usage`), and
`Convert.job_status` sends `Job.scheduling_message` as `failed_scheduling_message`.

What a new job meets, in this order (the job stays QUEUED and is never auto-run, `Job.pinned`):
1. no node of its clusters has `gpuCount` GPUs (or, with host networking, fewer such nodes than
   replicas): "N nodes do not have enough slots available" (observed wording); with
   `options.impossible_after` seconds it is then canceled IMPOSSIBLE_TO_SCHEDULE (inferred-medium);
2. every node big enough is cordoned: "N nodes do not have enough slots available" plus
   "M nodes are cordoned" (the fake's own wording: Beaker's is unknown);
3. the workspace's `slot_limit` would be passed by its running and held jobs:
   'excluded by slot limit (workspace "W" using U/L allowed unallocated slots, the job requires at
   least N slots)' (observed wording).
Budgets without an allocation on a cluster and priority holds are explicit (`hold`), wording the fake's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from beaker import beaker_pb2 as pb2

from .state import NotFound

if TYPE_CHECKING:
    from .state import Job, Node, State, Workspace

CANCEL_IMPOSSIBLE = pb2.CANCELATION_CODE_IMPOSSIBLE_TO_SCHEDULE


@dataclass
class Allocation:
    """A budget's or workspace's allocation on a cluster (GetEffectiveEntityAllocation answers it)."""

    id: str
    cluster_id: str
    slot_limit: int
    budget_id: str = ""
    workspace_id: str = ""


def allocate(
    state: State, cluster: str, slot_limit: int, *, budget: str = "", workspace: str = ""
) -> Allocation:
    """Give a budget (org/name) or a workspace an allocation of `slot_limit` slots on `cluster`."""
    with state.lock:
        a = Allocation(
            state.new_id("alc"),
            state.find_cluster(cluster).id,
            slot_limit,
            budget_id=state.find_budget(budget).id if budget else "",
            workspace_id=state.find_workspace(workspace).id if workspace else "",
        )
        state.allocations.append(a)
        return a


def _clusters(state: State, j: Job) -> list[Any]:
    patterns = state._patterns(j)
    found = [c for p in patterns for c in state.cluster_matches(p)]
    return found or [c for c in state.clusters.values() if c.max_task_timeout != 0]


def _big_enough(state: State, j: Job) -> list[Node]:
    return [n for c in _clusters(state, j) for n in c.nodes if n.slots >= j.gpus]


def workspace_usage(state: State, ws: Workspace) -> tuple[int, int]:
    """(slots its running jobs hold, slots its held jobs wait for) in the workspace."""
    used = queued = 0
    for j in state.jobs.values():
        if j.experiment.workspace_id != ws.id or j.finalized is not None or j.canceled is not None:
            continue
        if j.scheduled is not None and j.exited is None:
            used += max(j.gpus, 1)
        elif j.scheduled is None:
            queued += max(j.gpus, 1)
    return used, queued


def on_new_job(state: State, j: Job) -> None:
    """Hold a new job that cannot be placed, with the events Beaker shows (module docstring)."""
    if j.gpus <= 0:
        return
    host = bool(j.task.spec.get("hostNetworking"))
    replicas = j.task.replica_count
    fit = _big_enough(state, j)
    nodes = sum(len(c.nodes) for c in _clusters(state, j))
    if not fit or (host and len(fit) < replicas):
        hold(state, j, f"{nodes} nodes do not have enough slots available")
        if state.options.impossible_after is not None:
            message = f"no node can provide {j.gpus} GPUs" + (" per replica" if replicas > 1 else "")
            state._timer(state.options.impossible_after, lambda: impossible(state, j, message))
        return
    if all(n.cordoned for n in fit):
        hold(state, j, f"{nodes} nodes do not have enough slots available")
        if state.options.cordon_event:  # fact 11.13: no public source gives such an event
            state.add_event(j, "queued", f"{len(fit)} nodes are cordoned")
        return
    ws = state.workspaces[j.experiment.workspace_id]
    if ws.slot_limit is not None:
        used, _ = workspace_usage(state, ws)
        if used + j.gpus > ws.slot_limit:
            hold(
                state,
                j,
                f'excluded by slot limit (workspace "{state.workspace_full_name(ws)}" using '
                f"{used}/{ws.slot_limit} allowed unallocated slots, the job requires at least {j.gpus} slots)",
            )


def gpu_spec(
    *,
    gpus: int = 8,
    cluster: str = "ai2/jupiter",
    replicas: int = 1,
    priority: str = "normal",
    preemptible: bool | None = None,
    retries: int = 0,
    command: tuple[str, ...] = ("python", "train.py"),
    **task: Any,
) -> dict[str, Any]:
    """A launchkit-like spec of one task asking for `gpus` GPUs per replica on `cluster` (`task`: more
    task fields as the spec spells them, e.g. hostNetworking=True, timeout=ns)."""
    context: dict[str, Any] = {"priority": priority}
    if preemptible is not None:
        context["preemptible"] = preemptible
    spec: dict[str, Any] = {
        "version": "v2",
        "description": "[launchkit]",
        "budget": "ai2/oe-default",
        "tasks": [
            {
                "name": "main",
                "image": {"docker": "python:3.11"},
                "context": context,
                "command": list(command),
                "resources": {"gpuCount": gpus},
                "constraints": {"cluster": [cluster]},
                **({"replicas": replicas} if replicas != 1 else {}),
                "result": {"path": "/results"},
                **task,
            }
        ],
    }
    if retries:
        spec["retry"] = {"allowedTaskRetries": retries}
    return spec


def gpu_experiment(
    state: State,
    name: str,
    *,
    workspace: str = "ai2/launchkit",
    author: str = "alice",
    created: int | None = None,
    **spec: Any,
) -> Any:
    """An experiment of `gpu_spec(**spec)` in `workspace` by `author` (what a new job meets applies:
    it may be held, see the module docstring); `created` backdates it (ns)."""
    return state.add_experiment(
        workspace, name, author=author, spec=gpu_spec(**spec), created=created, description="[launchkit]"
    )


def occupy(
    state: State,
    node: str,
    gpus: int,
    *,
    started: int,
    timeout: int | None = None,
    name: str = "",
    priority: str = "normal",
    preemptible: bool = False,
    workspace: str = "ai2/launchkit",
    author: str = "bob",
) -> Job:
    """Another job running on `node` (hostname or id) since `started` (ns), holding `gpus` GPUs, with a
    task timeout (`timeout` ns; None: none): what a start estimate reads (ListJobs of a cluster's jobs).
    Its GPUs replace the node's bare `assigned` count (set the node's `assigned` to 0 first)."""
    with state.lock:
        n = state.find_node(node)
        cluster = state.clusters[n.cluster_id]
        where = f"{state.orgs[cluster.org_id].name}/{cluster.name}"
        n.assigned = max(0, n.assigned - gpus)  # made room for it (on_new_job would hold it otherwise)
    exp = gpu_experiment(
        state, name or state.new_id("busy"), workspace=workspace, author=author, gpus=gpus, cluster=where,
        priority=priority, preemptible=preemptible, **({"timeout": timeout} if timeout else {}),
    )  # fmt: skip
    with state.lock:
        j = exp.tasks[0].latest_job
        assert j is not None
        j.events = [e for e in j.events if e.status != "queued"]
        j.raw_events = []
        state.start_job(j, node=n.id)
        j.scheduled, j.started, j.pinned = started, started, True
        return j


def hold(state: State, job: Any, message: str) -> Job:
    """Keep a job QUEUED (never auto-run) with a scheduling event, e.g. for a budget without an
    allocation on the cluster or a priority hold (their wording is the fake's own)."""
    with state.lock:
        j = state._job(job)
        j.pinned = True
        state.add_event(j, "queued", message)
        state._touch()
        return j


def impossible(state: State, job: Any, message: str = "no node can satisfy the job's resources") -> Job:
    """Cancel a queued job IMPOSSIBLE_TO_SCHEDULE with `failed_scheduling_message` (fact 10.11)."""
    with state.lock:
        j = state._job(job)
        if j.scheduled is None and j.canceled is None:
            j.scheduling_message = message
            state.cancel_job(j, code=CANCEL_IMPOSSIBLE, message="Job is impossible to schedule")
        return j


def cordon(state: State, node: str, cordoned: bool = True) -> Node:
    with state.lock:
        n = state.find_node(node)
        n.cordoned = cordoned
        state._touch()
        return n


class SchedulingRpcs:
    """The RPCs beaker-py's high-level client does not wrap (fact 10.15); mixed into `servicer.Impl`."""

    s: State

    def ListJobEvents(self, req: Any, caller: Any) -> Any:
        from .servicer import paginate, paging, ts

        o, start = paging(req)
        j = self.s.find_job(o.job_id)
        # every occurrence add_event recorded (fact 11.1: a queued job collects events pass after pass),
        # and one at its latest occurrence for an event recorded only summarized (scheduled, started)
        raw = list(j.raw_events)
        said = {(st, m) for _, st, m in raw}
        raw += [(ev.latest, ev.status, ev.message) for ev in j.events if (ev.status, ev.message) not in said]
        desc = o.sort_clause.sort_order != pb2.SORT_ORDER_ASCENDING
        # by time, newest first unless ascending is asked; made at the same time: in the order made
        events = sorted(enumerate(raw), key=lambda e: (-e[1][0] if desc else e[1][0], e[0]))
        page, nxt = paginate(events, o, start)
        return pb2.ListJobEventsResponse(
            job_events=[
                pb2.JobEvent(
                    id=f"{j.id}-{i}",
                    job_id=j.id,
                    created=ts(at),
                    occurred=ts(at),
                    status=status,
                    message=message,
                )
                for i, (at, status, message) in page
            ],
            next_page_token=nxt,
        )

    def _effective(self, a: Allocation) -> Any:
        c = self.s.clusters[a.cluster_id]
        ref = pb2.Reference(id=c.id, full_name=f"{self.s.orgs[c.org_id].name}/{c.name}")
        alloc = pb2.Allocation(id=a.id, cluster=ref, slot_limit=a.slot_limit)
        if a.budget_id:
            b = self.s.budgets[a.budget_id]
            alloc.budget.CopyFrom(pb2.Reference(id=b.id, full_name=self.s.budget_full_name(b)))
        if a.workspace_id:
            w = self.s.workspaces[a.workspace_id]
            alloc.workspace.CopyFrom(pb2.Reference(id=w.id, full_name=self.s.workspace_full_name(w)))
        return pb2.EffectiveAllocation(allocation=alloc, effective_slot_limit=a.slot_limit)

    def _matching(
        self, *, workspace_id: str = "", budget_id: str = "", cluster_id: str = ""
    ) -> list[Allocation]:
        """A workspace's own allocations, else its budget's (the effective ones); or a budget's."""
        s = self.s
        found = []
        if workspace_id:
            ws = s.workspaces.get(workspace_id)
            if ws is None:
                raise NotFound(f"workspace {workspace_id!r} not found")
            found = [a for a in s.allocations if a.workspace_id == ws.id]
            budget_id = budget_id or (ws.budget_id or "")
        if budget_id and not found:
            found = [a for a in s.allocations if a.budget_id == budget_id]
        return [a for a in found if not cluster_id or a.cluster_id == cluster_id]

    def GetEffectiveEntityAllocation(self, req: Any, caller: Any) -> Any:
        found = self._matching(
            workspace_id=req.workspace_id, budget_id=req.budget_id, cluster_id=req.cluster_id
        )
        if not found:
            raise NotFound("no allocation")
        best = max(found, key=lambda a: a.slot_limit)
        return pb2.GetEffectiveEntityAllocationResponse(allocation=self._effective(best))

    def ListEffectiveAllocations(self, req: Any, caller: Any) -> Any:
        from .servicer import paginate, paging

        o, start = paging(req)
        found = self._matching(workspace_id=o.workspace_id, budget_id=o.budget_id)
        page, nxt = paginate(found, o, start)
        return pb2.ListEffectiveAllocationsResponse(
            effective_allocations=[self._effective(a) for a in page], next_page_token=nxt
        )
