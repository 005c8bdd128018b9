"""`BeakerBackend`: the `Backend` protocol over beaker-py (submit, get, list, logs, follow, stop, find-gpus)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import IO, Any

from beaker import beaker_pb2 as pb2
from beaker import exceptions as bx
from beaker.types import BeakerCancelationCode, BeakerSortOrder, BeakerWorkloadStatus, BeakerWorkloadType

from launchkit.application import Application
from launchkit.backends import Capability, LogQuery, RunInfo, RunStatus, Submission
from launchkit.backends.beaker import resolve as rs
from launchkit.backends.beaker.client import Connection
from launchkit.backends.beaker.logs import Flusher, stream_job
from launchkit.errors import (
    EXIT_JOB_FAILED,
    NotFoundError,
    PreconditionError,
    UsageError,
)

W = pb2.WorkloadStatus
_STATUS = {
    W.STATUS_SUBMITTED: RunStatus.queued,
    W.STATUS_QUEUED: RunStatus.queued,
    W.STATUS_READY_TO_START: RunStatus.queued,
    W.STATUS_INITIALIZING: RunStatus.starting,
    W.STATUS_RUNNING: RunStatus.running,
    W.STATUS_STOPPING: RunStatus.running,
    W.STATUS_UPLOADING_RESULTS: RunStatus.running,
    W.STATUS_SUCCEEDED: RunStatus.succeeded,
    W.STATUS_FAILED: RunStatus.failed,
    W.STATUS_CANCELED: RunStatus.canceled,
}
_PREEMPTION = {
    BeakerCancelationCode.system_preemption.as_pb2(),
    BeakerCancelationCode.user_preemption.as_pb2(),
}
STATUS_NAMES = [s.name for s in BeakerWorkloadStatus]


def _time(ts: Any) -> dt.datetime | None:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    return ts.ToDatetime(tzinfo=dt.UTC)


def job_status(job: Any) -> RunStatus:
    s = job.status
    if s.HasField("finalized") or s.HasField("exited") or s.HasField("canceled"):
        if s.HasField("canceled"):
            return RunStatus.preempted if s.canceled_code in _PREEMPTION else RunStatus.canceled
        return RunStatus.succeeded if s.exit_code == 0 and not s.HasField("failed") else RunStatus.failed
    if s.HasField("started"):
        return RunStatus.running
    if s.HasField("scheduled"):
        return RunStatus.starting
    return RunStatus.queued


def job_exit_code(job: Any) -> int:
    """The process exit code the CLI returns for a finished job."""
    st = job_status(job)
    if st == RunStatus.succeeded:
        return 0
    if st == RunStatus.failed:
        return job.status.exit_code or EXIT_JOB_FAILED
    return EXIT_JOB_FAILED  # canceled


class BeakerBackend:
    name = "beaker"
    capabilities = frozenset(Capability) - {Capability.uploads, Capability.unpushed}

    def __init__(
        self, app: Application | None = None, *, timeout: float | None = None, workspace: str | None = None
    ):
        self.app = app or Application()
        self._timeout = timeout if timeout is not None else self.app.beaker_timeout
        self._workspace = workspace
        self._conn: Connection | None = None

    # -- plumbing -------------------------------------------------------------------------------
    @property
    def conn(self) -> Connection:
        if self._conn is None:
            self._conn = Connection(self._timeout)
        return self._conn

    @property
    def beaker(self) -> Any:
        return self.conn.beaker

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def _errors(self):
        return self.conn.errors()

    def _workload(self, ref: str) -> Any:
        with self._errors():
            try:
                return self.beaker.workload.get(ref)
            except bx.BeakerWorkloadNotFound:
                pass
            if "/" not in ref:  # a bare name: the current user's experiment of that name
                try:
                    return self.beaker.workload.get(f"{self.conn.me().name}/{ref}")
                except bx.BeakerWorkloadNotFound:
                    pass
        raise NotFoundError(
            f"no Beaker experiment {ref!r}", hint="use an experiment id or user/name; see `launchkit list`"
        )

    def _info(self, wl: Any, *, author: str | None = None, job: Any = None) -> RunInfo:
        ex = wl.experiment
        status = _STATUS.get(wl.status, RunStatus.queued)
        exit_code = None
        started = finished = None
        if job is not None:
            started, finished = _time(job.status.started), _time(job.status.finalized)
            if status.finished or job_status(job).finished:
                exit_code = job_exit_code(job)
        return RunInfo(
            id=ex.id,
            name=ex.name,
            backend="beaker",
            status=status,
            exit_code=exit_code,
            created=_time(ex.created) or dt.datetime.now(dt.UTC),
            started=started,
            finished=finished,
            author=author,
            replicas=max(1, len(ex.tasks)),
            url=self.beaker.workload.url(wl),
            launchkit=rs.MARKER in ex.description,
        )

    # -- submit ---------------------------------------------------------------------------------
    def submit(self, submission: Submission) -> RunInfo:
        from launchkit.backends.beaker.submit import create_once

        with self._errors():
            resolved = rs.resolve(
                self.conn,
                submission.spec,
                workspace=submission.workspace or self._workspace,
                gpu_types=rs.spec_env_list(submission.spec, rs.ENV_GPU_TYPES),
                tags=rs.spec_env_list(submission.spec, rs.ENV_TAGS),
                auto_secrets=submission.auto_secrets,
            )
            for note in resolved.notes:
                self.app.info(note)
            self.conn.renew()
            wl = create_once(self.conn, resolved.workspace, submission.name, resolved.spec, self.app)
            return self._info(wl, author=self.conn.me().name)

    # -- lookups --------------------------------------------------------------------------------
    def get(self, run_ref: str) -> RunInfo:
        wl = self._workload(run_ref)
        with self._errors():
            jobs = [job for _, _, job in self._latest_jobs(wl) if job is not None]
            failed = (j for j in jobs if job_status(j).finished and job_exit_code(j) != 0)
            lead = next(failed, jobs[0] if jobs else None)  # a failing replica's exit code, else rank 0
            author = self.conn.user_names([wl.experiment.author_id])[wl.experiment.author_id]
            return self._info(wl, author=author, job=lead)

    def latest(self, *, author: str | None = None) -> RunInfo | None:
        """The newest experiment of `author` (default: the current user). Never someone else's."""
        with self._errors():
            user = self._user(author)
            for wl in self.beaker.workload.list(
                org=self.conn.org(),
                author=user,
                workspace=self._scope(),
                workload_type=BeakerWorkloadType.experiment,
                sort_order=BeakerSortOrder.descending,
                limit=1,
            ):
                if wl.experiment.author_id != user.id:  # defensive: the server must filter by author
                    continue
                return self._info(wl, author=user.name)
        return None

    def _scope(self, workspace: str | None = None) -> str | None:
        """The workspace `list` and `--latest` look in: given (-w, config), else Beaker's default
        workspace; None (no default at all): the whole organization."""
        return workspace or self._workspace or self.beaker.config.default_workspace or None

    def _group(self, ref: str) -> Any:
        """A group by id, or by name (NAME or owner/NAME) among the groups whose name contains it."""
        try:
            return self.beaker.group.get(ref)
        except (bx.BeakerGroupNotFound, ValueError):
            pass
        short = ref.split("/")[-1]
        for g in self.beaker.group.list(org=self.conn.org(), name_or_description=short):
            if ref in (g.name, g.full_name, g.id):
                return g
        raise NotFoundError(f"no Beaker group {ref!r}", hint="give the group's id or name")

    def _group_runs(self, group: str) -> list[Any]:
        """The group's experiments (ListGroupTaskMetrics, then GetWorkload each), newest first."""
        g = self._group(group)
        ids = dict.fromkeys(m.experiment_id for m in self.beaker.group.list_task_metrics(g))
        wls = [self._workload(eid) for eid in ids]
        return sorted(wls, key=lambda wl: wl.experiment.created.ToNanoseconds(), reverse=True)

    def _user(self, name: str | None) -> Any:
        if name is None or name == self.conn.me().name:
            return self.conn.me()
        try:
            return self.beaker.user.get(name)
        except bx.BeakerUserNotFound:
            raise NotFoundError(f"no Beaker user {name!r}", hint="check --author") from None

    def list_runs(
        self,
        *,
        limit: int = 20,
        statuses: list[RunStatus] | list[str] | None = None,
        author: str | None = None,
        text: str | None = None,
        max_age: dt.timedelta | None = None,
        include_all: bool = False,
        mine: bool = False,
        workspace: str | None = None,
        group: str | None = None,
    ) -> list[RunInfo]:
        """One ListWorkloads query (paged by the server) + one GetUser per unseen author.
        With `group`: the group's experiments, filtered here (as gantry's `list -g` does)."""
        if group is not None:
            return self._list_group(group, limit, statuses, author, text, max_age, include_all, mine)
        beaker_statuses = _beaker_statuses(statuses)
        with self._errors():
            user = self._user(author) if (author or mine) else None
            ws = self._scope(workspace)
            # Without --all, the server filters on the launchkit marker; --text then filters locally.
            server_text = text if (include_all or text) else rs.MARKER
            created_after = dt.datetime.now(dt.UTC) - max_age if max_age else None
            rows = []
            for wl in self.beaker.workload.list(
                org=self.conn.org(),
                author=user,
                workspace=ws,
                created_after=created_after,
                workload_type=BeakerWorkloadType.experiment,
                statuses=beaker_statuses,
                name_or_description=server_text,
                sort_order=BeakerSortOrder.descending,
                limit=limit if (include_all or not text) else None,
            ):
                if not include_all and rs.MARKER not in wl.experiment.description:
                    continue
                rows.append(wl)
                if len(rows) >= limit:
                    break
            names = self.conn.user_names([wl.experiment.author_id for wl in rows])
            return [self._info(wl, author=names[wl.experiment.author_id]) for wl in rows]

    def _list_group(
        self,
        group: str,
        limit: int,
        statuses: list[RunStatus] | list[str] | None,
        author: str | None,
        text: str | None,
        max_age: dt.timedelta | None,
        include_all: bool,
        mine: bool,
    ) -> list[RunInfo]:
        wanted = {RunStatus(s) for s in statuses or []}
        with self._errors():
            user = self._user(author) if (author or mine) else None
            oldest = dt.datetime.now(dt.UTC) - max_age if max_age else None
            rows = []
            for wl in self._group_runs(group):
                e = wl.experiment
                if not include_all and rs.MARKER not in e.description:
                    continue
                if user is not None and e.author_id != user.id:
                    continue
                if text and text not in e.name and text not in e.description:
                    continue
                if oldest and (_time(e.created) or oldest) < oldest:
                    continue
                rows.append(wl)
            names = self.conn.user_names([wl.experiment.author_id for wl in rows])
            infos = [self._info(wl, author=names[wl.experiment.author_id]) for wl in rows]
        return [r for r in infos if not wanted or r.status in wanted][:limit]

    # -- jobs and logs --------------------------------------------------------------------------
    def _latest_jobs(
        self, wl: Any, task: str | None = None, run: int | None = None
    ) -> list[tuple[int, Any, Any]]:
        """[(replica rank, task, latest job or None)] sorted by rank; one ListJobs per task.
        `run` N (logs --run): the task's Nth job (1 = its first) instead of the latest."""
        tasks = [t for t in wl.experiment.tasks if task is None or t.name == task]
        if task is not None and not tasks:
            names = ", ".join(t.name for t in wl.experiment.tasks)
            raise NotFoundError(f"experiment has no task {task!r}", hint=f"tasks: {names}")
        org = self.conn.org()
        out = []
        for i, t in enumerate(tasks):
            if run is None:
                jobs = list(self.beaker.job.list(org=org, task=t, limit=1))
                job = jobs[0] if jobs else None
            else:  # newest first from the server (ascending is not implemented there)
                jobs = list(self.beaker.job.list(org=org, task=t))[::-1]
                if not 1 <= run <= len(jobs):
                    raise NotFoundError(
                        f"task {t.name} has no run {run}",
                        hint=f"it has {len(jobs)} run(s): --run 1..{len(jobs)}",
                    )
                job = jobs[run - 1]
            rank = i
            for src in (job.system_details if job is not None else None, t.system_details):
                if src is not None and src.HasField("replica_group_details"):
                    rank = src.replica_group_details.rank
                    break
            out.append((rank, t, job))
        return sorted(out, key=lambda r: r[0])

    def _select(
        self, wl: Any, replica: int | None, task: str | None, run: int | None = None
    ) -> list[tuple[int, Any, Any]]:
        rows = self._latest_jobs(wl, task, run)
        if replica is not None:
            rows = [r for r in rows if r[0] == replica]
            if not rows:
                raise NotFoundError(
                    f"experiment {wl.experiment.id} has no replica {replica}",
                    hint=f"replicas: 0..{len(wl.experiment.tasks) - 1}",
                )
        return rows

    def write_logs(self, run: RunInfo, query: LogQuery, out: IO[bytes], *, all_tasks: bool = False) -> None:
        """Raw log bytes to `out`: every replica of the first task (or of `query.task`, or of all tasks).

        Several replicas: one after the other, each line prefixed `[rank] `. Memory stays flat.
        """
        if query.tail is not None and query.since is not None:
            raise UsageError("--tail and --since cannot be combined", hint="drop one")
        wl = self._workload(run.id)
        with self._errors():
            task = query.task
            if task is None and not (all_tasks or query.all_tasks) and wl.experiment.tasks:
                task = wl.experiment.tasks[0].name
            rows = self._select(wl, query.replica, task, query.run)
            since_ns = _epoch_ns(query.since) if query.since else None
            several_tasks = len({t.name for _, t, _ in rows}) > 1
            for rank, t, job in rows:
                if job is None:
                    self.app.warn(f"replica {rank} ({t.name}) has no job yet")
                    continue
                label = f"{t.name}/{rank}" if several_tasks else str(rank)
                prefix = f"[{label}] ".encode() if len(rows) > 1 else b""
                stream_job(
                    self.conn,
                    job.id,
                    out.write,
                    prefix=prefix,
                    tail=query.tail,
                    since_ns=since_ns,
                    head=query.head,
                    timestamps=query.timestamps,
                )
                out.flush()

    def follow(
        self,
        run: RunInfo,
        out: IO[bytes],
        *,
        replica: int | None = None,
        all_replicas: bool = False,
        tail: int | None = None,
        task: str | None = None,
    ) -> int:
        """Events until start, then raw logs until the job finishes (through preemptions).

        Returns the job's exit code (the first non-zero one with several replicas). Ctrl-C raises
        KeyboardInterrupt to the caller (the job keeps running).
        """
        wl = self._workload(run.id)
        with self._errors():
            rows = self._select(wl, replica, task)
            if not all_replicas:
                rows = rows[:1]
            with Flusher(out):
                if len(rows) == 1:
                    _, t, job = rows[0]
                    return self._follow_task(t, job, out.write, b"", tail)
                return self._follow_many(rows, out, tail)

    def _follow_many(self, rows: list[tuple[int, Any, Any]], out: IO[bytes], tail: int | None) -> int:
        lock = threading.Lock()
        codes: dict[int, int] = {}
        errors: list[BaseException] = []

        def write_locked(data: bytes) -> None:
            with lock:
                out.write(data)

        def worker(rank: int, t: Any, job: Any) -> None:
            try:
                codes[rank] = self._follow_task(t, job, write_locked, f"[{rank}] ".encode(), tail)
            except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
                errors.append(e)

        threads = [threading.Thread(target=worker, args=row, daemon=True) for row in rows]
        for th in threads:
            th.start()
        for th in threads:
            while th.is_alive():
                th.join(0.2)
        if errors:
            raise errors[0]
        return next((codes[r] for r in sorted(codes) if codes[r] != 0), 0)

    def _follow_task(self, task: Any, job: Any, write: Any, prefix: bytes, tail: int | None) -> int:
        seen_preempted: set[str] = set()
        org = self.conn.org()
        while True:
            job = self._wait_for_job(task, job, seen_preempted, org)
            job = self._show_events_until_started(job, prefix)
            watch = _JobWatch(self.conn, job)
            if job.status.HasField("finalized"):
                stream_job(self.conn, job.id, write, prefix=prefix, tail=tail)
            else:
                stream_job(
                    self.conn,
                    job.id,
                    write,
                    prefix=prefix,
                    tail=tail,
                    follow=True,
                    is_finalized=watch.finalized,
                )
            job = watch.job
            while not job.status.HasField("finalized"):
                time.sleep(0.5)
                job = self.beaker.job.get(job.id)
                self.conn.renew()
            if job_status(job) == RunStatus.preempted:
                self.app.info(
                    f"{prefix.decode()}job {job.id} was preempted; following the next job of task {task.name}"
                )
                seen_preempted.add(job.id)
                job, tail = None, None
                continue
            if job_status(job) == RunStatus.failed and job.status.message:
                self.app.info(f"{prefix.decode()}job {job.id}: {job.status.message}")
            return job_exit_code(job)

    def _wait_for_job(self, task: Any, job: Any, seen: set[str], org: Any) -> Any:
        announced = False
        while job is None or job.id in seen:
            jobs = list(self.beaker.job.list(org=org, task=task, limit=1))
            self.conn.renew()
            job = jobs[0] if jobs else None
            if job is None or job.id in seen:
                if not announced:
                    self.app.info(f"waiting for a job for task {task.name}...")
                    announced = True
                time.sleep(1.0)
        return job

    def _show_events_until_started(self, job: Any, prefix: bytes) -> Any:
        shown: set[tuple[str, str]] = set()
        while True:
            for ev in self.beaker.job.list_summarized_events(job, sort_order=BeakerSortOrder.ascending):
                key = (ev.status, ev.latest_message)
                if key not in shown:
                    shown.add(key)
                    self.app.info(f"{prefix.decode()}  ✓ {ev.latest_message or ev.status}")
            self.conn.renew()
            if job.status.HasField("started") or job.status.HasField("finalized"):
                return job
            time.sleep(0.5)
            job = self.beaker.job.get(job.id)

    # -- stop -----------------------------------------------------------------------------------
    def stop(self, run: RunInfo) -> RunInfo:
        """Cancel the run: only ever the current user's."""
        wl = self._workload(run.id)
        with self._errors():
            me = self.conn.me()
            if wl.experiment.author_id != me.id:
                owner = self.conn.user_names([wl.experiment.author_id])[wl.experiment.author_id]
                raise PreconditionError(
                    f"experiment {wl.experiment.id} belongs to {owner}, not to you ({me.name})",
                    hint="launchkit only stops your own jobs",
                )
            self.beaker.workload.cancel(wl)
            wl = self.beaker.workload.get(wl.experiment.id)
            return self._info(wl, author=me.name)

    # -- find-gpus ------------------------------------------------------------------------------
    def find_gpus(
        self, *, gpu_types: list[str] | None = None, include_all: bool = False
    ) -> list[dict[str, Any]]:
        """Clusters that take batch jobs: free GPUs, used/total slots, GPU types of all nodes."""
        with self._errors():
            clusters = [
                c
                for c in self.beaker.cluster.list(
                    org=self.conn.org(),
                    sort_field="free_gpus",
                    sort_order=BeakerSortOrder.descending,
                    include_cluster_occupancy=True,
                )
                if rs.takes_batch_jobs(c)
            ]
            if not include_all:
                clusters = [c for c in clusters if c.cluster_occupancy.slot_counts.available > 0]
            types = rs.node_gpu_types(self.conn, clusters)
        rows = []
        wanted = [g.lower() for g in gpu_types or []]
        for c in clusters:
            t = types.get(c.id, [])
            if wanted and not any(w in x.lower() for w in wanted for x in t):
                continue
            sc = c.cluster_occupancy.slot_counts
            rows.append(
                {
                    "cluster": rs.cluster_full_name(c),
                    "free_gpus": sc.available,
                    "used_slots": sc.assigned,
                    "total_slots": sc.total - sc.cordoned,
                    "cordoned": sc.cordoned,
                    "gpu_types": t,
                    "tags": list(c.tags),
                }
            )
        rows.sort(key=lambda r: (-r["free_gpus"], r["cluster"]))
        return rows

    # -- URLs (open) ----------------------------------------------------------------------------
    def url_for(self, target: str | None) -> str:
        """URL of an experiment, workspace or cluster (tried in that order); none: the default workspace."""
        b = self.beaker
        with self._errors():
            if target is None:
                name = rs.workspace_name(self.conn, self._workspace)
                return b.workspace.url(rs.get_workspace(self.conn, name))
            try:
                return b.workload.url(self._workload(target))
            except NotFoundError:
                pass
            if "/" in target:
                try:
                    return b.workspace.url(b.workspace.get(target))
                except bx.BeakerWorkspaceNotFound:
                    pass
            try:
                c = b.cluster.get(target if "/" in target else f"{b.config.default_org}/{target}")
                return f"{b.config.agent_address}/orgs/{c.organization_name or b.config.default_org}/clusters/{c.name}"
            except bx.BeakerClusterNotFound:
                pass
            for kind in ("image", "dataset"):  # gantry's order: ..., image, dataset, group
                try:
                    service = getattr(b, kind)
                    return str(service.url(service.get(target)))
                except (bx.BeakerImageNotFound, bx.BeakerDatasetNotFound, ValueError):
                    pass
            try:
                return str(b.group.url(self._group(target)))
            except NotFoundError:
                pass
        raise NotFoundError(
            f"{target!r} is not an experiment, workspace, cluster, image, dataset or group on Beaker",
            hint="use an id or name, e.g. an experiment id, org/workspace or org/cluster",
        )


class _JobWatch:
    """The latest state of a job; `finalized()` refreshes it (called when a follow stream ends)."""

    def __init__(self, conn: Connection, job: Any):
        self.conn = conn
        self.job = job

    def finalized(self) -> bool:
        self.job = self.conn.beaker.job.get(self.job.id)
        self.conn.renew()
        return self.job.status.HasField("finalized")


def _epoch_ns(t: dt.datetime) -> int:
    """Exact nanoseconds since the epoch (no float rounding); naive times are local time."""
    if t.tzinfo is None:
        t = t.astimezone()
    return (t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1) * 1000


def _beaker_statuses(statuses: Any) -> list[BeakerWorkloadStatus] | None:
    if not statuses:
        return None
    out = []
    for s in statuses:
        v = s.value if isinstance(s, RunStatus) else str(s).lower().replace("-", "_")
        if v in STATUS_NAMES:
            out.append(BeakerWorkloadStatus[v])
            continue
        mapped = [k for k, rs_ in _STATUS.items() if rs_.value == v]
        if not mapped:
            raise UsageError(
                f"unknown status {s!r}",
                hint="one of: " + ", ".join(STATUS_NAMES + [r.value for r in RunStatus]),
            )
        out += [BeakerWorkloadStatus(m) for m in mapped]
    return list(dict.fromkeys(out))


def _secrets_api(backend: BeakerBackend, workspace: str | None) -> tuple[Any, str]:
    conn = backend.conn
    name = rs.workspace_name(conn, workspace or backend._workspace)
    return rs.get_workspace(conn, name), name


def set_secret(backend: BeakerBackend, name: str, value: str, workspace: str | None = None) -> str:
    """Write a workspace secret; returns the workspace name. The value is never logged or echoed."""
    with backend._errors():
        ws, ws_name = _secrets_api(backend, workspace)
        backend.beaker.secret.write(name, value, workspace=ws)
        return ws_name


def secret_names(backend: BeakerBackend, workspace: str | None = None) -> list[str]:
    with backend._errors():
        ws, _ = _secrets_api(backend, workspace)
        return sorted(s.name for s in backend.beaker.secret.list(workspace=ws))
