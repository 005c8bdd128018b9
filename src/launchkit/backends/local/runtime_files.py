"""The runtime's files for local runs: what the Beaker backend mounts as the runtime dataset, written
once under the local backend's state dir (launchkit.runtime.materialise) and given to the job's
bootstrap through LAUNCHKIT_ENTRYPOINT_DIR, so `--local` runs the very script a Beaker job runs."""

from __future__ import annotations

from pathlib import Path

from launchkit.backends.local.store import ensure_home, state_error
from launchkit.core.specview import EnvVar, SpecView
from launchkit.runtime import ENV_ENTRYPOINT_DIR, materialise, runtime_dataset_name


def use_runtime(root: Path, spec: SpecView) -> Path | None:
    """Replace each task's runtime mount in `spec` (changed in place) by the materialised files under
    `root/runtime`; returns their directory (None: the spec mounts no runtime)."""
    name = runtime_dataset_name()
    directory: Path | None = None
    for task in spec.tasks:
        mounts = task.mounts
        keep = [m for m in mounts if m.beaker != name]
        if len(keep) == len(mounts):
            continue
        if directory is None:
            ensure_home(root)  # a state dir that is a file: that usage error first
            try:
                directory = materialise(root / "runtime")
            except OSError as e:
                raise state_error("the runtime's files", e) from e
        task.mounts = keep
        task.set_env(EnvVar(ENV_ENTRYPOINT_DIR, str(directory)))
    return directory
