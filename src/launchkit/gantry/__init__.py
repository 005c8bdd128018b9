"""gantry 3.7.0's Python API by import path: `launchkit.gantry.api`, `.callbacks`, `.exceptions` offer
gantry's public names and signatures with gantry's meaning, launched by launchkit (docs/from-gantry.md).
`RUNTIME_DIR` and `RESULTS_DIR` are gantry's (`/gantry-runtime`, `/results`, or $GANTRY_RUNTIME_DIR and
$RESULTS_DIR): the job runs in that directory, as gantry's does."""

from launchkit.gantry import api, callbacks
from launchkit.gantry.launch import RESULTS_DIR, RUNTIME_DIR

METRICS_FILE = f"{RESULTS_DIR}/metrics.json"  # the job's metrics (api.write_metrics)

__all__ = ["METRICS_FILE", "RESULTS_DIR", "RUNTIME_DIR", "api", "callbacks"]
