"""launchkit's own record of its Beaker launches, for `--latest` (Beaker's listings may lag a create)
and `list` (a run this machine launched is launchkit's, whatever its description says), and of the
runs it stopped itself, with why.

Like the local backend's state (`<XDG state>/launchkit/local`), it lives under the XDG state dir:
`<XDG state>/launchkit/beaker/launches.jsonl`, one JSON line per launch: Beaker address, user,
experiment id and name, workspace, local time. Only ids are kept; the server is asked for the rest.

`stops.jsonl` beside it: one line per run launchkit stopped itself (`run --follow --timeout`, ...):
address, experiment id, the reason. Beaker keeps no reason with a cancel (`CancelWorkloads` takes
ids only), and anything on Beaker the user can write, the job can too: it runs with the user's token,
and OLMo-core's and open-instruct's callbacks rewrite the experiment's description while they train
(fact sheet 11.8), which is where the reason went before. This machine's state is the one place no
job reaches; the description still gets the line too, for `why` on another machine while no job has
rewritten it.

`specs.jsonl`: what experiments' specs said when `list` had to read them to tell launchkit's runs
(identity.py), so that it reads each one once. `secret-names.jsonl`: the names (never the values) of
the secrets an experiment's spec references, read once to mask what the job printed (masking.py).
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


def stops_path() -> Path:
    return user_state_dir() / "beaker" / "stops.jsonl"


def verdicts_path() -> Path:
    return user_state_dir() / "beaker" / "specs.jsonl"


def record(address: str, user: str, run_id: str, name: str, workspace: str | None) -> None:
    """Append one launch (a convenience: a failure to write is ignored; --latest then lists)."""
    entry = {"address": address, "user": user, "id": run_id, "name": name, "workspace": workspace}
    _append(path(), entry)


def record_stop(address: str, run_id: str, reason: str) -> None:
    """launchkit stopped `run_id` itself, for `reason` (a failure to write is ignored: the description
    keeps it too, until a job rewrites it)."""
    _append(stops_path(), {"address": address, "id": run_id, "reason": reason})


def stop_reasons(address: str) -> dict[str, str]:
    """Experiment id -> why launchkit stopped it, for the runs this machine stopped on this Beaker."""
    out: dict[str, str] = {}
    for entry in _entries(stops_path()):  # (newest first: the newest stop of a run is its last)
        run_id, reason = entry.get("id"), entry.get("reason")
        if entry.get("address") == address and isinstance(run_id, str) and isinstance(reason, str):
            out.setdefault(run_id, reason)
    return out


def record_verdicts(address: str, told: dict[str, bool]) -> None:
    """What experiments' specs said (launchkit's or not: identity.py), read once each; a spec never
    changes, so `list` need not ask again."""
    _append(verdicts_path(), {"address": address, "told": told})


def spec_verdicts(address: str) -> dict[str, bool]:
    """Experiment id -> whether its spec is launchkit's, as read before on this Beaker."""
    out: dict[str, bool] = {}
    for entry in _entries(verdicts_path()):
        told = entry.get("told")
        if entry.get("address") == address and isinstance(told, dict):
            for eid, ours in told.items():
                if isinstance(ours, bool):
                    out.setdefault(eid, ours)
    return out


def secret_names_path() -> Path:
    return user_state_dir() / "beaker" / "secret-names.jsonl"


def record_secret_names(address: str, run_id: str, names: list[str]) -> None:
    """The names of the secrets `run_id`'s spec references (a spec never changes: read once)."""
    _append(secret_names_path(), {"address": address, "id": run_id, "names": names})


def secret_names(address: str) -> dict[str, list[str]]:
    """Experiment id -> the names of the secrets its spec references, as read before on this Beaker."""
    out: dict[str, list[str]] = {}
    for entry in _entries(secret_names_path()):
        run_id, names = entry.get("id"), entry.get("names")
        if entry.get("address") == address and isinstance(run_id, str) and isinstance(names, list):
            out.setdefault(run_id, [n for n in names if isinstance(n, str)])
    return out


def _append(p: Path, entry: dict[str, Any]) -> None:
    entry["time"] = time.time()
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


def _entries(p: Path) -> Iterator[dict[str, Any]]:
    """The file's entries, newest first."""
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn line
        if isinstance(entry, dict):
            yield entry


def launched_ids(address: str) -> set[str]:
    """The experiments this machine launched on this Beaker (the newest KEEP)."""
    return {e["id"] for e in _entries(path()) if e.get("address") == address and isinstance(e.get("id"), str)}


def recent(address: str, user: str, workspace: str | None = None) -> Iterator[dict[str, Any]]:
    """This user's launches on this Beaker, newest first (only in `workspace`, when given)."""
    for entry in _entries(path()):
        if entry.get("address") != address or entry.get("user") != user:
            continue
        if workspace and entry.get("workspace") and entry["workspace"] != workspace:
            continue
        if isinstance(entry.get("id"), str):
            yield entry
