"""The runtime dataset on Beaker: launchkit's runtime files (launchkit.runtime) as one content-addressed
dataset per workspace, made once and mounted read-only by id in every task, as gantry 3.7.0 ships its
entrypoint (fact sheet 7.7).

Named `<runtime_dataset_name()>-<workspace id>` (a hash of the files and launchkit's version), created
and verified through the `--upload` code (upload.Uploader: sizes and SHA-256 of every file checked
before the commit, a racing launch's dataset adopted), so a committed dataset of that name holds
exactly these files. Its id is remembered on this machine, with the workspace's names: a later launch
costs one GetDataset, and an offline dry run mounts it by that id too (backends/beaker_remembered.py).
Done in prepare(), so `run --dry-run` prints the id `run` submits (and its saved spec can be
submitted as is); a dry run may so create it, as gantry's does, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beaker import exceptions as bx

from launchkit.application import Application
from launchkit.backends import beaker_remembered as memory
from launchkit.backends.beaker.client import Connection
from launchkit.backends.beaker.upload import LocalTree, Uploader, scan
from launchkit.runtime import materialise, runtime_dataset_name


@dataclass(frozen=True)
class _RuntimeTree(LocalTree):
    dataset_name: str = ""

    @property
    def name(self) -> str:
        return self.dataset_name


class RuntimeDatasets:
    """Finds (or makes) the runtime dataset of a workspace; remembers ids in beaker-runtime.json
    (backends/beaker_remembered.py: the offline dry run reads them)."""

    def __init__(self, conn: Connection, app: Application, cache_dir: Path | None = None) -> None:
        self.conn, self.app = conn, app
        self.cache_dir = cache_dir or memory.cache_dir()
        self.path = self.cache_dir / memory.CACHE_FILE

    def ensure(self, workspace: Any, budget: str | None = None, names: tuple[str, ...] = ()) -> str:
        """The id of the workspace's committed runtime dataset, created if need be. `names`: what the
        launch called the workspace, remembered with its full name for the offline dry run."""
        name = f"{runtime_dataset_name()}-{workspace.id}"
        key = memory.dataset_key(self.conn.address, name)
        full = f"{workspace.owner_org.name}/{workspace.name}" if "/" not in workspace.name else workspace.name
        ws_id = str(workspace.id)
        known_ws = {memory.workspace_key(self.conn.address, n): ws_id for n in {full, *names} if n}
        known = memory.load(self.path).get(key)
        if known:
            try:
                ds = self.conn.beaker.dataset.get(known)  # an id: one GetDataset
                if ds.HasField("committed") and ds.name == name:
                    if any(memory.load(self.path).get(k) != v for k, v in known_ws.items()):
                        memory.save(self.path, dict(known_ws))
                    return str(ds.id)
            except bx.BeakerDatasetNotFound:
                pass
            memory.save(self.path, {key: None})  # deleted (or not ours any more): look it up by name
        tree = scan(str(materialise(self.cache_dir / "runtime")))
        runtime = _RuntimeTree(tree.source, tree.files, tree.digest, dataset_name=name)
        quiet = Application(verbosity=-1)  # the upload's own lines would be about an "--upload"
        ds_id = Uploader(self.conn, quiet, workspace, budget).ensure(runtime)
        self.app.info(f"runtime dataset {name} ({ds_id}): made once per launchkit version and workspace")
        memory.save(self.path, {key: ds_id, **known_ws})
        return ds_id


def mount_runtime(
    conn: Connection, app: Application, workspace: Any, spec: dict[str, Any], names: tuple[str, ...] = ()
) -> str | None:
    """Point the spec's runtime mounts (named runtime_dataset_name()) at the workspace's runtime
    dataset, by id (changed in place). Returns the id (None: the spec mounts no runtime). `names`: what
    the launch called the workspace (RuntimeDatasets.ensure)."""
    placeholder = runtime_dataset_name()
    mounts = [
        m
        for t in spec.get("tasks", [])
        for m in t.get("datasets") or []
        if (m.get("source") or {}).get("beaker") == placeholder
    ]
    if not mounts:
        return None
    ds_id = RuntimeDatasets(conn, app).ensure(workspace, spec.get("budget"), names)
    for m in mounts:
        m["source"]["beaker"] = ds_id
    return ds_id
