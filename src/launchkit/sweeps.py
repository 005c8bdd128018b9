"""`--sweep-experiments` launched in parts: what a partly failed launch created, so that the same
command again creates only the missing experiments.

The record is `sweeps/<backend>-<run id>.json` in the user state dir (the run id is the same for the
same command at the same commit: core/spec.run_id), written only when a launch fails midway and
removed once every experiment exists. A fully launched sweep leaves nothing: launching it again
launches it again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from launchkit.config import user_state_dir
from launchkit.core.contract import ENV_RUN_ID
from launchkit.core.specview import SpecView


def _path(backend: str, spec: SpecView) -> Path | None:
    rid = spec.env_value(ENV_RUN_ID)
    return user_state_dir() / "sweeps" / f"{backend}-{rid}.json" if rid else None


class SweepRecord:
    def __init__(self, backend: str, spec: SpecView) -> None:
        self.path = _path(backend, spec)

    def load(self) -> dict[str, str]:
        """experiment name -> run id, of a previous partial launch of this sweep."""
        if self.path is None:
            return {}
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def save(self, created: dict[str, str]) -> bool:
        if self.path is None:
            return False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(created))
            os.replace(tmp, self.path)
        except OSError:
            return False
        return True

    def clear(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)
