"""gantry 3.7.0's Python API by import path: `launchkit.gantry.api`, `.callbacks`, `.exceptions` offer
gantry's public names and signatures with gantry's meaning, launched by launchkit (docs/from-gantry.md)."""

from launchkit.core.contract import DEFAULT_RESULTS_DIR as RESULTS_DIR
from launchkit.core.contract import DEFAULT_RUNTIME_DIR as RUNTIME_DIR
from launchkit.gantry import api, callbacks

METRICS_FILE = f"{RESULTS_DIR}/metrics.json"  # the job's metrics (api.write_metrics)

__all__ = ["METRICS_FILE", "RESULTS_DIR", "RUNTIME_DIR", "api", "callbacks"]
