"""The runtime dataset on Beaker: launchkit's runtime files (launchkit.runtime) as one content-addressed
dataset per workspace, made once and mounted read-only by id in every task, as gantry 3.7.0 ships its
entrypoint (fact sheet 7.7).

Named `<runtime_dataset_name()>-<workspace id>` (a hash of the files and launchkit's version), created
and verified through the `--upload` code (upload.Uploader: sizes and SHA-256 of every file checked
before the commit, a racing launch's dataset adopted), so a committed dataset of that name holds
exactly these files. Its id is remembered on this machine, with the workspace's names: a later launch
costs one GetDataset, and an offline dry run mounts it by that id too (backends/beaker_remembered.py).
prepare() only looks it up (read-only: a dry run writes nothing, and works in a workspace the user may
only read); while it does not exist the spec mounts it by that name, and submit() creates it and mounts
it by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from beaker import beaker_pb2 as pb2
from beaker import exceptions as bx

from launchkit.application import Application
from launchkit.backends import beaker_remembered as memory
from launchkit.backends.beaker.client import Connection
from launchkit.backends.beaker.resolve import get_workspace, remembered_workspace_id
from launchkit.backends.beaker.upload import LOOK_UP, LocalTree, Uploader, scan
from launchkit.core.specview import Mount, SpecView
from launchkit.runtime import materialise, runtime_dataset_name


@dataclass(frozen=True)
class _RuntimeTree(LocalTree):
    dataset_name: str = ""

    @property
    def name(self) -> str:
        return self.dataset_name


class RuntimeDatasets:
    """Finds (read-only) or makes the runtime dataset of a workspace; remembers ids in
    beaker-runtime.json (backends/beaker_remembered.py: the offline dry run reads them). One per
    backend: what find() saw, make() does not ask again."""

    def __init__(self, conn: Connection, app: Application, cache_dir: Path | None = None) -> None:
        self.conn, self.app = conn, app
        self.cache_dir = cache_dir or memory.cache_dir()
        self.path = self.cache_dir / memory.CACHE_FILE
        self.seen: dict[str, Any] = {}  # name -> the dataset find() got by that name (None: none)

    def name(self, workspace: Any) -> str:
        """The content-addressed name of `workspace`'s runtime dataset."""
        return f"{runtime_dataset_name()}-{workspace.id}"

    def _remember(self, workspace: Any, names: tuple[str, ...], ds_id: str | None = None) -> None:
        """The workspace's names (and the dataset's id) for the offline dry run, if not known yet."""
        full = f"{workspace.owner_org.name}/{workspace.name}" if "/" not in workspace.name else workspace.name
        known = {memory.workspace_key(self.conn.address, n): str(workspace.id) for n in {full, *names} if n}
        if ds_id:
            known[memory.dataset_key(self.conn.address, self.name(workspace))] = ds_id
        if any(memory.load(self.path).get(k) != v for k, v in known.items()):
            memory.save(self.path, dict(known))

    def find_soon(self, workspace_name: str) -> None:
        """Send find()'s GetDataset of the remembered id beside the launch's other look-ups
        (Connection.soon): by the workspace id remembered here, else as soon as the workspace answers."""

        def ask() -> None:
            ws_id = remembered_workspace_id(self.conn, workspace_name)
            ws = pb2.Workspace(id=ws_id) if ws_id else get_workspace(self.conn, workspace_name)
            known = memory.load(self.path).get(memory.dataset_key(self.conn.address, self.name(ws)))
            if known:
                self.conn.soon(("dataset", known), partial(self.conn.beaker.dataset.get, known))

        self.conn.soon(("runtime dataset of", workspace_name), ask)

    def find(self, workspace: Any, names: tuple[str, ...] = ()) -> str | None:
        """The id of the workspace's committed runtime dataset, or None (not made yet, or its upload
        unfinished). Read-only: GetDataset of the id remembered here, else of the name. `names`: what
        the launch called the workspace, remembered with its full name for the offline dry run."""
        name = self.name(workspace)
        key = memory.dataset_key(self.conn.address, name)
        known = memory.load(self.path).get(key)
        if known:
            try:
                ds = self.conn.answer(("dataset", known), partial(self.conn.beaker.dataset.get, known))
                if ds.HasField("committed") and ds.name == name:
                    self._remember(workspace, names)
                    return str(ds.id)
            except bx.BeakerDatasetNotFound:
                pass
            memory.save(self.path, {key: None})  # deleted (or not ours any more): look it up by name
        uploader = Uploader(self.conn, self.app, workspace)
        found = self.seen[name] = uploader.find(name)
        if found is None or not found.HasField("committed"):
            return None
        uploader.verify(found, self._tree(name))  # its files, as an --upload found by name
        self._remember(workspace, names, str(found.id))
        return str(found.id)

    def make(self, workspace: Any, budget: str | None = None, names: tuple[str, ...] = ()) -> str:
        """Create (or complete) the workspace's runtime dataset, which find() did not find; its id."""
        name = self.name(workspace)
        quiet = Application(verbosity=-1)  # the upload's own lines would be about an "--upload"
        uploader = Uploader(self.conn, quiet, workspace, budget)
        ds_id = uploader.ensure(self._tree(name), found=self.seen.get(name, LOOK_UP))
        self.app.info(f"runtime dataset {name} ({ds_id}): made once per launchkit version and workspace")
        self._remember(workspace, names, ds_id)
        return ds_id

    def _tree(self, name: str) -> _RuntimeTree:
        """The runtime's files, as the dataset `name` holds them (written once under the cache dir)."""
        tree = scan(str(materialise(self.cache_dir / "runtime")))
        return _RuntimeTree(tree.source, tree.files, tree.digest, dataset_name=name)


def _runtime_mounts(spec: SpecView, source: str) -> list[Mount]:
    return [m for t in spec.tasks for m in t.mounts if m.beaker == source]


def mount_runtime(
    datasets: RuntimeDatasets, workspace: Any, spec: SpecView, names: tuple[str, ...] = ()
) -> str | None:
    """Point the spec's runtime mounts (named runtime_dataset_name()) at the workspace's runtime
    dataset (changed in place), read-only: by id when it exists, else by the content-addressed name
    submit() creates it under (make_runtime). Returns that name while it does not exist, else None.
    `names`: what the launch called the workspace (RuntimeDatasets.find)."""
    mounts = _runtime_mounts(spec, runtime_dataset_name())
    if not mounts:
        return None
    ds_id = datasets.find(workspace, names)
    for m in mounts:
        m.beaker = ds_id or datasets.name(workspace)
    return None if ds_id else datasets.name(workspace)


def make_runtime(
    datasets: RuntimeDatasets, workspace: Any, spec: SpecView, names: tuple[str, ...] = ()
) -> None:
    """At submit: create the runtime dataset a prepared spec mounts by name (mount_runtime found none)
    and mount it by id (changed in place)."""
    mounts = _runtime_mounts(spec, datasets.name(workspace))
    if mounts:
        ds_id = datasets.make(workspace, spec.budget, names)
        for m in mounts:
            m.beaker = ds_id
