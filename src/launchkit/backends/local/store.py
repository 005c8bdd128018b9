"""Local run state in SQLite (WAL, busy timeout): safe for many supervisors and CLIs at once.

Kept free of heavy imports: the supervisor process imports this module.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    exit_code INTEGER,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    replicas INTEGER NOT NULL,
    supervisor_pid INTEGER,
    message TEXT
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created);
CREATE TABLE IF NOT EXISTS replicas (
    run_id TEXT NOT NULL,
    rank INTEGER NOT NULL,
    pid INTEGER,
    status TEXT NOT NULL,
    exit_code INTEGER,
    started REAL,
    finished REAL,
    PRIMARY KEY (run_id, rank)
);
"""

FINISHED = ("succeeded", "failed", "canceled")


def home() -> Path:
    """Root of the local backend's state: runs.db, runs/<id>/, tools/."""
    from platformdirs import user_state_dir

    return Path(os.environ.get("LAUNCHKIT_LOCAL_HOME") or Path(user_state_dir("launchkit")) / "local")


def run_dir(run_id: str) -> Path:
    return home() / "runs" / run_id


def task_slots(spec: dict[str, Any]) -> list[tuple[dict[str, Any], int, int]]:
    """One process per replica of every task (a --multi/--sweep run has several tasks), in order:
    (task spec, rank within the task, the task's replica count). A slot's index is its "replica"
    number in the store, its log file and its directory."""
    out = []
    for task in spec["tasks"]:
        count = int(task.get("replicas") or 1)
        out += [(task, rank, count) for rank in range(count)]
    return out


def log_path(run_id: str, rank: int) -> Path:
    return run_dir(run_id) / "logs" / f"replica-{rank}.log"


class Store:
    def __init__(self, path: Path | None = None):
        path = path or home() / "runs.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA busy_timeout = 60000")
        if self.db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            self.db.execute("PRAGMA journal_mode = WAL")
        self.db.executescript(SCHEMA)

    def _write(self, sql: str, args: tuple[Any, ...]) -> None:
        for attempt in range(50):  # busy_timeout covers most contention; this covers the rest
            try:
                self.db.execute(sql, args)
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                time.sleep(0.05 * (attempt + 1))
        self.db.execute(sql, args)

    def create_run(self, run_id: str, name: str, replicas: int) -> None:
        self._write(
            "INSERT INTO runs (id, name, status, created, replicas) VALUES (?, ?, 'queued', ?, ?)",
            (run_id, name, time.time(), replicas),
        )

    def update_run(self, run_id: str, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self._write(f"UPDATE runs SET {cols} WHERE id = ?", (*fields.values(), run_id))

    def finish_run(self, run_id: str, status: str, exit_code: int | None, message: str | None = None) -> None:
        """Record the end once: a run that is already finished keeps its first outcome."""
        self._write(
            "UPDATE runs SET status = ?, exit_code = ?, finished = ?, message = COALESCE(?, message) "
            "WHERE id = ? AND status NOT IN ('succeeded', 'failed', 'canceled')",
            (status, exit_code, time.time(), message, run_id),
        )

    def set_replica(self, run_id: str, rank: int, **fields: Any) -> None:
        self._write(
            "INSERT OR IGNORE INTO replicas (run_id, rank, status) VALUES (?, ?, 'queued')", (run_id, rank)
        )
        cols = ", ".join(f"{k} = ?" for k in fields)
        self._write(
            f"UPDATE replicas SET {cols} WHERE run_id = ? AND rank = ?", (*fields.values(), run_id, rank)
        )

    def run(self, run_id: str) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()

    def replicas(self, run_id: str) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM replicas WHERE run_id = ? ORDER BY rank", (run_id,)).fetchall()

    def runs(
        self,
        *,
        limit: int,
        statuses: list[str] | None = None,
        text: str | None = None,
        since: float | None = None,
    ) -> list[sqlite3.Row]:
        sql, args = "SELECT * FROM runs WHERE 1", []
        if statuses:
            sql += f" AND status IN ({', '.join('?' * len(statuses))})"
            args += statuses
        if text:
            sql += " AND (id LIKE ? OR name LIKE ?)"
            args += [f"%{text}%"] * 2
        if since is not None:
            sql += " AND created >= ?"
            args.append(since)
        sql += " ORDER BY created DESC, rowid DESC LIMIT ?"
        args.append(limit)
        return self.db.execute(sql, args).fetchall()
