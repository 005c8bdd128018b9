"""The runtime the job runs (on Beaker, or here with the local backend): a bash bootstrap and the
stdlib-only Python package `node/` it hands over to once a Python exists.

The script is assembled from the `*.sh` parts in this folder, in `PARTS` order; `node/` travels
beside it as the package `launchkit_node`.

The runtime travels once, not per task (docs/runtime.md): its files (`runtime_files()`) are a
content-addressed dataset named `runtime_dataset_name()` (a hash of the files and launchkit's version),
mounted read-only at `RUNTIME_MOUNT`; each task's command is the short `bootstrap()`, which checks the
script's SHA-256 and execs it: `bash -c <bootstrap> launchkit-entrypoint ARGV...`. The Beaker backend
creates the dataset once and mounts it by id; the local backend materialises the same files
(`materialise`) and points the bootstrap at them (`ENV_ENTRYPOINT_DIR`).
"""

from __future__ import annotations

import os
from functools import lru_cache

from launchkit import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

# Library parts first (functions only), the main flow last.
PARTS = ("lib.sh", "nccl.sh", "launchers.sh", "entrypoint.sh")

ENTRYPOINT_NAME = "launchkit-entrypoint"  # $0 of the per-task bootstrap
NODE_PACKAGE = "launchkit_node"  # the name node/ has on the node

_FOLDER = os.path.dirname(os.path.abspath(__file__))  # a plain package directory; no importlib.resources


@lru_cache(maxsize=1)
def node_files() -> dict[str, str]:
    """The node-side Python package: path inside it (`launch/watchdog.py`) -> source, sorted by path."""
    from pathlib import Path

    node = Path(_FOLDER, "node")
    return {p.relative_to(node).as_posix(): p.read_text() for p in sorted(node.rglob("*.py"))}


@lru_cache(maxsize=1)
def entrypoint_script() -> str:
    """The complete entrypoint as one bash script."""
    return "\n".join(f"# ---- {part}\n" + _read(os.path.join(_FOLDER, part)) for part in PARTS)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


# ---- the runtime as files: one content-addressed dataset, mounted read-only in every task
RUNTIME_MOUNT = "/launchkit"  # where the job finds the runtime's files (gantry: /gantry)
ENTRYPOINT_FILE = "entrypoint.sh"
ENV_ENTRYPOINT_DIR = "LAUNCHKIT_ENTRYPOINT_DIR"  # the bootstrap's override of RUNTIME_MOUNT (local runs)
DATASET_PREFIX = "launchkit-runtime-"


@lru_cache(maxsize=1)
def runtime_files() -> dict[str, bytes]:
    """What the runtime dataset holds: relative path -> content. The Python package sits beside the
    script (`launchkit_node/`), where the entrypoint finds it (lib.sh: lk_node_dir), and so does
    launchkit's own data the tasks name instead of carrying it: the built-in cluster profiles' setup
    programs (core/profiles.py: stored_setup; runtime/nccl.sh reads them)."""
    from launchkit.core.profiles import STORED_SETUP_FILE, stored_setup

    files = {ENTRYPOINT_FILE: entrypoint_script().encode()}
    files.update({f"{NODE_PACKAGE}/{name}": text.encode() for name, text in node_files().items()})
    files[STORED_SETUP_FILE] = (stored_setup() + "\n").encode()
    return files


@lru_cache(maxsize=1)
def runtime_key() -> str:
    """Hex SHA-256 over launchkit's version and every runtime file (path, content)."""
    import hashlib

    h = hashlib.sha256(f"launchkit {__version__}\0".encode())
    for name, data in sorted(runtime_files().items()):
        h.update(f"{name}\0{len(data)}\0".encode() + hashlib.sha256(data).digest())
    return h.hexdigest()


def runtime_dataset_name() -> str:
    """The runtime dataset's name as the spec carries it before a backend resolves it (the offline
    dry run prints it): `launchkit-runtime-<key>`."""
    return DATASET_PREFIX + runtime_key()[:20]


def bootstrap() -> str:
    """The per-task command (`bash -c <this> launchkit-entrypoint ARGV...`): find the runtime's
    entrypoint, check it is the one this spec was made for (its SHA-256, where the image has
    `sha256sum`), exec it with the task's argv; else exit 100 saying so. One terse line: every task
    of a sweep carries it."""
    import hashlib

    digest = hashlib.sha256(runtime_files()[ENTRYPOINT_FILE]).hexdigest()
    return (
        f"f=${{{ENV_ENTRYPOINT_DIR}:-{RUNTIME_MOUNT}}}/{ENTRYPOINT_FILE};"
        "[[ -r $f ]]&&{ ! command -v sha256sum >/dev/null||"
        f'echo "{digest}  $f"|sha256sum -c>/dev/null 2>&1;}}&&exec bash "$f" "$@";'
        "echo \"[launchkit] error: no runtime at $f, or not this spec's"
        f' (dataset {runtime_dataset_name()})">&2;exit 100'
    )


def materialise(root: Path) -> Path:
    """The runtime's files under `root/<dataset name>/` (written once, atomically; read-only after),
    for backends that run the spec on this machine. Returns that directory."""
    import shutil
    import tempfile
    from pathlib import Path

    target = root / runtime_dataset_name()
    if all((target / name).is_file() for name in runtime_files()):
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    try:
        for name, data in runtime_files().items():
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            path.chmod(0o444)
        for folder in sorted({p.parent for p in tmp.rglob("*") if p.is_file()}, reverse=True):
            folder.chmod(0o555)
        try:
            os.rename(tmp, target)
        except OSError:
            if not all((target / name).is_file() for name in runtime_files()):
                raise  # not another launch's identical copy
    finally:
        if tmp.exists():
            for folder in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
                folder.chmod(0o755)
            shutil.rmtree(tmp, ignore_errors=True)
    return target
