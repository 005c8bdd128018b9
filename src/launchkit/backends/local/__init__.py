"""The local backend: runs the job's own entrypoint on this machine, under a detached supervisor.

State lives under the user state dir (platformdirs): `runs.db` (SQLite) and `runs/<id>/` with the
spec, per-replica runtime/results dirs and timestamped logs (docs/local-backend.md).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from typing import IO, Any

from launchkit.application import Application
from launchkit.backends import Capability, GpuRow, LogQuery, RunInfo, RunStatus, Submission
from launchkit.backends.local import logs, procs
from launchkit.backends.local.store import Store, log_path, run_dir
from launchkit.core.contract import ENV_GIT_COMMIT
from launchkit.errors import BackendError, NotFoundError, PreconditionError, UsageError

POLL = 0.1


def _ts(value: float | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromtimestamp(value, dt.UTC)


def _has_commit(repo_root: str, sha: str) -> bool:
    r = subprocess.run(
        ["git", "-C", repo_root, "cat-file", "-e", f"{sha}^{{commit}}"], capture_output=True, timeout=30
    )
    return r.returncode == 0


class LocalBackend:
    name = "local"
    capabilities = frozenset({Capability.uploads, Capability.unpushed})

    def __init__(self, app: Application | None = None) -> None:
        self.app = app or Application()
        self.store = Store()

    # ---- submit
    def submit(self, submission: Submission) -> RunInfo:
        task = submission.spec["tasks"][0]
        env_vars = task.get("envVars") or task.get("env_vars") or []
        missing = [v["secret"] for v in env_vars if v.get("secret") and v["secret"] not in os.environ]
        if missing:
            raise PreconditionError(
                f"local runs read secrets from your environment, and {', '.join(missing)} is not set",
                hint=f"export {missing[0]}=... before launching (the value is never written to disk)",
            )
        env = {v["name"]: v.get("value") for v in env_vars if not v.get("secret")}
        if task.get("datasets"):
            self.app.warn(
                f"local runs do not mount datasets, Weka or host paths: "
                f"{len(task['datasets'])} mount(s) in the spec are ignored"
            )
        meta: dict[str, Any] = {"repo_root": submission.repo_root}
        commit = env.get(ENV_GIT_COMMIT)
        if submission.repo_root and commit and _has_commit(submission.repo_root, commit):
            meta["git_remote"] = submission.repo_root  # clone from here: no push needed locally
        run_id = f"local-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
        rdir = run_dir(run_id)
        rdir.mkdir(parents=True)
        (rdir / "spec.json").write_text(json.dumps(submission.spec))
        (rdir / "meta.json").write_text(json.dumps(meta))
        replicas = int(task.get("replicas") or 1)
        self.store.create_run(run_id, submission.name, replicas)
        with open(rdir / "supervisor.log", "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "launchkit.backends.local.supervisor", run_id],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        proc.returncode = 0  # detached: never waited for
        self.store.update_run(run_id, supervisor_pid=proc.pid)
        return self.get(run_id)

    # ---- state
    def _info(self, row: Any) -> RunInfo:
        return RunInfo(
            id=row["id"],
            name=row["name"],
            backend="local",
            status=RunStatus(row["status"]),
            exit_code=row["exit_code"],
            created=_ts(row["created"]),
            started=_ts(row["started"]),
            finished=_ts(row["finished"]),
            replicas=row["replicas"],
            author=os.environ.get("USER"),
        )

    def _supervisor_alive(self, row: Any) -> bool:
        pid = row["supervisor_pid"]
        return bool(pid) and procs.alive(pid) and row["id"].encode() in procs.cmdline(pid)

    def get(self, run_ref: str) -> RunInfo:
        row = self.store.run(run_ref)
        if row is None:
            raise NotFoundError(f"no local run {run_ref!r}", hint="see `launchkit list --local`")
        if (
            row["status"] not in ("succeeded", "failed", "canceled")
            and row["supervisor_pid"]
            and not self._supervisor_alive(row)
        ):
            row = self.store.run(run_ref)  # it may have just finished
            if row["status"] not in ("succeeded", "failed", "canceled"):
                self.store.finish_run(run_ref, "failed", None, "the local supervisor process died")
                row = self.store.run(run_ref)
        return self._info(row)

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
    ) -> list[RunInfo]:
        _no_author(author)
        since = time.time() - max_age.total_seconds() if max_age else None
        rows = self.store.runs(
            limit=limit, statuses=[s.value for s in statuses or []], text=text, since=since
        )
        return [self.get(r["id"]) if r["status"] in ("queued", "running") else self._info(r) for r in rows]

    # ---- logs
    def _ranks(self, run: RunInfo, replica: int | None) -> list[int]:
        if replica is None:
            return list(range(run.replicas))
        if not 0 <= replica < run.replicas:
            raise NotFoundError(
                f"run {run.id} has no replica {replica}", hint=f"replicas are 0..{run.replicas - 1}"
            )
        return [replica]

    def write_logs(self, run: RunInfo, query: LogQuery, out: IO[bytes]) -> None:
        ranks = self._ranks(run, query.replica)
        since = int(query.since.timestamp() * 1e9) if query.since else None
        merged: list[tuple[int, int, bytes]] = []
        for rank in ranks:
            merged += [
                (ts, rank, line)
                for ts, line in logs.read_records(str(log_path(run.id, rank)))
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
        tails = {rank: logs.Tail(str(log_path(run.id, rank))) for rank in ranks}
        skip = tail is not None  # --tail N: of the lines written so far, only the last N
        while True:
            info = self.get(run.id)
            for rank, reader in tails.items():
                records = list(reader.read())
                if skip:
                    records = records[-tail:] if tail else []
                for ts, line in records:
                    out.write(self._decorate(ts, rank, line, len(ranks) > 1, False))
            skip = False
            out.flush()
            if info.status.finished:
                return 0 if info.status == RunStatus.succeeded else (info.exit_code or 1)
            time.sleep(POLL)

    # ---- stop
    def stop(self, run: RunInfo) -> RunInfo:
        row = self.store.run(run.id)
        if row is None:
            raise NotFoundError(f"no local run {run.id!r}")
        deadline = time.monotonic() + 5
        while row["status"] == "queued" and self._supervisor_alive(row) and time.monotonic() < deadline:
            time.sleep(POLL)  # let the supervisor start (and record) its replicas first
            row = self.store.run(run.id)
        if row["status"] in ("succeeded", "failed", "canceled"):
            return self._info(row)
        if self._supervisor_alive(row):
            os.kill(row["supervisor_pid"], signal.SIGTERM)
            from launchkit.backends.local.supervisor import STOP_GRACE

            deadline = time.monotonic() + STOP_GRACE + 15
            while time.monotonic() < deadline:
                info = self.get(run.id)
                if info.status.finished:
                    return info
                time.sleep(POLL)
        # No supervisor (or it hangs): end the replicas' process trees ourselves.
        pids = [r["pid"] for r in self.store.replicas(run.id) if r["pid"] and r["status"] == "running"]
        if row["supervisor_pid"]:
            pids.append(row["supervisor_pid"])
        procs.end_tree(pids, pids, 2)
        self.store.finish_run(run.id, "canceled", None, "stopped by user")
        return self.get(run.id)

    # ---- GPUs
    def find_gpus(self, *, gpu_types: list[str] | None = None, include_all: bool = False) -> list[GpuRow]:
        try:
            r = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=index,name,memory.total,memory.used,utilization.gpu",
                    "--format=csv,noheader,nounits",
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except FileNotFoundError:
            return []
        except (OSError, subprocess.SubprocessError) as e:
            raise BackendError(f"nvidia-smi failed: {e}") from None
        gpus: list[GpuRow] = []
        for line in r.stdout.splitlines():
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 5:
                gpus.append(
                    {
                        "index": int(parts[0]),
                        "name": parts[1],
                        "memory_total_mib": int(parts[2]),
                        "memory_used_mib": int(parts[3]),
                        "utilization_pct": int(parts[4]),
                    }
                )
        return gpus


def _no_author(author: str | None) -> None:
    if author:
        raise UsageError(
            f"--author {author}: local runs are all yours", hint="drop --author (it filters Beaker runs)"
        )
