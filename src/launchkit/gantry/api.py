"""gantry 3.7.0's public API (`gantry.api`) on launchkit: replace `gantry.` with `launchkit.gantry.` in the
imports and the same code launches through launchkit (docs/from-gantry.md, "Python")."""

from __future__ import annotations

import json
import os
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from launchkit.gantry.callbacks import Callback, SlackCallback
from launchkit.gantry.git_utils import GitRepoState
from launchkit.gantry.launch import follow_workload, launch_experiment
from launchkit.gantry.recipe import Recipe

if TYPE_CHECKING:
    from beaker import Beaker

__all__ = [
    "Callback",
    "GitRepoState",
    "Recipe",
    "SlackCallback",
    "follow_workload",
    "launch_experiment",
    "update_workload_description",
    "write_metrics",
]

_ORIGINAL_DESCRIPTIONS: dict[str, str] = {}


def update_workload_description(
    description: str,
    strategy: Literal["append", "prepend", "replace"] = "replace",
    beaker_token: str | None = None,
    client: Beaker | None = None,
) -> str:
    """Set the description of the workload this process runs in ($BEAKER_WORKLOAD_ID): `replace` it, or
    `append`/`prepend` to the description it had when first changed here. Returns the new description."""
    if (workload_id := os.environ.get("BEAKER_WORKLOAD_ID")) is None:
        raise RuntimeError("'update_workload_description' can only be called from within a running workload")
    if strategy not in ("append", "prepend", "replace"):
        raise ValueError(
            f"'strategy' must be one of 'append', 'prepend', or 'replace', but got '{strategy}'."
        )
    with ExitStack() as stack:
        if client is None:
            from beaker import Beaker

            kwargs: dict[str, Any] = {"check_for_upgrades": False}
            if beaker_token is not None:
                kwargs["user_token"] = beaker_token
            client = stack.enter_context(Beaker.from_env(**kwargs))
        workload = client.workload.get(workload_id)
        original = _ORIGINAL_DESCRIPTIONS.setdefault(
            workload_id, (workload.experiment.description or "").strip()
        )
        if strategy == "append":
            description = original + " " + description
        elif strategy == "prepend":
            description = description + " " + original
        description = description.strip()
        client.workload.update(workload, description=description)
    return description


def write_metrics(metrics: dict[str, Any]) -> None:
    """Write the job's metrics: `$RESULTS_DIR/metrics.json`, which Beaker reads as the job's metrics."""
    if os.environ.get("BEAKER_WORKLOAD_ID") is None:
        raise RuntimeError("'write_metrics' can only be called from within a running workload")
    if (results_dir := os.environ.get("RESULTS_DIR")) is None:
        raise RuntimeError("Results directory not set! Can't write metrics.")
    path = Path(results_dir) / "metrics.json"
    path.parent.mkdir(exist_ok=True, parents=True)
    path.write_text(json.dumps(metrics), encoding="utf-8")
