"""`--upload LOCAL:/PATH` on Beaker: a content-addressed dataset, created once, verified, then mounted.

The dataset's name is derived from the content (relative paths, sizes, SHA-256 of every file,
empty files included), so an unchanged directory is found and reused instead of uploaded again, and
two launches racing to upload the same content end up with one dataset: whoever loses the create
(409, or 400 "already in use") adopts the winner's dataset. Because every file's content is fixed by
the name, adopting an uncommitted dataset (another launcher still uploading, or one killed midway) is
safe: upload what is missing (the same bytes), verify, and commit (idempotent).

Nothing is committed (and so nothing mounted) until `list_files` shows every path with its size (and
SHA-256 when Beaker reports one), allowing for listing lag with a few short retries (fact sheet 7.6):
a dataset missing a file stays uncommitted, and the next launch of the same content completes it.
What is read is exactly the directory named (backends/uploadtree.py).
"""

from __future__ import annotations

import hashlib
import inspect
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests
from beaker import exceptions as bx

from launchkit.application import Application
from launchkit.backends.beaker.client import Connection
from launchkit.backends.uploadtree import files as tree_files
from launchkit.core.specview import SpecView
from launchkit.errors import BackendError, PreconditionError

NAME_PREFIX = "launchkit-upload-"
WORKERS = 8
VERIFY_ATTEMPTS = 4  # list_files lag: retry 0.5, 0.75, 1.1 s apart
LOOK_UP = object()  # Uploader.ensure's `found` when the caller has not looked the dataset up


@dataclass(frozen=True)
class LocalFile:
    path: Path  # on this machine
    target: str  # path inside the dataset (POSIX)
    size: int
    sha256: bytes


@dataclass(frozen=True)
class LocalTree:
    source: str
    files: tuple[LocalFile, ...]
    digest: str  # hex SHA-256 over (target, size, sha256) of every file

    @property
    def name(self) -> str:
        return NAME_PREFIX + self.digest[:40]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def _hash_file(path: Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.digest()


def scan(local_path: str) -> LocalTree:
    """The files under `local_path` (uploadtree.files: exactly that directory; links out of it,
    special files and unreadable files refused) and the content digest."""
    pairs = tree_files(local_path)
    files = []
    for p, t in pairs:
        try:
            files.append(LocalFile(p, t, p.stat().st_size, _hash_file(p)))
        except OSError as e:
            raise PreconditionError(
                f"--upload {local_path}: cannot read {p}: {e.strerror or e}",
                hint="fix its permissions or move it out",
            ) from None
    h = hashlib.sha256()
    for f in files:
        h.update(f"{f.target}\0{f.size}\0".encode() + f.sha256)
    return LocalTree(local_path, tuple(files), h.hexdigest())


class Uploader:
    """Makes sure the dataset for one local tree exists, is committed and complete; returns its id."""

    def __init__(self, conn: Connection, app: Application, workspace: Any, budget: str | None = None) -> None:
        self.conn, self.app, self.workspace, self.budget = conn, app, workspace, budget
        self.beaker = conn.beaker

    def ensure(self, tree: LocalTree, *, found: Any = LOOK_UP) -> str:
        """`found`: what the caller's find(tree.name) just returned (a dataset, or None)."""
        ds = self.find(tree.name) if found is LOOK_UP else found
        if ds is not None and ds.HasField("committed"):
            self.verify(ds, tree)
            self.app.info(f"upload {tree.source}: unchanged, reusing dataset {tree.name} ({ds.id})")
            return str(ds.id)
        fresh = False  # created here: it holds nothing yet (no listing before the upload)
        if ds is None:
            try:
                ds = self.beaker.dataset.create(
                    tree.name,
                    workspace=self.workspace,
                    description=f"launchkit upload of {os.path.basename(tree.source.rstrip('/'))}",
                    budget=self.budget,  # the run's --budget; otherwise the workspace's
                    commit=False,
                )
                fresh = True
            except bx.BeakerDatasetConflict:
                ds = self._adopt(tree.name)
            except bx.BeakerError as e:
                if "already in use" not in str(e) and "already exists" not in str(e):
                    raise
                ds = self._adopt(tree.name)  # beaker-py: Beaker sometimes answers a name clash with 400
            if ds.HasField("committed"):
                self.verify(ds, tree)
                self.app.info(f"upload {tree.source}: uploaded by another launch; using dataset {ds.id}")
                return str(ds.id)
        self._upload_missing(ds, tree, fresh=fresh)
        self.verify(ds, tree)  # before the commit: a dataset with a missing file is never committed
        ds = self.beaker.dataset.commit(ds)
        return str(ds.id)

    # -- steps --------------------------------------------------------------------------------------
    def find(self, name: str) -> Any | None:
        """This user's dataset of that name, committed or not; None if there is none."""
        try:
            return self.beaker.dataset.get(f"{self.conn.me().name}/{name}")
        except bx.BeakerDatasetNotFound:
            return None

    def _adopt(self, name: str) -> Any:
        """The name is taken: another launch created the same content. Its dataset may lag in lookups."""
        for attempt in range(VERIFY_ATTEMPTS):
            ds = self.find(name)
            if ds is not None:
                return ds
            time.sleep(0.5 * 1.5**attempt)
        raise BackendError(
            f"dataset name {name!r} is taken but the dataset cannot be found",
            hint="try again in a minute",
        )

    def _remote_files(self, ds: Any) -> dict[str, Any]:
        return {f.path: f for f in self.beaker.dataset.list_files(ds)}

    def _upload_missing(self, ds: Any, tree: LocalTree, *, fresh: bool = False) -> None:
        have = {} if fresh else self._remote_files(ds)  # an adopted dataset may hold some files already
        todo = [f for f in tree.files if not _matches(have.get(f.target), f)]
        if not todo:
            return
        todo.sort(key=lambda f: -f.size)  # big files first: the long uploads start early
        n = f"{len(todo)} file{'s' if len(todo) != 1 else ''}"
        label = f"uploading {os.path.basename(tree.source.rstrip('/')) or tree.source} ({n})"
        pending = iter(todo)
        lock = threading.Lock()
        errors: list[BaseException] = []
        put = self._file_writer(ds)

        def worker(bar: Any) -> None:
            # one HTTP session per thread (requests.Session is not thread-safe; beaker-py keeps it per thread)
            with self.beaker.http_session():
                while not errors:
                    with lock:
                        f = next(pending, None)
                    if f is None:
                        return
                    try:
                        put(f)
                    except bx.BeakerDatasetWriteError:
                        return  # committed meanwhile by a racing launch: verify decides
                    except OSError as e:
                        if isinstance(e, requests.RequestException) or e.filename is None:
                            errors.append(e)
                        else:  # the file itself (changed or removed since it was hashed)
                            errors.append(
                                PreconditionError(
                                    f"--upload {tree.source}: cannot read {e.filename}: {e.strerror or e}",
                                    hint="keep the directory unchanged while launching",
                                )
                            )
                        return
                    except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
                        errors.append(e)
                        return
                    bar.advance(f.size)

        with self.app.progress(label, sum(f.size for f in todo)) as bar:
            threads = [
                threading.Thread(target=worker, args=(bar,), daemon=True)
                for _ in range(min(WORKERS, len(todo)))
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        if errors:
            raise errors[0]
        self.conn.renew()

    def _file_writer(self, ds: Any) -> Any:
        """A function uploading one file. beaker-py's directory upload (`dataset.create(name, dir)`)
        skips zero-byte files, so a package's empty __init__.py would be missing in the job (gantry's
        --upload fails on such directories); its public `dataset.upload` sends any file but asks for the
        dataset's storage on every call (two round trips a file). So: the storage once, then per file
        the PUT that beaker-py's own directory upload makes (`_upload_file`, beaker-py 2.8). Without
        those helpers (another beaker-py): `dataset.upload`, two calls a file."""
        dataset = self.beaker.dataset
        get_storage = getattr(dataset, "_get_storage", None)
        upload_file = getattr(dataset, "_upload_file", None)
        # beaker-py puts the target in the URL unquoted (`#`, `?` and `%` would cut or change it);
        # quoted here, the server decodes it back (fact sheet 7.2)
        if get_storage is None or upload_file is None or not _takes(upload_file, "storage", "size", "source"):
            return lambda f: dataset.upload(ds, f.path, quote(f.target, safe="/"))
        storage = get_storage(ds)
        return lambda f: upload_file(
            ds, storage=storage, size=f.size, source=f.path, target=quote(f.target, safe="/")
        )

    def verify(self, ds: Any, tree: LocalTree) -> None:
        """Every local file is in the dataset with its size (and SHA-256 when given)."""
        missing: list[str] = []
        for attempt in range(VERIFY_ATTEMPTS):
            have = self._remote_files(ds)
            missing = [f.target for f in tree.files if not _matches(have.get(f.target), f)]
            if not missing:
                return
            if attempt + 1 < VERIFY_ATTEMPTS:
                time.sleep(0.5 * 1.5**attempt)
        raise BackendError(
            f"dataset {ds.id} for --upload {tree.source} is incomplete: {len(missing)} of {len(tree.files)} "
            f"files missing or different (first: {missing[0]})",
            hint=f"delete it (`beaker dataset delete {ds.id}`) and launch again",
        )


def _takes(function: Any, *names: str) -> bool:
    try:
        return set(names) <= set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return False


def _matches(remote: Any, local: LocalFile) -> bool:
    if remote is None or remote.size != local.size:
        return False
    from beaker import beaker_pb2 as pb2

    if remote.HasField("digest") and remote.digest.algorithm == pb2.DatasetFile.ALGORITHM_TYPE_SHA256:
        return bool(remote.digest.value == local.sha256)
    return True


def upload_all(
    conn: Connection, app: Application, workspace: Any, uploads: dict[str, str], budget: str | None = None
) -> dict[str, str]:
    """placeholder dataset name -> local path  =>  placeholder -> dataset id."""
    up = Uploader(conn, app, workspace, budget)
    trees = {placeholder: scan(local) for placeholder, local in uploads.items()}  # all refusals first
    out = {}
    for placeholder, tree in trees.items():
        conn.renew()  # hashing a large tree takes a while without talking to Beaker
        app.debug(f"upload {tree.source}: {len(tree.files)} files, {tree.size} bytes, dataset {tree.name}")
        out[placeholder] = up.ensure(tree)
    return out


def mount_uploads(
    conn: Connection, app: Application, workspace: Any, spec: SpecView, uploads: dict[str, str]
) -> None:
    """Upload (or reuse) each `--upload` and point its mount in `spec` at the dataset's id."""
    ids = upload_all(conn, app, workspace, uploads, spec.budget)
    for task in spec.tasks:
        for mount in task.mounts:
            if dataset_id := ids.get(mount.beaker or ""):
                mount.beaker = dataset_id
