"""The gRPC side: a `beaker_pb2_grpc.BeakerServicer` over `State`, plus state -> protobuf conversion.

Every RPC goes through `FakeServicer`: count the call, apply injected latency/UNAVAILABLE, authenticate
the bearer token (bad token: UNAUTHENTICATED, or PERMISSION_DENIED per options.auth_error), and map
errors (NotFound -> NOT_FOUND, Conflict -> ALREADY_EXISTS, Denied -> PERMISSION_DENIED, anything else ->
INVALID_ARGUMENT, which beaker-py never retries). RPCs the fake does not implement answer UNIMPLEMENTED
(beaker-py raises NotImplementedError).
"""

from __future__ import annotations

import asyncio
import base64
import time
import traceback
from typing import TYPE_CHECKING, Any

import grpc
import yaml
from beaker import beaker_pb2 as pb2
from beaker import beaker_pb2_grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from .faults import StreamFault
from .scheduling import SchedulingRpcs, workspace_usage
from .state import (
    NS,
    Cluster,
    Conflict,
    Denied,
    Experiment,
    Invalid,
    Job,
    Node,
    NotFound,
    State,
    Task,
    User,
    Workspace,
)

if TYPE_CHECKING:
    from .server import FakeBeaker

RST_STREAM_DETAILS = "Received RST_STREAM with error code 2 (fake stream cut)"
DEFAULT_PAGE_SIZE = 100


def ts(ns: int | None) -> Timestamp | None:
    if ns is None:
        return None
    return Timestamp(seconds=ns // NS, nanos=ns % NS)


def _duration(value: Any) -> Duration | None:
    """A spec duration (nanoseconds, as beaker-py writes it) as a proto Duration; None when unset."""
    if not value:
        return None
    ns = int(value)
    return Duration(seconds=ns // NS, nanos=ns % NS)


def ts_ns(t: Timestamp) -> int:
    return t.seconds * NS + t.nanos


class Convert:
    """State objects -> beaker_pb2 messages (call with `state.lock` held)."""

    def __init__(self, state: State) -> None:
        self.s = state

    def org(self, o) -> pb2.Organization:
        return pb2.Organization(id=o.id, name=o.name, display_name=o.name.upper(), created=ts(o.created))

    def user(self, u: User) -> pb2.User:
        return pb2.User(id=u.id, name=u.name, display_name=u.display_name, created=ts(u.created))

    def workspace(self, w: Workspace) -> pb2.Workspace:
        s = self.s
        author = s.users.get(w.author_id)
        msg = pb2.Workspace(
            id=w.id,
            name=s.workspace_full_name(w),
            description=w.description,
            created=ts(w.created),
            modified=ts(w.created),
            owner_org=self.org(s.orgs[w.org_id]),
            author_user=self.user(author) if author else None,
            archived=w.archived,
            budget_id=w.budget_id or "",
        )
        if w.max_priority:
            msg.maximum_workload_priority = pb2.JobPriority.Value("JOB_PRIORITY_" + w.max_priority.upper())
        if w.slot_limit is not None:
            msg.slot_limit_non_preemptible = w.slot_limit
        msg.assigned_slots_non_preemptible, msg.queued_slots_non_preemptible = workspace_usage(s, w)
        return msg

    def budget(self, b) -> pb2.Budget:
        org = self.s.orgs[b.org_id]
        return pb2.Budget(
            id=b.id,
            organization_id=org.id,
            name=b.name,
            organization_name=org.name,
            full_name=f"{org.name}/{b.name}",
            created=ts(b.created),
        )

    def secret(self, sec) -> pb2.Secret:
        return pb2.Secret(
            name=sec.name, created=ts(sec.created), updated=ts(sec.updated), author_id=sec.author_id
        )

    def image(self, i) -> pb2.Image:
        author = self.s.users[i.author_id]
        return pb2.Image(
            id=i.id,
            name=i.name,
            full_name=f"{author.name}/{i.name}",
            workspace_id=i.workspace_id,
            author_id=i.author_id,
            created=ts(i.created),
            committed=ts(i.created),
            docker_tag=i.docker_tag,
        )

    def dataset(self, d) -> pb2.Dataset:
        author = self.s.users[d.author_id]
        return pb2.Dataset(
            id=d.id,
            name=d.name,
            full_name=f"{author.name}/{d.name}",
            author_id=d.author_id,
            workspace_id=d.workspace_id,
            created=ts(d.created),
            committed=ts(d.committed),
            description=d.description,
            budget_id=d.budget_id,
        )

    def dataset_file(self, d, path: str) -> pb2.DatasetFile:
        import hashlib

        data = d.files[path]
        return pb2.DatasetFile(
            path=path,
            size=len(data),
            updated=ts(d.committed or d.created),
            digest=pb2.DatasetFile.Digest(
                algorithm=pb2.DatasetFile.ALGORITHM_TYPE_SHA256, value=hashlib.sha256(data).digest()
            ),
        )

    def session(self, sess) -> pb2.Workload:
        env = pb2.Environment(
            id=sess.id,
            name=sess.name,
            author_id=sess.author_id,
            workspace_id=sess.workspace_id,
            created=ts(sess.created),
        )
        status = pb2.STATUS_CANCELED if sess.canceled else pb2.STATUS_RUNNING
        return pb2.Workload(environment=env, status=status)

    def group(self, g) -> pb2.Group:
        author = self.s.users[g.author_id]
        return pb2.Group(
            id=g.id,
            name=g.name,
            full_name=f"{author.name}/{g.name}",
            description=g.description,
            workspace_id=g.workspace_id,
            author_id=g.author_id,
            created=ts(g.created),
            modified=ts(g.created),
        )

    @staticmethod
    def slot_counts(nodes: list[Node]) -> pb2.SlotCounts:
        total = sum(n.slots for n in nodes)
        assigned = sum(min(n.assigned, n.slots) for n in nodes)
        cordoned = sum(n.slots for n in nodes if n.cordoned)
        available = sum(n.available for n in nodes)
        return pb2.SlotCounts(
            total=total, available=available, occupied=assigned, assigned=assigned, cordoned=cordoned
        )

    def running_jobs(self, node_ids: set[str]) -> int:
        return sum(
            1
            for j in self.s.jobs.values()
            if j.node_id in node_ids and j.started is not None and j.exited is None
        )

    def cluster(self, c: Cluster, occupancy: bool = False) -> pb2.Cluster:
        org = self.s.orgs[c.org_id]
        msg = pb2.Cluster(
            id=c.id,
            name=c.name,
            organization_id=org.id,
            organization_name=org.name,
            created=ts(c.created),
            aliases=c.aliases,
            tags=c.tags,
            node_count=len(c.nodes),
            expected_node_count=len(c.nodes),
        )
        if c.max_task_timeout is not None:
            msg.max_task_timeout.CopyFrom(
                Duration(seconds=c.max_task_timeout // NS, nanos=c.max_task_timeout % NS)
            )
        if occupancy:
            msg.cluster_occupancy.CopyFrom(
                pb2.ClusterOccupancy(
                    running_jobs_count=self.running_jobs({n.id for n in c.nodes}),
                    slot_counts=self.slot_counts(c.nodes),
                    node_occupancies=[
                        pb2.NodeOccupancy(
                            node_id=n.id,
                            running_jobs_count=self.running_jobs({n.id}),
                            slot_counts=self.slot_counts([n]),
                        )
                        for n in c.nodes
                    ],
                )
            )
        return msg

    def node(self, n: Node) -> pb2.Node:
        msg = pb2.Node(
            id=n.id,
            cluster_id=n.cluster_id,
            hostname=n.hostname,
            created=ts(n.created),
            heartbeat=ts(self.s.clock()),
            node_resources=pb2.NodeResources(
                cpu_count=n.cpu_count,
                memory_bytes=n.memory_bytes,
                gpu_ids=[f"GPU-{i}" for i in range(n.gpu_count)],
                gpu_type=n.gpu_type,
                slot_details=pb2.SlotDetails(
                    slot_count=n.slots,
                    gpu_count=n.gpu_count,
                    cpu_count=float(n.cpu_count),
                    memory_bytes=n.memory_bytes,
                ),
            ),
        )
        if n.cordoned:
            msg.cordon_details.CopyFrom(pb2.CordonDetails(cordoned=ts(n.created), cordon_reason="cordoned"))
        return msg

    def container_spec(self, spec: dict[str, Any]) -> pb2.ContainerSpec:
        image = spec.get("image") or {}
        res = spec.get("resources") or {}
        envs = [  # `literal` and `secret_reference` are a oneof: set only the one the spec has
            pb2.EnvironmentVariable(name=e["name"], secret_reference=e["secret"])
            if e.get("secret")
            else pb2.EnvironmentVariable(name=e["name"], literal=str(e.get("value") or ""))
            for e in spec.get("envVars") or []
        ]
        return pb2.ContainerSpec(
            image_id=image.get("beaker") or "",
            docker_reference=image.get("docker") or "",
            command=[str(x) for x in spec.get("command") or []],
            arguments=[str(x) for x in spec.get("arguments") or []],
            environment_variables=envs,
            result_path=(spec.get("result") or {}).get("path") or "",
            host_networking=bool(spec.get("hostNetworking")),
            resource_request=pb2.ResourceRequest(
                cpu_count=float(res.get("cpuCount") or 0), gpu_count=int(res.get("gpuCount") or 0)
            ),
        )

    def system_details(self, t: Task) -> pb2.SystemDetails:
        """The task's scheduling as a job carries it: replica group, priority, and the spec's
        constraints as given (proto JobPlacementConstraint: type + values; whether real Beaker sends
        cluster names or ids is not public: launchkit only compares one job's with another's)."""
        priority = str((t.spec.get("context") or {}).get("priority") or "normal").upper()
        constraints = t.spec.get("constraints") or {}
        placed = [  # the spec's constraints as given (proto JobPlacementConstraint: type + values)
            pb2.JobPlacementConstraint(type=kind, values=[str(v) for v in constraints[key]])
            for key, kind in (
                ("cluster", pb2.JOB_PLACEMENT_CONSTRAINT_TYPE_CLUSTER),
                ("hostname", pb2.JOB_PLACEMENT_CONSTRAINT_TYPE_HOSTNAME),
            )
            if constraints.get(key)
        ]
        return pb2.SystemDetails(
            placement_constraints=placed,
            replica_group_details=pb2.ReplicaGroupDetails(
                id=f"{t.experiment.id}-{t.spec.get('name') or 'task'}" if t.replica_count > 1 else "",
                size=t.replica_count,
                rank=t.replica_rank,
                is_leader_replica=t.replica_rank == 0,
                synchronized_start_timeout=_duration(t.spec.get("synchronizedStartTimeout")),
            ),
            priority=getattr(pb2, f"JOB_PRIORITY_{priority}", pb2.JOB_PRIORITY_NORMAL),
            timeout=_duration(t.spec.get("timeout")) if self.s.options.list_job_timeouts else None,
            min_runtime=_duration((t.spec.get("context") or {}).get("minRuntime"))
            if self.s.options.list_job_timeouts
            else None,
        )

    def task(self, t: Task) -> pb2.Task:
        latest = t.latest_job
        return pb2.Task(
            id=t.id,
            experiment_id=t.experiment.id,
            name=t.name,
            author_id=t.experiment.author_id,
            created=ts(t.created),
            container_spec=self.container_spec(t.spec),
            system_details=self.system_details(t),
            status=getattr(pb2, "STATUS_" + (latest.status_name if latest else "SUBMITTED")),
        )

    def experiment(self, e: Experiment) -> pb2.Experiment:
        return pb2.Experiment(
            id=e.id,
            name=e.name,
            author_id=e.author_id,
            workspace_id=e.workspace_id,
            description=e.description,
            tasks=[self.task(t) for t in e.tasks],
            created=ts(e.created),
            canceled=ts(e.canceled),
            canceled_for=e.canceled_for,
        )

    def workload(self, e: Experiment) -> pb2.Workload:
        return pb2.Workload(
            experiment=self.experiment(e),
            status=getattr(pb2, "STATUS_" + e.status_name),
            budget_id=e.budget_id,
        )

    def job_status(self, j: Job) -> pb2.JobStatus:
        st = pb2.JobStatus(
            status=getattr(pb2, "STATUS_" + j.status_name),
            created=ts(j.created),
            scheduled=ts(j.scheduled),
            started=ts(j.started),
            exited=ts(j.exited),
            finalized=ts(j.finalized),
            canceled=ts(j.canceled),
            message=j.message,
        )
        if j.exit_code is not None:
            st.exit_code = j.exit_code
        if j.canceled is not None:
            st.canceled_code = j.canceled_code
            st.canceled_for = j.canceled_for
        if j.scheduling_message:
            st.failed_scheduling_message = j.scheduling_message
        if j.ready is not None:
            st.ready.CopyFrom(ts(j.ready))
        if j.failed is not None:
            st.failed.CopyFrom(ts(j.failed))
        elif j.exit_code not in (None, 0) and j.canceled is None:
            st.failed.CopyFrom(ts(j.exited))
        return st

    def job(self, j: Job) -> pb2.Job:
        t, e = j.task, j.task.experiment
        author = self.s.users[e.author_id]
        ws = self.s.workspaces[e.workspace_id]
        msg = pb2.Job(
            id=j.id,
            task_id=t.id,
            name=f"{e.name}-{t.name}",
            author_id=e.author_id,
            workspace_id=e.workspace_id,
            status=self.job_status(j),
            container_spec=self.container_spec(t.spec),
            system_details=self.system_details(t),
            workload_id=e.id,
            workspace_reference=self.s.workspace_full_name(ws),
            author_reference=author.name,
            retry_ancestor_id=j.retry_ancestor_id,
            budget_id=e.budget_id,
            workload_created=ts(e.created),
        )
        ad = msg.assignment_details
        if j.result_dataset_id:  # optional until the job is assigned (fact 7.5)
            ad.result_dataset_id = j.result_dataset_id
        if j.node_id:
            ad.node_id = j.node_id
            ad.resource_assignment.CopyFrom(
                pb2.ResourceAssignment(
                    gpus=[f"GPU-{i}" for i in range(j.gpus)], assigned_slots_count=max(j.gpus, 1)
                )
            )
        return msg

    def summarized_event(self, j: Job, ev) -> pb2.SummarizedJobEvent:
        return pb2.SummarizedJobEvent(
            job_id=j.id,
            status=ev.status,
            occurrences=ev.occurrences,
            earliest_occurrence=ts(ev.earliest),
            latest_occurrence=ts(ev.latest),
            latest_message=ev.message,
        )


def paging(req) -> tuple[Any, int]:
    """(options, offset) of a List request. `next_page_token` and `options` are a oneof, so like Beaker
    the token carries the query: base64(offset, 4 bytes + serialized options)."""
    token = req.next_page_token
    if not token:
        return req.options, 0
    try:
        raw = base64.urlsafe_b64decode(token.encode())
        return type(req.options).FromString(raw[4:]), int.from_bytes(raw[:4], "big")
    except Exception as e:
        raise Invalid(f"bad page token {token!r}") from e


def paginate(items: list, opts, start: int) -> tuple[list, str]:
    sized = "page_size" in opts.DESCRIPTOR.fields_by_name and opts.HasField("page_size")
    size = opts.page_size if sized and opts.page_size > 0 else DEFAULT_PAGE_SIZE
    page = items[start : start + size]
    if start + size >= len(items):
        return page, ""
    token = base64.urlsafe_b64encode((start + size).to_bytes(4, "big") + opts.SerializeToString()).decode()
    return page, token


class Impl(SchedulingRpcs):
    """RPC bodies: (request, caller) -> response. Raise NotFound/Invalid/Conflict for errors."""

    def __init__(self, fake: FakeBeaker) -> None:
        self.fake = fake
        self.s: State = fake.state
        self.c = Convert(fake.state)

    def _org_id(self, ref: str) -> str | None:
        if not ref:
            return None
        return self._id("org", ref).id

    def _id(self, kind: str, ref: str) -> Any:
        """An object by ID, as a `*_id` field takes it. With options.strict_ids (the default; fact sheet
        item 3) names answer NOT_FOUND: clients must resolve them with Resolve*Name first."""
        s = self.s
        table = {
            "workspace": s.workspaces,
            "cluster": s.clusters,
            "image": s.images,
            "experiment": s.experiments,
            "dataset": s.datasets,
            "budget": s.budgets,
            "org": s.orgs,
            "node": s.nodes,
            "group": s.groups,
            "user": s.users,
        }[kind]
        if ref in table:
            return table[ref]
        if not s.options.strict_ids:
            return getattr(s, f"find_{kind}")(ref)
        raise NotFound(f"{kind} {ref!r} not found (IDs only here; resolve names first)")

    # ---- users / orgs
    def GetUser(self, req, caller):
        u = self._id("user", req.user_id) if req.HasField("user_id") and req.user_id else caller
        return pb2.GetUserResponse(user=self.c.user(u))

    def ResolveUserName(self, req, caller):
        return pb2.ResolveUserNameResponse(user_id=self.s.find_user(req.user_name).id)

    def ListUsers(self, req, caller):
        o, start = paging(req)
        org = self._org_id(o.organization_id)
        users = sorted(
            (u for u in self.s.users.values() if org is None or u.org_id == org), key=lambda u: u.name
        )
        page, nxt = paginate(users, o, start)
        return pb2.ListUsersResponse(users=[self.c.user(u) for u in page], next_page_token=nxt)

    def GetOrganization(self, req, caller):
        return pb2.GetOrganizationResponse(organization=self.c.org(self._id("org", req.organization_id)))

    def ResolveOrganizationName(self, req, caller):
        return pb2.ResolveOrganizationNameResponse(organization_id=self.s.find_org(req.organization_name).id)

    def ListOrganizations(self, req, caller):
        orgs = sorted(self.s.orgs.values(), key=lambda o: o.created)
        o, start = paging(req)
        page, nxt = paginate(orgs, o, start)
        return pb2.ListOrganizationsResponse(organizations=[self.c.org(o) for o in page], next_page_token=nxt)

    # ---- workspaces, budgets, secrets
    def GetWorkspace(self, req, caller):
        return pb2.GetWorkspaceResponse(workspace=self.c.workspace(self._id("workspace", req.workspace_id)))

    def ResolveWorkspaceName(self, req, caller):
        ws = self.s.find_workspace(f"{req.owner_name}/{req.workspace_name}")
        return pb2.ResolveWorkspaceNameResponse(workspace_id=ws.id)

    def ListWorkspaces(self, req, caller):
        o, start = paging(req)
        org = self._org_id(o.organization_id)
        items = [
            w
            for w in self.s.workspaces.values()
            if (org is None or w.org_id == org)
            and w.archived == o.only_archived
            and (not o.HasField("author_id") or w.author_id == o.author_id)
        ]
        if o.HasField("name_or_description_substring"):
            sub = o.name_or_description_substring.lower()
            items = [w for w in items if sub in w.name.lower() or sub in w.description.lower()]
        items.sort(
            key=lambda w: w.created if o.sort_clause.HasField("created") else w.name,
            reverse=o.sort_clause.sort_order == pb2.SORT_ORDER_DESCENDING,
        )
        page, nxt = paginate(items, o, start)
        return pb2.ListWorkspacesResponse(workspaces=[self.c.workspace(w) for w in page], next_page_token=nxt)

    def GetBudget(self, req, caller):
        return pb2.GetBudgetResponse(budget=self.c.budget(self._id("budget", req.budget_id)))

    def ResolveBudgetName(self, req, caller):
        return pb2.ResolveBudgetNameResponse(
            budget_id=self.s.find_budget(f"{req.organization_name}/{req.budget_name}").id
        )

    def GetSecret(self, req, caller):
        ws = self._id("workspace", req.workspace_id)
        if req.secret_name not in ws.secrets:
            raise NotFound(f"secret {req.secret_name!r} not found")
        return pb2.GetSecretResponse(secret=self.c.secret(ws.secrets[req.secret_name]))

    def ListSecrets(self, req, caller):
        o, start = paging(req)
        ws = self._id("workspace", o.workspace_id)
        items = sorted(
            ws.secrets.values(),
            key=lambda x: x.created if o.sort_clause.HasField("created") else x.name,
            reverse=o.sort_clause.sort_order == pb2.SORT_ORDER_DESCENDING,
        )
        page, nxt = paginate(items, o, start)
        return pb2.ListSecretsResponse(secrets=[self.c.secret(x) for x in page], next_page_token=nxt)

    # ---- images, datasets, groups
    def GetImage(self, req, caller):
        return pb2.GetImageResponse(image=self.c.image(self._id("image", req.image_id)))

    def ResolveImageName(self, req, caller):
        return pb2.ResolveImageNameResponse(
            image_id=self.s.find_image(f"{req.author_name}/{req.image_name}").id
        )

    def ListImages(self, req, caller):
        o, start = paging(req)
        items = [
            i
            for i in self.s.images.values()
            if (not o.HasField("workspace_id") or i.workspace_id == o.workspace_id)
            and (not o.HasField("author_id") or i.author_id == o.author_id)
            and (not o.HasField("image_name_or_description") or o.image_name_or_description in i.name)
        ]
        items.sort(key=lambda i: i.name)
        page, nxt = paginate(items, o, start)
        return pb2.ListImagesResponse(images=[self.c.image(i) for i in page], next_page_token=nxt)

    def GetDataset(self, req, caller):
        return pb2.GetDatasetResponse(dataset=self.c.dataset(self._id("dataset", req.dataset_id)))

    def ResolveDatasetName(self, req, caller):
        return pb2.ResolveDatasetNameResponse(
            dataset_id=self.s.find_dataset(f"{req.author_name}/{req.dataset_name}").id
        )

    def GetGroup(self, req, caller):
        return pb2.GetGroupResponse(group=self.c.group(self._id("group", req.group_id)))

    def ListGroups(self, req, caller):
        o, start = paging(req)
        items = [
            g
            for g in self.s.groups.values()
            if not o.HasField("workspace_id") or g.workspace_id == o.workspace_id
        ]
        if o.HasField("name_or_description_substring"):
            items = [g for g in items if o.name_or_description_substring in g.name + g.description]
        items.sort(key=lambda g: g.name)
        page, nxt = paginate(items, o, start)
        return pb2.ListGroupsResponse(groups=[self.c.group(g) for g in page], next_page_token=nxt)

    def CreateGroup(self, req, caller):
        ws = self._id("workspace", req.workspace_id)
        if any(g.name == req.name and g.workspace_id == ws.id for g in self.s.groups.values()):
            raise Conflict(f"group {req.name!r} already exists")
        g = self.s.add_group(ws.id, req.name, description=req.description, author=caller.id)
        for eid in req.experiment_ids:
            g.experiment_ids.append(self._id("experiment", eid).id)
        return pb2.CreateGroupResponse(group=self.c.group(g))

    def UpdateGroup(self, req, caller):
        g = self._id("group", req.group_id)
        if req.HasField("name"):
            g.name = req.name
        if req.HasField("description"):
            g.description = req.description
        for eid in req.add_experiment_ids:
            g.experiment_ids.append(self._id("experiment", eid).id)
        return pb2.UpdateGroupResponse(group=self.c.group(g))

    def ListGroupTaskMetrics(self, req, caller):
        o, start = paging(req)
        g = self._id("group", o.group_id)
        items = [
            t for eid in g.experiment_ids if eid in self.s.experiments for t in self.s.experiments[eid].tasks
        ]
        page, nxt = paginate(items, o, start)
        return pb2.ListGroupTaskMetricsResponse(
            next_page_token=nxt,
            task_metrics=[
                pb2.TaskMetrics(
                    task_id=t.id,
                    task_name=t.name,
                    experiment_id=t.experiment.id,
                    experiment_name=t.experiment.name,
                    task_status=getattr(
                        pb2, "STATUS_" + (t.latest_job.status_name if t.latest_job else "SUBMITTED")
                    ),
                )
                for t in page
            ],
        )

    # ---- clusters, nodes
    def GetCluster(self, req, caller):
        c = self._id("cluster", req.cluster_id)
        return pb2.GetClusterResponse(cluster=self.c.cluster(c, req.include_cluster_occupancy))

    def ResolveClusterName(self, req, caller):
        """`owner/name` of the canonical name; aliases only with options.resolve_cluster_aliases
        (unknown on real Beaker, fact 1.10)."""
        aliases = self.s.options.resolve_cluster_aliases
        for c in self.s.clusters.values():
            if self.s.orgs[c.org_id].name == req.owner_name and (
                c.name == req.cluster_name or (aliases and req.cluster_name in c.aliases)
            ):
                return pb2.ResolveClusterNameResponse(cluster_id=c.id)
        raise NotFound(f"cluster {req.owner_name}/{req.cluster_name} not found")

    def ListClusters(self, req, caller):
        o, start = paging(req)
        org = self._org_id(o.organization_id)
        items = [c for c in self.s.clusters.values() if org is None or c.org_id == org]
        sc = o.sort_clause
        if sc.HasField("free_gpus") or sc.HasField("total_gpus"):
            field = "available" if sc.HasField("free_gpus") else "total"
            key = lambda c: (getattr(Convert.slot_counts(c.nodes), field), c.name)
        elif sc.HasField("total_nodes"):
            key = lambda c: (len(c.nodes), c.name)
        elif sc.HasField("running_jobs"):
            key = lambda c: (self.c.running_jobs({n.id for n in c.nodes}), c.name)
        elif sc.HasField("created"):
            key = lambda c: (c.created, c.name)
        else:
            key = lambda c: c.name
        default_desc = not (sc.HasField("name") or not sc.ListFields())
        desc = sc.sort_order == pb2.SORT_ORDER_DESCENDING if sc.sort_order else default_desc
        items.sort(key=key, reverse=desc)
        page, nxt = paginate(items, o, start)
        occ = o.include_cluster_occupancy
        return pb2.ListClustersResponse(clusters=[self.c.cluster(c, occ) for c in page], next_page_token=nxt)

    def GetNode(self, req, caller):
        return pb2.GetNodeResponse(node=self.c.node(self._id("node", req.node_id)))

    def ListNodes(self, req, caller):
        o, start = paging(req)
        if o.HasField("cluster_id"):
            items = list(self._id("cluster", o.cluster_id).nodes)
        else:
            org = self._org_id(o.organization_id)
            items = [
                n for n in self.s.nodes.values() if org is None or self.s.clusters[n.cluster_id].org_id == org
            ]
        sc = o.sort_clause
        if sc.HasField("created"):
            items.sort(key=lambda n: n.created, reverse=sc.sort_order == pb2.SORT_ORDER_DESCENDING)
        elif sc.HasField("utilization"):
            items.sort(
                key=lambda n: n.assigned / max(n.slots, 1), reverse=sc.sort_order == pb2.SORT_ORDER_DESCENDING
            )
        else:
            items.sort(key=lambda n: n.hostname, reverse=sc.sort_order == pb2.SORT_ORDER_DESCENDING)
        page, nxt = paginate(items, o, start)
        return pb2.ListNodesResponse(nodes=[self.c.node(n) for n in page], next_page_token=nxt)

    # ---- workloads / experiments
    def GetWorkload(self, req, caller):
        if req.workload_id in self.s.sessions:
            return pb2.GetWorkloadResponse(workload=self.c.session(self.s.sessions[req.workload_id]))
        return pb2.GetWorkloadResponse(workload=self.c.workload(self._id("experiment", req.workload_id)))

    def ResolveWorkloadName(self, req, caller):
        for sess in self.s.sessions.values():
            if sess.name == req.workload_name and self.s.users[sess.author_id].name == req.author_name:
                return pb2.ResolveWorkloadNameResponse(workload_id=sess.id)
        e = self.s.find_experiment(f"{req.author_name}/{req.workload_name}")
        return pb2.ResolveWorkloadNameResponse(workload_id=e.id)

    def ListWorkloads(self, req, caller):
        o, start = paging(req)
        org = self._org_id(o.organization_id)
        items: list[Any] = []
        wtype = o.workload_type if o.HasField("workload_type") else pb2.WORKLOAD_TYPE_UNSPECIFIED
        if wtype != pb2.WORKLOAD_TYPE_EXPERIMENT:  # sessions: environment workloads (fact 8.2)
            for sess in self.s.sessions.values():
                if (
                    o.HasField("workspace_id")
                    and sess.workspace_id != self._id("workspace", o.workspace_id).id
                ):
                    continue
                if o.HasField("author_id") and sess.author_id != self._id("user", o.author_id).id:
                    continue
                if o.HasField("job_finalized") and (sess.canceled is not None) != o.job_finalized:
                    continue
                items.append(sess)
        if wtype == pb2.WORKLOAD_TYPE_ENVIRONMENT:
            items.sort(key=lambda x: (x.created, x.id), reverse=True)
            page, nxt = paginate(items, o, start)
            return pb2.ListWorkloadsResponse(workloads=[self.c.session(x) for x in page], next_page_token=nxt)
        statuses = set(o.statuses)
        sub = o.name_or_description_substring.lower() if o.HasField("name_or_description_substring") else None
        after = ts_ns(o.created_after) if o.HasField("created_after") else None
        before = ts_ns(o.created_before) if o.HasField("created_before") else None
        now = time.monotonic()
        for e in self.s.experiments.values():
            if e.listed_from > now:  # options.list_lag: the listing has not caught up with the create
                continue
            if org is not None and self.s.workspaces[e.workspace_id].org_id != org:
                continue
            if o.HasField("workspace_id") and e.workspace_id != self._id("workspace", o.workspace_id).id:
                continue
            if o.HasField("author_id") and e.author_id != self._id("user", o.author_id).id:
                continue
            if statuses and getattr(pb2, "STATUS_" + e.status_name) not in statuses:
                continue
            if o.HasField("job_finalized") and e.finalized != o.job_finalized:
                continue
            if sub is not None and sub not in e.name.lower() and sub not in e.description.lower():
                continue
            if after is not None and e.created < after:
                continue
            if before is not None and e.created >= before:
                continue
            items.append(e)
        items.sort(
            key=lambda e: (e.created, e.id), reverse=o.sort_clause.sort_order != pb2.SORT_ORDER_ASCENDING
        )
        page, nxt = paginate(items, o, start)
        workloads = [self.c.workload(e) if isinstance(e, Experiment) else self.c.session(e) for e in page]
        if not self.s.options.list_task_specs:  # (unknown: the listing without the tasks' specs)
            for wl in workloads:
                for t in wl.experiment.tasks:
                    t.ClearField("container_spec")
        return pb2.ListWorkloadsResponse(workloads=workloads, next_page_token=nxt)

    def UpdateWorkload(self, req, caller):
        e = self._id("experiment", req.workload_id)
        if req.HasField("name"):
            e.name = req.name
        if req.HasField("description"):
            e.description = req.description
        return pb2.UpdateWorkloadResponse(workload=self.c.workload(e))

    def CancelWorkloads(self, req, caller):
        ids = []
        for wid in req.workload_ids:
            if wid in self.s.sessions:
                self.s.sessions[wid].canceled = self.s.sessions[wid].canceled or self.s.now()
                ids.append(wid)
                continue
            e = self._id("experiment", wid)
            self.s.cancel_experiment(e, stopping=True, by=caller.name)  # running jobs pass STOPPING
            ids.append(e.id)
        return pb2.CancelWorkloadsResponse(workload_ids=ids)

    def DeleteWorkloads(self, req, caller):
        for wid in req.workload_ids:
            self.s.delete_experiment(self._id("experiment", wid))
        return pb2.DeleteWorkloadsResponse()

    def GetExperimentYamlSpec(self, req, caller):
        if req.experiment_id in self.s.sessions:
            raise Invalid(f"workload {req.experiment_id} is not an experiment")
        e = self._id("experiment", req.experiment_id)
        return pb2.GetExperimentYamlSpecResponse(experiment_spec=yaml.safe_dump(e.spec, sort_keys=False))

    def RestartExperimentTasks(self, req, caller):
        e = self._id("experiment", req.experiment_id)
        for t in e.tasks:
            j = t.latest_job
            if j is not None and j.finalized is not None and j.status_name in ("FAILED", "CANCELED"):
                self.s._new_job(t, retry_of=j)
        e.canceled = None
        return pb2.RestartExperimentTasksResponse(workload=self.c.workload(e))

    # ---- jobs
    def GetJob(self, req, caller):
        return pb2.GetJobResponse(job=self.c.job(self.s.find_job(req.job_id)))

    def ListJobs(self, req, caller):
        o, start = paging(req)
        if o.HasField("task_id"):
            items = list(self.s.find_task(o.task_id).jobs)
        elif o.HasField("environment_id"):
            items = []
        else:
            org = self._org_id(o.organization_id)
            items = [
                j
                for j in self.s.jobs.values()
                if org is None or self.s.workspaces[j.experiment.workspace_id].org_id == org
            ]
        if o.HasField("finalized"):
            items = [j for j in items if (j.finalized is not None) == o.finalized]
        if o.HasField("scheduled"):
            items = [j for j in items if (j.scheduled is not None) == o.scheduled]
        if o.HasField("scheduled_on_node_id"):
            items = [j for j in items if j.node_id == o.scheduled_on_node_id]
        if o.HasField("scheduled_on_cluster_id"):
            cid = self._id("cluster", o.scheduled_on_cluster_id).id
            items = [j for j in items if j.cluster_id == cid]
        if o.HasField("canceled"):
            items = [j for j in items if (j.canceled is not None) == o.canceled]
        if o.HasField("exited"):
            items = [j for j in items if (j.exited is not None) == o.exited]
        # Ascending is "not implemented server-side" (fact 4.5): always newest first.
        items.sort(key=lambda j: (j.created, j.id), reverse=True)
        page, nxt = paginate(items, o, start)
        return pb2.ListJobsResponse(jobs=[self.c.job(j) for j in page], next_page_token=nxt)

    def UpdateJobSourcePriority(self, req, caller):
        """Lowering works; raising a running job's priority is refused (fact 3.2: PERMISSION_DENIED)."""
        from .state import PRIORITIES, Denied

        j = self.s.find_job(req.job_id)
        ctx = j.task.spec.setdefault("context", {})
        old = str(ctx.get("priority") or "normal").lower()
        new = pb2.JobPriority.Name(req.priority).removeprefix("JOB_PRIORITY_").lower()
        if new not in PRIORITIES:
            raise Invalid(f"invalid priority {new!r}")
        if j.started is not None and PRIORITIES.index(new) > PRIORITIES.index(old):
            raise Denied(f'cannot increase priority for running job "{j.id}"')
        ctx["priority"] = new
        return pb2.UpdateJobSourcePriorityResponse()

    # ---- datasets (fact 7): the HTTP side creates, uploads and commits (httpapi.py)
    def ListDatasets(self, req, caller):
        o, start = paging(req)
        items = list(self.s.datasets.values())
        if o.HasField("workspace_id"):
            wid = self._id("workspace", o.workspace_id).id
            items = [d for d in items if d.workspace_id == wid]
        if o.HasField("author_id"):
            items = [d for d in items if d.author_id == o.author_id]
        if o.HasField("name_or_description_substring"):
            sub = o.name_or_description_substring.lower()
            items = [d for d in items if sub in d.name.lower() or sub in d.description.lower()]
        if o.dataset_type == pb2.ListDatasetsRequest.Opts.DATASET_TYPE_IS_RESULT:
            items = [d for d in items if d.is_result]
        elif o.dataset_type == pb2.ListDatasetsRequest.Opts.DATASET_TYPE_IS_NOT_RESULT:
            items = [d for d in items if not d.is_result]
        items.sort(key=lambda d: (d.created, d.id), reverse=True)
        page, nxt = paginate(items, o, start)
        return pb2.ListDatasetsResponse(datasets=[self.c.dataset(d) for d in page], next_page_token=nxt)

    def ListDatasetFiles(self, req, caller):
        o, start = paging(req)
        d = self._id("dataset", o.dataset_id)
        paths = sorted(p for p in d.files if p.startswith(o.prefix))
        page, nxt = paginate(paths, o, start)
        return pb2.ListDatasetFilesResponse(
            dataset_files=[self.c.dataset_file(d, p) for p in page],
            next_page_token=nxt,
            total_size=sum(len(d.files[p]) for p in paths),
            file_count=len(paths),
        )

    def GetDatasetFileLink(self, req, caller):
        d = self._id("dataset", req.dataset_id)
        if req.file_path not in d.files:
            raise NotFound(f"file {req.file_path!r} not found in dataset {d.id}")
        return pb2.GetDatasetFileLinkResponse(
            download_url=f"{self.fake.agent_address}/api/v3/datasets/{d.id}/files/{req.file_path}"
        )

    def UpdateDataset(self, req, caller):
        d = self._id("dataset", req.dataset_id)
        if req.HasField("name"):
            d.name = req.name
        if req.HasField("description"):
            d.description = req.description
        if req.HasField("committed") and d.committed is None:
            d.committed = self.s.now()
        return pb2.UpdateDatasetResponse(dataset=self.c.dataset(d))

    def DeleteDatasets(self, req, caller):
        for did in req.dataset_ids:
            self.s.datasets.pop(self._id("dataset", did).id)
        return pb2.DeleteDatasetsResponse()

    def ListSummarizedJobEvents(self, req, caller):
        o, start = paging(req)
        j = self.s.find_job(o.job_id)
        events = sorted(
            j.events, key=lambda ev: ev.latest, reverse=o.sort_clause.sort_order == pb2.SORT_ORDER_DESCENDING
        )
        page, nxt = paginate(events, o, start)
        return pb2.ListSummarizedJobEventsResponse(
            summarized_job_events=[self.c.summarized_event(j, ev) for ev in page], next_page_token=nxt
        )


FOLLOW_POLL = 0.02  # seconds between checks for new lines while following


async def stream_job_logs(fake: FakeBeaker, req, context):
    """StreamJobLogs (asyncio): `since` inclusive, then `tail_lines` (the last N of those), then with
    `follow` new lines until the job is finalized. Injected faults cut (RST_STREAM) or end it early."""
    s = fake.state
    with s.lock:
        job = s.find_job(req.job_id)
        logs = job.logs
        start = logs.index_at_or_after(_resend_from(s, ts_ns(req.since))) if req.HasField("since") else 0
        if req.tail_lines > 0:
            start = max(start, logs.count - req.tail_lines)
    fault = fake.faults.take_stream_fault(follow=req.follow)
    max_lines = fault.after_lines if fault is not None and fault.after_lines is not None else None
    deadline = (
        time.monotonic() + fault.after_seconds
        if fault is not None and fault.after_seconds is not None
        else None
    )
    lifetime = s.options.follow_stream_lifetime
    if req.follow and lifetime is not None and fault is None:
        # Real follow streams end cleanly before the job is finalized (fact 5.3, Beaker issue #6602),
        # at varying points: 0.5-1.5 x the lifetime.
        with s.lock:
            lifetime *= 0.5 + s._rand.random()
        fault = StreamFault("end", None, lifetime)
        deadline = time.monotonic() + lifetime
    sent = 0
    idx = start
    JobLog = pb2.JobLog
    write = context.write
    while True:
        stop = logs.count
        if max_lines is not None:
            stop = min(stop, idx + max(0, max_lines - sent))
        for t, msg in logs.iter_from(idx, stop):
            await write(JobLog(timestamp=Timestamp(seconds=t // NS, nanos=t % NS), message=msg))
        sent += stop - idx
        idx = stop
        if (max_lines is not None and sent >= max_lines) or (
            deadline is not None and time.monotonic() >= deadline
        ):
            if fault.kind in ("cut", "unavailable"):
                raise StreamCut(unavailable=fault.kind == "unavailable")
            return
        if not req.follow:
            return
        while logs.count <= idx:
            if job.id not in s.jobs:  # deleted while followed (fact 10.7): the stream ends
                return
            if job.finalized is not None:
                if logs.count <= idx:  # re-read: lines appended just before finalizing
                    return
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
            await asyncio.sleep(FOLLOW_POLL)


def _resend_from(s, since: int) -> int:
    """Where a `since` request starts, per options.resume_resend (fact 10.13, unknown): exactly at
    `since`, at the start of its second (earlier lines of that second come again), or at the start."""
    mode = s.options.resume_resend
    if mode == "second":
        return since - since % NS
    if mode == "all":
        return 0
    return since


class StreamCut(Exception):
    """Raised inside a stream to end it like a dropped HTTP/2 stream (INTERNAL + RST_STREAM), or with
    UNAVAILABLE (fact 5.4)."""

    def __init__(self, unavailable: bool = False) -> None:
        super().__init__()
        self.unavailable = unavailable


def _status_for(exc: Exception) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, NotFound):
        return grpc.StatusCode.NOT_FOUND, str(exc)
    if isinstance(exc, Conflict):
        return grpc.StatusCode.ALREADY_EXISTS, str(exc)
    if isinstance(exc, Invalid):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, Denied):
        return grpc.StatusCode.PERMISSION_DENIED, str(exc)
    tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return grpc.StatusCode.INVALID_ARGUMENT, f"fakebeaker bug or unsupported request: {tb}"


class FakeServicer(beaker_pb2_grpc.BeakerServicer):
    """Served by a grpc.aio server: unary RPCs are plain functions (run in the server's thread pool, so
    they may block, e.g. for injected latency); StreamJobLogs is a coroutine (fast streaming)."""

    def __init__(self, fake: FakeBeaker) -> None:
        self.fake = fake
        self.impl = Impl(fake)

    def _preamble(self, name: str, context) -> tuple[User | None, tuple[grpc.StatusCode, str] | None]:
        fake = self.fake
        fake._record_call(name)
        if fake.faults.take_unavailable(name):
            return None, (grpc.StatusCode.UNAVAILABLE, "fakebeaker: injected UNAVAILABLE")
        after = fake.faults.take_rate_limit(name)
        if after is not None:
            context.set_trailing_metadata((("retry-after", f"{after:g}"),))
            return None, (grpc.StatusCode.RESOURCE_EXHAUSTED, "fakebeaker: rate limit exceeded, retry later")
        token = ""
        for k, v in context.invocation_metadata() or ():
            if k == "authorization":
                token = v.split(" ", 1)[-1]
        user = fake.state.user_for_token(token)
        if user is None:  # options.auth_error: the gRPC code for a bad token is unknown (fact 3.2)
            if fake.state.options.auth_error == "permission_denied":
                return None, (grpc.StatusCode.PERMISSION_DENIED, "invalid authentication token")
            return None, (grpc.StatusCode.UNAUTHENTICATED, "invalid authentication token")
        return user, None

    def _unary(self, name: str, request, context):
        self.fake.faults.meet(name)
        delay = self.fake.faults.delay_for(name)
        if delay:
            time.sleep(delay)
        caller, err = self._preamble(name, context)
        body = getattr(self.impl, name, None)
        if err is None and body is None:
            err = (grpc.StatusCode.UNIMPLEMENTED, f"fakebeaker does not implement {name}")
        if err is None:
            try:
                with self.fake.state.lock:
                    return body(request, caller)
            except Exception as exc:
                err = _status_for(exc)
        context.abort(*err)

    async def StreamJobLogs(self, request, context):
        delay = self.fake.faults.delay_for("StreamJobLogs")
        if delay:
            await asyncio.sleep(delay)
        _caller, err = self._preamble("StreamJobLogs", context)
        if err is None:
            try:
                await stream_job_logs(self.fake, request, context)
                return
            except StreamCut as cut:
                err = (
                    (grpc.StatusCode.UNAVAILABLE, "fakebeaker: connection reset (UNAVAILABLE)")
                    if cut.unavailable
                    else (grpc.StatusCode.INTERNAL, RST_STREAM_DETAILS)
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                err = _status_for(exc)
        await context.abort(*err)


def _unary_method(name: str):
    def method(self, request, context):
        return self._unary(name, request, context)

    method.__name__ = name
    return method


def _unsupported_stream(name: str):
    async def method(self, request, context):
        self.fake._record_call(name)
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"fakebeaker does not implement {name}")

    method.__name__ = name
    return method


for _m in pb2.DESCRIPTOR.services_by_name["Beaker"].methods:
    if _m.name == "StreamJobLogs":
        continue
    if _m.server_streaming or _m.client_streaming:
        setattr(FakeServicer, _m.name, _unsupported_stream(_m.name))
    else:
        setattr(FakeServicer, _m.name, _unary_method(_m.name))
