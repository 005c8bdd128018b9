"""A run's own record, `runs/<id>/status.json`: the source of truth for its status.

Written atomically (temp file + rename) by one writer at a time: the CLI when it creates the run,
then the supervisor; the CLI again only once the supervisor is gone (lost, stopped). runs.db is an
index over these files and can always be rebuilt from them. Standard library only: the supervisor
imports this module.

A run's supervisor holds an exclusive lock on `runs/<id>/supervisor.lock` for as long as it lives:
the CLI takes it before starting the supervisor and hands the open file over, so "the lock is free"
means "the supervisor is gone", without pids (which get reused) or /proc.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time

from launchkit.core import status

TYPE_CHECKING = False  # the supervisor imports this module: no `typing`, no `pathlib` at run time
if TYPE_CHECKING:
    from typing import Any

    Dir = str | os.PathLike[str]

FINISHED = tuple(s.value for s in status.FINISHED)
OOM_MESSAGE = "killed for going over --memory "  # + the limit; kept in runs.db's message column
STATUS_FILE = "status.json"
LOCK_FILE = "supervisor.lock"
RESERVE_FILE = "reserve"  # space kept for the record: freed when the disk is full, so the end is told
RESERVE_BYTES = 256 * 1024
# Why launchkit itself stops the run (`Backend.stop(reason=)`), written before the supervisor is told:
# the supervisor records it as the canceled run's message instead of "stopped by user".
STOP_REASON_FILE = "stop-reason"
STOPPED_BY_USER = "stopped by user"


def read(rdir: Dir) -> dict[str, Any] | None:
    try:
        with open(os.path.join(rdir, STATUS_FILE), "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "id" in data else None


def ask_stop(rdir: Dir, reason: str) -> None:
    """Say why the run is being stopped, before its supervisor is signalled (it reads stop_reason);
    "": a user's `launchkit stop` (a reason left by an earlier stop that did not finish goes)."""
    tmp = os.path.join(rdir, f".{STOP_REASON_FILE}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(reason)
    os.replace(tmp, os.path.join(rdir, STOP_REASON_FILE))


def stop_reason(rdir: Dir) -> str:
    """Why the run was stopped: launchkit's own reason (ask_stop), else a user's `launchkit stop`."""
    try:
        with open(os.path.join(rdir, STOP_REASON_FILE), encoding="utf-8") as f:
            return f.read().strip() or STOPPED_BY_USER
    except OSError:
        return STOPPED_BY_USER


def reserve(rdir: Dir) -> None:
    """Set space aside for the record's last writes (a job that fills the disk must not keep its run
    from being recorded failed, with the reason)."""
    try:
        fd = os.open(os.path.join(rdir, RESERVE_FILE), os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)
    except (OSError, AttributeError):  # macOS has no posix_fallocate; tmpfs and ext4 do
        try:
            os.write(fd, bytes(RESERVE_BYTES))
        except OSError:
            pass
    finally:
        os.close(fd)


def write(rdir: Dir, data: dict[str, Any]) -> None:
    """Replace the record atomically (raises OSError when the disk is full or read-only). On a full
    disk, the run's reserve is given up and the write tried again."""
    try:
        _write(rdir, data)
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        try:
            os.unlink(os.path.join(rdir, RESERVE_FILE))
        except OSError:
            raise e from None
        _write(rdir, data)


def _write(rdir: Dir, data: dict[str, Any]) -> None:
    tmp = os.path.join(rdir, f".{STATUS_FILE}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(data))
        os.replace(tmp, os.path.join(rdir, STATUS_FILE))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def new(run_id: str, name: str, replicas: int, created: float | None = None) -> dict[str, Any]:
    """A queued run's record; `created`: when the backend received it (time.time(), now if None)."""
    return {
        "id": run_id,
        "name": name,
        "status": "queued",
        "exit_code": None,
        "created": time.time() if created is None else created,
        "started": None,
        "finished": None,
        "replicas": replicas,
        "supervisor_pid": None,
        "message": None,
        "ranks": {},  # rank -> its newest job ({"pgid", "attempt", "status", "exit_code", "started", ...})
        "jobs": [],  # every job (a replica's attempt), oldest first: outcome.py reads the run from them
    }


def job_dir(rdir: str, rank: int, attempt: int = 1) -> str:
    """A job's own dir (runtime/, results/): `replica-N`, a retry's `replica-N/attempt-K` (fresh, as
    a Beaker retry starts on a fresh node with a new result dataset)."""
    base = os.path.join(rdir, f"replica-{rank}")
    return base if attempt == 1 else os.path.join(base, f"attempt-{attempt}")


def take_lock(rdir: Dir) -> int:
    """Open and lock the supervisor lock file; the fd goes to the supervisor."""
    fd = os.open(os.path.join(rdir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def supervisor_alive(rdir: Dir) -> bool:
    """True while the run's supervisor (or the CLI starting it) holds the lock."""
    try:
        fd = os.open(os.path.join(rdir, LOCK_FILE), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
