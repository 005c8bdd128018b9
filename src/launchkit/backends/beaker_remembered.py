"""What this machine remembers of a Beaker, for specs made without asking it (the offline dry run).

Light on purpose (stdlib only: no beaker-py, no grpc; `launchkit.backends.beaker` loads the client on
import): `run --dry-run --offline` calls `offline_spec` through the registry row.

`beaker-runtime.json` in launchkit's cache directory maps
- `ADDRESS|<runtime dataset name>-<workspace id>` to the runtime dataset's id (written by
  backends/beaker/runtime_dataset.py when it finds or makes the dataset), and
- `workspace|ADDRESS|NAME` to the id of the workspace a launch named NAME (its full `org/name` too),
so an offline spec can mount the runtime dataset by the id `run` would submit, when an earlier launch
from this machine made or found it. Nothing remembered: the spec keeps the dataset's name (and the
offline note says the id is decided at submit). A launch also asks by these ids beside the workspace
itself (prepare.ask_ahead; checked against the workspace's answer), and by
- `budget|ADDRESS|WORKSPACE ID`: the id of the workspace's default budget, when a launch used it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from launchkit.errors import UsageError
from launchkit.runtime import runtime_dataset_name
from launchkit.userfile import CONFIG_FILE_LIMIT, read_user_file

CACHE_FILE = "beaker-runtime.json"
DEFAULT_ADDRESS = "https://beaker.org"  # beaker-py's Config.agent_address


def cache_dir() -> Path:
    import platformdirs  # only where the remembered ids are read or written: a dry run need not

    return Path(platformdirs.user_cache_dir("launchkit"))


def load(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def save(path: Path, updates: dict[str, str | None]) -> None:
    """Set (or, for None, drop) entries; a cache only, so failures are ignored."""
    data = load(path)
    for key, value in updates.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass


def dataset_key(address: str, name: str) -> str:
    return f"{address}|{name}"


def workspace_key(address: str, name: str) -> str:
    return f"workspace|{address}|{name}"


def budget_key(address: str, workspace_id: str) -> str:
    return f"budget|{address}|{workspace_id}"


def config_value(key: str, environ: dict[str, str]) -> str | None:
    """`key` of beaker-py's config file (BEAKER_CONFIG, else ~/.beaker/config.yml), read as plain
    `key: value` lines (what beaker-py writes), without PyYAML."""
    path = environ.get("BEAKER_CONFIG") or os.path.join(environ.get("HOME") or "~", ".beaker", "config.yml")
    try:  # a regular file only, read whole up to a limit: a FIFO or /dev/zero named there cannot hang it
        data = read_user_file(os.path.expanduser(path), path, limit=CONFIG_FILE_LIMIT, hint="")
    except UsageError:
        return None
    for line in data.decode("utf-8", "replace").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return value.strip().strip("'\"") or None
    return None


def configured_address(environ: dict[str, str] | None = None) -> str | None:
    """The Beaker address beaker-py would use: BEAKER_ADDR, else the config's agent_address; None when
    neither says (beaker.org)."""
    env = dict(os.environ) if environ is None else environ
    return env.get("BEAKER_ADDR") or config_value("agent_address", env)


def address(environ: dict[str, str] | None = None) -> str:
    return configured_address(environ) or DEFAULT_ADDRESS


def default_workspace(environ: dict[str, str] | None = None) -> str | None:
    return config_value("default_workspace", dict(os.environ) if environ is None else environ)


def remembered_runtime_id(
    workspace: str | None, *, environ: dict[str, str] | None = None, cache: Path | None = None
) -> str | None:
    """The id `run` would mount the runtime dataset by in `workspace` (None: the config's default),
    if a launch from this machine made or found it; else None."""
    addr = address(environ)
    name = workspace or default_workspace(environ)
    if not name:
        return None
    data = load((cache or cache_dir()) / CACHE_FILE)
    ws_id = data.get(workspace_key(addr, name))
    if not ws_id:
        return None
    return data.get(dataset_key(addr, f"{runtime_dataset_name()}-{ws_id}"))


def offline_spec(submission: Any) -> Any:
    """The submission with its runtime mounts pointing at the remembered dataset id, when there is one
    (the registry's `offline` hook for Beaker)."""
    ds_id = remembered_runtime_id(submission.workspace)
    if ds_id is None:
        return submission
    placeholder = runtime_dataset_name()
    spec = submission.spec.copy()  # the submission is frozen
    for task in spec.tasks:
        for mount in task.mounts:
            if mount.beaker == placeholder:
                mount.beaker = ds_id
    return submission.model_copy(update={"spec": spec})
