"""The detached process that runs one local job: `python -m launchkit.backends.local.supervisor RUN_DIR`.

It starts every replica (the spec's own `bash -c <entrypoint>` command, each in its own session and
process group, in its own runtime dir), writes their output to timestamped logs, and keeps the run's
record (record.py) up to date: one entry per job, a replica's attempt. As on Beaker, a replica that
fails has its siblings stopped for it under the task's propagateFailure, and gets a new attempt
while the spec's retry.allowedTaskRetries last (with its siblings, when they were stopped for it);
with --retry-on, only for the causes it names, up to its cap (retry.py).
Each replica's process group is recorded *before* the replica runs: the replica first waits at a
gate on its stdin, which the supervisor opens only once the record is written; if the supervisor
dies before that, the gate closes and the replica exits unstarted.
On SIGTERM (`launchkit stop`) it ends every process of the run.

Standard library only (psutil only when leftovers must be searched; the run model, pydantic, only to
end a run of several jobs): it starts in ~20 ms.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from launchkit.backends.local import bell, logs, outcome, posts, procs, record, retry, spawn
from launchkit.backends.local.cleanup import remove_credentials
from launchkit.backends.local.memlimit import MemoryLimit
from launchkit.core.contract import ENV_GIT_REMOTE, ENV_RESULTS_DIR, ENV_RUNTIME_DIR
from launchkit.core.redact import looks_secret_name, redact_url, token_kind
from launchkit.core.specview import SpecView, TaskView
from launchkit.core.status import Cause, RunStatus
from launchkit.core.units import parse_size
from launchkit.runtime.node.launch.notify import TIMEOUT, hooks_text
from launchkit.runtime.node.policy import (
    EMPTY,
    ENV_ATTEMPT,
    ENV_NOTIFY,
    ENV_RESUME_FROM,
    ENV_WEBHOOK,
    PREEMPTION,
    RUN,
    SUPERVISOR,
    SWEEP,
    Policy,
    posts_any,
)

TYPE_CHECKING = False  # not typing's: start-up matters here (no typing, pathlib, shutil, socket)
if TYPE_CHECKING:
    from typing import Any

DEFAULT_STOP_GRACE = 10.0
# The replica's first process: wait for the supervisor's go (a newline on stdin), then become the job.
GATE = ["/bin/sh", "-c", 'read -r _ || exit 125; exec "$@" </dev/null', "launchkit-gate"]


# A local retry waits before its attempt starts: RETRY_BACKOFF seconds before the run's first retry,
# doubling with each one after, at most RETRY_BACKOFF_CAP (a command that fails at once must not make
# attempts, and a directory each, as fast as it can). LAUNCHKIT_LOCAL_RETRY_BACKOFF sets the first wait.
RETRY_BACKOFF = 1.0
RETRY_BACKOFF_CAP = 60.0
ENV_RETRY_BACKOFF = "LAUNCHKIT_LOCAL_RETRY_BACKOFF"
POLL = 0.05  # while a retry waits and other replicas run: how often their ends are looked for


def retry_backoff(environ: Any = None) -> float:
    """The first retry's wait: LAUNCHKIT_LOCAL_RETRY_BACKOFF seconds, 0 to RETRY_BACKOFF_CAP (checked by
    the CLI at launch; the default if unusable here)."""
    raw = (os.environ if environ is None else environ).get(ENV_RETRY_BACKOFF)
    try:
        value = RETRY_BACKOFF if raw is None else float(raw)
    except ValueError:
        return RETRY_BACKOFF
    return value if 0 <= value <= RETRY_BACKOFF_CAP else RETRY_BACKOFF


def backoff(first: float, retry_number: int) -> float:
    """Seconds before the run's retry `retry_number` (1-based): `first`, doubling, at most the cap."""
    return min(first * 2.0 ** min(retry_number - 1, 30), RETRY_BACKOFF_CAP)


def stop_grace() -> float:
    """LAUNCHKIT_STOP_GRACE seconds (checked by the CLI at launch; the default if unusable here)."""
    try:
        value = float(os.environ.get("LAUNCHKIT_STOP_GRACE", DEFAULT_STOP_GRACE))
    except ValueError:
        return DEFAULT_STOP_GRACE
    return value if 0 <= value <= 86400 else DEFAULT_STOP_GRACE


def gpu_count() -> int:
    if procs.which("nvidia-smi") is None:
        return 0
    try:
        r = subprocess.run(["nvidia-smi", "-L"], check=False, capture_output=True, text=True, timeout=20)
        out = r.stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def gpu_share(total: int, per_replica: int | None, replicas: int, rank: int) -> tuple[int, str | None]:
    """(BEAKER_ASSIGNED_GPU_COUNT, CUDA_VISIBLE_DEVICES) for one replica.

    With `--gpus G` and room for every replica, each gets its own G GPUs; otherwise all share all.
    """
    if total == 0:
        return 0, None
    if per_replica == 0:  # --gpus 0 (gantry's "no GPUs"): hide them all
        return 0, ""
    if per_replica and per_replica * replicas <= total:
        return per_replica, ",".join(str(i) for i in range(rank * per_replica, (rank + 1) * per_replica))
    return total, None


# Credentials by name that the name checks of core/redact.py don't catch (e.g. no TOKEN/KEY suffix).
CREDENTIAL_NAMES = frozenset({"AWS_ACCESS_KEY_ID", "GH_ENTERPRISE_TOKEN", "NETRC", "PGPASSFILE"})


def is_credential(name: str, value: str) -> bool:
    """A variable of the user's shell that a Beaker job would not have: a credential by its name
    (BEAKER_TOKEN, GITHUB_TOKEN, *_SECRET, *_KEY, *WEBHOOK*, ...) or by its value (a known token
    format, a URL carrying user-info or credential parameters, a Slack webhook)."""
    if name in CREDENTIAL_NAMES or looks_secret_name(name) or token_kind(value):
        return True
    return "://" in value and (redact_url(value) != value or "hooks.slack.com/" in value.lower())


def base_env(rdir: str) -> dict[str, str]:
    """The user's environment minus its credentials (the job gets those only through the spec,
    as on Beaker) and launchkit's own venv; uv stays reachable via the run's bin dir."""
    env = {name: value for name, value in os.environ.items() if not is_credential(name, value)}
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONHOME", None)
    env.pop("UV_PROJECT_ENVIRONMENT", None)
    own_bin = os.path.join(sys.prefix, "bin")
    path = [
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if p and (sys.prefix == sys.base_prefix or p != own_bin)
    ]
    bin_dir = os.path.join(rdir, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    uv = procs.which("uv", path=own_bin)
    link = os.path.join(bin_dir, "uv")
    if uv and not os.path.lexists(link):
        os.symlink(uv, link)  # else the entrypoint installs uv itself if needed
    env["PATH"] = os.pathsep.join([*path, bin_dir])
    return env


def what_runs(spec: SpecView) -> tuple[TaskView, int, list[str], bool, int]:
    """The spec's job: (its task, replicas, argv, whether one replica's failure stops the others,
    retries allowed)."""
    task = spec.tasks[0]
    count = task.replicas
    argv = [*task.command, *task.arguments]
    return task, count, argv, count > 1 and task.propagate_failure, spec.task_retries


def replica_env(
    base: dict[str, str],
    spec_task: TaskView,
    meta: dict[str, Any],
    rdir: str,
    rank: int,
    count: int,
    total_gpus: int,
    attempt: int = 1,
) -> dict[str, str]:
    run_id = os.path.basename(rdir)
    job_id = outcome.job_id(run_id, rank, attempt)
    env = dict(base)
    for var in spec_task.env:
        if var.name in (ENV_WEBHOOK, ENV_NOTIFY):
            continue  # the supervisor's, given to the runtime alone (posts.py)
        if var.secret:
            env[var.name] = os.environ[var.secret]  # checked at submit; never stored
        else:
            env[var.name] = var.value or ""
    replica_dir = record.job_dir(rdir, rank, attempt)
    host = os.uname().nodename  # socket.gethostname(), without importing socket
    gpus, visible = gpu_share(total_gpus, spec_task.gpus, count, rank)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    env.update(
        {
            procs.RUN_MARKER: run_id,
            ENV_RESULTS_DIR: os.path.join(replica_dir, "results"),
            ENV_RUNTIME_DIR: os.path.join(replica_dir, "runtime"),
            "LAUNCHKIT_TOOLS_DIR": os.path.join(os.path.dirname(os.path.dirname(rdir)), "tools"),
            "BEAKER_REPLICA_COUNT": str(count),
            "BEAKER_REPLICA_RANK": str(rank),
            "BEAKER_LEADER_REPLICA_HOSTNAME": "127.0.0.1",
            "BEAKER_ASSIGNED_GPU_COUNT": str(gpus),
            "BEAKER_JOB_ID": job_id,
            ENV_ATTEMPT: str(
                attempt
            ),  # the runtime adds its in-place restarts (runtime/node/launch/restart.py)
            "BEAKER_WORKLOAD_ID": run_id,
            "BEAKER_EXPERIMENT_ID": run_id,
            "BEAKER_TASK_ID": f"{run_id}-{spec_task.name or 'main'}",
            "BEAKER_NODE_HOSTNAME": host,
            "BEAKER_NODE_ID": host,
            "BEAKER_RESULT_DATASET_ID": f"{job_id}-results",
        }
    )
    if meta.get("git_remote"):
        env[ENV_GIT_REMOTE] = meta["git_remote"]
    return env


class Joiner:
    """Moves a replica at its gate into the run's memory cgroup (v1) and cgroup, in a thread of its
    own: `result()` waits for it, (joined the memory limit, joined the cgroup)."""

    def __init__(self, pid: int, cgroup: str | None, memory: MemoryLimit | None):
        self.pid, self.cgroup, self.memory = pid, cgroup, memory
        self.joined = (memory is None, False)
        self.thread = threading.Thread(target=self._join, daemon=True)
        self.thread.start()

    def _join(self) -> None:
        in_memory = self.memory is None or self.memory.join(self.pid)
        self.joined = (in_memory, self.cgroup is not None and procs.join_cgroup(self.cgroup, self.pid))

    def result(self) -> tuple[bool, bool]:
        self.thread.join()
        return self.joined


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class Supervisor:
    def __init__(self, rdir: str, clock: Any = time.monotonic, pause: Any = None):
        """`clock` (seconds) and `pause(seconds)` (True when the run is stopped meanwhile; default: a
        wait on the stop) time the retries' backoff; tests give their own."""
        self.rdir = rdir
        rec = record.read(rdir)
        if rec is None:
            raise RuntimeError(f"{os.path.join(rdir, record.STATUS_FILE)} is missing or unreadable")
        rec.setdefault("jobs", [])
        self.rec = rec
        self.run_id: str = rec["id"]
        self.grace = stop_grace()
        self.cancel = threading.Event()
        self.clock = clock
        self.pause = pause if pause is not None else self.cancel.wait
        self.backoff = retry_backoff()
        self.retries_made = 0
        self.pending: list[tuple[float, list[int], int]] = []  # retries waiting: (due, ranks, attempt)
        self.done = threading.Event()
        self.stopper: threading.Thread | None = None
        self.lock = threading.Lock()
        self.procs: dict[int, int] = {}  # pid (= pgid) -> rank, of each replica's running job
        self.attempts: dict[int, int] = {}  # rank -> its newest attempt (1, then one more per retry)
        self.pumps: dict[int, threading.Thread] = {}  # rank -> its newest job's log pump
        self.failing: int | None = None  # the rank whose failure the other replicas are stopped for
        self.siblings: threading.Thread | None = None  # stopping them
        self.retries_left = 0  # the spec's retry.allowedTaskRetries, less the retries made
        self.policy: Policy = EMPTY  # the run's policy (runtime/node/policy.py): --retry-on (retry.py)
        self.retried_cause: str | None = None  # the cause of the failure siblings are stopped for
        self.propagate = False  # the task's propagateFailure (several replicas)
        self.ooms = 0  # the memory controller's OOM kills counted so far
        self.storage_error: str | None = None  # a log could not be written: the run is stopped
        self.timed_out: str | None = None  # --task-timeout passed: the run is stopped
        self.webhook: str | None = None  # the run's Slack webhook (posts.py), in memory only
        self.events: str | None = None  # where the run's events go as JSON (--notify-*), in memory only
        self.subreaper = False
        self.cgroup: str | None = None  # the run's cgroup; without one, the process tree is recorded
        self.memory: MemoryLimit | None = None  # --memory, enforced by the kernel where it can be
        self.tree: dict[int, float] = {}  # pid -> start time (procs.json), without a cgroup
        self.watcher: threading.Thread | None = None
        # followers hear of every output line and record change, from the first replica's start on
        self.bells = bell.Ringer(rdir, start=False)

    # ---- the record
    def read_json(self, name: str) -> Any:
        with open(os.path.join(self.rdir, name), "rb") as f:
            return json.loads(f.read())

    def save(self, **fields: Any) -> None:
        with self.lock:
            self.rec.update(fields)
            self.write()
        self.bells.ring()

    def save_job(self, rank: int, **fields: Any) -> None:
        """Update replica `rank`'s newest job (a new one when `fields` has a new `attempt`)."""
        attempt = fields.get("attempt", self.attempts.get(rank, 1))
        with self.lock:
            job = next(
                (j for j in self.rec["jobs"] if j["replica"] == rank and j["attempt"] == attempt), None
            )
            if job is None:
                job = {"replica": rank, "attempt": attempt}
                self.rec["jobs"].append(job)
            job.update(fields)
            self.rec["ranks"][str(rank)] = {k: v for k, v in job.items() if k != "replica"}
            self.write()
        self.bells.ring()

    def write(self) -> None:
        """Write the record; once the job runs, a failed write (even after the reserve was given up)
        stops the run rather than the supervisor, whose later writes may still get through."""
        try:
            record.write(self.rdir, self.rec)
        except OSError as e:
            if not self.procs and not self.rec["jobs"]:
                raise
            if self.storage_error is None:
                self.storage_error = f"could not write its record ({e.strerror or e})"
                self.request_stop()

    # ---- stopping
    def request_stop(self) -> None:
        """End every replica (from a signal handler, or a failed log write)."""
        self.cancel.set()
        if self.stopper is None:
            self.stopper = threading.Thread(target=self.stop_all, daemon=True)
            self.stopper.start()

    def stop_all(self) -> None:
        self.end_groups(list(self.procs), kill=False)
        self.run_procs().end(0)  # and whatever escaped the groups

    def end_groups(self, groups: list[int], kill: bool = True) -> None:
        """SIGTERM to each process group; after the grace time, SIGKILL to what is left (`kill`)."""
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGTERM)
            except OSError:
                pass
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and any(procs.group_alive(g) for g in groups):
            time.sleep(0.05)
        for pgid in groups if kill else ():
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass

    def groups(self) -> list[int]:
        """Each replica's newest process group (running or not)."""
        return [int(j["pgid"]) for j in self.rec["ranks"].values() if isinstance(j.get("pgid"), int)]

    def run_procs(self) -> procs.RunProcs:
        groups = sorted({*self.procs, *self.groups()})
        return procs.RunProcs(self.run_id, groups, cgroup=self.cgroup, rdir=self.rdir, root=os.getpid())

    # ---- tracking (without a cgroup): every descendant with its start time, on disk for `stop`
    def record_tree(self) -> None:
        import psutil

        with self.lock:
            alive = {}
            for pid, started in self.tree.items():  # gone from our tree (not a subreaper)? still ours
                try:
                    if abs(psutil.Process(pid).create_time() - started) < 0.01:
                        alive[pid] = started
                except psutil.Error:
                    pass
            alive.update(procs.descendants_now(os.getpid()))
            if alive != self.tree:
                self.tree = alive
                procs.write_tree(self.rdir, list(alive.items()))

    def watch_tree(self) -> None:
        while True:
            try:
                self.record_tree()
            except OSError:
                pass  # a full disk: the last record stands
            if self.done.wait(0.25):
                return

    def log_failed(self, path: str, err: OSError) -> None:
        if self.storage_error is None:
            self.storage_error = f"could not write its log {path} ({err.strerror or err})"
            self.request_stop()

    # ---- the job
    def start(self) -> None:
        spec, self.meta = SpecView(self.read_json("spec.json")), self.read_json("meta.json")
        self.task, self.count, self.argv, self.propagate, self.retries_left = what_runs(spec)
        task = self.task
        self.webhook, self.events = posts.hooks(task)  # the runtime posts with them, and so do we (posts.py)
        self.policy = task.policy()
        if not posts_any(SUPERVISOR, RUN if not self.policy.sweep else SWEEP):  # a sweep's run: its
            self.webhook = self.events = None  # follower posts the digest (docs/notifications.md)
        if self.policy.retry_on:  # the cap counts every cause's retries (the runtime's in-place ones apart)
            self.retries_left = self.policy.retry_cap
        self.base = base_env(self.rdir)
        gpus = self.meta.get("gpus")  # counted by the CLI for --gpus (nvidia-smi takes tens of ms)
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
            gpus = gpu_count()
        self.gpus = gpus
        os.makedirs(os.path.join(self.rdir, "logs"), exist_ok=True)
        self.cgroup = procs.make_cgroup(self.run_id)
        fields: dict[str, Any] = {"supervisor_pid": os.getpid(), "cgroup": self.cgroup}
        if self.retries_left:
            fields["allowed_retries"] = self.retries_left
        memory = task.memory
        if memory:  # the replicas share the limit, as a Beaker task's processes do
            self.memory = MemoryLimit.make(self.run_id, parse_size(memory), self.cgroup)
            fields.update(memory=memory, memory_enforced=self.memory is not None)
        self.spawn(list(range(self.count)), 1, fields)
        if not self.cancel.is_set():
            self.save(status="running", started=time.time())
            if task.timeout_ns:  # --task-timeout, from the start, as on Beaker
                threading.Thread(target=self.time_out, args=(task.timeout_ns / 1e9,), daemon=True).start()

    def spawn(self, ranks: list[int], attempt: int, first: dict[str, Any] | None = None) -> None:
        """Start attempt `attempt` of replicas `ranks`; `first`: the record's fields of the run's
        start (its first attempt), saved before any replica runs."""
        # Every replica waits at its gate while it joins the run's cgroup (the kernel takes ~10 ms to
        # move a process: an RCU grace period), for all at once and while the rest is set up. Until
        # its gate opens, a replica that loses its supervisor exits unstarted.
        gates: list[tuple[int, Any, int, Joiner]] = []
        try:
            for rank in ranks:
                if self.cancel.is_set():
                    break
                job_dir = record.job_dir(self.rdir, rank, attempt)
                os.makedirs(job_dir, exist_ok=True)
                env = replica_env(
                    self.base, self.task, self.meta, self.rdir, rank, self.count, self.gpus, attempt
                )
                handed: tuple[int, ...] = ()
                if self.webhook or self.events:  # on a pipe the entrypoint reads once: in no environment
                    handed = (spawn.hand_over(hooks_text(self.webhook, self.events)),)
                    env[spawn.HOOKS_FD_ENV] = str(handed[0])
                if attempt > 1:  # checked against the step the attempt before reached (watchdog.py)
                    patterns = self.policy.progress_patterns
                    step = retry.resume_from(self.rdir, rank, self.attempts.get(rank, attempt - 1), patterns)
                    if step is not None:
                        env[ENV_RESUME_FROM] = step
                gate_r, gate_w = os.pipe()
                try:
                    p = subprocess.Popen(
                        [*GATE, *self.argv],
                        env=env,
                        cwd=job_dir,
                        stdin=gate_r,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        pass_fds=handed,
                    )
                except BaseException:
                    os.close(gate_w)
                    raise
                finally:
                    os.close(gate_r)
                    for fd in handed:
                        os.close(fd)
                p.returncode = 0  # we reap all children with waitpid(-1): keep subprocess from reaping it
                self.procs[p.pid] = rank
                self.attempts[rank] = attempt
                gates.append((rank, p, gate_w, Joiner(p.pid, self.cgroup, self.memory)))
            if first is not None:
                record.reserve(self.rdir)
                self.save(**first)
                self.subreaper = procs.become_subreaper()  # before any replica runs: orphans come back to us
            while gates:
                rank, p, gate_w, joiner = gates.pop(0)
                try:  # recorded before it runs: whoever finds this run can end the group
                    self.track(p.pid, *joiner.result())
                    gpus = gpu_share(self.gpus, self.task.gpus, self.count, rank)[0]  # GPU-hours (why --json)
                    self.save_job(
                        rank, attempt=attempt, pgid=p.pid, status="running", started=time.time(), gpus=gpus
                    )
                    if not self.cancel.is_set():
                        os.write(gate_w, b"go\n")
                        self.bells.start()  # not before: its thread would compete with the gates
                finally:
                    os.close(gate_w)
                path = logs.log_file(self.rdir, rank, attempt)
                t = threading.Thread(target=self.pump, args=(p.stdout, path), daemon=True)
                t.start()
                self.pumps[rank] = t
            if attempt > 1 and self.events and not self.cancel.is_set():  # a retry began: its event
                body = posts.attempt_json(self.rec, attempt)
                threading.Thread(target=posts.post_event, args=(self.events, body), daemon=True).start()
        finally:
            for _, p, gate_w, joiner in gates:  # never opened (an error): they exit at their gates
                os.close(gate_w)
                p.stdout.close()
                joiner.result()

    def time_out(self, seconds: float) -> None:
        """Stop the run once it has run `seconds` (its record then says which timeout)."""
        if not self.done.wait(seconds) and not self.cancel.is_set():
            self.timed_out = f"--task-timeout {seconds:g}s passed"
            self.request_stop()

    def track(self, pid: int, in_memory: bool, in_cgroup: bool) -> None:
        """Record where a replica (still at its gate) can be found: the run's cgroup it joined, else
        the recorded tree, watched from now on."""
        if self.memory is not None and not in_memory:
            self.memory = None  # refused: the limit is not enforced (the record says so)
            self.save(memory_enforced=False)
        if self.cgroup and in_cgroup:
            return
        if self.cgroup:  # the cgroup refuses it: fall back to the tree for the whole run
            procs.remove_cgroup(self.cgroup)
            self.cgroup = None
            self.save(cgroup=None)
        self.record_tree()
        if self.watcher is None:
            self.watcher = threading.Thread(target=self.watch_tree, daemon=True)
            self.watcher.start()

    def pump(self, stream: Any, path: str) -> None:
        try:
            logs.pump(stream, path, self.bells.ring)
        except OSError as e:
            self.log_failed(path, e)
            while stream.read(65536):  # keep the job from blocking on a full pipe until it is ended
                pass

    def wait(self) -> None:
        while self.procs or self.pending:
            if self.pending and not self.due():
                continue
            try:
                pid, status = os.waitpid(-1, os.WNOHANG if self.pending else 0)
            except ChildProcessError:
                if self.pending:  # nothing to reap now: the retry's wait goes on
                    self.pause(max(0.0, min(POLL, self.pending[0][0] - self.clock())))
                    continue
                break
            if pid == 0:  # a retry waits and the other replicas run on: look again soon
                self.pause(max(0.0, min(POLL, self.pending[0][0] - self.clock())))
                continue
            rank = self.procs.pop(pid, None)
            if rank is None:
                continue  # an orphan re-parented to us
            self.job_ended(rank, exit_code(status))

    def job_ended(self, rank: int, code: int) -> None:
        """Record how replica `rank`'s job ended; on a failure, stop its siblings (propagateFailure)
        and retry (retry.allowedTaskRetries), as Beaker does."""
        fields: dict[str, Any] = {"exit_code": code, "finished": time.time()}
        if code != 0 and self.memory is not None:
            kills = self.memory.oom_kills()  # the kernel's count, for the whole run
            if kills > self.ooms:
                self.ooms = kills
                fields["oom"] = True
        cause = None
        if self.cancel.is_set():
            fields.update(status=RunStatus.canceled.value, stop=Cause.canceled.value)
        elif self.failing is not None:
            fields.update(
                status=RunStatus.canceled.value, stop=Cause.sibling_failed.value, stopped_for=self.failing
            )
        elif self.policy.require_resume and retry.resume_stopped(
            code, self.rdir, rank, self.attempts.get(rank, 1), self.pumps.get(rank)
        ):
            fields.update(status="failed", cause=retry.NOT_RESUMING)
        elif code != 0 and self.policy.retry_on:
            cause = retry.cause_of(code, self.rdir, rank, self.attempts.get(rank, 1), self.pumps.get(rank))
            fields.update(retry.fields(cause))
        else:
            fields["status"] = "succeeded" if code == 0 else "failed"
        self.save_job(rank, **fields)
        if self.cancel.is_set():
            return
        failed = fields["status"] == "failed" or cause == PREEMPTION
        if failed:
            self.retried_cause = cause
        if fields.get("cause") == retry.NOT_RESUMING:
            self.retries_left = 0  # launchkit's stop: nothing of the run is retried again
        if failed and self.propagate and self.procs:
            self.failing = rank  # the others are stopped for it, then (with retries left) all run again
            self.siblings = threading.Thread(target=self.end_groups, args=(list(self.procs),), daemon=True)
            self.siblings.start()
        elif not self.retries_left or not retry.wanted(self.policy, self.retried_cause):
            return
        elif not self.propagate and failed:
            self.retry([rank])  # the others run on
        elif self.propagate and not self.procs and (failed or self.failing is not None):
            self.retry([r for r in range(self.count) if self.job(r).get("status") != "succeeded"])

    def due(self) -> bool:
        """Start the retries whose wait is over; with nothing running, wait for the next one. False when
        nothing is left to wait for (the run was stopped meanwhile)."""
        if self.cancel.is_set():
            self.pending.clear()
            return False
        if not self.procs and self.pending[0][0] > (now := self.clock()):
            if self.pause(self.pending[0][0] - now) or self.cancel.is_set():
                self.pending.clear()
                return False
        while self.pending and self.pending[0][0] <= self.clock():
            _, ranks, attempt = self.pending.pop(0)
            self.spawn(ranks, attempt)
        return True

    def job(self, rank: int) -> dict[str, Any]:
        return self.rec["ranks"].get(str(rank)) or {}

    def retry(self, ranks: list[int]) -> None:
        """Run `ranks` again as a new attempt, once what their last one left is ended."""
        self.retries_left -= 1
        if self.siblings is not None:
            self.siblings.join()
            self.siblings = None
        self.failing = None
        if self.procs:  # others still run: end what is left in the retried replicas' groups
            self.end_groups([self.job(r)["pgid"] for r in ranks if self.job(r).get("pgid")])
        else:  # nothing else runs: whatever is left of the attempt (daemons, escaped sessions)
            procs.RunProcs(self.run_id, self.groups(), root=os.getpid()).end(self.grace)
        for r in ranks:
            pump = self.pumps.get(r)
            if pump is not None:
                pump.join(timeout=5)  # its last lines are logged before the retry shows in the record
        if not self.cancel.is_set():  # after the backoff (told in the attempt line: core/runs.py)
            self.retries_made += 1
            delay = backoff(self.backoff, self.retries_made)
            for r in ranks:
                self.save_job(r, retry_delay=delay)
            self.pending.append((self.clock() + delay, ranks, max(self.attempts[r] for r in ranks) + 1))
            self.pending.sort(key=lambda p: p[0])

    def finish(self) -> None:
        # Nothing may outlive the job: end leftovers (daemons, escaped sessions), then drain the logs.
        groups = self.groups()
        self.done.set()
        if self.watcher is not None:
            self.watcher.join()
        if self.siblings is not None:
            self.siblings.join()
        clean = self.subreaper and procs.reap_children() and not any(map(procs.group_alive, groups))
        left: list[str] = []
        if not (clean and not (self.cgroup and procs.cgroup_pids(self.cgroup))):
            ending = self.run_procs()
            # (on Beaker the container ends with the command: nothing outlives it there); the run's
            # cgroup, or this subreaper's descendants, hold all of it: no machine-wide scan at its end
            ending.end(2, scan=not (self.cgroup or self.subreaper))
            left = ending.found
            procs.reap_children()

        remove_credentials(self.rdir)  # nothing of the job is left to read them
        for t in self.pumps.values():
            t.join(timeout=5)
        if left and not self.cancel.is_set():  # said after the command's own last lines
            shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
            try:
                logs.note(
                    logs.log_file(self.rdir, 0, self.attempts.get(0, 1)),
                    f"ended what the command left running: {shown}",
                )
            except OSError:
                pass
        if self.storage_error is not None:
            self.rec["state_error"] = True
            self.end("failed", None, f"stopped because it {self.storage_error}")
        elif self.cancel.is_set():
            newest = sorted(self.rec["ranks"].items(), key=lambda kv: int(kv[0]))
            code = next((c for c in (j.get("exit_code") for _, j in newest) if c), None)
            self.end("canceled", code, self.timed_out or record.stop_reason(self.rdir))
        else:
            self.end(*self.outcome())
        self.bells.close()  # the last ring, at once: followers see the end now
        told = posts.end_event(self.rdir, self.rec, self.timed_out, self.storage_error)
        # the two posts at once: the run's end waits for the slower one (TIMEOUT), never their sum
        event = None
        if self.events and told is not None:
            body = posts.end_json(self.rdir, self.rec, told[0])
            event = threading.Thread(target=posts.post_event, args=(self.events, body), daemon=True)
            event.start()
        if self.webhook:
            text = posts.end_message(self.rdir, self.rec, self.timed_out, self.storage_error)
            posts.post(self.webhook, text)
        if event is not None:
            event.join(TIMEOUT + 1)  # (the post keeps its own deadline: a guard)
        # Only the empty shells are left: the run's (empty) cgroups, its record's reserve, its links.
        procs.remove_cgroup(self.cgroup)
        if self.memory is not None:
            self.memory.remove()
        try:
            os.unlink(os.path.join(self.rdir, record.RESERVE_FILE))
        except OSError:
            pass

        from launchkit.backends.local.uploads import unlink_uploads

        unlink_uploads(self.rdir)  # after end(): this run no longer counts as a user of its links

    def outcome(self) -> tuple[str, int | None, str | None]:
        """(status, exit code, message) of the run, from the run model (core/runs.py); a run of one
        job is its job's end, without loading the model (pydantic) into the supervisor."""
        all_jobs = outcome.jobs(self.rec)
        if len(all_jobs) == 1 and all_jobs[0].get("status") in ("succeeded", "failed"):
            status, code, message = all_jobs[0]["status"], all_jobs[0].get("exit_code"), None
            oom = all_jobs[0].get("oom")
        else:
            result = outcome.of(self.rec)
            status = result.state.value if result.state.value in record.FINISHED else "failed"
            code, message = result.exit_code, (result.text() if result.subject or result.notes else None)
            oom = (outcome.recorded(self.rec, result.where) or {}).get("oom")
        if oom:  # the kernel's count says so: kept in the message (runs.db keeps no more)
            message = record.OOM_MESSAGE + str(self.rec.get("memory"))
        return status, code, message

    def end(self, status: str, code: int | None, message: str | None = None) -> None:
        if self.rec["status"] not in record.FINISHED:
            fields = {"status": status, "exit_code": code, "finished": time.time()}
            self.save(**fields, **({"message": message} if message else {}))


def main(rdir: str) -> None:
    sup = Supervisor(rdir)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: sup.request_stop())
    try:
        sup.start()
        sup.wait()
    except BaseException as e:  # record the failure rather than leave the run "running" forever
        sup.request_stop()
        if sup.stopper is not None:
            sup.stopper.join()
        sup.end("failed", None, f"supervisor error: {e!r}")
        raise
    finally:
        try:
            sup.finish()
        finally:
            sup.bells.close()  # the last ring, after the final record (if finish() did not get there)


if __name__ == "__main__":
    main(sys.argv[1])
