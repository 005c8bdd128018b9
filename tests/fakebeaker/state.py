"""In-memory Beaker model plus the Python API tests use to arrange scenarios and drive jobs.

All times are integers in nanoseconds since the epoch (`State.now()`). Objects are plain dataclasses;
the gRPC layer (`servicer.py`) converts them to beaker-py's protobuf messages.
"""

from __future__ import annotations

import fnmatch
import itertools
import random
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from timescale import scaled

from .logs import JobLogs

NS = 1_000_000_000


class NotFound(Exception):
    """Unknown id or name: the server answers NOT_FOUND (HTTP 404)."""


class Invalid(Exception):
    """A request the fake rejects: the server answers INVALID_ARGUMENT (HTTP 400)."""


class Conflict(Exception):
    """A name already in use: HTTP 409 (or 400 "... already in use", see Options.name_conflict)."""


class Denied(Exception):
    """A business rule refused the request: gRPC PERMISSION_DENIED (HTTP 403)."""


@dataclass
class Options:
    """How the fake behaves where Beaker's real behaviour is unknown or optional (fact sheet, last section).

    The defaults are the strict fake. Every field marked *unknown* is a switch tests run both ways
    (`tests/fakebeaker/plugin.py`: `both_ways(...)`)."""

    # *unknown* (fact sheet 1.10): does ResolveClusterName resolve aliases too?
    resolve_cluster_aliases: bool = False
    # conservative (fact 3): gRPC `*_id` fields take IDs only; names go through Resolve*Name.
    strict_ids: bool = True
    # *unknown* (3.2): the gRPC code for a bad token. HTTP always answers 401.
    auth_error: str = "unauthenticated"  # or "permission_denied"
    # both happen (3.2): a name clash answers HTTP 409 or HTTP 400 "... already in use".
    name_conflict: str = "409"  # or "400"
    # 9.1: jobs are created synchronously: each job beyond the first adds this much to the create.
    create_latency_per_job: float = 0.25
    # 5.3: follow streams end cleanly this long after they start (None: they run to finalize).
    follow_stream_lifetime: float | None = 2.0
    # *unknown* (5.7): appended lines share timestamps in bursts of `tie_burst` lines.
    tie_timestamps: bool = False
    tie_burst: int = 3
    # *unknown* (4.7): replica task names: "same" (the spec's name) or "distinct" (name-rank).
    replica_task_names: str = "same"
    # 4.10 (both seen): seconds between create and a task's first job (0: jobs exist at once).
    job_creation_delay: float = 0.0
    # 3.2, low confidence: a spec without a cluster constraint needs preemptible jobs.
    no_cluster_needs_preemptible: bool = False
    # 4.6: seconds a canceled job that had started stays STOPPING before it is finalized.
    stopping_seconds: float = 0.3
    # issue 22: the server's clock minus the client's, in seconds (e.g. -300: 5 minutes behind). Every
    # time the server stamps (created, started, log lines, ...) is off by this much.
    clock_skew: float = 0.0
    # 9.3 "Lists may lag": ListWorkloads leaves out experiments for this many (real) seconds after their
    # create. GetWorkload sees them at once (read-after-write).
    list_lag: float = 0.0
    # *unknown*: how Beaker reports an OOM kill. "message": exit code 137 and a status message saying
    # so; "exit_code": exit code 137 alone (what a container's SIGKILL leaves).
    oom_report: str = "message"
    # issue 22: Beaker refuses experiment names longer than this (HTTP 400).
    max_name_length: int = 128
    # *unknown* (fact 11.8, issue 40): ListWorkloads' tasks carry their container spec (image, command,
    # env vars), as the proto allows and GetWorkload does. False: the listing leaves it out (a tool then
    # reads each experiment's spec to recognise its own, as gantry's `list` does).
    list_task_specs: bool = True
    # -- runs of many jobs (issue 32; fact sheet 10, README "Runs of many jobs")
    # *unknown* (10.2): a job canceled for a lost/unhealthy node is retried under allowedTaskRetries.
    retry_node_loss: bool = False
    # *unknown* (10.13): what a log request with `since` re-sends: "none" (exact to the ns), "second"
    # (since honoured to the second: earlier lines of that second again), "all" (from the first line).
    resume_resend: str = "none"
    # 10.11 (inferred-medium): seconds after which a job no node can take is canceled
    # IMPOSSIBLE_TO_SCHEDULE (None: it stays queued). scheduling.py
    impossible_after: float | None = None
    # *unknown* (11.13): whether a job that only cordoned nodes could take gets an event saying so
    # ("N nodes are cordoned", the fake's wording) besides "N nodes do not have enough slots available".
    cordon_event: bool = True
    # *unknown* (10.12): a job whose env secret was deleted between submit and start. "fail": it fails
    # when it would start, with no exit code and a message naming the secret (what fact 10.12 suggests a
    # fake do); "start": it starts without the variable.
    deleted_secret: str = "fail"
    # *unknown* (issue 43): whether a listed job's system details carry its task timeout and min runtime
    # (the spec's `timeout`, `context.minRuntime`), as the proto allows; False: left out (a start
    # estimate then rests on the cluster's max task timeout, or there is none).
    list_job_timeouts: bool = True

    @classmethod
    def parse(cls, items: dict[str, Any] | None) -> Options:
        """From a dict of field -> value (strings converted to the field's type: CLI / env / YAML)."""
        out = cls()
        for k, v in (items or {}).items():
            if not hasattr(out, k):
                raise ValueError(f"unknown fakebeaker option {k!r}; one of {list(vars(out))}")
            default = getattr(cls(), k)
            if isinstance(v, str) and not isinstance(default, str):
                v = (
                    None
                    if v.lower() in ("none", "null")
                    else (v.lower() in ("1", "true", "yes", "on") if isinstance(default, bool) else float(v))
                )
            setattr(out, k, v)
        return out


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(ms: int, low: int) -> str:
    """26 upper-case Crockford base32 characters: 48 bits of milliseconds, 80 bits of `low`."""
    n = ((ms & ((1 << 48) - 1)) << 80) | (low & ((1 << 80) - 1))
    out = []
    for _ in range(26):
        out.append(CROCKFORD[n & 31])
        n >>= 5
    return "".join(reversed(out))


def gpu_type_value(gpu_type: str | int | None) -> int:
    """beaker_pb2.GpuType value from "NVIDIA_H100", "nvidia h100", "GPU_TYPE_NVIDIA_H100" or an int."""
    from beaker import beaker_pb2 as pb2

    if gpu_type is None:
        return 0
    if isinstance(gpu_type, int):
        return gpu_type
    key = "GPU_TYPE_" + gpu_type.upper().replace(" ", "_").removeprefix("GPU_TYPE_")
    try:
        return pb2.GpuType.Value(key)
    except ValueError:
        raise ValueError(f"unknown GPU type {gpu_type!r}; one of {list(pb2.GpuType.keys())}") from None


@dataclass
class Org:
    id: str
    name: str
    created: int


@dataclass
class User:
    id: str
    name: str
    token: str
    display_name: str
    created: int
    org_id: str


@dataclass
class Budget:
    id: str
    org_id: str
    name: str
    created: int


@dataclass
class Secret:
    name: str
    value: bytes  # kept only inside the fake; never sent anywhere but the secret-value route
    created: int
    updated: int
    author_id: str


@dataclass
class Workspace:
    id: str
    org_id: str
    name: str
    created: int
    author_id: str
    description: str = ""
    budget_id: str | None = None
    archived: bool = False
    secrets: dict[str, Secret] = field(default_factory=dict)
    max_priority: str | None = None  # maximum_workload_priority: low, normal, high, urgent
    slot_limit: int | None = None  # unallocated slots the workspace may hold (jobs beyond it stay queued)
    readers: set[str] = field(default_factory=set)  # user ids who may only read it (fact 10.10)

    def check_write(self, user_id: str, what: str) -> None:
        """Fact 10.10: a read-only member lists, but creating and secret values answer 403."""
        if user_id in self.readers:
            raise Denied(f"{what}: you have read-only access to workspace {self.name!r}")

    def secret(self, name: str, *, exact: bool) -> Secret | None:
        """By exact name (gRPC GetSecret), or case-insensitively (HTTP value route, spec resolution)."""
        if name in self.secrets or exact:
            return self.secrets.get(name)
        return next((v for k, v in self.secrets.items() if k.lower() == name.lower()), None)


@dataclass
class Image:
    id: str
    name: str
    author_id: str
    workspace_id: str
    created: int
    docker_tag: str = ""


@dataclass
class Dataset:
    id: str
    name: str
    author_id: str
    workspace_id: str
    created: int
    description: str = ""
    budget_id: str = ""
    is_result: bool = False
    committed: int | None = None
    storage_id: str = ""
    storage_token: str = ""
    files: dict[str, bytes] = field(default_factory=dict)  # path -> contents


@dataclass
class Group:
    id: str
    name: str
    workspace_id: str
    author_id: str
    created: int
    description: str = ""
    experiment_ids: list[str] = field(default_factory=list)


@dataclass
class Node:
    id: str
    cluster_id: str
    hostname: str
    gpu_type: int
    gpu_count: int
    cpu_count: int
    memory_bytes: int
    slots: int  # schedulable slots (one per GPU; 0 on a CPU-only node)
    created: int
    assigned: int = 0  # slots in use (set directly by tests or by jobs running on the node)
    cordoned: bool = False

    @property
    def available(self) -> int:
        return 0 if self.cordoned else max(0, self.slots - self.assigned)


@dataclass
class Cluster:
    id: str
    org_id: str
    name: str
    created: int
    aliases: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    max_task_timeout: int | None = None  # ns; None = unset (unlimited); 0 = takes no batch jobs
    nodes: list[Node] = field(default_factory=list)


@dataclass
class Session:
    """An interactive session: an environment workload (type 2) with no tasks. No RPC creates one."""

    id: str
    name: str
    author_id: str
    workspace_id: str
    created: int
    cluster_id: str = ""
    canceled: int | None = None


@dataclass
class Event:
    status: str
    message: str
    earliest: int
    latest: int
    occurrences: int = 1


@dataclass
class Job:
    id: str
    task: Task
    created: int
    result_dataset_id: str
    retry_ancestor_id: str = ""
    scheduled: int | None = None
    ready: int | None = None  # synchronized start (fact 11.11): placed, waiting for the other replicas
    started: int | None = None
    exited: int | None = None
    finalized: int | None = None
    canceled: int | None = None
    canceled_code: int = 0  # beaker_pb2.CancelationCode
    canceled_for: str = ""
    failed: int | None = None  # set for failures without an exit code too (e.g. an image pull)
    exit_code: int | None = None
    message: str = ""
    pinned: bool = False  # queue_forever / scheduling.hold: never scheduled by AutoRun
    scheduling_message: str = ""  # failed_scheduling_message (scheduling.impossible)
    tie_left: int = 0  # options.tie_timestamps: lines that may still reuse the last timestamp
    node_id: str = ""
    cluster_id: str = ""
    gpus: int = 0
    events: list[Event] = field(default_factory=list)
    # every occurrence of a waiting event, as ListJobEvents lists them (fact 11.1): (ns, status, message)
    raw_events: list[tuple[int, str, str]] = field(default_factory=list)
    logs: JobLogs = field(default_factory=JobLogs)

    @property
    def experiment(self) -> Experiment:
        return self.task.experiment

    @property
    def status_name(self) -> str:
        """The beaker_pb2.WorkloadStatus name (without STATUS_)."""
        if self.canceled is not None:
            return "CANCELED" if self.finalized is not None else "STOPPING"
        if self.failed is not None and self.finalized is not None:
            return "FAILED"
        if self.exited is not None or self.failed is not None:
            if self.finalized is None:
                return "UPLOADING_RESULTS"
            return "SUCCEEDED" if self.exit_code == 0 else "FAILED"
        if self.started is not None:
            return "RUNNING"
        if self.ready is not None:
            return "READY_TO_START"
        if self.scheduled is not None:
            return "INITIALIZING"
        return "QUEUED"


@dataclass
class Task:
    id: str
    experiment: Experiment
    name: str
    created: int
    spec: dict[str, Any]
    replica_rank: int = 0
    replica_count: int = 1
    jobs: list[Job] = field(default_factory=list)

    @property
    def latest_job(self) -> Job | None:
        return self.jobs[-1] if self.jobs else None


@dataclass
class Experiment:
    id: str
    name: str
    author_id: str
    workspace_id: str
    created: int
    spec: dict[str, Any]
    description: str = ""
    budget_id: str = ""
    canceled: int | None = None
    canceled_for: str = ""
    allowed_retries: int = 0  # spec retry.allowedTaskRetries (per experiment, fact 10.1)
    retries_used: int = 0
    tasks: list[Task] = field(default_factory=list)
    listed_from: float = 0.0  # time.monotonic() from which ListWorkloads shows it (options.list_lag)

    @property
    def jobs(self) -> list[Job]:
        return [j for t in self.tasks for j in t.jobs]

    @property
    def status_name(self) -> str:
        latest = [t.latest_job for t in self.tasks if t.latest_job is not None]
        names = {j.status_name for j in latest}
        if not latest:
            return "CANCELED" if self.canceled is not None else "SUBMITTED"
        for s in ("STOPPING", "RUNNING", "INITIALIZING", "UPLOADING_RESULTS", "QUEUED", "READY_TO_START"):
            if s in names:
                return s
        if "FAILED" in names:
            return "FAILED"
        if "CANCELED" in names:
            return "CANCELED"
        return "SUCCEEDED"

    @property
    def finalized(self) -> bool:
        if self.canceled is not None and not any(t.jobs for t in self.tasks):
            return True  # canceled before any job existed (fact 10.6)
        return all(t.latest_job is not None and t.latest_job.finalized is not None for t in self.tasks)


CANCEL_MANUAL = 4
CANCEL_SYSTEM_PREEMPTION = 1
CANCEL_USER_PREEMPTION = 2
CANCEL_TIMEOUT = 5
CANCEL_NODE_UNAVAILABLE = 6
CANCEL_IMPOSSIBLE_TO_SCHEDULE = 7
CANCEL_NODE_UNHEALTHY = 12
CANCEL_HEALTHCHECK_FAILED = 10
CANCEL_SIBLING_TASK_FAILED = 8
CANCEL_SIBLING_TASK_PREEMPTION = 9
CANCEL_SIBLING_TASK_RETRY = 11
MAX_TASK_RETRIES = 10  # fact 10.1: allowedTaskRetries "with a max limit of 10"
PRIORITIES = ["low", "normal", "high", "urgent"]


@dataclass
class AutoRun:
    """Scheduler for jobs nobody drives by hand: each new job starts after `start_after` s, logs `lines`
    (all at once, or one every `line_interval` s) and `synthetic_lines` generated lines, then exits with
    `exit_code` `run_for` s later. With `preempt_first_after`, each task's first job is preempted that
    long after it started; the replacement job (queued by the preemption) then runs the same way."""

    start_after: float = 0.05
    run_for: float | None = 0.1  # None: keep running until a test finishes/cancels the job
    exit_code: int = 0
    lines: list[str] = field(default_factory=lambda: ["hello from the fake job"])
    line_interval: float = 0.0
    synthetic_lines: int = 0
    preempt_first_after: float | None = None
    # runs of many jobs (issue 32): (exit code, run_for) per job, from the job (its task's replica_rank,
    # its attempt = its place in job.task.jobs, 1-based); overrides exit_code and run_for, and `lines`
    # may then name {rank} and {attempt}. In-process tests only.
    plan: Any = None


def _synchronized(j: Job) -> bool:
    """A replica of a group that starts together (`synchronizedStartTimeout`, fact 11.11)."""
    return j.task.replica_count > 1 and bool(j.task.spec.get("synchronizedStartTimeout"))


def _group_jobs(j: Job) -> list[Job]:
    """The newest job of each replica of `j`'s group (the experiment's tasks of the same spec name)."""
    e, name = j.task.experiment, j.task.spec.get("name")
    return [t.latest_job for t in e.tasks if t.spec.get("name") == name and t.latest_job is not None]


class State:
    """All server-side data. Every mutation holds `lock` and notifies `changed` (log followers wait on it)."""

    def __init__(self, clock=time.time_ns, options: Options | None = None) -> None:
        self.options = options or Options()
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.clock = clock
        self._ids = itertools.count(1)
        self._rand = random.Random(0x5EED)
        self.orgs: dict[str, Org] = {}
        self.users: dict[str, User] = {}
        self.budgets: dict[str, Budget] = {}
        self.workspaces: dict[str, Workspace] = {}
        self.images: dict[str, Image] = {}
        self.datasets: dict[str, Dataset] = {}
        self.groups: dict[str, Group] = {}
        self.clusters: dict[str, Cluster] = {}
        self.nodes: dict[str, Node] = {}
        self.experiments: dict[str, Experiment] = {}
        self.tasks: dict[str, Task] = {}
        self.jobs: dict[str, Job] = {}
        self.sessions: dict[str, Session] = {}
        self.private_repos: set[str] = set()  # "owner/repo" that github.com answers 404 for
        self.auto: AutoRun | None = None
        self.allocations: list[Any] = []  # scheduling.Allocation
        self._timers: list[threading.Timer] = []
        self._last_ts = 0

    # ----------------------------------------------------------------- basics
    def now(self) -> int:
        """Current time in ns, strictly increasing between calls (so log lines never tie)."""
        with self.lock:
            t = max(self.clock() + int(self.options.clock_skew * NS), self._last_ts + 1)
            self._last_ts = t
            return t

    def new_id(self, kind: str = "") -> str:
        """A ULID like Beaker's (26 characters, [0-9A-Z]); unique: the counter is in the low bits."""
        n = next(self._ids)
        return ulid(self.clock() // 1_000_000, (self._rand.getrandbits(48) << 32) | n)

    def _touch(self) -> None:
        self.changed.notify_all()

    # ------------------------------------------------------------ arrangement
    def add_org(self, name: str) -> Org:
        with self.lock:
            for o in self.orgs.values():
                if o.name == name:
                    return o
            org = Org(self.new_id("org"), name, self.now())
            self.orgs[org.id] = org
            return org

    def add_user(
        self, name: str, token: str | None = None, *, org: str = "ai2", display_name: str | None = None
    ) -> User:
        with self.lock:
            o = self.add_org(org)
            user = User(
                self.new_id("usr"),
                name,
                token or f"token-{name}",
                display_name or name.title(),
                self.now(),
                o.id,
            )
            self.users[user.id] = user
            return user

    def add_budget(self, full_name: str) -> Budget:
        org_name, name = _split(full_name, "budget")
        with self.lock:
            o = self.add_org(org_name)
            b = Budget(self.new_id("bud"), o.id, name, self.now())
            self.budgets[b.id] = b
            return b

    def add_workspace(
        self,
        full_name: str,
        *,
        budget: str | None = None,
        author: str | None = None,
        description: str = "",
        secrets: dict[str, str] | None = None,
        readers: Iterable[str] = (),
    ) -> Workspace:
        """`readers`: users (names or ids) who may only read it (fact 10.10)."""
        org_name, name = _split(full_name, "workspace")
        with self.lock:
            o = self.add_org(org_name)
            budget_id = None
            if budget is not None:
                try:
                    budget_id = self.find_budget(budget).id
                except NotFound:
                    budget_id = self.add_budget(budget).id
            author_id = self.find_user(author).id if author else next(iter(self.users), "")
            ws = Workspace(self.new_id("wsp"), o.id, name, self.now(), author_id, description, budget_id)
            self.workspaces[ws.id] = ws
            for k, v in (secrets or {}).items():
                self.put_secret(ws.id, k, v, author_id=author_id)
            ws.readers.update(self.find_user(u).id for u in readers)
            return ws

    def put_secret(
        self, workspace: str, name: str, value: str | bytes = "", *, author_id: str = ""
    ) -> Secret:
        with self.lock:
            ws = self.find_workspace(workspace)
            data = value.encode() if isinstance(value, str) else bytes(value)
            now = self.now()
            old = ws.secrets.get(name)
            s = Secret(name, data, old.created if old else now, now, author_id or ws.author_id)
            ws.secrets[name] = s
            return s

    def add_image(self, full_name: str, *, workspace: str | None = None, docker_tag: str = "") -> Image:
        author_name, name = _split(full_name, "image")
        with self.lock:
            author = self.find_user(author_name)
            ws_id = self.find_workspace(workspace).id if workspace else next(iter(self.workspaces), "")
            img = Image(self.new_id("img"), name, author.id, ws_id, self.now(), docker_tag)
            self.images[img.id] = img
            return img

    def add_cluster(
        self,
        full_name: str,
        *,
        aliases: Iterable[str] = (),
        tags: Iterable[str] = (),
        max_task_timeout: int | None = None,
        nodes: Iterable[dict[str, Any]] | None = None,
    ) -> Cluster:
        """`nodes`: dicts of `add_node` keyword arguments. max_task_timeout in ns (0 = no batch jobs)."""
        org_name, name = _split(full_name, "cluster")
        with self.lock:
            o = self.add_org(org_name)
            c = Cluster(
                self.new_id("clu"), o.id, name, self.now(), list(aliases), list(tags), max_task_timeout
            )
            self.clusters[c.id] = c
            for kw in nodes or ():
                self.add_node(c.id, **kw)
            return c

    def add_node(
        self,
        cluster: str,
        *,
        gpu_type: str | int | None = "NVIDIA_H100",
        gpus: int = 8,
        assigned: int = 0,
        cordoned: bool = False,
        hostname: str | None = None,
        cpus: int = 128,
        memory_bytes: int = 1 << 40,
    ) -> Node:
        with self.lock:
            c = self.find_cluster(cluster)
            n = Node(
                self.new_id("nod"),
                c.id,
                hostname or f"{c.name}-{len(c.nodes) + 1:03d}.example",
                gpu_type_value(gpu_type) if gpus else 0,
                gpus,
                cpus,
                memory_bytes,
                gpus,
                self.now(),
                assigned,
                cordoned,
            )
            c.nodes.append(n)
            self.nodes[n.id] = n
            self._touch()
            return n

    def add_group(
        self, workspace: str, name: str, *, description: str = "", author: str | None = None
    ) -> Group:
        with self.lock:
            ws = self.find_workspace(workspace)
            g = Group(
                self.new_id("grp"),
                name,
                ws.id,
                self.find_user(author).id if author else ws.author_id,
                self.now(),
                description,
            )
            self.groups[g.id] = g
            return g

    # ---------------------------------------------------------------- lookups
    def find_user(self, ref: str) -> User:
        with self.lock:
            if ref in self.users:
                return self.users[ref]
            for u in self.users.values():
                if u.name == ref:
                    return u
        raise NotFound(f"user {ref!r} not found")

    def user_for_token(self, token: str) -> User | None:
        with self.lock:
            for u in self.users.values():
                if u.token == token:
                    return u
        return None

    def find_org(self, ref: str) -> Org:
        with self.lock:
            if ref in self.orgs:
                return self.orgs[ref]
            for o in self.orgs.values():
                if o.name == ref:
                    return o
        raise NotFound(f"organization {ref!r} not found")

    def find_budget(self, ref: str) -> Budget:
        with self.lock:
            if ref in self.budgets:
                return self.budgets[ref]
            if "/" in ref:
                org_name, name = ref.split("/", 1)
                for b in self.budgets.values():
                    if b.name == name and self.orgs[b.org_id].name == org_name:
                        return b
        raise NotFound(f"budget {ref!r} not found")

    def find_workspace(self, ref: str) -> Workspace:
        with self.lock:
            if ref in self.workspaces:
                return self.workspaces[ref]
            if "/" in ref:
                owner, name = ref.split("/", 1)
                for w in self.workspaces.values():
                    if w.name == name and self.orgs[w.org_id].name == owner:
                        return w
        raise NotFound(f"workspace {ref!r} not found")

    def find_image(self, ref: str) -> Image:
        with self.lock:
            if ref in self.images:
                return self.images[ref]
            if "/" in ref:
                author, name = ref.split("/", 1)
                for i in self.images.values():
                    if i.name == name and self.users[i.author_id].name == author:
                        return i
        raise NotFound(f"image {ref!r} not found")

    def find_cluster(self, ref: str) -> Cluster:
        """By id, `org/name`, `org/alias`, bare name or bare alias."""
        with self.lock:
            if ref in self.clusters:
                return self.clusters[ref]
            org, _, name = ref.rpartition("/")
            for c in self.clusters.values():
                if (name == c.name or name in c.aliases or ref in c.aliases) and (
                    not org or self.orgs[c.org_id].name == org or ref in c.aliases
                ):
                    return c
        raise NotFound(f"cluster {ref!r} not found")

    def find_node(self, ref: str) -> Node:
        with self.lock:
            if ref in self.nodes:
                return self.nodes[ref]
            for n in self.nodes.values():
                if n.hostname == ref:
                    return n
        raise NotFound(f"node {ref!r} not found")

    def find_experiment(self, ref: str) -> Experiment:
        with self.lock:
            if ref in self.experiments:
                return self.experiments[ref]
            if "/" in ref:
                author, name = ref.split("/", 1)
                for e in self.experiments.values():
                    if e.name == name and self.users[e.author_id].name == author:
                        return e
        raise NotFound(f"workload {ref!r} not found")

    def find_task(self, ref: str) -> Task:
        with self.lock:
            if ref in self.tasks:
                return self.tasks[ref]
        raise NotFound(f"task {ref!r} not found")

    def find_job(self, ref: str | Job) -> Job:
        if isinstance(ref, Job):
            return ref
        with self.lock:
            if ref in self.jobs:
                return self.jobs[ref]
        raise NotFound(f"job {ref!r} not found")

    def find_dataset(self, ref: str) -> Dataset:
        with self.lock:
            if ref in self.datasets:
                return self.datasets[ref]
            if "/" in ref:
                author, name = ref.split("/", 1)
                for d in self.datasets.values():
                    if d.name == name and self.users[d.author_id].name == author:
                        return d
        raise NotFound(f"dataset {ref!r} not found")

    def _dataset_known(self, ref: str, user: Any) -> bool:
        """A spec's `source.beaker`: an id, `author/name`, or a bare name of the author's (inferred)."""
        try:
            self.find_dataset(ref)
            return True
        except NotFound:
            return any(d.name == ref and d.author_id == user.id for d in self.datasets.values())

    def find_group(self, ref: str) -> Group:
        with self.lock:
            if ref in self.groups:
                return self.groups[ref]
        raise NotFound(f"group {ref!r} not found")

    def cluster_by_reference(self, ref: str) -> Cluster | None:
        """What a spec's `constraints.cluster` entry names: `org/name`, `org/alias` or an ID."""
        with self.lock:
            if ref in self.clusters:
                return self.clusters[ref]
            org, _, name = ref.rpartition("/")
            for c in self.clusters.values():
                if self.orgs[c.org_id].name == org and (name == c.name or name in c.aliases):
                    return c
        return None

    def cluster_matches(self, pattern: str) -> list[Cluster]:
        with self.lock:
            out = []
            for c in self.clusters.values():
                org = self.orgs[c.org_id].name
                names = [c.name, f"{org}/{c.name}", *c.aliases, *(f"{org}/{a}" for a in c.aliases)]
                if any(fnmatch.fnmatchcase(n, pattern) for n in names):
                    out.append(c)
            return out

    # ------------------------------------------------------------ experiments
    def create_experiment(
        self, workspace: str, spec: dict[str, Any], *, name: str | None = None, author: str
    ) -> Experiment:
        """What `POST /api/v3/workspaces/{id}/experiments` does: validate, record, queue one job per task."""
        from beaker.types import BeakerDataSource, BeakerExperimentSpec

        with self.lock:
            ws = self.find_workspace(workspace)
            user = self.find_user(author)
            raw_tasks = spec.get("tasks", [])
            try:
                with warnings.catch_warnings():  # the server reads `preemptible` as Beaker does, silently
                    warnings.filterwarnings("ignore", "The 'preemptible' field", DeprecationWarning)
                    parsed = BeakerExperimentSpec.from_json(spec)
                for task in parsed.tasks:  # beaker-py 2.8.1 from_json leaves mount sources as dicts
                    for mount in task.datasets or []:
                        if isinstance(mount.source, dict):
                            mount.source = BeakerDataSource(
                                **{{"hostPath": "host_path"}.get(k, k): v for k, v in mount.source.items()}
                            )
            except Exception as e:
                raise Invalid(f"invalid experiment spec: {e}") from e
            if not parsed.tasks:
                raise Invalid("invalid experiment spec: no tasks")
            if name is None:
                name = f"exp-{next(self._ids)}"
            if len(name) > self.options.max_name_length:
                raise Invalid(
                    f"experiment name is {len(name)} characters; the maximum is {self.options.max_name_length}"
                )
            for e in self.experiments.values():
                if e.name == name and e.author_id == user.id:
                    raise Conflict(f"experiment name {name!r} is already in use")
            opts = self.options
            budget_id = ws.budget_id or ""
            if parsed.budget:
                try:
                    budget_id = self.find_budget(parsed.budget).id
                except NotFound as err:
                    raise Invalid(f"budget {parsed.budget!r} not found") from err
            if not budget_id:
                raise Invalid(
                    f"workspace {self.workspace_full_name(ws)} has no budget; set 'budget' in the spec"
                )
            task_names = set()
            for i, t in enumerate(parsed.tasks):
                tname = t.name or f"task{i}"
                if tname in task_names:
                    raise Invalid(f"duplicate task name {tname!r}")
                task_names.add(tname)
                if t.image.beaker:
                    try:
                        self.find_image(t.image.beaker)
                    except NotFound as err:
                        raise Invalid(f"image {t.image.beaker!r} not found") from err
                elif not t.image.docker:
                    raise Invalid(f"task {tname!r}: image.beaker or image.docker is required")
                # spec-time secret resolution is case-insensitive (inferred, fact sheet 2 / 9.5)
                for ev in t.env_vars or []:
                    if ev.secret is not None and ws.secret(ev.secret, exact=False) is None:
                        raise Invalid(
                            f"secret {ev.secret!r} not found in workspace {self.workspace_full_name(ws)}"
                        )
                for mount in t.datasets or []:
                    if (
                        mount.source.secret is not None
                        and ws.secret(mount.source.secret, exact=False) is None
                    ):
                        raise Invalid(f"secret {mount.source.secret!r} not found in workspace")
                    ref = mount.source.beaker
                    if ref is not None and not self._dataset_known(ref, user):  # a spec names "Name or ID"
                        raise Invalid(f"task {tname!r}: dataset {ref!r} not found")
                raw_ctx = (raw_tasks[i] if i < len(raw_tasks) else {}).get("context") or {}
                if "preemptible" in raw_ctx and ("minRuntime" in raw_ctx or "autoResume" in raw_ctx):
                    raise Invalid(
                        f"task {tname!r}: context.preemptible cannot be combined with minRuntime/autoResume"
                    )
                priority = str(raw_ctx.get("priority") or "normal").lower()
                if ws.max_priority and PRIORITIES.index(priority) > PRIORITIES.index(ws.max_priority):
                    raise Invalid(
                        f"priority {priority!r} exceeds the maximum priority {ws.max_priority!r} of "
                        f"workspace {self.workspace_full_name(ws)}"
                    )
                patterns = (t.constraints.cluster if t.constraints else None) or []
                for cl in patterns:
                    found = self.cluster_by_reference(cl)
                    if found is None:
                        raise Invalid(f"cluster {cl!r} not found")
                    if found.max_task_timeout == 0:
                        raise Invalid(f"cluster {cl!r} does not accept batch jobs (max task timeout is 0)")
                if not patterns and opts.no_cluster_needs_preemptible and not raw_ctx.get("preemptible"):
                    raise Invalid(
                        f"task {tname!r}: omitting the cluster constraint is only allowed for preemptible jobs"
                    )
            retries = _allowed_retries(spec)
            now = self.now()
            exp = Experiment(
                self.new_id("exp"), name, user.id, ws.id, now, spec, parsed.description or "", budget_id
            )
            exp.allowed_retries = retries
            for i, t in enumerate(parsed.tasks):
                replicas = t.replicas or 1
                for rank in range(replicas):
                    tname = t.name or f"task{i}"
                    if replicas > 1 and opts.replica_task_names == "distinct":
                        tname = f"{tname}-{rank}"
                    task = Task(self.new_id("tsk"), exp, tname, now, raw_tasks[i], rank, replicas)
                    exp.tasks.append(task)
                    self.tasks[task.id] = task
            for gid in parsed.groups or []:
                if gid in self.groups:
                    self.groups[gid].experiment_ids.append(exp.id)
            exp.listed_from = time.monotonic() + opts.list_lag
            self.experiments[exp.id] = exp
            if opts.job_creation_delay > 0:
                self._timer(opts.job_creation_delay, lambda: self._first_jobs(exp))
            else:
                self._first_jobs(exp)
            self._touch()
            return exp

    def _first_jobs(self, exp: Experiment) -> None:
        with self.lock:
            if exp.canceled is not None or exp.id not in self.experiments:
                return  # canceled (or deleted) before its jobs were made (fact 10.6)
            for task in exp.tasks:
                if not task.jobs:
                    self._new_job(task)
            self._touch()

    def _new_job(self, task: Task, retry_of: Job | None = None, created: int | None = None) -> Job:
        now = created if created is not None else self.now()
        gpus = int(((task.spec.get("resources") or {}).get("gpuCount")) or 0)
        job = Job(
            self.new_id("job"), task, now, "", retry_ancestor_id=retry_of.id if retry_of else "", gpus=gpus
        )
        job.events.append(Event("queued", "Job queued", now, now))
        task.jobs.append(job)
        self.jobs[job.id] = job
        from .scheduling import on_new_job

        on_new_job(self, job)  # held when it cannot be placed (slot limit, node sizes, cordons)
        if self.auto is not None:
            self._auto_schedule(job, self.auto)
        return job

    def add_experiment(
        self,
        workspace: str,
        name: str,
        *,
        author: str,
        spec: dict[str, Any] | None = None,
        created: int | None = None,
        description: str = "",
        task_names: Iterable[str] = ("main",),
        env: dict[str, str] | None = None,
        replicas: int = 1,
    ) -> Experiment:
        """Arrange an experiment directly (no HTTP). `created` backdates it (ns)."""
        if spec is None:
            env_vars = [{"name": k, "value": v} for k, v in (env or {}).items()]
            spec = {
                "version": "v2",
                "description": description,
                "tasks": [
                    {
                        "name": t,
                        "image": {"docker": "python:3.11"},
                        "context": {},
                        "command": ["python", "-c", "print(1)"],
                        "envVars": env_vars,
                        "replicas": replicas,
                        "result": {"path": "/results"},
                    }
                    for t in task_names
                ],
            }
        with self.lock:
            ws = self.find_workspace(workspace)
            if ws.budget_id is None and not spec.get("budget"):
                spec = {
                    **spec,
                    "budget": self.budget_full_name(next(iter(self.budgets.values())))
                    if self.budgets
                    else self.budget_full_name(self.add_budget(f"{self.orgs[ws.org_id].name}/default")),
                }
            exp = self.create_experiment(ws.id, spec, name=name, author=author)
            self._first_jobs(exp)
            if created is not None:
                exp.created = created
                for t in exp.tasks:
                    t.created = created
                    for j in t.jobs:
                        j.created = created
            return exp

    # -------------------------------------------------------- job transitions
    def _job(self, job: str | Job | Experiment) -> Job:
        """A Job, a job id, or an experiment (object, id, `author/name`): its first task's latest job.
        beaker-py protobufs work too (pb2.Job, pb2.Workload)."""
        if not isinstance(job, (str, Job, Experiment)):
            job = job.experiment.id if hasattr(job, "experiment") else job.id
        if isinstance(job, str) and job not in self.jobs:
            try:
                job = self.find_experiment(job)
            except NotFound:
                pass
        if isinstance(job, Experiment):
            latest = job.tasks[0].latest_job
            if latest is None:
                raise NotFound(f"experiment {job.id} has no job")
            return latest
        return self.find_job(job)

    def schedule_job(self, job, *, node: str | None = None) -> Job:
        with self.lock:
            j = self._job(job)
            if j.scheduled is not None:
                return j
            n = self.find_node(node) if node else self._pick_node(j)
            now = self.now()
            j.scheduled = now
            if not j.result_dataset_id:  # 7.5: the result dataset comes with the assignment
                exp = j.experiment
                ds = Dataset(
                    self.new_id("dst"),
                    f"{exp.name}-{j.task.name}-result-{len(self.datasets)}",
                    exp.author_id,
                    exp.workspace_id,
                    now,
                    is_result=True,
                    committed=now,
                )
                self.datasets[ds.id] = ds
                j.result_dataset_id = ds.id
            if n is not None:
                j.node_id, j.cluster_id = n.id, n.cluster_id
                n.assigned += j.gpus
                j.events.append(Event("scheduled", f"Scheduled on node {n.hostname}", now, now))
            else:
                j.events.append(Event("scheduled", "Scheduled", now, now))
            j.events.append(Event("pulling", "Pulling image", now, now))
            if _synchronized(j):  # fact 11.11: placed replicas wait until every rank is placed
                j.ready = now
                j.events.append(Event("ready", "Ready to start; waiting for the other replicas", now, now))
            self._touch()
            return j

    def _pick_node(self, j: Job) -> Node | None:
        patterns = ((j.task.spec.get("constraints") or {}).get("cluster")) or []
        clusters = [c for p in patterns for c in self.cluster_matches(p)] or list(self.clusters.values())
        for c in clusters:
            for n in c.nodes:
                if not n.cordoned and n.available >= j.gpus:
                    return n
        return None

    def start_job(self, job, *, node: str | None = None) -> Job:
        with self.lock:
            j = self.schedule_job(job, node=node)
            if j.started is None and j.failed is None and (gone := self._deleted_secret(j)):
                return self.fail_job(j, gone)
            if j.started is None and _synchronized(j):
                group = _group_jobs(j)
                if any(g.scheduled is None for g in group):
                    return j  # READY_TO_START until every replica is placed (fact 11.11)
                for g in group:  # then they start together
                    if g is not j and g.started is None and g.ready is not None:
                        g.started = j_now = self.now()
                        g.events.append(Event("started", "Started", j_now, j_now))
            if j.started is None:
                j.started = self.now()
                j.events.append(Event("started", "Started", j.started, j.started))
            self._touch()
            return j

    def finish_job(self, job, exit_code: int = 0, *, finalize: bool = True) -> Job:
        with self.lock:
            j = self.start_job(job)
            if j.exited is None:
                j.exited = self.now()
                j.exit_code = exit_code
                j.events.append(Event("exited", f"Exited with code {exit_code}", j.exited, j.exited))
                self._release(j)
                if exit_code != 0:
                    self._failed(j)
            if finalize:
                self.finalize_job(j)
            self._touch()
            return j

    def finalize_job(self, job) -> Job:
        with self.lock:
            j = self._job(job)
            if j.finalized is None:
                j.finalized = self.now()
                j.events.append(Event("finalized", "Finalized", j.finalized, j.finalized))
                self._maybe_retry(j)
            self._touch()
            return j

    def _release(self, j: Job) -> None:
        if j.node_id and j.node_id in self.nodes:
            n = self.nodes[j.node_id]
            n.assigned = max(0, n.assigned - j.gpus)

    def cancel_job(
        self,
        job,
        *,
        code: int = CANCEL_MANUAL,
        message: str = "canceled",
        canceled_for: str = "",
        stopping: bool = False,
    ) -> Job:
        """Cancel a job. With `stopping` (what CancelWorkloads does), a job that had started stays
        STOPPING for `options.stopping_seconds` before it is finalized as CANCELED."""
        with self.lock:
            j = self._job(job)
            if j.finalized is not None or j.canceled is not None:
                return j
            now = self.now()
            j.canceled = now
            j.canceled_code = code
            j.message = message
            j.canceled_for = canceled_for or message
            was_running = j.started is not None and j.exited is None
            if was_running:
                j.exited = now
                self._release(j)
            j.events.append(Event("canceled", message, now, now))
            delay = self.options.stopping_seconds if stopping and was_running else 0
            if delay > 0:
                self._timer(delay, lambda: self.finalize_job(j))
            else:
                j.finalized = now
            self._touch()
            return j

    def preempt_job(self, job, *, start_next: bool = False, by_user: str | None = None) -> Job | None:
        """Cancel `job` as preempted (fact 4.3/4.4: canceled_code, canceled_for, message) and queue the
        next job of the same task, created at the cancel time; returns the new job (None: the task's
        `context.autoResume` is false, so none comes)."""
        with self.lock:
            j = self._job(job)
            self.cancel_job(
                j,
                code=CANCEL_USER_PREEMPTION if by_user else CANCEL_SYSTEM_PREEMPTION,
                message="Job canceled while starting" if j.started is None else "Job preempted",
                canceled_for=f"This job or session has been manually preempted by {by_user}."
                if by_user
                else "This job was preempted by a higher-priority job.",
            )
            if (j.task.spec.get("context") or {}).get("autoResume") is False:
                self._touch()
                return None
            nxt = self._new_job(j.task, retry_of=j, created=j.canceled)
            if _propagates(j, "propagatePreemption"):
                self._stop_siblings(j, CANCEL_SIBLING_TASK_PREEMPTION, resume=True)
            if start_next:
                self.start_job(nxt)
            self._touch()
            return nxt

    def _deleted_secret(self, j: Job) -> str | None:
        """Fact 10.12 (unknown; Options.deleted_secret): the message a job fails with at its start when an
        env secret of its spec was deleted since it was submitted; None when all are there."""
        if self.options.deleted_secret != "fail":
            return None
        ws = self.workspaces[j.experiment.workspace_id]
        for ev in j.task.spec.get("envVars") or []:
            name = ev.get("secret")
            if name is not None and ws.secret(name, exact=False) is None:
                return f'secret "{name}" not found in workspace "{self.workspace_full_name(ws)}"'
        return None

    def fail_job(self, job, message: str = "failed to pull image", *, finalize: bool = True) -> Job:
        """A FAILED job with no exit code (fact 4.8), e.g. an image pull failure."""
        with self.lock:
            j = self._job(job)
            now = self.now()
            j.failed = now
            j.message = message
            if j.started is not None and j.exited is None:
                j.exited = now
            self._release(j)
            j.events.append(Event("failed", message, now, now))
            self._failed(j)
            if finalize:
                self.finalize_job(j)
            self._touch()
            return j

    def lose_node(self, job, *, unhealthy: bool = False) -> Job:
        """The job's node went away (NODE_UNAVAILABLE) or turned unhealthy (NODE_UNHEALTHY): Beaker
        cancels the job (fact 4.6 codes; the texts are the fake's own)."""
        with self.lock:
            j = self.cancel_job(
                job,
                code=CANCEL_NODE_UNHEALTHY if unhealthy else CANCEL_NODE_UNAVAILABLE,
                message="Node unhealthy" if unhealthy else "Node became unavailable",
                canceled_for="The node running this job became "
                + ("unhealthy." if unhealthy else "unavailable."),
            )
            self._maybe_retry(j)  # finalized at once (a node loss has no STOPPING here)
            return j

    def time_out_job(self, job) -> Job:
        """The job ran past its task timeout: canceled with CANCELATION_CODE_TIMEOUT (fact 4.6)."""
        return self.cancel_job(
            job, code=CANCEL_TIMEOUT, message="Job timed out", canceled_for="The job exceeded its timeout."
        )

    def oom_kill(self, job, *, finalize: bool = True) -> Job:
        """The kernel killed the job for exceeding its memory: exit code 137, plus (options.oom_report
        "message") a status message saying so. How real Beaker words it is unknown."""
        with self.lock:
            j = self.finish_job(job, 137, finalize=False)
            if self.options.oom_report == "message":
                j.message = "OOMKilled: the container exceeded its memory limit"
            if finalize:
                self.finalize_job(j)
            return j

    def cancel_experiment(
        self, exp: str | Experiment, *, stopping: bool = False, by: str | None = None
    ) -> Experiment:
        with self.lock:
            e = exp if isinstance(exp, Experiment) else self.find_experiment(exp)
            for t in e.tasks:
                if t.latest_job is not None:
                    self.cancel_job(
                        t.latest_job,
                        stopping=stopping,
                        message="canceled",
                        canceled_for=f"Canceled by {by}" if by else "",
                    )
            if e.canceled is None:
                e.canceled = self.now()
                e.canceled_for = f"Canceled by {by}" if by else ""
            self._touch()
            return e

    def queue_forever(self, job, *, slot_limit: bool = True, impossible_after: float | None = None) -> Job:
        """Keep `job` QUEUED with the summarized events real Beaker shows when it cannot fit (fact 3.2,
        19); with `impossible_after` seconds it is then canceled IMPOSSIBLE_TO_SCHEDULE."""
        with self.lock:
            j = self._job(job)
            ws = self.workspaces[j.experiment.workspace_id]
            need = max(j.gpus, 1)
            if slot_limit:
                limit = ws.slot_limit or 64
                self.add_event(
                    j,
                    "queued",
                    f'excluded by slot limit (workspace "{self.workspace_full_name(ws)}" using '
                    f"{limit}/{limit} allowed unallocated slots, the job requires at least {need} slots)",
                )
            nodes = [n for p in self._patterns(j) for c in self.cluster_matches(p) for n in c.nodes]
            self.add_event(
                j, "queued", f"{len(nodes) or len(self.nodes)} nodes do not have enough slots available"
            )
            j.pinned = True
            if impossible_after is not None:
                self._timer(
                    impossible_after,
                    lambda: self.cancel_job(
                        j, code=CANCEL_IMPOSSIBLE_TO_SCHEDULE, message="Job is impossible to schedule"
                    ),
                )
            return j

    def _patterns(self, j: Job) -> list[str]:
        return ((j.task.spec.get("constraints") or {}).get("cluster")) or []

    def job_env(self, job) -> dict[str, str]:
        """The environment Beaker sets inside a running job (fact 9.7), from the job's assignment."""
        with self.lock:
            j = self._job(job)
            t = j.task
            node = self.nodes.get(j.node_id)
            leader = next(
                (
                    x
                    for x in t.experiment.tasks
                    if x.name.split("-")[0] == t.name.split("-")[0] and x.replica_rank == 0
                ),
                t,
            )
            leader_job = leader.latest_job
            leader_node = self.nodes.get(leader_job.node_id) if leader_job else None
            env = {
                "BEAKER_JOB_ID": j.id,
                "BEAKER_JOB_KIND": "batch",
                "BEAKER_WORKLOAD_ID": t.experiment.id,
                "BEAKER_EXPERIMENT_ID": t.experiment.id,
                "BEAKER_TASK_ID": t.id,
                "BEAKER_NODE_ID": j.node_id,
                "BEAKER_NODE_HOSTNAME": node.hostname if node else "",
                "BEAKER_RESULT_DATASET_ID": j.result_dataset_id,
                "BEAKER_ASSIGNED_GPU_COUNT": str(j.gpus),
                "BEAKER_ASSIGNED_CPU_COUNT": str(float((t.spec.get("resources") or {}).get("cpuCount") or 1)),
                "BEAKER_REPLICA_COUNT": str(t.replica_count),
                "BEAKER_REPLICA_RANK": str(t.replica_rank),
            }
            if t.replica_count > 1 and t.spec.get("leaderSelection"):
                env["BEAKER_LEADER_REPLICA_HOSTNAME"] = leader_node.hostname if leader_node else ""
                env["BEAKER_LEADER_REPLICA_NODE_ID"] = leader_node.id if leader_node else ""
            return env

    # ---------------------------------------- runs of many jobs (issue 32, fact sheet 10)
    def _failed(self, j: Job) -> None:
        """A job failed (exit code != 0, or no exit code): with `propagateFailure` (fact 10.3) the other
        tasks' unfinished jobs are canceled SIBLING_TASK_FAILED; when the failed task will be retried,
        SIBLING_TASK_RETRY instead, and they resume with it (inferred: code 11 exists for that)."""
        if _propagates(j, "propagateFailure"):
            e = j.experiment
            retried = e.retries_used < e.allowed_retries
            code = CANCEL_SIBLING_TASK_RETRY if retried else CANCEL_SIBLING_TASK_FAILED
            self._stop_siblings(j, code, resume=retried)

    def _stop_siblings(self, j: Job, code: int, *, resume: bool) -> None:
        """Cancel the unfinished newest jobs of the experiment's other tasks with `code`; with `resume`,
        each task gets a new job created at its cancel (as a preemption's, fact 4.3)."""
        why = {
            CANCEL_SIBLING_TASK_FAILED: "Another task of the experiment failed.",
            CANCEL_SIBLING_TASK_PREEMPTION: "Another task of the experiment was preempted.",
            CANCEL_SIBLING_TASK_RETRY: "Another task of the experiment is being retried.",
        }[code]
        for t in j.experiment.tasks:
            sib = t.latest_job
            if t is j.task or sib is None or sib.finalized is not None or sib.canceled is not None:
                continue
            self.cancel_job(sib, code=code, message=why, canceled_for=why)
            if resume:
                self._new_job(t, retry_of=sib, created=sib.canceled)

    def _maybe_retry(self, j: Job) -> None:
        """Fact 10.1: a finalized job that failed gets a new job of its task (retry_ancestor_id = it)
        while the experiment's allowedTaskRetries last; a node loss too with options.retry_node_loss."""
        e = j.experiment
        if j.task.latest_job is not j or e.canceled is not None or e.retries_used >= e.allowed_retries:
            return
        node = j.canceled is not None and j.canceled_code in (
            CANCEL_NODE_UNAVAILABLE,
            CANCEL_NODE_UNHEALTHY,
            CANCEL_HEALTHCHECK_FAILED,
        )
        failed = j.canceled is None and (j.failed is not None or j.exit_code not in (None, 0))
        if failed or (node and self.options.retry_node_loss):
            e.retries_used += 1
            self._new_job(j.task, retry_of=j)

    def delete_experiment(self, exp: str | Experiment) -> None:
        """What DeleteWorkloads does (fact 10.7): later reads answer NOT_FOUND; open log streams end."""
        with self.lock:
            e = exp if isinstance(exp, Experiment) else self.find_experiment(exp)
            for t in e.tasks:
                for j in t.jobs:
                    self.jobs.pop(j.id, None)
                self.tasks.pop(t.id, None)
            self.experiments.pop(e.id, None)
            self._touch()

    def delete_dataset(self, dataset: str) -> None:
        """What DeleteDatasets does; a job's result dataset may go while its experiment stays (10.14)."""
        with self.lock:
            self.datasets.pop(self.find_dataset(dataset).id)
            self._touch()

    # ------------------------------------------------------------- sessions
    def add_session(self, workspace: str, name: str, *, author: str, cluster: str | None = None) -> Session:
        """Arrange a session (environment workload; fact 8.2): listed and gettable, no tasks, no spec."""
        with self.lock:
            ws = self.find_workspace(workspace)
            sess = Session(
                self.new_id("env"),
                name,
                self.find_user(author).id,
                ws.id,
                self.now(),
                self.find_cluster(cluster).id if cluster else "",
            )
            self.sessions[sess.id] = sess
            return sess

    # ------------------------------------------------------------- datasets
    def create_dataset(
        self, workspace: str, name: str | None, *, author: str, description: str = "", budget: str = ""
    ) -> Dataset:
        """What `POST /api/v3/datasets?name=` does (fact 7.1); a name taken by the author -> Conflict."""
        with self.lock:
            ws = self.find_workspace(workspace)
            user = self.find_user(author)
            name = name or f"dataset-{next(self._ids)}"
            if any(d.name == name and d.author_id == user.id for d in self.datasets.values()):
                raise Conflict(f"dataset name {name!r} is already in use")
            d = Dataset(
                self.new_id("dst"),
                name,
                user.id,
                ws.id,
                self.now(),
                description=description,
                budget_id=budget,
                storage_id=self.new_id("sto"),
                storage_token=f"storage-token-{self._rand.getrandbits(64):016x}",
            )
            self.datasets[d.id] = d
            self._touch()
            return d

    def add_event(self, job, status: str, message: str, *, at: int | None = None) -> Event:
        """One occurrence of an event (`at`: when, ns; default now): ListJobEvents lists each, the
        summarized events fold repeats of the same status and message (earliest, latest, occurrences)."""
        with self.lock:
            j = self._job(job)
            now = self.now() if at is None else at
            j.raw_events.append((now, status, message))
            for ev in j.events:
                if ev.status == status and ev.message == message:
                    ev.earliest, ev.latest = min(ev.earliest, now), max(ev.latest, now)
                    ev.occurrences += 1
                    return ev
            ev = Event(status, message, now, now)
            j.events.append(ev)
            return ev

    def replay(
        self,
        job,
        *,
        created: int,
        waits: list[tuple[str, int, int]] = (),  # type: ignore[assignment]
        scheduled: int | None = None,
        started: int | None = None,
        lines: list[tuple[int, str]] = (),  # type: ignore[assignment]
        exited: int | None = None,
        exit_code: int = 0,
    ) -> Job:
        """A job's life at given times (ns), as a real queue and node make it: created, waiting passes
        (`wait_passes`), scheduled, started, its log lines, exited and finalized."""
        with self.lock:
            j = self._job(job)
            j.created = created
            self.wait_passes(j, list(waits))
            if scheduled is not None:
                self.schedule_job(j)
                j.scheduled = scheduled
                j.pinned = True  # its times are the test's: no AutoRun
            if started is not None:
                self.start_job(j)
                j.started = started
            if lines:
                self.append_logs(j, [m for _, m in lines], timestamps=[t for t, _ in lines])
            if exited is not None:
                self.finish_job(j, exit_code)
                j.exited = j.finalized = exited
            return j

    def wait_passes(self, job, passes: list[tuple[str, int, int]], *, every: float = 60.0) -> None:
        """A queued job's scheduling passes, as a real queue makes them (fact 11.1): each (message, from
        ns, to ns) repeated every `every` seconds, so the reason can change while the job waits."""
        for message, start, end in passes:
            t = start
            while t <= end:
                self.add_event(job, "queued", message, at=t)
                t += int(every * 1e9)

    # ------------------------------------------------------------------- logs
    def append_logs(
        self, job, lines: Iterable[str | bytes], *, timestamps: Iterable[int] | None = None
    ) -> None:
        """Append lines (no trailing newline needed). Timestamps default to now, strictly increasing."""
        with self.lock:
            j = self._job(job)
            ts_iter = iter(timestamps) if timestamps is not None else None
            pairs: list[tuple[int, bytes]] = []
            last = j.logs.last_ts
            for line in lines:
                msg = line.encode() if isinstance(line, str) else bytes(line)
                last = next(ts_iter) if ts_iter is not None else self._log_stamp(j, last)
                pairs.append((last, msg))
            j.logs.append(pairs)
            if pairs:
                self._last_ts = max(self._last_ts, pairs[-1][0])
            self._touch()

    def _log_stamp(self, j: Job, last: int | None) -> int:
        """Now; with options.tie_timestamps, `tie_burst` consecutive lines of a job share a timestamp."""
        o = self.options
        if o.tie_timestamps and j.tie_left > 0 and last is not None:
            j.tie_left -= 1
            return last
        j.tie_left = o.tie_burst - 1
        return self.now()

    def append_synthetic_logs(
        self,
        job,
        count: int,
        *,
        fmt: str = "line {i:06d} " + "x" * 60,
        step_ns: int = 1000,
        start: int | None = None,
        first_number: int = 0,
    ) -> None:
        """Append `count` generated lines lazily (O(1) memory): line i = fmt.format(i=first_number+i)."""
        with self.lock:
            j = self._job(job)
            begin = start if start is not None else self.now()
            j.logs.append_synthetic(count, begin, step_ns, fmt, first_number)
            self._last_ts = max(self._last_ts, begin + (count - 1) * step_ns)
            self._touch()

    # --------------------------------------------------------------- auto-run
    def set_auto(self, auto: AutoRun | None) -> None:
        """Drive every new job automatically (see AutoRun); None turns it off."""
        with self.lock:
            self.auto = auto

    def _auto_schedule(self, job: Job, auto: AutoRun) -> None:
        def alive() -> bool:
            return job.finalized is None

        def start():
            with self.lock:
                if not alive() or job.pinned:
                    return
                self.start_job(job)
                if job.failed is not None:  # failed at its start (Options.deleted_secret)
                    return
                if job.started is None:  # placed, waiting for its group (synchronized start): later
                    self._timer(0.05, start)
                    return
                if not auto.line_interval:
                    self.append_logs(job, lines)
                if auto.synthetic_lines:
                    self.append_synthetic_logs(job, auto.synthetic_lines)
            if auto.preempt_first_after is not None and not job.retry_ancestor_id:
                self._timer(auto.preempt_first_after, preempt)
            if auto.line_interval and auto.lines:
                self._timer(auto.line_interval, lambda: emit(0))
            elif run_for is not None:
                self._timer(run_for, finish)

        def emit(i: int):
            with self.lock:
                if not alive():
                    return
                self.append_logs(job, [lines[i]])
            if i + 1 < len(auto.lines):
                self._timer(auto.line_interval, lambda: emit(i + 1))
            elif run_for is not None:
                self._timer(run_for, finish)

        def preempt():
            with self.lock:
                if alive():
                    self.preempt_job(job)

        exit_code, run_for, lines = auto.exit_code, auto.run_for, auto.lines
        if auto.plan is not None:
            exit_code, run_for = auto.plan(job)
            where = {"rank": job.task.replica_rank, "attempt": job.task.jobs.index(job) + 1}
            lines = [line.format(**where) for line in lines]

        def finish():
            with self.lock:
                if alive():
                    self.finish_job(job, exit_code)

        self._timer(auto.start_after, start)

    def _timer(self, delay: float, fn) -> None:
        t = threading.Timer(delay, fn)
        t.daemon = True
        self._timers.append(t)
        t.start()

    def stop_timers(self) -> None:
        for t in self._timers:
            t.cancel()

    # ------------------------------------------------------------ names, misc
    def org_name(self, org_id: str) -> str:
        return self.orgs[org_id].name

    def workspace_full_name(self, ws: Workspace) -> str:
        return f"{self.orgs[ws.org_id].name}/{ws.name}"

    def budget_full_name(self, b: Budget) -> str:
        return f"{self.orgs[b.org_id].name}/{b.name}"

    def experiments_of(self, *, author: str | None = None) -> list[Experiment]:
        with self.lock:
            exps = list(self.experiments.values())
            if author is not None:
                uid = self.find_user(author).id
                exps = [e for e in exps if e.author_id == uid]
            return exps

    def wait_for(self, predicate, timeout: float = 60.0) -> bool:
        """Block until predicate() is true; re-checked on every state change and at least every 0.1 s.
        The predicate runs without the lock held, so it may make RPCs to this fake."""
        deadline = time.monotonic() + scaled(timeout)
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            with self.changed:
                self.changed.wait(min(left, 0.1))
        return True


def _propagates(j: Job, key: str) -> bool:
    """The task's spec sets `propagateFailure` / `propagatePreemption` (fact 10.3/10.4)."""
    return bool(j.task.spec.get(key))


def _allowed_retries(spec: dict[str, Any]) -> int:
    """`retry.allowedTaskRetries` of a spec; above the cap of 10: HTTP 400 (fact 10.1, inferred)."""
    n = int(((spec.get("retry") or {}).get("allowedTaskRetries")) or 0)
    if n > MAX_TASK_RETRIES:
        raise Invalid(f"retry.allowedTaskRetries is {n}; the maximum is {MAX_TASK_RETRIES}")
    return n


def _split(full_name: str, what: str) -> tuple[str, str]:
    if "/" not in full_name:
        raise ValueError(f"{what} name must be 'owner/name', got {full_name!r}")
    a, b = full_name.split("/", 1)
    return a, b
