"""launchkit's own record of its Beaker launches, for `--latest` (Beaker's listings may lag a create).

Like the local backend's state (`<XDG state>/launchkit/local`), it lives under the XDG state dir:
`<XDG state>/launchkit/beaker/launches.jsonl`, one JSON line per launch: Beaker address, user,
experiment id and name, workspace, local time. Only ids are kept; the server is asked for the rest.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from launchkit.config import user_state_dir

KEEP = 200  # launches kept per file (the newest)


def path() -> Path:
    return user_state_dir() / "beaker" / "launches.jsonl"


def record(address: str, user: str, run_id: str, name: str, workspace: str | None) -> None:
    """Append one launch (a convenience: a failure to write is ignored; --latest then lists)."""
    entry = {"address": address, "user": user, "id": run_id, "name": name, "workspace": workspace}
    entry["time"] = time.time()  # type: ignore[assignment]
    p = path()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with p.open("a", encoding="utf-8") as f:  # one short line per write: appends do not interleave
            f.write(json.dumps(entry) + "\n")
        if p.stat().st_size > KEEP * 2 * 300:
            _trim(p)
    except OSError:
        pass


def _trim(p: Path) -> None:
    lines = p.read_text(encoding="utf-8").splitlines()[-KEEP:]
    tmp = p.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.replace(tmp, p)


def recent(address: str, user: str, workspace: str | None = None) -> Iterator[dict[str, Any]]:
    """This user's launches on this Beaker, newest first (only in `workspace`, when given)."""
    try:
        lines = path().read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn line
        if not isinstance(entry, dict) or entry.get("address") != address or entry.get("user") != user:
            continue
        if workspace and entry.get("workspace") and entry["workspace"] != workspace:
            continue
        if isinstance(entry.get("id"), str):
            yield entry
