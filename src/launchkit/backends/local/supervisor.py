"""The detached process that runs one local job: `python -m launchkit.backends.local.supervisor RUN_ID`.

It starts every replica (the spec's own `bash -c <entrypoint>` command, each replica in its own
process group and runtime dir), writes their output to timestamped logs, records status and exit
codes in SQLite, and on SIGTERM (`launchkit stop`) ends every replica's whole process tree.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from launchkit.backends.local import logs, procs
from launchkit.backends.local.store import Store, log_path, run_dir, task_slots
from launchkit.core.contract import ENV_GIT_REMOTE, ENV_RESULTS_DIR, ENV_RUNTIME_DIR

STOP_GRACE = float(os.environ.get("LAUNCHKIT_STOP_GRACE", "10"))


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def gpu_share(total: int, per_replica: int | None, replicas: int, rank: int) -> tuple[int, str | None]:
    """(BEAKER_ASSIGNED_GPU_COUNT, CUDA_VISIBLE_DEVICES) for one replica.

    With `--gpus G` and room for every replica, each gets its own G GPUs; otherwise all share all.
    """
    if total == 0:
        return 0, None
    if per_replica and per_replica * replicas <= total:
        return per_replica, ",".join(str(i) for i in range(rank * per_replica, (rank + 1) * per_replica))
    return total, None


def base_env(run_id: str) -> dict[str, str]:
    """The user's environment minus launchkit's own venv; uv stays reachable via the run's bin dir."""
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONHOME", None)
    env.pop("UV_PROJECT_ENVIRONMENT", None)
    own_bin = os.path.join(sys.prefix, "bin")
    path = [
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if p and (sys.prefix == sys.base_prefix or p != own_bin)
    ]
    bin_dir = run_dir(run_id) / "bin"
    bin_dir.mkdir(exist_ok=True)
    try:
        from uv import find_uv_bin

        link = bin_dir / "uv"
        if not link.exists():
            link.symlink_to(find_uv_bin())
    except Exception:  # noqa: BLE001 - the entrypoint installs uv itself if needed
        pass
    env["PATH"] = os.pathsep.join([*path, str(bin_dir)])
    return env


def replica_env(
    base: dict[str, str],
    spec_task: dict,
    meta: dict,
    run_id: str,
    rank: int,
    count: int,
    total_gpus: int,
    *,
    slot: int | None = None,
    slots: int | None = None,
) -> dict[str, str]:
    """The env of replica `rank` of `count` of a task; `slot` of `slots` is its place among all the
    run's processes (several tasks: task_slots), which names its directory and shares the GPUs."""
    slot = rank if slot is None else slot
    slots = count if slots is None else slots
    env = dict(base)
    for var in spec_task.get("envVars") or spec_task.get("env_vars") or []:
        if var.get("secret"):
            env[var["name"]] = os.environ[var["secret"]]  # checked at submit; never stored
        else:
            env[var["name"]] = var.get("value") or ""
    rdir = run_dir(run_id) / f"replica-{slot}"
    host = socket.gethostname()
    gpus, visible = gpu_share(total_gpus, (spec_task.get("resources") or {}).get("gpuCount"), slots, slot)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    env.update(
        {
            ENV_RESULTS_DIR: str(rdir / "results"),
            ENV_RUNTIME_DIR: str(rdir / "runtime"),
            "LAUNCHKIT_TOOLS_DIR": str(run_dir(run_id).parent.parent / "tools"),
            "BEAKER_REPLICA_COUNT": str(count),
            "BEAKER_REPLICA_RANK": str(rank),
            "BEAKER_LEADER_REPLICA_HOSTNAME": "127.0.0.1",
            "BEAKER_ASSIGNED_GPU_COUNT": str(gpus),
            "BEAKER_JOB_ID": f"{run_id}-{slot}",
            "BEAKER_WORKLOAD_ID": run_id,
            "BEAKER_EXPERIMENT_ID": run_id,
            "BEAKER_TASK_ID": f"{run_id}-{spec_task.get('name', 'main')}",
            "BEAKER_NODE_HOSTNAME": host,
            "BEAKER_NODE_ID": host,
            "BEAKER_RESULT_DATASET_ID": f"{run_id}-{slot}-results",
        }
    )
    if meta.get("git_remote"):
        env[ENV_GIT_REMOTE] = meta["git_remote"]
    return env


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class Supervisor:
    def __init__(self, run_id: str):
        self.run_id = run_id
        self.store = Store()
        self.cancel = threading.Event()
        self.procs: dict[int, int] = {}  # pid -> slot (a replica of a task: store.task_slots)
        self.codes: dict[int, int] = {}  # slot -> exit code
        self.task_of: dict[int, int] = {}  # slot -> index of its task
        self.stopped: set[int] = set()  # slots stopped because another replica of their task failed
        self.pumps: list[threading.Thread] = []
        self.failed_first: int | None = None  # rank whose failure ended the others

    def stop_all(self) -> None:
        pids = list(self.procs)
        procs.end_tree(pids, [os.getpid()], STOP_GRACE)

    def start(self) -> None:
        rdir = run_dir(self.run_id)
        spec = json.loads((rdir / "spec.json").read_text())
        meta = json.loads((rdir / "meta.json").read_text())
        slots = task_slots(spec)
        names = [t.get("name") for t in spec["tasks"]]
        base = base_env(self.run_id)
        gpus = gpu_count()
        (rdir / "logs").mkdir(exist_ok=True)
        for slot, (task, rank, count) in enumerate(slots):
            if self.cancel.is_set():
                break
            argv = [*task["command"], *(task.get("arguments") or [])]
            self.task_of[slot] = names.index(task.get("name"))
            (rdir / f"replica-{slot}").mkdir(exist_ok=True)
            env = replica_env(base, task, meta, self.run_id, rank, count, gpus, slot=slot, slots=len(slots))
            p = subprocess.Popen(
                argv,
                env=env,
                cwd=rdir / f"replica-{slot}",
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self.procs[p.pid] = slot
            self.store.set_replica(self.run_id, slot, pid=p.pid, status="running", started=time.time())
            t = threading.Thread(
                target=logs.pump, args=(p.stdout, str(log_path(self.run_id, slot))), daemon=True
            )
            t.start()
            self.pumps.append(t)
            p.returncode = 0  # we reap all children with waitpid(-1): keep subprocess from reaping this one
        if not self.cancel.is_set():
            self.store.update_run(self.run_id, status="running", started=time.time())

    def wait(self) -> None:
        live = set(self.procs)
        stopping = False
        while live:
            if self.cancel.is_set() and not stopping:
                stopping = True
                threading.Thread(target=self.stop_all, daemon=True).start()
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.05)
                continue
            if pid not in live:
                continue  # an orphan re-parented to us
            live.discard(pid)
            rank, code = self.procs[pid], exit_code(status)
            self.codes[rank] = code
            stopped = self.cancel.is_set() or rank in self.stopped
            state = "canceled" if stopped else ("succeeded" if code == 0 else "failed")
            self.store.set_replica(self.run_id, rank, status=state, exit_code=code, finished=time.time())
            if code != 0 and live and not stopped:  # propagate failure within the task, like Beaker
                task = self.task_of.get(rank, 0)
                siblings = [p for p in live if self.task_of.get(self.procs[p], 0) == task]
                if len(siblings) == len(live):  # every live replica is of this task: the run is over
                    self.failed_first = rank
                    self.cancel.set()
                elif siblings:  # other tasks (a sweep's other points) keep running
                    self.stopped.update(self.procs[p] for p in siblings)
                    threading.Thread(
                        target=procs.end_tree, args=(siblings, [os.getpid()], STOP_GRACE), daemon=True
                    ).start()

    def finish(self) -> None:
        # Nothing may outlive the job: end leftovers (daemons, escaped sessions), then drain the logs.
        procs.end_tree(list(self.procs), [os.getpid()], 2)
        for t in self.pumps:
            t.join(timeout=5)
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        first_failure = next((c for r, c in sorted(self.codes.items()) if c != 0), None)
        if self.failed_first is not None:
            first_failure = self.codes[self.failed_first]
            self.store.finish_run(
                self.run_id,
                "failed",
                first_failure,
                f"replica {self.failed_first} failed; the others were stopped",
            )
        elif self.cancel.is_set():
            self.store.finish_run(self.run_id, "canceled", first_failure, "stopped by user")
        elif first_failure is not None:
            self.store.finish_run(self.run_id, "failed", first_failure)
        else:
            self.store.finish_run(self.run_id, "succeeded", 0)


def main(run_id: str) -> None:
    sup = Supervisor(run_id)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: sup.cancel.set())
    procs.become_subreaper()
    try:
        sup.start()
        sup.wait()
    except BaseException as e:  # record the failure rather than leave the run "running" forever
        sup.store.finish_run(run_id, "failed", None, f"supervisor error: {e!r}")
        sup.stop_all()
        raise
    finally:
        sup.finish()


if __name__ == "__main__":
    main(sys.argv[1])
