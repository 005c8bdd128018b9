"""The local backend: runs the job's own entrypoint on this machine, under a detached supervisor.

State lives under the user state dir (platformdirs) or $LAUNCHKIT_LOCAL_HOME: `runs/<id>/` with the
spec, the run's record (status.json), per-replica runtime/results dirs and timestamped logs, and
`runs.db`, an index over those records (docs/local-backend.md).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path
from typing import IO, Any

from launchkit.application import Application
from launchkit.backends import ending, registry
from launchkit.backends.local import bell, logs, outcome, procs, record, spawn
from launchkit.backends.local.cleanup import remove_credentials
from launchkit.backends.local.ended import run_end
from launchkit.backends.local.runtime_files import use_runtime
from launchkit.backends.local.store import Store, column, home, row_jobs, state_error
from launchkit.backends.local.supervisor import (
    DEFAULT_STOP_GRACE,
    ENV_RETRY_BACKOFF,
    RETRY_BACKOFF_CAP,
    gpu_count,
)
from launchkit.backends.local.uploads import link_uploads, unlink_uploads
from launchkit.backends.progress import (
    HEAD_BYTES,
    TAIL_BYTES,
    attempt_progress,
    last_progress,
    resume_note,
)
from launchkit.backends.protocol import (
    AttemptDetail,
    GpuRow,
    LogQuery,
    Posting,
    Progress,
    RunInfo,
    RunStatus,
    Submission,
)
from launchkit.core import phases as ph
from launchkit.core.contract import ENV_GIT_COMMIT
from launchkit.core.runs import attempt_line, attempt_text, ended_as
from launchkit.core.specview import SpecView, TaskView
from launchkit.errors import BackendError, NotFoundError, PreconditionError, UsageError
from launchkit.runtime.node.policy import EMPTY as EMPTY_POLICY
from launchkit.runtime.node.policy import ENV_NOTIFY, ENV_WEBHOOK, Policy

# The ids submit() makes (`local-20260131-120000-a1b2c3`), and older or hand-made ones: one path part.
RUN_ID = re.compile(r"local-[A-Za-z0-9][A-Za-z0-9._-]{0,120}")

# follow: look again when the supervisor rings (bell.py), and at least every WAKE_FALLBACK seconds
# (a dead supervisor, a lost ring). Without a bell, after a tenth of the time the run has been quiet,
# between MIN_POLL and MAX_POLL seconds.
WAKE_FALLBACK = 0.25
MIN_POLL, MAX_POLL = 0.003, 0.1
BASH_NEEDED = (5, 1)  # the entrypoint uses `wait -n -p` (bash 5.1)
BASH_MEMO = "bash-checked"  # under the state dir: the bash last found new enough (check_bash)
ENDED = tuple(s for s in record.FINISHED if s != "lost")  # final: the record never changes again
INDEXED = ("status", "exit_code", "started", "finished", "message", "jobs")  # what changes after creation


NS = 1_000_000_000


def _ns(value: float | None) -> int | None:
    return None if value is None else int(value * NS)


def _ts(value: float | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromtimestamp(value, dt.UTC)


def _queued_from(rec: dict[str, Any], job: dict[str, Any]) -> int | None:
    """When `job` began to wait (ns): the run's creation (its supervisor waited for GPUs or a slot);
    a later attempt's, the end of the attempt before it (its backoff: a Beaker retry is a new job)."""
    before = [
        j for j in outcome.jobs(rec) if (j["replica"], j["attempt"]) == (job["replica"], job["attempt"] - 1)
    ]
    ended = _ns(before[0].get("finished")) if before else None
    return ended if ended is not None else _ns(rec.get("created"))


def _created(value: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(value, dt.UTC)


class _HasCommit:
    """Whether `repo_root` has commit `sha` (`git cat-file -e`), asked at once and answered by
    `answer()`, so that git runs while the launch goes on; `close()` ends an unanswered question."""

    def __init__(self, repo_root: str | None, sha: str | None):
        self.proc: subprocess.Popen[bytes] | None = None
        if repo_root and sha:
            self.proc = subprocess.Popen(
                ["git", "-C", repo_root, "cat-file", "-e", f"{sha}^{{commit}}"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    def answer(self) -> bool:
        if self.proc is None:
            return False
        try:
            return self.proc.wait(timeout=30) == 0
        except subprocess.TimeoutExpired:
            return False

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def _interrupt_held() -> Iterator[list[int]]:
    """Ctrl-C (SIGINT) noted, not raised, inside the block: the list it yields is non-empty then. The
    forked supervisor inherits the handler until it sets its own, so it never sees a KeyboardInterrupt."""
    got: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    except ValueError:  # not the main thread: signals go to the main thread anyway
        yield got
        return
    try:
        yield got
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def check_retry_backoff() -> None:
    """LAUNCHKIT_LOCAL_RETRY_BACKOFF, the first local retry's wait (supervisor.py), if set: 0 to the cap."""
    raw = os.environ.get(ENV_RETRY_BACKOFF)
    if raw is None:
        return
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= RETRY_BACKOFF_CAP:  # also refuses nan and inf
        raise UsageError(
            f"{ENV_RETRY_BACKOFF}={raw!r} is not a number of seconds",
            hint=f"set it to e.g. 1 (0 to {RETRY_BACKOFF_CAP:g}), or unset it",
        )


def stop_grace() -> float:
    raw = os.environ.get("LAUNCHKIT_STOP_GRACE")
    if raw is None:
        return DEFAULT_STOP_GRACE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 86400:  # also refuses nan and inf
        raise UsageError(
            f"LAUNCHKIT_STOP_GRACE={raw!r} is not a number of seconds",
            hint="set it to e.g. 10 (0 to 86400), or unset it",
        )
    return value


def check_bash(memo: Path | None = None) -> None:
    """The entrypoint needs bash 5.1+; macOS ships 3.2. One line with the fix, before anything runs.
    With `memo`, a file that remembers the last bash found good (its path and file identity), that
    bash is not run again."""
    bash = shutil.which("bash")
    if bash is None:
        raise PreconditionError("the local backend needs bash 5.1 or newer, and there is no bash on PATH")
    try:
        st = os.stat(bash)
        key = f"{os.path.realpath(bash)} {st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns}\n"
    except OSError:
        key = None
    if memo is not None and key is not None:
        try:
            if memo.read_text() == key:
                return
        except (OSError, UnicodeDecodeError):
            pass
    try:
        out = subprocess.run(
            [bash, "-c", 'echo "${BASH_VERSINFO[0]} ${BASH_VERSINFO[1]}"'],
            check=False,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.split()
        version = (int(out[0]), int(out[1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        version = (0, 0)
    if version < BASH_NEEDED:
        found = f"{version[0]}.{version[1]}" if version > (0, 0) else "of unknown version"
        raise PreconditionError(
            f"the local backend needs bash 5.1 or newer, but {bash} is {found}",
            hint="on macOS: `brew install bash`, with Homebrew's bin before /bin on PATH",
        )
    if memo is not None and key is not None:
        try:
            memo.write_text(key)
        except OSError:
            pass  # checked again next time


def check_gpus(task: TaskView) -> int | None:
    """Refuse more GPUs than this machine has; the count, when it had to be read (--gpus N > 0):
    the supervisor then does not run nvidia-smi again before the job can start."""
    wanted = task.gpus or 0
    if not wanted:
        return None
    have = gpu_count()
    if wanted > have:
        raise UsageError(
            f"--gpus {wanted}: this machine has {have} GPU{'s' if have != 1 else ''}",
            hint=(f"use --gpus {have} or fewer" if have else "drop --gpus")
            + " for a local run, or run it on Beaker (without --local)",
        )
    return have


class LocalBackend:
    name = "local"
    capabilities = registry.BY_NAME[name].capabilities

    def __init__(self, app: Application | None = None) -> None:
        self.app = app or Application()
        self.root = home()
        self.clock: Callable[[], float] = time.time  # seconds since the epoch (a running run's phases)

    @cached_property
    def store(self) -> Store:
        """runs.db, opened (and rebuilt if need be) on first use: find-gpus never touches it."""
        return Store(self.root, warn=self.app.warn)

    def rdir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    # ---- submit
    def prepare(self, submission: Submission) -> Submission:
        """Nothing to resolve: the local backend runs the spec as built."""
        return submission

    def submit(self, submission: Submission) -> RunInfo:
        received = time.time()  # the run's `created` (bench_local.py times the parts from here)

        spec = submission.spec.copy()  # the runtime mount becomes local files
        use_runtime(self.root, spec)
        submission = submission.model_copy(update={"spec": spec})
        task = spec.tasks[0]
        env_vars = task.env
        missing = [v.secret for v in env_vars if v.secret and v.secret not in os.environ]
        if missing:
            raise PreconditionError(
                f"local runs read secrets from your environment, and {', '.join(missing)} is not set",
                hint=f"export {missing[0]}=... before launching (the value is never written to disk)",
            )
        stop_grace()
        check_retry_backoff()
        procs.cgroups_wanted()  # a bad LAUNCHKIT_CGROUP fails the launch, not the run
        gpus = check_gpus(task)
        env = {v.name: v.value for v in env_vars if not v.secret}
        has_commit = _HasCommit(submission.repo_root, env.get(ENV_GIT_COMMIT))  # runs meanwhile
        try:
            check_bash(self.root / BASH_MEMO)
            links: list[list[str]] = []
            if submission.uploads:  # the job sees each --upload at its path through a symlink
                links = link_uploads(self.root, submission.spec, submission.uploads)
            store = self.store  # the state dir and runs.db are usable before anything is written
            meta: dict[str, Any] = {"repo_root": submission.repo_root, "links": links}
            if gpus is not None:
                meta["gpus"] = gpus
            if has_commit.answer():
                meta["git_remote"] = submission.repo_root  # clone from here: no push needed locally
            webhook = (
                submission.slack_webhook_url.get_secret_value() if submission.slack_webhook_url else None
            )
            # --slack-webhook-secret NAME (--notify-secret NAME): NAME's value, handed over as the
            # webhook (the events URL); NAME itself is left out of the supervisor's environment unless
            # another variable needs it too
            hooks = (ENV_WEBHOOK, ENV_NOTIFY)
            named = [v.secret for v in env_vars if v.name == ENV_WEBHOOK and v.secret]
            told = [v.secret for v in env_vars if v.name == ENV_NOTIFY and v.secret]
            others = {v.secret for v in env_vars if v.name not in hooks and v.secret}
            webhook = webhook or next((os.environ[n] for n in named if os.environ.get(n)), None)
            events = next((os.environ[n] for n in told if os.environ.get(n)), None)
            drop = tuple(n for n in (*named, *told) if n not in others)
            if webhook is not None or named:
                meta["slack"] = True  # the run posts its own messages (node_notifies); never the URL
        finally:
            has_commit.close()
        if task.mounts:
            self.app.warn(
                f"local runs do not mount datasets, Weka or host paths: "
                f"{len(task.mounts)} mount(s) in the spec are ignored"
            )
        run_id = f"local-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(received))}-{secrets.token_hex(3)}"
        rdir = self.rdir(run_id)
        rec = record.new(run_id, submission.name, task.replicas, created=received)
        lock = -1
        try:  # the run dir and its record first (the truth), then the index; all or nothing
            rdir.mkdir()
            (rdir / "spec.json").write_text(json.dumps(spec.to_json()))
            (rdir / "meta.json").write_text(json.dumps(meta))
            lock = record.take_lock(rdir)  # held from now until the supervisor exits
            record.write(rdir, rec)
            store.upsert(rec)
            log = open(rdir / "supervisor.log", "ab")
        except (OSError, PreconditionError) as e:
            if lock >= 0:
                os.close(lock)
            shutil.rmtree(rdir, ignore_errors=True)
            try:
                store.delete(run_id)
            except PreconditionError:
                pass  # never indexed
            raise e if isinstance(e, PreconditionError) else state_error(str(rdir), e) from None
        with _interrupt_held() as interrupted:  # a run exists from here, its id not yet told
            try:
                with log:
                    pid = spawn.start_supervisor(str(rdir), lock, log.fileno(), webhook, drop, events)
            except OSError as e:
                raise BackendError(f"could not start the local supervisor: {e}") from None
            finally:
                os.close(lock)  # the supervisor holds the lock now
            self._index({**rec, "supervisor_pid": pid})
            run = self.get(run_id)
            if interrupted:  # Ctrl-C before the launch was told: nothing of it is left running
                self.stop(run)
                self.app.info(f"interrupted: {run_id} was stopped before it started")
                raise KeyboardInterrupt
        return run

    # ---- state
    def _index(self, rec: dict[str, Any], row: Any = None) -> None:
        """Bring runs.db up to date with a record (unless `row`, its index entry, already is);
        the record stays the truth when the disk is full."""
        if row is not None and all(row[c] == column(rec, c) for c in INDEXED):
            return
        try:
            self.store.upsert(rec)
        except PreconditionError:
            pass

    def _current(self, run_id: str, row: Any = None) -> dict[str, Any] | None:
        """The run's record, marked lost if its supervisor is gone before recording an end."""
        rdir = self.rdir(run_id)
        alive = record.supervisor_alive(rdir)  # before reading: a supervisor records its end, then exits
        rec = record.read(rdir)
        if rec is None:
            return None
        if rec["status"] not in record.FINISHED and not alive:
            pid = rec.get("supervisor_pid")
            died = (
                f"its supervisor (pid {pid}) died before the run ended"
                if pid
                else "its supervisor never started"
            )
            rec.update(status="lost", finished=time.time(), message=f"{died}; {_leftovers(rdir, rec)}")
            try:
                record.write(rdir, rec)
            except OSError:
                pass  # still reported as lost; recorded next time
        self._index(rec, row)
        return rec

    def _record(self, run_id: str) -> dict[str, Any]:
        if not RUN_ID.fullmatch(run_id):  # not one submit() makes: never a path under the state dir
            shown = run_id if len(run_id) <= 60 else f"{run_id[:40]}... ({len(run_id)} characters)"
            raise NotFoundError(f"no local run {shown!r}", hint="see `launchkit list --local`")
        row = self.store.run(run_id)
        if row is not None and row["status"] in ENDED:
            return _from_row(row)
        rec = self._current(run_id, row)
        if rec is None:
            if row is None:
                raise NotFoundError(f"no local run {run_id!r}", hint="see `launchkit list --local`")
            rec = _from_row(row)
            if not self.rdir(run_id).exists() and rec["status"] not in record.FINISHED:
                rec.update(status="lost", finished=time.time(), message="its run directory was removed")
                self._index(rec)
        return rec

    def _info(self, rec: dict[str, Any]) -> RunInfo:
        attempts = max((j["attempt"] for j in outcome.jobs(rec)), default=1)
        phases, hours = self._phases(rec)
        return RunInfo(
            id=rec["id"],
            name=rec["name"],
            backend="local",
            status=RunStatus(rec["status"]),
            exit_code=rec["exit_code"],
            created=_created(rec["created"]),
            started=_ts(rec["started"]),
            finished=_ts(rec["finished"]),
            replicas=rec["replicas"],
            author=os.environ.get("USER"),
            message=rec.get("message"),
            end=run_end(rec, self.rdir(rec["id"])),
            attempts=attempts,
            retry=attempt_text(outcome.view(rec)) if attempts > 1 else None,
            resume=resume_note(self._details(rec)) if attempts > 1 else None,
            phases=phases,
            gpu_hours=hours,
        )

    def _phases(
        self, rec: dict[str, Any], seen: ph.SetupSeen | None = None
    ) -> tuple[ph.Phases, float | None]:
        """Replica 0's newest attempt: queued until it started (`_queued_from`), the rest from the
        log's markers (`seen`); GPU-hours of every job."""
        now = int(self.clock() * NS)
        jobs = outcome.jobs(rec)
        lead = max((j for j in jobs if j["replica"] == 0), key=lambda j: j["attempt"], default=None)
        started = _ns((lead or {}).get("started"))
        ended = _ns((lead or {}).get("finished")) if lead else _ns(rec.get("finished"))
        created = _queued_from(rec, lead) if lead else _ns(rec.get("created"))
        phases = ph.phases(created=created, scheduled=None, started=started, ended=ended, now=now, seen=seen)
        asked = self._gpus(rec["id"]) if any(not isinstance(j.get("gpus"), int) for j in jobs) else 0
        if asked is None:
            return phases, None
        held = [(j["gpus"] if isinstance(j.get("gpus"), int) else asked, j) for j in jobs]  # its own GPUs
        return phases, ph.gpu_hours(
            [(g, _ns(j.get("started")), _ns(j.get("finished"))) for g, j in held], now
        )

    def _gpus(self, run_id: str) -> int | None:
        """GPUs per replica, from the run's spec (None: not readable)."""
        try:
            tasks = SpecView.read((self.rdir(run_id) / "spec.json").read_text()).tasks
        except (OSError, ValueError):
            return None
        return (tasks[0].gpus or 0) if tasks else None

    def phases(self, run: RunInfo, *, where: bool = False, detail: bool = False) -> RunInfo:
        """From its record and the first lines of replica 0's newest log (a bounded read of a file);
        `detail`: every job's, from its own times and log (`_phases_detail`)."""
        rdir = self.rdir(run.id)
        rec = record.read(rdir)
        if rec is None:
            return run
        attempt = max((j["attempt"] for j in outcome.jobs(rec) if j["replica"] == 0), default=1)
        seen = ph.setup_seen(logs.head_records(logs.log_file(rdir, 0, attempt)))
        phases, hours = self._phases(rec, seen)
        notes = ph.PhaseNotes(env_cache=seen.env_cache, steps=seen.steps, attempt=attempt)
        update: dict[str, Any] = {"phases": phases, "phase_notes": notes, "gpu_hours": hours}
        if where:
            update["cluster"] = "this machine"
        if detail:
            update["phases_detail"] = self._phases_detail(rec)
        return run.model_copy(update=update)

    def _phases_detail(self, rec: dict[str, Any]) -> list[ph.PhaseDetail]:
        """Every job of the record (none for a run of one job): queued until it started
        (`_queued_from`), the rest from its own log's markers (a bounded read of a file each)."""
        jobs = outcome.jobs(rec)
        if len(jobs) < 2:
            return []
        rdir, now = self.rdir(rec["id"]), int(self.clock() * NS)
        try:
            task = SpecView.read((rdir / "spec.json").read_text()).tasks[0].name
        except (OSError, ValueError, IndexError):
            task = "main"
        out = []
        for j in sorted(jobs, key=lambda j: (j["attempt"], j["replica"])):
            rank, attempt = j["replica"], j["attempt"]
            seen = ph.setup_seen(logs.head_records(logs.log_file(rdir, rank, attempt)))
            p = ph.phases(
                created=_queued_from(rec, j),
                scheduled=None,
                started=_ns(j.get("started")),
                ended=_ns(j.get("finished")),
                now=now,
                seen=seen,
            )
            out.append(
                ph.PhaseDetail(task=task, attempt=attempt, replica=rank, phases=p, env_cache=seen.env_cache)
            )
        return out

    def attempts_detail(self, run: RunInfo) -> list[AttemptDetail]:
        return self._details(self._record(run.id))

    def _details(self, rec: dict[str, Any]) -> list[AttemptDetail]:
        """Every job of the record: its end, GPU-hours and its log's first and last progress."""
        rdir = self.rdir(rec["id"])
        patterns = _patterns(rdir)
        found = []
        ends = {(j.replica, j.attempt): j for j in outcome.view(rec).jobs}
        for job in outcome.jobs(rec):
            rank, attempt = job["replica"], job["attempt"]
            path = logs.log_file(rdir, rank, attempt)
            head, tail = logs.head_records(path, HEAD_BYTES), logs.last_records(path, TAIL_BYTES)
            first, last = attempt_progress(head, tail, patterns)
            started, gpus = job.get("started"), job.get("gpus")
            hours = None
            if isinstance(started, float | int) and isinstance(gpus, int):
                hours = round(gpus * ((job.get("finished") or time.time()) - started) / 3600, 4)
            model = ends.get((rank, attempt))
            found.append(
                AttemptDetail(
                    task=outcome.TASK,
                    replica=rank,
                    attempt=attempt,
                    cause=ended_as(model) if model is not None else None,
                    exit_code=job.get("exit_code"),
                    gpu_hours=hours,
                    first_progress=first,
                    last_progress=last,
                )
            )
        return found

    def get(self, run_ref: str) -> RunInfo:
        return self._info(self._record(run_ref))

    def latest(self, *, author: str | None = None) -> RunInfo | None:
        _no_author(author)
        rows = self.store.runs(limit=1)
        return self.get(rows[0]["id"]) if rows else None

    def list_runs(
        self,
        *,
        limit: int = 20,
        statuses: list[RunStatus] | None = None,
        author: str | None = None,
        text: str | None = None,
        max_age: dt.timedelta | None = None,
        include_all: bool = False,  # no Capability.others_runs: every local run is yours
        mine: bool = False,
        progress: bool = False,
    ) -> list[RunInfo]:
        _no_author(author)
        for row in self.store.runs(limit=None, statuses=["queued", "running"]):
            self._current(row["id"], row)  # so that statuses are current before filtering on them
        since = time.time() - max_age.total_seconds() if max_age else None
        rows = self.store.runs(
            limit=limit, statuses=[s.value for s in statuses or []], text=text, since=since
        )
        infos = [self._info(_from_row(r)) for r in rows]
        if not progress:
            return infos
        return [
            r.model_copy(update={"progress": self.progress(r)}) if r.status == RunStatus.running else r
            for r in infos
        ]

    def progress(self, run: RunInfo) -> Progress | None:
        """Replica 0's newest attempt: the last TAIL_BYTES of its log, with the run's own patterns."""
        if run.status != RunStatus.running:
            return None
        rdir = self.rdir(run.id)
        rec = record.read(rdir) or {"id": run.id}
        attempt = max((j["attempt"] for j in outcome.jobs(rec) if j["replica"] == 0), default=1)
        patterns = _patterns(rdir)
        return last_progress(logs.last_records(logs.log_file(rdir, 0, attempt), TAIL_BYTES), patterns)

    # ---- logs
    def _ranks(self, run: RunInfo, replica: int | None) -> list[int]:
        if replica is None:
            return list(range(run.replicas))
        if not 0 <= replica < run.replicas:
            raise NotFoundError(
                f"run {run.id} has no replica {replica}", hint=f"replicas are 0..{run.replicas - 1}"
            )
        return [replica]

    def secret_values(self, run: RunInfo) -> dict[str, str | None]:
        """The secrets a local run was given come from the launching shell's environment (by name, as
        submit() reads them): their values there now (None: not set in this shell)."""
        try:
            spec = SpecView.read((self.rdir(run.id) / "spec.json").read_text())
        except (OSError, ValueError):
            return {}
        return {name: os.environ.get(name) for name in dict.fromkeys(spec.secrets())}

    def events_posting(self, run: RunInfo) -> Posting:
        """A local run posts every event itself (its runtime and its supervisor)."""
        return Posting.sweep if self.run_policy(run).sweep else Posting.run

    def run_policy(self, run: RunInfo) -> Policy:
        try:
            return SpecView.read((self.rdir(run.id) / "spec.json").read_text()).policy()
        except (OSError, ValueError):
            return EMPTY_POLICY

    def slack_posting(self, run: RunInfo) -> Posting:
        """A local run with a webhook posts every message itself (its runtime and its supervisor)."""
        try:
            given = json.loads((self.rdir(run.id) / "meta.json").read_text()).get("slack")
        except (OSError, ValueError):
            given = False
        if self.run_policy(run).sweep:
            return Posting.sweep
        return Posting.run if given else Posting.follower

    def _attempts(self, run: RunInfo, ranks: list[int], attempt: int | None) -> list[tuple[int, int]]:
        """(rank, attempt) of each log to read: attempt `attempt` of each replica that had it, else
        each replica's newest."""
        jobs = outcome.jobs(self._record(run.id))
        had: dict[int, set[int]] = {r: {1} for r in ranks}
        for job in jobs:
            if job["replica"] in had:
                had[job["replica"]].add(job["attempt"])
        if attempt is None:
            return [(r, max(had[r])) for r in ranks]
        found = [(r, attempt) for r in ranks if attempt in had[r]]
        if not found:
            most = max(max(a) for a in had.values())
            raise NotFoundError(
                f"run {run.id} has no attempt {attempt}",
                hint=f"attempts are 1..{most}" if most > 1 else "it ran once: drop --attempt",
            )
        return found

    def write_logs(self, run: RunInfo, query: LogQuery, out: IO[bytes]) -> None:
        ranks = self._ranks(run, query.replica)
        since = int(query.since.timestamp() * 1e9) if query.since else None
        if query.since_ago is not None:  # this machine's clock stamps a local run's lines
            since = time.time_ns() - int(query.since_ago * 1e9)
        merged: list[tuple[int, int, bytes]] = []
        for rank, attempt in self._attempts(run, ranks, query.run):
            merged += [
                (ts, rank, line)
                for ts, line in logs.read_records(logs.log_file(self.rdir(run.id), rank, attempt))
                if since is None or ts >= since
            ]
        merged.sort(key=lambda r: (r[0], r[1]))
        if query.head is not None:
            merged = merged[: query.head]
        if query.tail is not None:
            merged = merged[-query.tail :] if query.tail else []
        prefix = len(ranks) > 1
        for ts, rank, line in merged:
            out.write(self._decorate(ts, rank, line, prefix, query.timestamps))
        out.flush()

    @staticmethod
    def _decorate(ts: int, rank: int, line: bytes, prefix: bool, timestamps: bool) -> bytes:
        head = b""
        if timestamps:
            head += dt.datetime.fromtimestamp(ts / 1e9, dt.UTC).isoformat().encode() + b" "
        if prefix:
            head += b"[%d] " % rank
        return head + line

    def follow(
        self,
        run: RunInfo,
        out: IO[bytes],
        *,
        replica: int | None = None,
        all_replicas: bool = False,
        tail: int | None = None,
    ) -> int:
        ranks = self._ranks(run, replica)
        rdir = self.rdir(run.id)
        tails = {(rank, 1): logs.Tail(logs.log_file(rdir, rank)) for rank in ranks}
        told: set[tuple[int, int]] = set()  # (rank, attempt) of the failures said, once retried
        quiet_since = time.monotonic()
        skip = tail is not None  # --tail N: of the lines written so far, only the last N
        replay = run.status.finished  # it had ended before following began: its retries are past
        with bell.Doorbell(rdir) as door:  # before the first read: no ring is missed
            while True:
                rec = self._record(run.id)  # before reading the logs: an ended run's logs are complete
                jobs = [j for j in outcome.jobs(rec) if j["replica"] in ranks]
                for attempt in sorted({1, *(j["attempt"] for j in jobs)}):
                    for rank in ranks:  # attempt by attempt: a retry's lines after its predecessor's
                        if (rank, attempt) not in tails and any(
                            j["replica"] == rank and j["attempt"] == attempt for j in jobs
                        ):
                            tails[rank, attempt] = logs.Tail(logs.log_file(rdir, rank, attempt))
                        reader = tails.get((rank, attempt))
                        records = list(reader.read()) if reader is not None else []
                        if skip:
                            records = records[-tail:] if tail else []
                        for ts, line in records:
                            out.write(self._decorate(ts, rank, line, len(ranks) > 1, False))
                            quiet_since = time.monotonic()
                    out.flush()
                    self._tell_retries(rec, attempt, ranks, told, replay)
                skip = False
                if rec["status"] in record.FINISHED:
                    return self._outcome(rec)
                quiet = time.monotonic() - quiet_since
                door.wait(WAKE_FALLBACK if door.sock else min(max(quiet / 10, MIN_POLL), MAX_POLL))

    def _tell_retries(
        self, rec: dict[str, Any], attempt: int, ranks: list[int], told: set[tuple[int, int]], replay: bool
    ) -> None:
        """Say how a job of `attempt` ended, once its next attempt runs or waits to (its log is complete
        then: the supervisor records the retry's wait, `retry_delay`, after the job's output). `replay`:
        the run had ended before following began: the retry is told as past, without its wait."""
        newer = {
            j["replica"]
            for j in outcome.jobs(rec)
            if j["replica"] in ranks
            and (j["attempt"] > attempt or (j["attempt"] == attempt and j.get("retry_delay") is not None))
        }
        if not newer - {r for r, a in told if a == attempt}:
            return

        run_view = outcome.view(rec)
        for rank in sorted(newer):
            part = run_view.part(outcome.TASK, rank)
            job = part.attempt(attempt) if part is not None else None
            told.add((rank, attempt))
            line = attempt_line(run_view, job, ended=replay) if job is not None else None
            if line:
                self.app.info(line)

    @staticmethod
    def _outcome(rec: dict[str, Any]) -> int:
        """follow's exit code; a run that could not be kept track of is an error of its own."""
        if rec.get("state_error"):
            raise PreconditionError(
                f"{rec['id']} was {rec.get('message')}",
                hint="free disk space under the local state dir, or set LAUNCHKIT_LOCAL_HOME elsewhere",
            )
        if rec["status"] == "lost":
            raise BackendError(f"{rec['id']} is lost: {rec.get('message')}")
        return RunStatus(rec["status"]).shell_code(rec["exit_code"])

    # ---- results
    def _results_dirs(self, run: RunInfo) -> dict[int, Path]:
        """Each replica's newest job's results dir, by rank."""
        rdir = str(self.rdir(run.id))
        newest = self._attempts(run, list(range(run.replicas)), None)
        return {rank: Path(record.job_dir(rdir, rank, attempt)) / "results" for rank, attempt in newest}

    def download_results(self, run: RunInfo, dest: str | None) -> list[str]:
        """A local run's results are already here (its results dirs); with `dest`, copied there."""
        dirs = {rank: d for rank, d in self._results_dirs(run).items() if d.is_dir()}
        if not dirs:
            raise NotFoundError(f"{run.id} has no results yet", hint=f"see `launchkit logs {run.id}`")
        if dest is None:
            return [str(d) for d in dirs.values()]
        out = []
        for rank, d in dirs.items():
            target = Path(dest) / f"replica-{rank}" if len(dirs) > 1 else Path(dest)
            shutil.copytree(d, target, dirs_exist_ok=True, symlinks=True)
            out.append(str(target))
        return out

    def results_location(self, run: RunInfo) -> str:
        dirs = list(self._results_dirs(run).values())
        first = self.rdir(run.id) / "replica-0" / "results"
        if len(dirs) == 1:
            where = str(dirs[0])
        elif all(d == first.parent.parent / f"replica-{r}" / "results" for r, d in enumerate(dirs)):
            where = str(first.parent.parent / "replica-*" / "results")
        else:  # a replica was retried: its newest attempt's
            where = ", ".join(map(str, dirs))
        return f"results: {where}"

    # ---- stop
    def stop(self, run: RunInfo, *, reason: str | None = None) -> RunInfo:
        grace = stop_grace()
        rec = self._record(run.id)
        if rec["status"] in ENDED:
            return self._info(rec)
        rdir = self.rdir(run.id)
        try:  # launchkit's own stop: the supervisor records its reason as the message (else the user's)
            record.ask_stop(rdir, ending.LAUNCHKIT_STOP + reason if reason is not None else "")
        except OSError as e:
            self.app.debug(f"the reason for stopping {run.id} could not be written: {e}")
        asked = record.supervisor_alive(rdir)  # then it ends as canceled, even if it dies doing so
        if asked:
            row = self.store.run(run.id)
            pid = rec.get("supervisor_pid") or (row["supervisor_pid"] if row else None)
            if pid:
                _signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace + 15
            while time.monotonic() < deadline and record.supervisor_alive(rdir):
                time.sleep(0.02)
            rec = self._record(run.id)
            if rec["status"] in ENDED:
                return self._info(rec)
            if pid and record.supervisor_alive(rdir):  # hung: end it with the rest
                _signal(pid, signal.SIGKILL)
        # No supervisor (died, or hung): end every process of the run ourselves, and check.
        ended, left = procs.RunProcs.of(rdir, rec).end(min(grace, 2))
        rec = self._record(run.id)
        if left:
            rec["message"] = f"{(rec.get('message') or '').split(';')[0]}; {_leftovers(rdir, rec, left)}"
            self._save(rdir, rec)
            raise PreconditionError(
                f"could not end {len(left)} process(es) of {run.id}: pid {', '.join(map(str, left))}",
                hint="they belong to another user or ignore signals; end them with `sudo kill -9`",
            )
        if rec["status"] not in ENDED:
            was_lost = rec["status"] == "lost" and not asked
            if ended or not was_lost:
                rec.update(
                    status="canceled",
                    finished=time.time(),
                    message=record.stop_reason(rdir) + (" after its supervisor died" if was_lost else ""),
                )
            else:
                rec["message"] = (rec.get("message") or "").split(";")[0] + "; nothing of it is left running"
            self._save(rdir, rec)
        _unlink_uploads(rdir)  # its processes are ended; the supervisor that would have done this is gone
        remove_credentials(rdir)
        return self._info(rec)

    def _save(self, rdir: Path, rec: dict[str, Any]) -> None:
        try:
            record.write(rdir, rec)
        except OSError as e:
            raise state_error(str(rdir), e) from None
        self._index(rec)

    # ---- prune
    def prunable(self, older_than: dt.timedelta) -> list[RunInfo]:
        """Ended runs older than `older_than` (by end time), of which no process is left."""
        self.list_runs(limit=1)  # marks runs whose supervisor died as lost
        rows = self.store.runs(
            limit=None, statuses=[*ENDED, "lost"], before=time.time() - older_than.total_seconds()
        )
        return [
            self._info(_from_row(r)) for r in rows if not self._alive(r["id"], scan=r["status"] == "lost")
        ]

    def _alive(self, run_id: str, *, scan: bool = True) -> list[int]:
        """Pids of the run's live processes (its cgroup, recorded tree and process groups; with
        `scan`, also every process's marker variable, the slow part)."""
        rdir = self.rdir(run_id)
        rec = record.read(rdir)
        if rec is None:
            return []
        return procs.RunProcs.of(rdir, rec).alive(scan=scan)

    def remove(self, run: RunInfo) -> None:
        rdir = self.rdir(run.id)
        if record.supervisor_alive(rdir):
            raise PreconditionError(f"{run.id} is running", hint=f"stop it first: launchkit stop {run.id}")
        left = self._alive(run.id)
        if left:
            raise PreconditionError(
                f"{run.id} still has {len(left)} process(es) running (pid {', '.join(map(str, left))})",
                hint=f"end them first: launchkit stop {run.id}",
            )
        bell.clear(rdir)  # and the sockets of followers killed while it ran, kept outside it
        _unlink_uploads(rdir)  # a lost run's links: its supervisor never removed them
        rec = record.read(rdir) or {}
        procs.remove_cgroup(procs.run_cgroup(run.id, rec.get("cgroup")))
        shutil.rmtree(rdir, ignore_errors=True)
        if rdir.exists():
            raise PreconditionError(
                f"could not remove all of {rdir}", hint="fix its permissions and prune again"
            )
        self.store.delete(run.id)

    def size(self, run: RunInfo) -> int:
        total = 0
        for folder, _, files in os.walk(self.rdir(run.id)):
            for name in files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_size
                except OSError:
                    pass
        return total

    # ---- GPUs
    def find_gpus(
        self,
        *,
        gpu_types: list[str] | None = None,
        include_all: bool = False,
        gpus: int | None = None,  # Capability.gpu_filters: refused by the CLI for local runs
        replicas: int = 1,
    ) -> list[GpuRow]:
        try:
            r = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=index,name,memory.total,memory.used,utilization.gpu",
                    "--format=csv,noheader,nounits",
                ],
                check=False,
                capture_output=True,
                text=True,
                timeout=30,
            )
        except FileNotFoundError:
            return []
        except (OSError, subprocess.SubprocessError) as e:
            raise BackendError(f"nvidia-smi failed: {e}") from None
        found: list[GpuRow] = []
        for line in r.stdout.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 5:
                found.append(
                    {
                        "index": int(parts[0]),
                        "name": parts[1],
                        "memory_total_mib": int(parts[2]),
                        "memory_used_mib": int(parts[3]),
                        "utilization_pct": int(parts[4]),
                    }
                )
        return found


def _from_row(row: Any) -> dict[str, Any]:
    """A run's index row as a record (its jobs decoded)."""
    return {**dict(row), "jobs": None, **row_jobs(row)}


def _leftovers(rdir: Path, rec: dict[str, Any], left: list[int] | None = None) -> str:
    """What is left of a run whose supervisor is gone, as checked now (credentials go when nothing is)."""
    left = procs.RunProcs.of(rdir, rec).alive() if left is None else left
    if not left:
        remove_credentials(rdir)
        return "nothing of it is left running"
    n = len(left)
    return (
        f"{n} of its process{'es are' if n != 1 else ' is'} still running (pid {', '.join(map(str, left))}); "
        f"`launchkit stop {rec['id']}` ends them"
    )


def _unlink_uploads(rdir: Path) -> None:
    unlink_uploads(str(rdir))


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # it just ended


def _no_author(author: str | None) -> None:
    if author:
        raise UsageError(
            f"--author {author}: local runs are all yours", hint="drop --author (it filters Beaker runs)"
        )


def _patterns(rdir: Path) -> tuple[str, ...]:
    """The run's progress patterns, from its policy in the spec it ran (none: the watchdog's defaults)."""
    try:
        return SpecView(json.loads((rdir / "spec.json").read_text())).policy().progress_patterns
    except (OSError, ValueError):  # (a PolicyError is a ValueError)
        return ()
