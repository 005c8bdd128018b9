"""`launchkit results`: download each task's and replica's result dataset (fact sheet 7.5), with progress.

Every file is checked against the digest Beaker lists for it (beaker-py verifies SHA-256/CRC32C while
streaming). Paths are kept inside the destination directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from launchkit.application import Application
from launchkit.backends.beaker.client import Connection
from launchkit.errors import BackendError, NotFoundError


def _stream(conn: Connection, dataset: Any, file: Any) -> Iterator[bytes]:
    # beaker-py's public `dataset.stream_file(dataset, path)` looks the file up again with
    # `list_files(prefix=dirname)` before every download: for a directory of N files that is N listings
    # of N files (O(N^2) RPCs for a checkpoint directory). Its private `_stream_file` takes the
    # DatasetFile we already listed and does the same download and checksum check. This is the one
    # place launchkit uses it.
    return conn.beaker.dataset._stream_file(dataset, file)


def _check_path(part: str, run_id: str, path: str) -> None:
    """A result file's name must be a relative path of plain names: `.`, `..`, empty parts, or an
    absolute path would write beside or outside the destination (`.` is the destination itself)."""
    names = path.split("/")
    if not path or path.startswith("/") or "\0" in path or any(n in ("", ".", "..") for n in names):
        raise BackendError(
            f"the result dataset of {part} of {run_id} has a file named {path!r}, which is not a path "
            "inside a directory; nothing was downloaded",
            hint="download it with `beaker dataset fetch`, or rename the file in the job",
        )


def download(
    conn: Connection, app: Application, run_id: str, datasets: list[tuple[str, str, str | None]], dest: Path
) -> list[Path]:
    """datasets: [(the part's name for messages, its directory under `dest` ("" for `dest` itself),
    its result dataset id or None)]. A part without a dataset (never assigned) or whose dataset was
    deleted is named and skipped. Returns the directories written, each once."""
    from beaker import exceptions as bx

    plan: list[tuple[Path, Any, list[Any]]] = []
    gone = []
    for part, sub, dataset_id in datasets:
        if not dataset_id:
            app.warn(f"{part} of {run_id} has no result dataset yet (its job was not assigned)")
            continue
        try:
            ds = conn.beaker.dataset.get(dataset_id)
        except bx.BeakerDatasetNotFound:
            app.warn(f"the result dataset of {part} of {run_id} was deleted")
            gone.append(part)
            continue
        files = list(conn.beaker.dataset.list_files(ds))
        for f in files:  # every name checked before anything is written
            _check_path(part, run_id, f.path)
        plan.append((dest / sub if sub else dest, ds, files))
    if gone and not plan:
        what = "result datasets" if len(gone) > 1 else "result dataset"
        were = "were" if len(gone) > 1 else "was"
        raise NotFoundError(f"the {what} of {run_id} {were} deleted", hint="nothing is left to download")
    total = sum(f.size for _, _, files in plan for f in files)
    count = sum(len(files) for _, _, files in plan)
    written: list[Path] = []
    with app.progress(f"downloading results of {run_id} ({count} files)", total) as bar:
        for folder, ds, files in plan:
            root = folder.resolve()
            root.mkdir(parents=True, exist_ok=True)
            for f in files:
                target = (root / f.path).resolve()
                if target == root or not target.is_relative_to(root):  # a link in the destination
                    raise BackendError(
                        f"result file {f.path!r} would land outside {root}", hint="report this"
                    )
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.part")
                with open(tmp, "wb") as out:
                    for chunk in _stream(conn, ds, f):
                        out.write(chunk)
                        bar.advance(len(chunk))
                os.replace(tmp, target)
                conn.renew()
            written.append(folder)
    return written
