"""`launchkit results`: download each replica's result dataset (fact sheet 7.5), with progress.

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
from launchkit.errors import BackendError


def _stream(conn: Connection, dataset: Any, file: Any) -> Iterator[bytes]:
    # beaker-py's public `dataset.stream_file(dataset, path)` looks the file up again with
    # `list_files(prefix=dirname)` before every download: for a directory of N files that is N listings
    # of N files (O(N^2) RPCs for a checkpoint directory). Its private `_stream_file` takes the
    # DatasetFile we already listed and does the same download and checksum check. This is the one
    # place launchkit uses it.
    return conn.beaker.dataset._stream_file(dataset, file)


def download(
    conn: Connection, app: Application, run_id: str, datasets: list[tuple[int, str | None]], dest: Path
) -> list[Path]:
    """datasets: [(replica rank, result dataset id or None)]. One replica -> files go into `dest`;
    several -> `dest/replica-N`. Returns the directories written."""
    several = len(datasets) > 1
    plan: list[tuple[Path, Any, list[Any]]] = []
    for rank, dataset_id in datasets:
        if not dataset_id:
            app.warn(f"replica {rank} of {run_id} has no result dataset yet (the job was not assigned)")
            continue
        ds = conn.beaker.dataset.get(dataset_id)
        files = list(conn.beaker.dataset.list_files(ds))
        plan.append((dest / f"replica-{rank}" if several else dest, ds, files))
    total = sum(f.size for _, _, files in plan for f in files)
    count = sum(len(files) for _, _, files in plan)
    written: list[Path] = []
    with app.progress(f"downloading results of {run_id} ({count} files)", total) as bar:
        for folder, ds, files in plan:
            root = folder.resolve()
            root.mkdir(parents=True, exist_ok=True)
            for f in files:
                target = (root / f.path).resolve()
                if not target.is_relative_to(root):
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
