"""`--upload LOCAL:/PATH` for local runs: the job sees LOCAL at /PATH through a symlink.

A local run has no container, so /PATH is a real path on this machine: it is created as a symlink to
LOCAL when it does not exist, and reused when it already is that link. Each run records the links it
uses (`meta.json`: "links"); links launchkit created are listed in `upload-links.json` next to the
runs. When a run ends, a link launchkit created is removed unless another unfinished run uses it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from launchkit.backends.local.store import Store, home, run_dir
from launchkit.errors import PreconditionError

_UNFINISHED = ["queued", "starting", "running"]


def _registry() -> Path:
    return home() / "upload-links.json"


def _created() -> dict[str, str]:
    try:
        data = json.loads(_registry().read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_created(links: dict[str, str]) -> None:
    path = _registry()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(links))
    os.replace(tmp, path)


def link_uploads(spec: dict[str, Any], uploads: dict[str, str]) -> list[list[str]]:
    """Link each upload's mount path to its local path; drop those mounts from the spec. Returns the
    [mount path, local path] pairs this run uses."""
    used: list[list[str]] = []
    for task in spec.get("tasks", []):
        keep = []
        for mount in task.get("datasets") or []:
            local = uploads.get((mount.get("source") or {}).get("beaker") or "")
            if local is None:
                keep.append(mount)
                continue
            target = Path(mount["mountPath"])
            used.append([str(target), local])
            if target.is_symlink() and os.path.realpath(target) == os.path.realpath(local):
                continue
            try:
                if target.exists() or target.is_symlink():
                    raise FileExistsError(f"{target} exists")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(local)
                _save_created({**_created(), str(target): local})
            except OSError as e:
                raise PreconditionError(
                    f"--upload {local}:{target}: a local run cannot put it at {target} ({e.strerror or e})",
                    hint=f"use a free, writable path, e.g. --upload {local}:/tmp/{Path(local).name}",
                ) from None
        task["datasets"] = keep or None
    return used


def unlink_uploads(run_id: str) -> None:
    """Remove the links launchkit created for this run, unless another unfinished run uses them."""
    try:
        links = json.loads((run_dir(run_id) / "meta.json").read_text()).get("links") or []
    except (OSError, ValueError):
        return
    if not links:
        return
    in_use: set[str] = set()
    for row in Store().runs(limit=1000, statuses=_UNFINISHED):
        if row["id"] == run_id:
            continue
        try:
            meta = json.loads((run_dir(row["id"]) / "meta.json").read_text())
        except (OSError, ValueError):
            continue
        in_use.update(str(m) for m, _ in meta.get("links") or [])
    created = _created()
    removed = False
    for mount, local in links:
        path = Path(mount)
        if mount in in_use or created.get(mount) != local:
            continue
        if path.is_symlink() and os.readlink(path) == local:
            path.unlink(missing_ok=True)
        created.pop(mount)
        removed = True
    if removed:
        _save_created(created)
