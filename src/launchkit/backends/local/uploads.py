"""`--upload LOCAL:/PATH` for local runs: the job sees LOCAL at /PATH through a symlink.

A local run has no container, so /PATH is a real path on this machine: it is created as a symlink to
LOCAL when it does not exist, and reused when it already is that link. Each run records the links it
uses (`meta.json`: "links"); links launchkit created are listed in `upload-links.json` next to the
runs. When a run ends (its supervisor's last step), a link launchkit created is removed unless
another unfinished run uses it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from launchkit.backends.local import record
from launchkit.backends.uploadtree import files
from launchkit.core.specview import SpecView
from launchkit.errors import PreconditionError


def _registry(root: Path) -> Path:
    return root / "upload-links.json"


def _created(root: Path) -> dict[str, str]:
    try:
        data = json.loads(_registry(root).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_created(root: Path, links: dict[str, str]) -> None:
    path = _registry(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(links))
    os.replace(tmp, path)


def link_uploads(root: Path, spec: SpecView, uploads: dict[str, str]) -> list[list[str]]:
    """Link each upload's mount path to its local path; drop those mounts from the spec. Returns the
    [mount path, local path] pairs this run uses. `root`: the local backend's state dir."""
    for path in uploads.values():
        files(path)  # what a Beaker upload would refuse (links out, special files) is refused here too
    used: list[list[str]] = []
    for task in spec.tasks:
        keep = []
        for mount in task.mounts:
            local = uploads.get(mount.beaker or "")
            if local is None:
                keep.append(mount)
                continue
            target = Path(mount.mount_path)
            used.append([str(target), local])
            if target.is_symlink() and os.path.realpath(target) == os.path.realpath(local):
                continue
            try:
                if target.exists() or target.is_symlink():
                    raise FileExistsError(f"{target} exists")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(local)
                _save_created(root, {**_created(root), str(target): local})
            except OSError as e:
                raise PreconditionError(
                    f"--upload {local}:{target}: a local run cannot put it at {target} ({e.strerror or e})",
                    hint=f"use a free, writable path, e.g. --upload {local}:/tmp/{Path(local).name}",
                ) from None
        task.mounts = keep
    return used


def _links(rdir: Path) -> list[list[str]]:
    try:
        return json.loads((rdir / "meta.json").read_text()).get("links") or []
    except (OSError, ValueError):
        return []


def unlink_uploads(rdir: str) -> None:
    """Remove the links launchkit created for the run in `rdir`, unless another unfinished run uses
    them (each run's record, status.json, is the truth: the index may lag)."""
    this = Path(rdir)
    links = _links(this)
    if not links:
        return
    root = this.parent.parent
    in_use: set[str] = set()
    for other in (root / "runs").iterdir():
        rec = record.read(str(other)) if other != this else None
        if rec is not None and rec.get("status") not in record.FINISHED:
            in_use.update(str(m) for m, _ in _links(other))
    created = _created(root)
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
        _save_created(root, created)
