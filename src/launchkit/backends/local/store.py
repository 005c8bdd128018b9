"""runs.db: an SQLite index (WAL, busy timeout) over the run directories, for fast `list`.

The truth about a run is its own record, `runs/<id>/status.json` (record.py); this index can always
be rebuilt from those, and is, when it is missing or unreadable. Failures to write the index (full or
read-only disk) are one-line errors, never tracebacks.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launchkit.backends.local import record
from launchkit.config import user_state_dir
from launchkit.core.specview import SpecView
from launchkit.errors import PreconditionError, UsageError

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
    message TEXT,
    jobs TEXT
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created);
"""
COLUMNS: tuple[str, ...] = ("id", "name", "status", "exit_code", "created", "started", "finished")
COLUMNS += ("replicas", "supervisor_pid", "message", "jobs")  # jobs: JSON, each replica's attempts
HOME_VAR = "LAUNCHKIT_LOCAL_HOME"


def home() -> Path:
    """Root of the local backend's state: runs.db, runs/<id>/, tools/."""
    if os.environ.get(HOME_VAR):
        return Path(os.environ[HOME_VAR]).absolute()  # replicas run in their own directories

    return user_state_dir() / "local"


def recent_run_ids(incomplete: str, limit: int = 50) -> list[str]:
    """TAB completion (the registry row's `run_ids`): the newest runs' ids starting with `incomplete`,
    read-only (no index is made or repaired for it)."""
    db = home() / "runs.db"
    if not db.is_file():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            rows = conn.execute("SELECT id FROM runs ORDER BY created DESC LIMIT ?", (limit,)).fetchall()
    except sqlite3.Error:
        return []
    return [r[0] for r in rows if r[0].startswith(incomplete)]


def run_dir(run_id: str) -> Path:
    return home() / "runs" / run_id


def log_path(run_id: str, rank: int) -> Path:
    return run_dir(run_id) / "logs" / f"replica-{rank}.log"


def state_error(what: str, err: BaseException) -> PreconditionError:
    """A failed write of local state, as one line with the fix."""
    reason = getattr(err, "strerror", None) or str(err)
    return PreconditionError(
        f"cannot write the local state ({what}): {reason}",
        hint=f"free disk space or fix permissions there, or set {HOME_VAR} to a writable directory",
    )


def ensure_home(root: Path) -> None:
    if root.exists() and not root.is_dir():
        via = f"{HOME_VAR}={root}" if os.environ.get(HOME_VAR) else f"the local state dir {root}"
        raise UsageError(f"{via} is a file, not a directory", hint=f"point {HOME_VAR} at a directory")
    try:
        (root / "runs").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise state_error(str(root), e) from None


class Store:
    def __init__(self, root: Path | None = None, warn: Callable[[str], None] | None = None):
        self.root = root or home()
        self.warn = warn or (lambda msg: None)
        ensure_home(self.root)
        self.path = self.root / "runs.db"
        self.db = self._open()

    # ---- opening and rebuilding
    def _open(self, why: str = "was missing") -> sqlite3.Connection:
        missing = not self.path.exists()
        if missing:
            for stale in ("-wal", "-shm"):  # left by a deleted runs.db: never replay them into a new one
                Path(f"{self.path}{stale}").unlink(missing_ok=True)
        try:
            db = self._connect()
        except sqlite3.OperationalError as e:
            raise state_error(str(self.path), e) from None
        except sqlite3.DatabaseError as e:
            if missing:
                raise state_error(str(self.path), e) from None
            return self._open(self._set_aside(e))
        if missing:
            count = self._rebuild(db)
            if count or why != "was missing":
                self.warn(f"runs.db {why}; rebuilt it from {count} run directories")
        return db

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        db.row_factory = sqlite3.Row
        try:
            db.execute("PRAGMA busy_timeout = 60000")
            db.execute("PRAGMA synchronous = NORMAL")  # WAL stays consistent; the index is rebuildable
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode = WAL")
            db.executescript(SCHEMA)
            if "jobs" not in {row[1] for row in db.execute("PRAGMA table_info(runs)")}:
                db.execute("ALTER TABLE runs ADD COLUMN jobs TEXT")  # a runs.db from before attempts
            db.execute("SELECT count(*) FROM runs").fetchone()
        except BaseException:
            db.close()
            raise
        return db

    def _set_aside(self, err: BaseException) -> str:
        """Move an unreadable runs.db out of the way (kept for inspection); the next open rebuilds."""
        kept = self.path.with_name(f"runs.db.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        try:
            os.replace(self.path, kept)
        except OSError as e:
            raise state_error(str(self.path), e) from None
        return f"was unreadable ({err}; kept as {kept.name})"

    def _rebuild(self, db: sqlite3.Connection) -> int:
        count = 0
        for rdir in sorted((self.root / "runs").iterdir()):
            rec = record.read(rdir) or recovered(rdir)
            if rec is not None:
                self._upsert(db, rec)
                count += 1
        return count

    # ---- writing
    def _write(self, db: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> None:
        """One write; busy_timeout covers most contention, the retries the rest. Other failures
        (read-only, full disk, unreadable file) are one-line errors."""
        for attempt in range(50):
            try:
                db.execute(sql, args)
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise state_error(str(self.path), e) from None
                time.sleep(0.05 * (attempt + 1))
            except sqlite3.DatabaseError as e:
                raise state_error(str(self.path), e) from None
        raise state_error(str(self.path), sqlite3.OperationalError("database is locked"))

    def _upsert(self, db: sqlite3.Connection, rec: dict[str, Any]) -> None:
        marks = ", ".join("?" * len(COLUMNS))
        updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c != "supervisor_pid")
        self._write(
            db,
            f"INSERT INTO runs ({', '.join(COLUMNS)}) VALUES ({marks}) ON CONFLICT(id) DO UPDATE SET "
            f"{updates}, supervisor_pid = COALESCE(excluded.supervisor_pid, runs.supervisor_pid)",
            tuple(column(rec, c) for c in COLUMNS),
        )

    def upsert(self, rec: dict[str, Any]) -> None:
        self._upsert(self.db, rec)

    def delete(self, run_id: str) -> None:
        self._write(self.db, "DELETE FROM runs WHERE id = ?", (run_id,))

    # ---- reading
    def _query(self, sql: str, args: list[Any] | tuple[Any, ...]) -> list[sqlite3.Row]:
        """Rows of a read; an index found damaged only now is set aside and rebuilt, once."""
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.OperationalError as e:
            raise state_error(str(self.path), e) from None
        except sqlite3.DatabaseError as e:
            self.db.close()
            self.db = self._open(self._set_aside(e))
            return self.db.execute(sql, args).fetchall()

    def run(self, run_id: str) -> sqlite3.Row | None:
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))
        return rows[0] if rows else None

    def runs(
        self,
        *,
        limit: int | None,
        statuses: list[str] | None = None,
        text: str | None = None,
        since: float | None = None,
        before: float | None = None,
    ) -> list[sqlite3.Row]:
        sql, args = "SELECT * FROM runs WHERE 1", list[Any]()
        if statuses:
            sql += f" AND status IN ({', '.join('?' * len(statuses))})"
            args += statuses
        if text:
            sql += " AND (id LIKE ? OR name LIKE ?)"
            args += [f"%{text}%"] * 2
        if since is not None:
            sql += " AND created >= ?"
            args.append(since)
        if before is not None:
            sql += " AND COALESCE(finished, created) < ?"
            args.append(before)
        sql += " ORDER BY created DESC, rowid DESC"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return self._query(sql, args)


def column(rec: dict[str, Any], name: str) -> Any:
    """A record's value for index column `name` (`jobs`: its jobs and retry budget, as JSON)."""
    if name != "jobs":
        return rec.get(name)
    if rec.get("jobs") is None:
        return None
    return json.dumps({"jobs": rec["jobs"], "allowed_retries": rec.get("allowed_retries") or 0})


def row_jobs(row: Any) -> dict[str, Any]:
    """What an index row keeps of a run's jobs, as record fields (none for a run indexed before
    attempts were)."""
    try:
        value = json.loads(row["jobs"] or "null")
    except (IndexError, KeyError, ValueError):
        return {}
    return value if isinstance(value, dict) and isinstance(value.get("jobs"), list) else {}


def recovered(rdir: Path) -> dict[str, Any] | None:
    """A record for a run directory without one (made by an older launchkit): its end is unknown."""
    try:
        spec = SpecView.read((rdir / "spec.json").read_text())
        created = (rdir / "spec.json").stat().st_mtime
    except (OSError, ValueError):
        return None
    rec = record.new(rdir.name, spec.description or rdir.name, 1)
    tasks = spec.tasks
    rec.update(
        created=created,
        replicas=tasks[0].replicas if tasks else 1,
        status="lost",
        message="recovered from its run directory without a status record",
    )
    return rec
