"""Shell completion of option values launchkit knows without the network: profiles, cluster names
cached by the last `find-gpus`, run statuses, option choices (local run ids: cli/backend_choice.py).

Each completer is cheap (no beaker-py, no git): shells call them on every TAB.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from launchkit.backends import registry
from launchkit.core.status import RunStatus


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.expanduser("~/.cache")
    return Path(base) / "launchkit"


def clusters_cache() -> Path:
    """Cluster names `find-gpus` last saw (Beaker), for completing --cluster."""
    return cache_dir() / "clusters.json"


def remember_clusters(names: Iterable[str]) -> None:
    """Called by `find-gpus`; never fails the command."""
    import json

    try:
        path = clusters_cache()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(sorted(set(names))))
        tmp.replace(path)
    except OSError:
        pass


def _matching(values: Iterable[str], incomplete: str) -> list[str]:
    return [v for v in values if v.startswith(incomplete)]


def clusters(incomplete: str) -> list[str]:
    import json

    try:
        names = json.loads(clusters_cache().read_text())
    except (OSError, ValueError):
        return []
    # complete both org/name and the bare name
    return _matching(dict.fromkeys([*names, *(n.split("/", 1)[-1] for n in names)]), incomplete)


def _backend_names() -> list[str]:
    return registry.names()


def profiles(incomplete: str) -> list[str]:
    from launchkit.config import help_defaults
    from launchkit.core.profiles import BUILTIN_PROFILES

    user = help_defaults().get("profiles", ({}, ""))[0]
    return _matching([*BUILTIN_PROFILES, *(user if isinstance(user, dict) else {})], incomplete)


def statuses(incomplete: str) -> list[str]:
    return _matching([s.value for s in RunStatus], incomplete)


def choices(*values: str) -> Callable[[str], list[str]]:
    def complete(incomplete: str) -> list[str]:
        return _matching(values, incomplete)

    return complete


# run options (core/run_options.py names) whose values can be completed
RUN_COMPLETERS: dict[str, Callable[[str], list[str]]] = {
    "cluster": clusters,
    "profile": profiles,
    "priority": choices("low", "normal", "high", "urgent", "immediate"),
    "interconnect": choices("ib", "tcpxo"),
    "exec_method": choices("exec", "bash"),
    "backend": lambda incomplete: _matching(_backend_names(), incomplete),
    "python_manager": choices("uv"),
}
