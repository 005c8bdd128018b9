"""`BeakerBackend`: the `Backend` protocol over beaker-py (submit, get, list, logs, follow, stop,
find-gpus)."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, Any

from beaker import beaker_pb2 as pb2
from beaker import exceptions as bx
from beaker.types import BeakerSortOrder, BeakerWorkloadStatus, BeakerWorkloadType

from launchkit.application import Application
from launchkit.backends import LogQuery, Posting, RunInfo, RunStatus, Submission, registry
from launchkit.backends.beaker import identity, launches
from launchkit.backends.beaker import resolve as rs
from launchkit.backends.beaker import runview as rv
from launchkit.backends.beaker.client import Connection
from launchkit.backends.beaker.logs import (
    Flusher,
    command_started,
    head_records,
    stream_job,
    tail_records,
)
from launchkit.backends.beaker.prepare import ask_ahead, prepare
from launchkit.backends.beaker.results import download
from launchkit.backends.beaker.runtime_dataset import RuntimeDatasets, make_runtime, mount_runtime
from launchkit.backends.beaker.scheduling import (
    WaitTeller,
    elsewhere,
    find_starts,
    list_reasons,
    no_estimate,
    nodes_now,
    queue_ahead,
    summarized,
    synchronized_wait,
    wait_history,
    waiting_reason,
)
from launchkit.backends.beaker.submit import check_name, create_once
from launchkit.backends.beaker.upload import mount_uploads
from launchkit.backends.ending import (
    LAUNCHKIT_STOP,
    SETUP_STEPS,
    WATCHDOG_EXIT,
    launchkit_stopped,
    watchdog_stop,
)
from launchkit.backends.progress import (
    HEAD_LINES,
    TAIL_LINES,
    attempt_progress,
    last_progress,
)
from launchkit.backends.protocol import AttemptDetail, Cause, EndReason, Progress
from launchkit.core import digest, runs
from launchkit.core import phases as ph
from launchkit.core.estimate import start_estimate
from launchkit.core.fit import unknown_gpu_types
from launchkit.core.specview import SpecView
from launchkit.core.tasks import label_of
from launchkit.errors import (
    LaunchkitError,
    NotFoundError,
    PreconditionError,
    UsageError,
)
from launchkit.runtime.node.policy import ENV as POLICY_ENV
from launchkit.runtime.node.policy import Policy, PolicyError

W = pb2.WorkloadStatus
_STATUS = {
    W.STATUS_SUBMITTED: RunStatus.queued,
    W.STATUS_QUEUED: RunStatus.queued,
    W.STATUS_READY_TO_START: RunStatus.queued,
    W.STATUS_INITIALIZING: RunStatus.starting,
    W.STATUS_RUNNING: RunStatus.running,
    W.STATUS_STOPPING: RunStatus.stopping,
    W.STATUS_UPLOADING_RESULTS: RunStatus.uploading,
    W.STATUS_SUCCEEDED: RunStatus.succeeded,
    W.STATUS_FAILED: RunStatus.failed,
    W.STATUS_CANCELED: RunStatus.canceled,
}
STATUS_NAMES = [s.name for s in BeakerWorkloadStatus]
_HAD_JOB = set(_STATUS) - {W.STATUS_SUBMITTED}  # a task's status once it has a job
_WAITING = {W.STATUS_SUBMITTED, W.STATUS_QUEUED, W.STATUS_READY_TO_START}  # not placed yet
RETRY_GRACE = 60.0  # seconds a due retry may take to appear before it is given up on (core/runs.py)
WAIT_POLL = 1.0  # seconds between looks while waiting for a job (gantry polls every second)
# the watchdog's `[launchkit] stopped:` line is among its job's last lines (after it: a --ray head's
# shutdown output and the runtime's last line)
WATCHDOG_TAIL = 20
PROGRESS_ROWS = 5  # `list`: the newest running rows whose progress is read (2 calls each, at once)
PAGE = 50  # rows in a page of ListWorkloads (beaker-py asks for its MAX_PAGE_SIZE, 50)
Rows = list[tuple[int, Any, list[Any]]]  # (replica rank, task, its jobs newest first)


def _time(ts: Any) -> dt.datetime | None:
    if ts is None or (ts.seconds == 0 and ts.nanos == 0):
        return None
    out: dt.datetime = ts.ToDatetime(tzinfo=dt.UTC)
    return out


class BeakerBackend:
    name = "beaker"
    capabilities = registry.BY_NAME[name].capabilities

    def __init__(
        self, app: Application | None = None, *, timeout: float | None = None, workspace: str | None = None
    ):
        self.app = app or Application()
        self._timeout = timeout if timeout is not None else self.app.beaker_timeout
        self._workspace = workspace
        self._conn: Connection | None = None
        self._prepared_workspace: tuple[str, Any] | None = None  # (name, pb2.Workspace) from prepare()
        self._runtime: Any = None  # runtime_dataset.RuntimeDatasets: prepare() finds, submit() makes
        self._session = False  # preparing for `launchkit session`: sessions-only clusters allowed
        self._asked_ahead = False  # ask_ahead() sent this launch's look-ups: prepare() takes them
        self._seen: dict[str, tuple[Any, Rows]] = {}  # get() -> follow()
        self._leads: dict[str, Any] = {}  # list: a running row's replica 0 job (_rows_progress)
        self._listed: dict[str, Any] = {}  # list: experiment id -> its workload (secret_values reuses it)
        self._secret_reads: dict[tuple[str, str], str | None] = {}  # (workspace id, name) -> value, in memory
        self._secret_names: dict[str, list[str]] | None = None  # experiment id -> its spec's secrets
        self._final: dict[str, RunInfo] = {}  # runs follow() saw finish
        self._retries: dict[str, int] = {}  # experiment id -> allowed task retries (from its spec)
        self._snapshot: tuple[Any, Rows] | None = None  # follow: the run as its last part to end saw it
        self._snapshot_lock = threading.Lock()
        self._stops: dict[str, str] | None = None  # experiment id -> launchkit's reason (launches.py)
        self.clock: Callable[[], float] = time.time  # seconds since the epoch (retry grace)
        self.retry_grace = RETRY_GRACE
        self.sleep: Callable[[float], None] = time.sleep

    # -- plumbing -------------------------------------------------------------------------------
    @property
    def conn(self) -> Connection:
        if self._conn is None:
            config = self.app.config if self._timeout is None else None  # read once, on the app
            self._conn = Connection(self._timeout, config=config)
        return self._conn

    @property
    def beaker(self) -> Any:
        return self.conn.beaker

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def _errors(self) -> AbstractContextManager[None]:
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

    def _info(
        self,
        wl: Any,
        *,
        author: str | None = None,
        rows: Rows | None = None,
        events: bool = False,
        budget: bool | None = None,
        waiting: Any = None,
        launchkit: bool | None = None,
    ) -> RunInfo:
        """The run as commands show it. With `rows` (its tasks' jobs), status, exit code, end reason and
        attempts come from the run model (core/runs.py): the newest attempt of every replica and task,
        and the one outcome computed from them. `events`: read a never-scheduled job's events.
        `budget`: read the retry budget (None: when a newest attempt failed; False: never, `list`).
        `launchkit`: whether it is launchkit's, when already told (identity.py; else from `wl`)."""
        ex = wl.experiment
        status = _STATUS.get(wl.status, RunStatus.queued)
        exit_code = started = finished = end = message = None
        view: runs.RunView | None = None
        attempts = 1
        retry = None
        if rows is not None:
            complete = all(js for _, _, js in rows) or not any(js for _, _, js in rows)
            view, out = self._outcome(wl, rows, complete=complete, budget=budget)
            attempts = max(1, out.attempts)
            retry = runs.attempt_text(view)
            pb = {j.id: j for _, _, js in rows for j in js}
            starts = [rj.started for rj in view.jobs if rj.started is not None]
            started = dt.datetime.fromtimestamp(min(starts), dt.UTC) if starts else None
            ended = rv.status_of(out)
            if complete and ended is not None:
                status = ended
            elif complete and status.finished:
                status = RunStatus.queued  # a retry is due: Beaker makes its job
            elif status == RunStatus.canceled and ended == RunStatus.preempted:
                status = ended
            if out.going and out.waiting_for:
                message = f"waiting for {out.waiting_for}"
            if status.finished or status == RunStatus.preempted:
                ends = [rj.finished for rj in view.latest if rj.finished is not None]
                finished = dt.datetime.fromtimestamp(max(ends), dt.UTC) if ends else None
                cause = pb.get(out.cause.id) if out.cause is not None else None
                seen = self._never_scheduled_events(cause) if events else None
                command_started = self._command_started(cause) if cause is not None else False
                stopped = self._watchdog_stop(cause) if cause is not None else None
                end = rv.run_end(view, out, ex.id, pb, events=seen, started=command_started, stopped=stopped)
                exit_code = out.exit_code
        elif status == RunStatus.canceled and not any(t.status in _HAD_JOB for t in ex.tasks):
            view = rv.view_of(wl, [])  # canceled before any job of it existed (no job to read)
            end = rv.run_end(view, runs.outcome(view), ex.id, {})
        if end is not None and end.kind == Cause.canceled and end.by != "Beaker":
            end = self._launchkit_stop(ex) or end  # launchkit's own stop (stop(reason=))
        phases, hours = self._phases(wl, rows)  # from the jobs read (no call)
        tasks = {rv.task_name(t) for t in ex.tasks}  # (ex.tasks: one per replica of each)
        detail: list[digest.TaskState] = []  # a sweep's tasks (core/digest.py): each from its jobs read,
        if events and rows is not None and view is not None and len(tasks) > 1:  # else its status
            read = {rv.task_name(t) for _, t, js in rows if js}
            detail = digest.tasks_of(view, now=self.clock(), grace=self.retry_grace, only=read)
            unread = {rv.task_name(t): t.status for t in ex.tasks if rv.task_name(t) not in read}
            detail += [
                digest.TaskState(name=n, status=_STATUS.get(st, RunStatus.queued)) for n, st in unread.items()
            ]
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
            tasks=max(1, len({t.name for t in ex.tasks})),
            url=self.beaker.workload.url(wl),
            launchkit=identity.from_listing(wl) is True if launchkit is None else launchkit,
            message=message,
            end=end,
            task_statuses=_task_statuses(ex.tasks),
            tasks_detail=detail,
            attempts=attempts,
            retry=retry,
            waiting=waiting if status == RunStatus.queued else None,
            phases=phases,
            gpu_hours=hours,
        )

    def _launchkit_stop(self, ex: Any) -> EndReason | None:
        """launchkit's own stop of the experiment (stop(reason=)): this machine's record of it, which no
        job can reach (launches.py), else the line stop() added to the description, while no job has
        rewritten it (fact sheet 11.8)."""
        if self._stops is None:
            self._stops = launches.stop_reasons(self.conn.address)
        why = self._stops.get(ex.id)
        return launchkit_stopped(why) if why is not None else _launchkit_stop(ex.description)

    def _outcome(
        self, wl: Any, rows: Rows, *, complete: bool = True, budget: bool | None = None
    ) -> tuple[runs.RunView, runs.Outcome]:
        """The run model of `rows` and its outcome. The retry budget (the spec's, one call) is read only
        when it matters: a newest attempt that failed or lost its node (`budget` True: always; False:
        never, as `list` does: a retry Beaker has not made yet is not waited for there)."""
        retries = 0
        latest = [rv.record(t, js[0]) for _, t, js in rows if js]
        if budget is None:  # (a retried run: its attempts are told against it)
            retried = any(len(js) > 1 for _, _, js in rows)
            budget = retried or any(j.state.finished and j.spends_retry for j in latest)
        if budget:
            retries = self._allowed_retries(wl)
        view = rv.view_of(wl, [(t, js) for _, t, js in rows], allowed_retries=retries, complete=complete)
        if not complete:  # some tasks' jobs were not read: the workload's status says whether it ended
            return view, runs.outcome(view, now=float("inf"), grace=0.0)
        return view, runs.outcome(view, now=self.clock(), grace=self.retry_grace)

    def _allowed_retries(self, wl: Any) -> int:
        eid = wl.experiment.id
        if eid not in self._retries:
            try:
                retry = self.beaker.experiment.get_spec(wl).retry
                self._retries[eid] = int(retry.allowed_task_retries or 0) if retry else 0
            except (bx.BeakerError, ValueError, TypeError) as e:  # a spec beaker-py cannot parse
                self.app.debug(f"no retry budget for {eid}: {e}")
                self._retries[eid] = 0
        return self._retries[eid]

    # -- submit ---------------------------------------------------------------------------------
    def ask_ahead(self, workspace: str | None, *, images: Sequence[str], budget: str | None) -> None:
        """LooksAhead: the look-ups of prepare() that need no spec, sent now (prepare.ask_ahead)."""
        try:
            with self._errors():
                self.conn.forget()  # each launch asks afresh (a Python API caller may add a secret)
                name = rs.workspace_name(self.conn, workspace or self._workspace)
                self._runtime_datasets().find_soon(name)
                ask_ahead(self.conn, name, images=images, budget=budget)
        except LaunchkitError as e:  # no credentials, no workspace: prepare() says so where it asks
            self.app.debug(f"nothing asked ahead: {e}")
            return
        self._asked_ahead = True

    def drop_ahead(self) -> None:
        """LooksAhead: the look-ups asked ahead given up (Connection.abandon)."""
        if self._asked_ahead and self._conn is not None:
            self._asked_ahead = False
            self._conn.abandon()

    def prepare(self, submission: Submission) -> Submission:
        if submission.prepared:
            return self._made(submission) if submission.launching else submission
        check_name(submission.name)  # Beaker's limit, before anything is asked or sent
        with self._errors():
            if not self._asked_ahead:  # each launch asks afresh (a Python API caller may add a secret)
                self.conn.forget()
            self._asked_ahead = False
            if not self._session:
                name = rs.workspace_name(self.conn, submission.workspace or self._workspace)
                self._runtime_datasets().find_soon(name)
            p = prepare(
                self.conn,
                submission.spec,
                workspace=submission.workspace or self._workspace,
                auto_secrets=submission.auto_secrets,
                app=self.app,
                session=self._session,
                clock=self.clock,
            )
            if not self._session:  # a session runs no entrypoint (core/session.py drops the mount)
                # read-only: by id, or by the name submit() creates it under (the workspace's name
                # remembered for offline dry runs)
                names = (p.workspace_name,)
                mount_runtime(self._runtime_datasets(), p.workspace, p.spec, names=names)
        for note in p.notes:
            self.app.info(note)
        self._prepared_workspace = (p.workspace_name, p.workspace)
        update = {"spec": p.spec, "workspace": p.workspace_name, "prepared": True, "start_now": p.start_now}
        out = submission.model_copy(update=update)
        return self._made(out) if submission.launching else out

    def _made(self, submission: Submission) -> Submission:
        """A prepared launch's spec with the runtime dataset it mounts by name made, and mounted by id
        (launch.ready: after the plan line), so the spec --save-spec writes is the one sent."""
        if self._session:  # a session runs no entrypoint (core/session.py drops the mount)
            return submission.model_copy(update={"launching": False})
        with self._errors():
            spec = submission.spec.copy()
            ws = self._prepared_ws(submission)
            make_runtime(self._runtime_datasets(), ws, spec, names=(submission.workspace or "",))
        return submission.model_copy(update={"spec": spec, "launching": False})

    def submit(self, submission: Submission) -> RunInfo:
        submission = self.prepare(submission)
        with self._errors():
            ws = self._prepared_ws(submission)
            spec = self._upload(submission, ws)
            rs.create_groups(self.conn, ws, spec)  # a missing --group is created (as gantry)
            wl = create_once(self.conn, ws, submission.name, spec, self.app)
            author = wl.experiment.author_id  # its name from the cache: no GetUser after the create
            me = self.conn.user_names([author])[author]
            launches.record(self.conn.address, me, wl.experiment.id, wl.experiment.name, submission.workspace)
            return self._info(wl, author=me)

    def session_spec(self, submission: Submission) -> tuple[str, SpecView]:
        """What `launchkit session` hands the `beaker` CLI: the workspace's full name and the spec as
        submit() would send it, `--upload` datasets made (or reused) and mounted by id. Sessions-only
        clusters (max task timeout 0) are allowed here."""
        self._session = True
        submission = self.prepare(submission)
        with self._errors():
            ws = self._prepared_ws(submission)
            spec = self._upload(submission, ws)
            name = ws.name if "/" in ws.name else f"{ws.owner_org.name}/{ws.name}"
            return name, spec

    def session_placement(self, submission: Submission) -> list[str] | None:
        self._session = True
        return self.placement(submission)

    def _prepared_ws(self, submission: Submission) -> Any:
        """The pb2.Workspace of a prepared submission (the one prepare() just fetched, if it is)."""
        known = self._prepared_workspace
        if known is not None and known[0] == submission.workspace:
            return known[1]
        return rs.get_workspace(self.conn, rs.workspace_name(self.conn, submission.workspace))

    def _runtime_datasets(self) -> Any:
        if self._runtime is None:
            self._runtime = RuntimeDatasets(self.conn, self.app)
        return self._runtime

    def _upload(self, submission: Submission, ws: Any) -> SpecView:
        """The prepared spec with the runtime dataset made if prepare() found none, and each `--upload`
        placeholder replaced by its dataset's id. Only at submit: prepare() (and so a dry run) never
        creates datasets."""
        spec = submission.spec.copy()
        make_runtime(self._runtime_datasets(), ws, spec, names=(submission.workspace or "",))
        if submission.uploads:
            mount_uploads(self.conn, self.app, ws, spec, submission.uploads)
        self.conn.renew()  # hashing and uploading may take long: a fresh deadline for the create
        return spec

    # -- optional interfaces (protocol.py: Placement, SecretStore, Accounts) ---------------------
    def placement(self, submission: Submission) -> list[str] | None:
        """The clusters the spec's constraints resolve to (prepare() reuses the answer: no new calls)."""
        with self._errors():
            return rs.placement(self.conn, submission.spec, session=self._session)

    def _secret_workspace(self, workspace: str | None) -> tuple[Any, str]:
        name = rs.workspace_name(self.conn, workspace or self._workspace)
        return rs.get_workspace(self.conn, name), name

    def set_secret(self, name: str, value: str, workspace: str | None = None) -> str:
        """Write a workspace secret; returns the workspace name. The value is never logged or echoed."""
        with self._errors():
            ws, ws_name = self._secret_workspace(workspace)
            self.beaker.secret.write(name, value, workspace=ws)
            return ws_name

    def secret_names(self, workspace: str | None = None) -> list[str]:
        with self._errors():
            ws, _ = self._secret_workspace(workspace)
            return sorted(s.name for s in self.beaker.secret.list(workspace=ws))

    def secret_values(self, run: RunInfo) -> dict[str, str | None]:
        """The values of the secrets the experiment's spec references (GetExperimentYamlSpec, read once
        per experiment on this machine: launches.secret_names), read from its workspace (one GET per
        secret and workspace, kept in memory only); None for one this user may not read or that is
        gone. `list` reuses the workloads it listed: a known run costs it no call but its values."""
        from beaker import beaker_pb2 as pb2

        wl = self._listed.get(run.id) or self._workload(run.id)
        with self._errors():
            eid, ws_id = wl.experiment.id, wl.experiment.workspace_id
            if self._secret_names is None:
                self._secret_names = launches.secret_names(self.conn.address)
            if eid not in self._secret_names:
                names = list(dict.fromkeys(SpecView(self.beaker.experiment.get_spec(wl).to_json()).secrets()))
                launches.record_secret_names(self.conn.address, eid, names)
                self._secret_names[eid] = names
            out: dict[str, str | None] = {}
            for name in self._secret_names[eid]:
                if (ws_id, name) not in self._secret_reads:  # rows of one workspace share their secrets
                    try:
                        value = self.beaker.secret.read(
                            pb2.Secret(name=name), workspace=pb2.Workspace(id=ws_id)
                        )
                    except bx.BeakerError as e:  # permissions (a read-only member: 403), or deleted
                        self.app.debug(f"secret {name}: {type(e).__name__}")
                        value = None
                    self._secret_reads[(ws_id, name)] = value
                out[name] = self._secret_reads[(ws_id, name)]
            return out

    def slack_posting(self, run: RunInfo) -> Posting:
        """A webhook secret in the spec (--slack-webhook-secret): the job's runtime posts what it knows."""
        wl = self._workload(run.id)
        with self._errors():
            pol = SpecView(self.beaker.experiment.get_spec(wl).to_json()).policy()
        if pol.sweep:
            return Posting.sweep
        return Posting.job if pol.webhook_secret is not None else Posting.follower

    def events_posting(self, run: RunInfo) -> Posting:
        """The job's runtime posts what it knows; `follow` what it cannot (a preemption, a cancelation)."""
        return Posting.sweep if self.run_policy(run).sweep else Posting.job

    def run_policy(self, run: RunInfo) -> Policy:
        """From the workload `get` read (its tasks' container specs hold the policy's variable: no
        call), else the spec (one GetExperimentYamlSpec)."""
        seen = self._seen.get(run.id)
        wl = seen[0] if seen is not None else self._workload(run.id)
        for t in wl.experiment.tasks:
            if not t.container_spec.ByteSize():
                continue  # (not in this answer)
            env = {v.name: v.literal for v in t.container_spec.environment_variables}
            try:
                return Policy.decode(env.get(POLICY_ENV))  # none: the default policy
            except PolicyError:
                break
        with self._errors():
            return SpecView(self.beaker.experiment.get_spec(wl).to_json()).policy()

    def user_name(self) -> str:
        with self._errors():
            return str(self.conn.me().name)

    # -- lookups --------------------------------------------------------------------------------
    def get(self, run_ref: str) -> RunInfo:
        """Two round trips: the workload (with the org resolved alongside), then every task's latest
        job (and the author's name) at once. `follow` reuses what this fetched."""
        if run_ref in self._final:
            return self._final[run_ref]
        with self._errors():
            _ = self.beaker.service  # one channel, made before two threads use it
            with ThreadPoolExecutor(max_workers=2) as pool:
                org = pool.submit(self.conn.org)
                wl = self._workload(run_ref)
                org.result()
            with ThreadPoolExecutor(max_workers=2) as pool:
                author_id = wl.experiment.author_id
                names = pool.submit(self.conn.user_names, [author_id])
                rows = self._task_jobs(wl, sample=SAMPLED_TASKS)
                author = names.result()[author_id]
            self._seen[wl.experiment.id] = (wl, rows)

            newest = [js[0] for _, _, js in rows if js]
            lead = next((j for j in newest if not j.status.HasField("scheduled")), None)
            waiting = waiting_reason(self.conn, lead)  # queued: why it waits (one ListJobEvents)
            waiting = synchronized_wait(newest, waiting) or waiting  # placed replicas waiting for the rest
            return self._info(wl, author=author, rows=rows, events=True, waiting=waiting)

    def _command_started(self, job: Any) -> bool | None:
        """For a job that exited with one of the runtime's setup codes (100-109): whether its log says
        the user's command had started (None: the log could not be read). Else False, unread."""
        if not job.status.HasField("exit_code") or job.status.exit_code not in SETUP_STEPS:
            return False
        try:
            with self._errors():
                return command_started(self.conn, job.id)
        except LaunchkitError as e:
            self.app.debug(f"the log of job {job.id} could not be read: {e}")
            return None

    def _watchdog_stop(self, job: Any) -> str | None:
        """For a job that exited with the watchdog's code: why it stopped the job (its log's last
        WATCHDOG_TAIL lines, one `tail_lines` read). Else None, unread."""
        if not job.status.HasField("exit_code") or job.status.exit_code != WATCHDOG_EXIT:
            return None
        lines: list[bytes] = []
        try:
            with self._errors():
                stream_job(self.conn, job.id, lines.append, tail=WATCHDOG_TAIL)
        except LaunchkitError as e:
            self.app.debug(f"the log of job {job.id} could not be read: {e}")
            return None
        return watchdog_stop(lines)

    def progress(self, run: RunInfo) -> Progress | None:
        """Replica 0's newest job while it runs: its log's last TAIL_LINES lines (one StreamJobLogs; its
        jobs as get() read them, else one get())."""
        if run.status != RunStatus.running:
            return None
        if run.id not in self._seen:
            self.get(run.id)
        _, rows = self._seen[run.id]
        return self._job_progress(next((js[0] for _, _, js in rows if js), None))

    def phases(self, run: RunInfo, *, where: bool = False, detail: bool = False) -> RunInfo:
        """Its jobs as get() read them (else one get()); then, at once, the newest attempt's lead job's
        summarized events (its waiting history, one call) and, once it started, its log's first lines
        up to the command's first output (one bounded read): `why`'s phases. `detail`: every job's
        phases too (`_phases_detail`)."""
        if run.id not in self._seen:
            self.get(run.id)
        wl, rows = self._seen[run.id]
        lead = next((js[0] for _, _, js in rows if js), None)
        if lead is None:
            return run
        with self._errors(), ThreadPoolExecutor(max_workers=2) as pool:
            _ = self.beaker.service  # one channel, made before two threads use it
            events_f = pool.submit(summarized, self.conn, lead)
            seen_f = pool.submit(self._setup_seen, lead) if lead.status.HasField("started") else None
            queued = run.status == RunStatus.queued and not lead.status.HasField("scheduled")
            line_f = pool.submit(queue_ahead, self.conn, lead) if queued else None
            waits_for_nodes = (
                queued and run.waiting is not None and run.waiting.kind in ("no_node", "cordoned")
            )
            other_f = pool.submit(elsewhere, self.conn, lead) if waits_for_nodes else None
            now = int(self.clock() * NS)
            reason = no_estimate(run.waiting) if queued else None
            nodes_f = pool.submit(nodes_now, self.conn, lead, now) if queued and reason is None else None
            events, seen = events_f.result(), seen_f.result() if seen_f else None
            ahead, read, cut = line_f.result() if line_f else (None, 0, False)
            other = other_f.result() if other_f else None
            nodes = nodes_f.result() if nodes_f else None
        estimate = None
        if isinstance(nodes, str):
            reason = nodes
        elif nodes is not None and ahead is not None:
            group = lead.system_details.replica_group_details.id
            unplaced = [  # its replicas not placed yet (the placed ones hold their GPUs already)
                js[0]
                for _, _, js in rows
                if js
                and not js[0].status.HasField("scheduled")
                and js[0].system_details.replica_group_details.id == group
            ]
            answer = start_estimate(
                gpus=int(lead.container_spec.resource_request.gpu_count),
                replicas=max(1, len(unplaced) if group else 1),
                host_networking=lead.container_spec.host_networking,
                nodes=nodes,
                ahead=ahead,
                now=now,
            )
            estimate, reason = answer.estimate, answer.reason
        phases, hours = self._phases(wl, rows, seen)
        notes = ph.PhaseNotes(
            waits=wait_history(
                events,
                gpus=int(lead.container_spec.resource_request.gpu_count),
                until=_ns(lead.status, "scheduled"),
            ),
            env_cache=seen.env_cache if seen else None,
            steps=seen.steps if seen else None,
            attempt=run.attempts,
            ahead=None if ahead is None else len(ahead),
            queue_read=read,
            read_all=not cut,
            elsewhere=other,
            estimate=estimate,
            no_estimate_reason=reason,
        )
        update: dict[str, Any] = {"phases": phases, "phase_notes": notes, "gpu_hours": hours}
        if where:
            update["cluster"] = self._cluster_of(lead)
        if detail:
            update["phases_detail"] = self._phases_detail(wl, rows, lead, seen)
        return run.model_copy(update=update)

    def _phases_detail(
        self, wl: Any, rows: Rows, lead: Any, seen: ph.SetupSeen | None
    ) -> list[ph.PhaseDetail]:
        """Every job read (each attempt of each replica; a many-task run: its sample) with its phases
        from its own timestamps, and its log's first lines for up to DETAIL_LOGS started jobs besides
        the lead (read at once); none for a run of one job (the run's phases are its)."""
        pb_jobs = {j.id: j for _, _, js in rows for j in js}
        if len(pb_jobs) < 2:
            return []
        view = rv.view_of(wl, [(t, js) for _, t, js in rows], complete=False)
        others = [j for j in pb_jobs.values() if j.status.HasField("started") and j.id != lead.id]
        others = others[:DETAIL_LOGS]
        with self._errors(), ThreadPoolExecutor(max_workers=max(1, min(8, len(others)))) as pool:
            _ = self.beaker.service  # one channel, made before the threads use it
            read = dict(zip((j.id for j in others), pool.map(self._setup_seen, others), strict=True))
        read[lead.id] = seen
        now = int(self.clock() * NS)
        out = []
        for job in sorted(view.jobs, key=lambda j: (j.task, j.attempt or 0, j.replica)):
            got = read.get(job.id)
            p = _job_phases(pb_jobs[job.id].status, now, got)
            cache = got.env_cache if got else None
            out.append(
                ph.PhaseDetail(
                    task=job.task, attempt=job.attempt or 1, replica=job.replica, phases=p, env_cache=cache
                )
            )
        return out

    def _cluster_of(self, job: Any) -> str | None:
        """The cluster of the node the job was assigned to (the org's clusters and their nodes, listed
        once per connection, at once)."""
        node = job.assignment_details.node_id
        if not node:
            return None
        with self._errors():
            clusters = rs.org_clusters(self.conn)
            rs.node_gpu_types(self.conn, clusters)
        return next(
            (
                rs.cluster_full_name(c)
                for c in clusters
                if any(n.id == node for n in self.conn.nodes.get(c.id, []))
            ),
            None,
        )

    def _phases(
        self, wl: Any, rows: Rows | None, seen: ph.SetupSeen | None = None
    ) -> tuple[ph.Phases | None, float | None]:
        """The phases of the newest attempt of the run's lead job (replica 0 of its first task) from the
        jobs read (no call), and the GPU-hours of every job read (None for a run whose jobs were
        sampled); a run with no job read: how long it has waited, if it waits."""
        now = int(self.clock() * NS)
        lead = next((js[0] for _, _, js in rows or [] if js), None)
        if lead is None:
            if wl.status not in _WAITING:
                return None, None
            created = wl.experiment.created.ToNanoseconds()
            return ph.phases(created=created, scheduled=None, started=None, ended=None, now=now), None
        phases = _job_phases(lead.status, now, seen)
        if len(wl.experiment.tasks) > SAMPLED_TASKS:
            return phases, None
        ran = [  # its assigned GPUs (as attempts_detail counts them), else those it asked for
            (
                len(j.assignment_details.resource_assignment.gpus)
                or int(j.container_spec.resource_request.gpu_count),
                j.status,
            )
            for _, _, js in rows or []
            for j in js
        ]
        return phases, ph.gpu_hours([(g, _ns(st, "started"), _ended(st)) for g, st in ran], now)

    def _setup_seen(self, job: Any) -> ph.SetupSeen | None:
        """The runtime's markers in the job's first log lines (one read, stopped at the command's first
        line of output or after ph.SETUP_LINES lines)."""
        setup_done = False

        def last(line: bytes) -> bool:  # the command's first line: the read stops after it
            nonlocal setup_done
            if line.startswith(ph.SETUP_DONE):
                setup_done = True
                return False
            return setup_done and not line.startswith(ph.RUNTIME)

        try:
            with self._errors():
                return ph.setup_seen(head_records(self.conn, job.id, ph.SETUP_LINES, last))
        except LaunchkitError as e:
            self.app.debug(f"the log of job {job.id} could not be read: {e}")
            return None

    def attempts_detail(self, run: RunInfo) -> list[AttemptDetail]:
        """Every job of the tasks get() read (a many-task run: its sample): its end, GPU-hours (its
        assigned GPUs x how long it ran) and its log's first HEAD_LINES and last TAIL_LINES matched
        (two log reads a job that started, all at once)."""
        if run.id not in self._seen:
            self.get(run.id)
        wl, rows = self._seen[run.id]
        view = rv.view_of(wl, [(t, js) for _, t, js in rows], complete=False)
        pb_jobs = {j.id: j for _, _, js in rows for j in js}
        started = [j for j in pb_jobs.values() if j.status.HasField("started")]

        def ends(job: Any) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
            try:
                with self._errors():
                    return head_records(self.conn, job.id, HEAD_LINES), tail_records(
                        self.conn, job.id, TAIL_LINES
                    )
            except LaunchkitError as e:
                self.app.debug(f"the log of job {job.id} could not be read: {e}")
                return [], []

        with ThreadPoolExecutor(max_workers=max(1, min(8, len(started)))) as pool:
            read = dict(zip((j.id for j in started), pool.map(ends, started), strict=True))
        found = []
        for job in sorted(view.jobs, key=lambda j: (j.task, j.replica, j.attempt or 0)):
            pb = pb_jobs[job.id]
            head, tail = read.get(job.id, ([], []))
            first, last = attempt_progress(head, tail, self._patterns(pb) or ())
            gpus = len(pb.assignment_details.resource_assignment.gpus)
            hours = None
            if job.started is not None:
                ended = job.finished or rv.exited_at(pb) or time.time()
                hours = round(gpus * (ended - job.started) / 3600, 4)
            found.append(
                AttemptDetail(
                    task=job.task,
                    replica=job.replica,
                    attempt=job.attempt or 1,
                    cause=runs.ended_as(job),
                    exit_code=job.exit_code,
                    gpu_hours=hours,
                    first_progress=first,
                    last_progress=last,
                )
            )
        return found

    def _job_progress(self, job: Any) -> Progress | None:
        """A running job's last progress line, matched with the job's own patterns (its env)."""
        s = job.status if job is not None else None
        if s is None or not s.HasField("started") or s.HasField("exited") or s.HasField("finalized"):
            return None
        try:
            with self._errors():
                records = tail_records(self.conn, job.id, TAIL_LINES)
        except LaunchkitError as e:
            self.app.debug(f"the log of job {job.id} could not be read: {e}")
            return None
        patterns = self._patterns(job)
        return None if patterns is None else last_progress(records, patterns)

    def _patterns(self, job: Any) -> tuple[str, ...] | None:
        """A job's progress patterns, from the run's policy in its env; None: a policy it refused."""
        env = {v.name: v.literal for v in job.container_spec.environment_variables}
        try:
            return Policy.from_env(env).progress_patterns
        except PolicyError as e:
            self.app.debug(f"job {job.id}: {e}")
            return None

    def _rows_progress(self, rows: list[Any], org: Any) -> dict[str, Progress | None]:
        """`list`: experiment id -> progress, for the newest PROGRESS_ROWS running rows: replica 0's
        newest job (one ListJobs) and its log's tail (one StreamJobLogs), every row at once."""
        running = [wl for wl in rows if wl.status == W.STATUS_RUNNING and wl.experiment.tasks][:PROGRESS_ROWS]
        if not running:
            return {}

        def first(t: Any) -> int:
            sd = t.system_details
            return sd.replica_group_details.rank if sd.HasField("replica_group_details") else 0

        def one(wl: Any) -> Progress | None:
            task = min(wl.experiment.tasks, key=first)
            try:
                with self._errors():
                    job = next(iter(self.beaker.job.list(org=org, task=task, limit=1)), None)
            except LaunchkitError as e:
                self.app.debug(f"the jobs of {wl.experiment.id} could not be read: {e}")
                return None
            self._leads[wl.experiment.id] = job  # its phases, from the same read (_lead_phases)
            return self._job_progress(job)

        with ThreadPoolExecutor(max_workers=len(running)) as pool:
            return dict(zip((wl.experiment.id for wl in running), pool.map(one, running), strict=True))

    def _lead_phases(self, wl: Any) -> dict[str, Any]:
        """`list`: a running row's phases from replica 0's newest job that _rows_progress read (no call);
        its GPU-hours are not known from one replica. Empty when that job was not read."""
        job = self._leads.get(wl.experiment.id)
        if job is None:
            return {}
        s = job.status
        now = int(self.clock() * NS)
        phases = ph.phases(
            created=_ns(s, "created"), scheduled=_ns(s, "scheduled"), started=_ns(s, "started"),
            ended=_ended(s), now=now,
        )  # fmt: skip
        return {"phases": phases}

    def _never_scheduled_events(self, job: Any | None) -> list[str] | None:
        """A canceled job that never got a node: its scheduling events (why it never fit)."""
        if job is None or not job.status.HasField("canceled") or job.status.HasField("scheduled"):
            return None
        return [
            ev.latest_message or ev.status
            for ev in self.beaker.job.list_summarized_events(job, sort_order=BeakerSortOrder.ascending)
        ]

    def latest(self, *, author: str | None = None) -> RunInfo | None:
        """Yours: the run launchkit launched last (its own record, launches.py), checked against the
        server (GetWorkload reads what was just written; a listing may lag a create). Without a record
        (another machine), or for another `author`: their newest experiment, from the listing."""
        with self._errors():
            user = self._user(author)
            if user.id == self.conn.me().id:
                for entry in launches.recent(self.conn.address, user.name, self._workspace):
                    try:
                        wl = self.beaker.workload.get(entry["id"])
                    except bx.BeakerWorkloadNotFound:
                        continue  # deleted since
                    return self._info(wl, author=user.name)
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

    def _find_group(self, ref: str) -> Any:
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
        g = self._find_group(group)
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
        progress: bool = False,
    ) -> list[RunInfo]:
        """One ListWorkloads query (paged by the server) + one GetUser per unseen author. The lookups it
        needs (organization, workspace, author) run at once, and the first page of finished jobs (for
        the EXIT column) is read alongside the workloads: two round trips in series for a page of rows.
        With `group`: the group's experiments, filtered here (as gantry's `list -g` does). `progress`:
        the newest PROGRESS_ROWS running rows' progress, read alongside (_rows_progress)."""
        if group is not None:
            return self._list_group(group, limit, statuses, author, text, max_age, include_all, mine)
        beaker_statuses, shown = status_filter(statuses)
        preempted = RunStatus.preempted in (shown or ())  # canceled rows, filtered by their jobs
        ws_name = workspace or self._workspace or None  # gantry's scope: configured, else the org
        with self._errors(), ThreadPoolExecutor(max_workers=3) as pool:
            _ = self.beaker.service  # one channel, made before the threads use it
            org_f = pool.submit(self.conn.org)
            ws_f = pool.submit(self._workspace_ref, ws_name) if ws_name else None
            user = self._user(author) if (author or mine) else None
            org, ws = org_f.result(), ws_f.result() if ws_f else None
            # finished rows are possible: read the newest finished jobs while the workloads come
            may_finish = beaker_statuses is None or any(s.as_pb2() in self.FINISHED for s in beaker_statuses)
            jobs_f = pool.submit(_JobPages, self.beaker, org) if may_finish else None
            # launchkit's runs are told by their spec, not their description, which jobs rewrite
            # (identity.py): without --all they are picked here from pages of the listing
            created_after = dt.datetime.now(dt.UTC) - max_age if max_age else None
            listing = iter(
                self.beaker.workload.list(
                    org=org,
                    author=user,
                    workspace=ws,
                    created_after=created_after,
                    workload_type=BeakerWorkloadType.experiment,
                    statuses=beaker_statuses,
                    name_or_description=text or None,
                    sort_order=BeakerSortOrder.descending,
                    limit=limit if include_all and not preempted else None,
                )
            )
            wanted = limit * 10 if preempted else limit
            rows = self._launchkit_rows(listing, wanted, include_all)
            self._listed.update((wl.experiment.id, wl) for wl in rows)
            names_f = pool.submit(self.conn.user_names, [wl.experiment.author_id for wl in rows])
            progress_f = pool.submit(self._rows_progress, rows, org) if progress else None
            jobs = self._finished_jobs(rows, jobs_f.result() if jobs_f else None)
            names = names_f.result()

            waiting = list_reasons(self.conn, rows, org)  # the newest queued rows: why they wait
            progressed = progress_f.result() if progress_f else {}
            infos = [
                self._info(
                    wl,
                    author=names[wl.experiment.author_id],
                    rows=jobs.get(wl.experiment.id),
                    budget=False,
                    waiting=waiting.get(wl.experiment.id),
                    launchkit=True if not include_all else None,
                ).model_copy(update={"progress": progressed.get(wl.experiment.id), **self._lead_phases(wl)})
                for wl in rows
            ]
            if shown is not None:  # rows show what was asked for (e.g. preempted vs canceled)
                infos = [i for i in infos if i.status in shown]
            return infos[:limit]

    LIST_SCAN = 20  # pages (of 50) of the listing looked through for launchkit's runs at most

    def _recognizer(self) -> identity.Recognizer:
        """Tells launchkit's runs (identity.py) with what this machine knows: its launches, and what
        specs read before said."""
        address = self.conn.address
        return identity.Recognizer(
            self.beaker,
            launches.launched_ids(address),
            self.app.debug,
            known=launches.spec_verdicts(address),
            remember=lambda told: launches.record_verdicts(address, told),
        )

    def _launchkit_rows(self, listing: Iterator[Any], wanted: int, include_all: bool) -> list[Any]:
        """The first `wanted` workloads of `listing` (newest first) that are launchkit's (all of them
        with `include_all`), a page at a time: a page's rows the listing cannot tell are told by their
        specs at once (identity.Recognizer). At most LIST_SCAN pages are looked through (said)."""
        rows: list[Any] = []
        recognizer = None
        for _ in range(1 if include_all else self.LIST_SCAN):
            page = list(itertools.islice(listing, wanted if include_all else PAGE))
            if not page:
                return rows
            if include_all:
                return page
            if recognizer is None:
                recognizer = self._recognizer()
            rows += [wl for wl, ours in zip(page, recognizer.select(page), strict=True) if ours]
            if len(rows) >= wanted:
                return rows[:wanted]
            if len(page) < PAGE:
                return rows
        if next(listing, None) is not None:
            self.app.warn(
                f"looked through the newest {self.LIST_SCAN * PAGE} experiments for launchkit's runs;"
                " older ones are not shown (narrow the listing: --author, --max-age, --text)"
            )
        return rows

    def _workspace_ref(self, name: str) -> Any:
        """pb2.Workspace(id=...) for a name (one ResolveWorkspaceName; ids pass through)."""
        return pb2.Workspace(id=self.beaker.workspace.resolve_workspace_id(name))

    FINISHED = frozenset({W.STATUS_SUCCEEDED, W.STATUS_FAILED, W.STATUS_CANCELED})
    JOB_PAGES = 10  # pages of 50 finished jobs read at most for the EXIT column

    def _finished_jobs(self, rows: list[Any], pages: _JobPages | None = None) -> dict[str, Rows]:
        """Experiment id -> its tasks' jobs (newest first), for the finished rows, from ONE newest-first
        listing of the org's finalized jobs (not a call per row): it stops once every wanted task and
        every attempt a retry names (`retry_ancestor_id`) is seen, or the jobs are older than the
        oldest finished row."""
        done = [wl for wl in rows if wl.status in self.FINISHED]
        if not done:
            return {}
        want = {t.id: wl.experiment.id for wl in done for t in wl.experiment.tasks}
        oldest = min(wl.experiment.created.ToNanoseconds() for wl in done)
        found: dict[str, list[Any]] = {}
        ancestors: set[str] = set()  # attempts named by a retry, not seen yet
        pages = pages or _JobPages(self.beaker, self.conn.org())
        for i, job in enumerate(pages.jobs()):
            if job.task_id in want:
                found.setdefault(job.task_id, []).append(job)
                ancestors.discard(job.id)
                if job.retry_ancestor_id:
                    ancestors.add(job.retry_ancestor_id)
            if (len(found) == len(want) and not ancestors) or job.status.created.ToNanoseconds() < oldest:
                break
            if i >= 50 * self.JOB_PAGES:
                break
        out: dict[str, Rows] = {}
        for wl in done:
            tasks = [(t, found.get(t.id, [])) for t in wl.experiment.tasks]
            if any(js for _, js in tasks):
                out[wl.experiment.id] = [(rv.record(t, js[0]).replica if js else 0, t, js) for t, js in tasks]
        return out

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
        _, shown = status_filter(statuses)
        wanted = set(shown or ())
        with self._errors():
            user = self._user(author) if (author or mine) else None
            oldest = dt.datetime.now(dt.UTC) - max_age if max_age else None
            rows = []
            found = self._group_runs(group)
            if not include_all:
                ours = self._recognizer().select(found)
                found = [wl for wl, mine in zip(found, ours, strict=True) if mine]
            for wl in found:
                e = wl.experiment
                if user is not None and e.author_id != user.id:
                    continue
                if text and text not in e.name and text not in e.description:
                    continue
                if oldest and (_time(e.created) or oldest) < oldest:
                    continue
                rows.append(wl)
            names = self.conn.user_names([wl.experiment.author_id for wl in rows])
            told = True if not include_all else None
            infos = [self._info(wl, author=names[wl.experiment.author_id], launchkit=told) for wl in rows]
        return [r for r in infos if not wanted or r.status in wanted][:limit]

    # -- jobs and logs --------------------------------------------------------------------------
    def _task_jobs(self, wl: Any, task: str | None = None, sample: int | None = None) -> Rows:
        """[(replica rank, task, its jobs newest first)] sorted by rank; the tasks' ListJobs run at once
        (one call each: a task's attempts fit in a page). `task` selects a task and its replicas,
        whatever Beaker names replica tasks (unknown). `sample` N: with more tasks than N, jobs are
        read only for N of them (failed ones first, then the first, then running ones: a sweep's digest
        tells a retry after preemption by them; the others' lists are empty):
        a 1,000-task run is not 1,000 ListJobs."""
        if not wl.HasField("experiment"):
            raise UsageError(
                f"{_workload_id(wl)} is a session, not an experiment", hint="launchkit follows experiments"
            )
        tasks = list(wl.experiment.tasks)
        if task is not None:
            groups = {_group(t) for t in tasks if task in (t.name, _group(t), _unranked(t))}
            tasks = [t for t in tasks if _group(t) in groups]
        if task is not None and not tasks:
            names = ", ".join(dict.fromkeys(t.name for t in wl.experiment.tasks))
            raise NotFoundError(f"experiment has no task {task!r}", hint=f"tasks: {names}")
        org = self.conn.org()

        def jobs_of(t: Any) -> list[Any]:  # newest first (ascending is not implemented server-side)
            return list(self.beaker.job.list(org=org, task=t))

        wanted = tasks
        if sample is not None and len(tasks) > sample:  # (running ones next: a retry tells its cause)
            failed = [t for t in tasks if t.status == W.STATUS_FAILED]
            running = [t for t in tasks if t.status == W.STATUS_RUNNING]
            wanted = list({t.id: t for t in [*failed, *tasks[:1], *running]}.values())[:sample]
        if len(wanted) > 1:
            with ThreadPoolExecutor(max_workers=min(16, len(wanted))) as pool:
                found = dict(zip((t.id for t in wanted), pool.map(jobs_of, wanted), strict=True))
        else:
            found = {t.id: jobs_of(t) for t in wanted}
        out = []
        for i, t in enumerate(tasks):
            js = found.get(t.id, [])
            rank = i
            for src in (js[0].system_details if js else None, t.system_details):
                if src is not None and src.HasField("replica_group_details"):
                    rank = src.replica_group_details.rank
                    break
            out.append((rank, t, js))
        return sorted(out, key=lambda r: r[0])

    def _select(
        self, wl: Any, replica: int | None, task: str | None, attempt: int | None = None
    ) -> list[tuple[int, Any, Any]]:
        """[(replica rank, task, its newest job or None)] of the chosen replicas; `attempt` N: each
        task's Nth job (1 = its first) instead of its newest. A newest job that has not started (queued
        again after a preemption, or waiting for its retry) has no lines yet (fact 11.10): its newest
        attempt that started is shown instead, and said so."""
        out = []
        for rank, t, js in self._pick(wl, self._task_jobs(wl, task), replica):
            if attempt is None:
                ran = next((j for j in js if j.status.HasField("started")), None)
                if js and ran is not None and ran is not js[0]:
                    shown, newest = len(js) - js.index(ran), len(js)
                    self.app.info(
                        f"attempt {newest} of {rv.task_name(t)} has not started yet: the log of attempt "
                        f"{shown}, its last that ran (`--attempt {newest}` for the new one)"
                    )
                    out.append((rank, t, ran))
                    continue
                out.append((rank, t, js[0] if js else None))
                continue
            if not 1 <= attempt <= len(js):
                raise NotFoundError(
                    f"task {t.name} has no attempt {attempt}",
                    hint=f"it has {len(js)} attempt(s): --attempt 1..{len(js)}",
                )
            out.append((rank, t, js[::-1][attempt - 1]))
        return out

    def _pick(
        self, wl: Any, rows: list[tuple[int, Any, Any]], replica: int | None
    ) -> list[tuple[int, Any, Any]]:
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
        if query.tail is not None and (query.since is not None or query.since_ago is not None):
            raise UsageError("--tail and --since cannot be combined", hint="drop one")
        wl = self._workload(run.id)
        with self._errors(), self._deletion(run.id, "read"):
            task = query.task
            if task is None and not (all_tasks or query.all_tasks) and wl.experiment.tasks:
                task = _group(wl.experiment.tasks[0])
                others = len({_group(t) for t in wl.experiment.tasks}) - 1
                if others:
                    self.app.info(f"logs of task {task}; {others} more task(s): --all for all, --task NAME")
            rows = self._select(wl, query.replica, task, query.run)
            since_ns = _epoch_ns(query.since) if query.since else None
            if query.since_ago is not None:  # measured back from the server's now: it stamps the lines
                now = self.conn.server_now()
                since_ns = (time.time_ns() if now is None else int(now * 1e9)) - int(query.since_ago * 1e9)
            labels = self._labels(wl, rows)
            for rank, t, job in rows:
                if job is None:
                    self.app.warn(f"replica {rank} ({t.name}) has no job yet")
                    continue
                prefix = f"[{labels[(t.name, rank)]}] ".encode() if len(rows) > 1 else b""
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
        """Events until start, then raw logs of each followed replica through its attempts (retries,
        preemptions, a sibling's preemption), until the run as a whole ends (core/runs.py decides).

        Returns the run's exit code: the failing replica's own, 0 when the newest attempts succeeded,
        1 when it ended without one. Ctrl-C raises KeyboardInterrupt to the caller (the job keeps
        running). A run deleted while followed ends it at once (NotFoundError)."""
        seen = self._seen.pop(run.id, None)  # what get() just fetched: no second round trip
        wl = seen[0] if seen else self._workload(run.id)
        with self._errors(), self._deletion(run.id, "followed"):
            sampled = len(wl.experiment.tasks) > SAMPLED_TASKS  # get() read only some tasks' jobs
            rows = seen[1] if seen and task is None and not sampled else self._task_jobs(wl, task)
            rows = self._pick(wl, rows, replica)
            if not all_replicas:  # one replica per task: every task of a --multi/--sweep experiment
                firsts: dict[str, tuple[int, Any, list[Any]]] = {}
                for row in rows:
                    firsts.setdefault(_group(row[1]), row)
                rows = list(firsts.values())
            followed = [(rank, t, js[0] if js else None) for rank, t, js in rows]
            self._earlier_attempts(wl, rows, len(followed) > 1)
            with Flusher(out):
                if len(followed) == 1:
                    _, t, job = followed[0]
                    self._follow_task(wl, t, job, out.write, b"", tail)
                else:
                    self._follow_many(wl, followed, self._labels(wl, followed), out, tail)
            info = self._wait_for_run(wl, run.author)
        self._final[run.id] = info  # the caller's get() needs no round trip
        return info.status.shell_code(info.exit_code)

    def _earlier_attempts(self, wl: Any, rows: Rows, prefixed: bool) -> None:
        """Before following a replica whose earlier attempts already ended: one line saying how the
        last of them ended and the command that shows its log (follow shows the newest attempt)."""
        if not any(len(js) > 1 for _, _, js in rows):
            return
        view = rv.view_of(wl, [(t, js) for _, t, js in rows], complete=False)
        several_tasks = len({_group(t) for t in wl.experiment.tasks}) > 1
        for rank, t, _ in rows:
            part = view.part(rv.task_name(t), rank)
            if part is None or len(part.attempts) < 2:
                continue
            prev = part.attempts[-2]
            where = runs.Where(task=part.task, replica=rank, attempt=prev.attempt or 1)
            args = runs.logs_args(view, where)
            if several_tasks and "--task" not in args:
                args = ["--task", part.task, *args]
            head = f"[{view.name(part)}] " if prefixed and view.name(part) else ""
            self.app.info(
                f"{head}following attempt {len(part.attempts)}; attempt {prev.attempt} "
                f"{runs.describe_job(prev)} (its log: `launchkit logs {' '.join([_workload_id(wl), *args])}`)"
            )

    @contextmanager
    def _deletion(self, run_id: str, doing: str) -> Iterator[None]:
        """An error while `doing` (followed, read) a run that turns out to be deleted (fact 10.7: its
        jobs answer NOT_FOUND) is told as that, never as a job id the user did not type."""
        try:
            yield
        except (KeyboardInterrupt, BrokenPipeError, UsageError):
            raise
        except Exception:
            if self._gone(run_id):
                raise NotFoundError(
                    f"experiment {run_id} was deleted while it was {doing}",
                    hint="its jobs, logs and results went with it",
                ) from None
            raise

    def _gone(self, run_id: str) -> bool:
        try:
            self.beaker.workload.get(run_id)
        except bx.BeakerWorkloadNotFound:
            return True
        except Exception as e:  # noqa: BLE001 - not known to be gone: the original error stands
            self.app.debug(f"could not tell whether {run_id} still exists: {e}")
        return False

    def _wait_for_run(self, wl: Any, author: str | None) -> RunInfo:
        """The run's final state, once no part runs and no retry is due (parts not followed may still
        run, upload their results or be retried)."""
        announced = False
        with self._snapshot_lock:
            snapshot, self._snapshot = self._snapshot, None
        while True:
            if snapshot is not None:  # read when the last followed part ended: no new round trip
                (wl, rows), snapshot = snapshot, None
            else:
                wl = self.beaker.workload.get(wl.experiment.id)
                rows = self._task_jobs(wl)
            _, out = self._outcome(wl, rows)
            if not out.going:
                return self._info(wl, author=author, rows=rows, events=True)
            if not announced:
                self.app.info(f"waiting for the rest of the run ({out.waiting_for or 'tasks still running'})")
                announced = True
            self.conn.renew()
            self.sleep(WAIT_POLL)

    def _labels(self, wl: Any, rows: list[tuple[int, Any, Any]]) -> dict[tuple[str, int], str]:
        """(task name, rank) -> the line prefix: the rank alone for one task; for several tasks the
        task's label (core.tasks.label_of: e.g. `lr=1e-4,seed=1`, else its name), plus `/rank` when the
        task has several replicas."""
        groups = list(dict.fromkeys(_group(t) for _, t, _ in rows))
        if len(groups) == 1:
            return {(t.name, rank): str(rank) for rank, t, _ in rows}
        labels: dict[str, str] = {}
        try:
            for ts in self.beaker.experiment.get_spec(wl).tasks:
                env = {e.name: e.value for e in ts.env_vars or []}
                if ts.name and (label := label_of(env)):
                    labels[ts.name] = label
        except bx.BeakerError as e:  # labels are a nicety: fall back to task names
            self.app.debug(f"no task labels: {e}")
        size = {g: sum(1 for x in wl.experiment.tasks if _group(x) == g) for g in groups}
        out = {}
        for rank, t, _ in rows:
            name = _unranked(t) if t.system_details.HasField("replica_group_details") else str(t.name)
            label = labels.get(str(t.name)) or labels.get(name) or name
            out[(t.name, rank)] = label + (f"/{rank}" if size[_group(t)] > 1 else "")
        return out

    def _follow_many(
        self,
        wl: Any,
        rows: list[tuple[int, Any, Any]],
        labels: dict[tuple[str, int], str],
        out: IO[bytes],
        tail: int | None,
    ) -> None:
        lock = threading.Lock()
        errors: list[BaseException] = []

        def write_locked(data: bytes) -> None:
            with lock:
                out.write(data)

        def worker(rank: int, t: Any, job: Any) -> None:
            try:
                prefix = f"[{labels[(t.name, rank)]}] ".encode()
                self._follow_task(wl, t, job, write_locked, prefix, tail)
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

    def _follow_task(self, wl: Any, task: Any, job: Any, write: Any, prefix: bytes, tail: int | None) -> None:
        """Follow one replica of one task (a Beaker task) through its attempts: each job's log, then the
        next attempt's (a retry, a resume after a preemption) while one comes."""
        if job is None:
            job = self._first_job(wl, task, prefix)
            if job is None:  # canceled before its job existed
                return
        while True:
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
                self.sleep(0.5)
                job = self.beaker.job.get(job.id)
                self.conn.renew()
            job = self._next_attempt(wl, task, job, prefix)
            if job is None:
                return
            tail = None

    def _next_attempt(self, wl: Any, task: Any, job: Any, prefix: bytes) -> Any | None:
        """The task's next job after `job` ended: one Beaker made already, or one due (a retry with
        budget left), waited for until it comes or `retry_grace` passes; None when none comes."""
        org = self.conn.org()
        wl = self.beaker.workload.get(wl.experiment.id)
        rows = self._task_jobs(wl)
        with self._snapshot_lock:  # taken after this part's job ended: the newest one wins
            self._snapshot = (wl, rows)
        rec = rv.record(task, job)
        view, _ = self._outcome(wl, rows, budget=rec.spends_retry or None)  # it numbers the retry
        found = view.find(job.id)
        part = found[0] if found else None
        head = prefix.decode()
        newer = part is not None and part.latest is not None and part.latest.id != job.id
        if part is None or not (newer or runs.due(view, part, now=self.clock(), grace=self.retry_grace)):
            return None
        line = runs.attempt_line(view, rec)
        if newer:
            if line:
                self.app.info(f"{head}{line}")
            jobs = list(self.beaker.job.list(org=org, task=task, limit=1))
            return jobs[0] if jobs else None
        name = view.name(part) if part is not None else ""
        what = (f"{name}: " if name else "") + f"attempt {found[1].attempt if found else '?'}"
        self.app.info(f"{head}{what} {runs.describe_job(rec)}; waiting for Beaker to retry it")
        ended = self.clock()
        while self.clock() - ended <= self.retry_grace:
            self.sleep(WAIT_POLL)
            jobs = list(self.beaker.job.list(org=org, task=task, limit=1))
            self.conn.renew()
            if jobs and jobs[0].id != job.id:
                return jobs[0]
            if self.beaker.workload.get(wl.experiment.id).experiment.HasField("canceled"):
                return None
        self.app.info(f"{head}Beaker did not retry it within {self.retry_grace:g}s")
        return None

    def _first_job(self, wl: Any, task: Any, prefix: bytes) -> Any | None:
        """The task's first job, waited for (a task may have none right after create, fact 4.10);
        None when the run is canceled first (fact 10.6: it never gets one)."""
        org = self.conn.org()
        announced = False
        while True:
            jobs = list(self.beaker.job.list(org=org, task=task, limit=1))
            self.conn.renew()
            if jobs:
                return jobs[0]
            if self.beaker.workload.get(wl.experiment.id).experiment.HasField("canceled"):
                return None
            if not announced:
                self.app.info(f"{prefix.decode()}waiting for a job for task {task.name}...")
                announced = True
            self.sleep(WAIT_POLL)

    def _show_events_until_started(self, job: Any, prefix: bytes) -> Any:
        """Scheduling events until the job starts (none to show, and no call, once it has)."""
        shown: set[tuple[str, str]] = set()
        teller = WaitTeller()  # why it waits, once each time that changes (from these events)
        while not (job.status.HasField("started") or job.status.HasField("finalized")):
            events = list(self.beaker.job.list_summarized_events(job, sort_order=BeakerSortOrder.ascending))
            for ev in events:
                key = (ev.status, ev.latest_message)
                if key not in shown:
                    shown.add(key)
                    self.app.info(f"{prefix.decode()}  ✓ {ev.latest_message or ev.status}")
            if line := teller.line(job, events):
                self.app.info(f"{prefix.decode()}{line}")
            self.conn.renew()
            self.sleep(0.5)
            job = self.beaker.job.get(job.id)
        return job

    # -- results --------------------------------------------------------------------------------
    def download_results(self, run: RunInfo, dest: str | None) -> list[str]:
        """Each task's and replica's result dataset (of its newest attempt), downloaded under `dest`
        (default ./results/<experiment id>): one part -> `dest`; replicas -> `dest/replica-N`; several
        tasks -> `dest/<task>` (and `dest/<task>/replica-N`)."""

        wl = self._workload(run.id)
        with self._errors():
            rows = self._task_jobs(wl)
            view = rv.view_of(wl, [(t, js) for _, t, js in rows])
            several_tasks = len(view.tasks) > 1
            datasets: list[tuple[str, str, str | None]] = []
            for _, t, js in rows:
                part = view.part(rv.task_name(t), rv.rank_of(t, js[0] if js else None)[0])
                if part is None:
                    continue
                sub = [part.task] if several_tasks else []
                sub += [f"replica-{part.replica}"] if part.replicas > 1 else []
                dataset_id = None  # optional until the job is assigned (fact sheet 7.5)
                if js and js[0].assignment_details.HasField("result_dataset_id"):
                    dataset_id = js[0].assignment_details.result_dataset_id
                datasets.append((view.name(part) or "the run", "/".join(sub), dataset_id))
            folders = download(self.conn, self.app, run.id, datasets, Path(dest or Path("results") / run.id))
        return [str(f) for f in folders]

    def results_location(self, run: RunInfo) -> str:
        return f"results: `launchkit results {run.id}` downloads them (Beaker result datasets)"

    # -- stop -----------------------------------------------------------------------------------
    def stop(self, run: RunInfo, *, reason: str | None = None) -> RunInfo:
        """Cancel the run: only ever the current user's. `reason` (launchkit's own stop): CancelWorkloads
        carries none, so it is kept in this machine's record (launches.py), which no job can reach, and
        in a line of the experiment's description, which every read of the workload has (`_info`: no
        extra call) for `why` elsewhere, until a job rewrites it (OLMo-core and open-instruct do while
        they train: fact sheet 11.8)."""
        wl = self._workload(run.id)
        with self._errors():
            me = self.conn.me()
            if wl.experiment.author_id != me.id:
                owner = self.conn.user_names([wl.experiment.author_id])[wl.experiment.author_id]
                raise PreconditionError(
                    f"experiment {wl.experiment.id} belongs to {owner}, not to you ({me.name})",
                    hint="launchkit only stops your own jobs",
                )
            if reason is not None:
                launches.record_stop(self.conn.address, wl.experiment.id, reason)
                if self._stops is not None:
                    self._stops[wl.experiment.id] = reason
                try:
                    text = f"{wl.experiment.description}\n{LAUNCHKIT_STOP}{reason}"
                    self.beaker.workload.update(wl, description=text)
                except bx.BeakerError as e:  # the stop matters more than its reason
                    self.app.debug(f"the reason for stopping {run.id} could not be recorded: {e}")
            self.beaker.workload.cancel(wl)
            wl = self.beaker.workload.get(wl.experiment.id)
            return self._info(wl, author=me.name)

    # -- find-gpus ------------------------------------------------------------------------------
    def find_gpus(
        self,
        *,
        gpu_types: list[str] | None = None,
        include_all: bool = False,
        gpus: int | None = None,
        replicas: int = 1,
    ) -> list[dict[str, Any]]:
        """Clusters that take batch jobs: free GPUs, used/total slots, GPU types of all nodes. With
        `gpus`: where a replica of that many can start now (scheduling.find_starts)."""
        if gpus is not None:
            with self._errors():
                name = self._scope()
                ws = rs.get_workspace(self.conn, name) if name else None
                return find_starts(
                    self.conn, ws, gpus=gpus, replicas=replicas, gpu_types=gpu_types, include_all=include_all
                )
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
            batch = clusters
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
        if wanted and not rows:  # none free, or a type no cluster has: which, by every node's type
            with self._errors():
                known = {x for ts in rs.node_gpu_types(self.conn, batch).values() for x in ts}
            if unknown := unknown_gpu_types(gpu_types or [], sorted(known)):
                raise UsageError(unknown[0], hint=unknown[1])
        rows.sort(key=lambda r: (-r["free_gpus"], r["cluster"]))
        return rows

    # -- URLs (open) ----------------------------------------------------------------------------
    def url_for(self, target: str | None) -> str:
        """URL of an experiment, workspace or cluster (tried in that order); none: the default workspace."""
        b = self.beaker
        with self._errors():
            if target is None:
                name = rs.workspace_name(self.conn, self._workspace)
                return str(b.workspace.url(rs.get_workspace(self.conn, name)))
            try:
                return str(b.workload.url(self._workload(target)))
            except NotFoundError:
                pass
            if "/" in target:
                try:
                    return str(b.workspace.url(b.workspace.get(target)))
                except bx.BeakerWorkspaceNotFound:
                    pass
            default_org = b.config.default_org
            for c in b.cluster.list(org=self.conn.org()):  # names, aliases (bare or org/), ids
                if "*" not in target and rs.matches(c, target, default_org):
                    org = c.organization_name or default_org
                    return f"{b.config.agent_address}/orgs/{org}/clusters/{c.name}"
            for kind in ("image", "dataset"):  # gantry's order: ..., image, dataset, group
                try:
                    service = getattr(b, kind)
                    return str(service.url(service.get(target)))
                except (bx.BeakerImageNotFound, bx.BeakerDatasetNotFound, ValueError):
                    pass
            try:
                return str(b.group.url(self._find_group(target)))
            except NotFoundError:
                pass
        raise NotFoundError(
            f"{target!r} is not an experiment, workspace, cluster, image, dataset or group on Beaker",
            hint="use an id or name, e.g. an experiment id, org/workspace or org/cluster",
        )


class _JobPages:
    """The org's finalized jobs, newest first: the first page read on construction (in a thread, while
    the workloads are listed), the rest on demand from the same listing."""

    PAGE = 50  # beaker-py's page size

    def __init__(self, beaker: Any, org: Any) -> None:
        self._it = iter(beaker.job.list(org=org, finalized=True))
        self.first = list(itertools.islice(self._it, self.PAGE))

    def jobs(self) -> Iterator[Any]:
        yield from self.first
        if len(self.first) == self.PAGE:
            yield from self._it


class _JobWatch:
    """The latest state of a job; `finalized()` refreshes it (called when a follow stream ends)."""

    def __init__(self, conn: Connection, job: Any):
        self.conn = conn
        self.job = job

    def finalized(self) -> bool:
        self.job = self.conn.beaker.job.get(self.job.id)
        self.conn.renew()
        return bool(self.job.status.HasField("finalized"))


def _launchkit_stop(description: str) -> EndReason | None:
    """launchkit's own stop, from the line stop(reason=) added to the experiment's description."""
    at = description.rfind(LAUNCHKIT_STOP)
    if at < 0:
        return None
    return launchkit_stopped(description[at + len(LAUNCHKIT_STOP) :].split("\n")[0])


def _group(task: Any) -> str:
    """The task a replica belongs to: its replica group (Beaker's replica task names are unknown:
    the same name, or distinct ones), else its name."""
    sd = task.system_details
    if sd.HasField("replica_group_details") and sd.replica_group_details.id:
        return str(sd.replica_group_details.id)
    return str(task.name)


def _unranked(task: Any) -> str:
    """A replica task's name without a `-<rank>` suffix (in case Beaker names replicas that way)."""
    rank = task.system_details.replica_group_details.rank
    return str(task.name).removesuffix(f"-{rank}")


SAMPLED_TASKS = 16  # get(): jobs read for at most this many tasks of a many-task run
NS = 1_000_000_000
DETAIL_LOGS = 8  # `why`: jobs besides the lead whose log's first lines are read for their setup


def _ns(status: Any, name: str) -> int | None:
    """A job status timestamp in ns since the epoch (None: not set)."""
    return int(getattr(status, name).ToNanoseconds()) if status.HasField(name) else None


def _job_phases(s: Any, now: int, seen: ph.SetupSeen | None) -> ph.Phases:
    """One job's phases from its status's timestamps and what its log's first lines said."""
    return ph.phases(
        created=_ns(s, "created"),
        scheduled=_ns(s, "scheduled"),
        started=_ns(s, "started"),
        ended=_ended(s),
        now=now,
        seen=seen,
    )


def _ended(status: Any) -> int | None:
    """When a job's container ended: exited, else canceled, else finalized (None: it has not)."""
    return next((t for t in (_ns(status, n) for n in ("exited", "canceled", "finalized")) if t), None)


def _task_statuses(tasks: Any) -> dict[str, int]:
    """RunStatus value -> number of tasks in it, from the tasks' own status (no call); {} for one task."""
    if len(tasks) < 2:
        return {}
    counts: dict[str, int] = {}
    for t in tasks:
        status = _STATUS.get(t.status, RunStatus.queued).value
        counts[status] = counts.get(status, 0) + 1
    return counts


def _workload_id(wl: Any) -> str:
    return str(wl.experiment.id if wl.HasField("experiment") else wl.environment.id)


def _epoch_ns(t: dt.datetime) -> int:
    """Exact nanoseconds since the epoch (no float rounding); naive times are local time."""
    if t.tzinfo is None:
        t = t.astimezone()
    return (t - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1) * 1000


def status_filter(statuses: Any) -> tuple[list[BeakerWorkloadStatus] | None, set[RunStatus] | None]:
    """(server-side workload statuses, statuses rows must show) for `list -s`. Takes launchkit's
    words (what the STATUS column shows) and gantry's (Beaker's: uploading_results, ...)."""
    if not statuses:
        return None, None
    server: list[BeakerWorkloadStatus] = []
    shown: set[RunStatus] = set()
    for s in statuses:
        v = s.value if isinstance(s, RunStatus) else str(s).lower().replace("-", "_")
        if v in STATUS_NAMES:  # gantry's vocabulary: Beaker's own status
            server.append(BeakerWorkloadStatus[v])
            shown.add(_STATUS[BeakerWorkloadStatus[v].as_pb2()])
            continue
        if v == RunStatus.preempted.value:  # canceled by a preemption: told apart by its job
            server.append(BeakerWorkloadStatus.canceled)
            shown.add(RunStatus.preempted)
            continue
        mapped = [k for k, rs_ in _STATUS.items() if rs_.value == v]
        if not mapped:
            raise UsageError(
                f"unknown status {s!r}",
                hint="one of: " + ", ".join([r.value for r in RunStatus] + STATUS_NAMES),
            )
        server += [BeakerWorkloadStatus(m) for m in mapped]
        shown.add(RunStatus(v))
    return list(dict.fromkeys(server)), shown
