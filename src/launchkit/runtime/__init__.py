"""The runtime entrypoint: bash that runs inside the job (on Beaker, or here with the local backend).

The script is assembled from the `*.sh` parts in this folder, in `PARTS` order, and embedded in the
spec as `bash -c <script> launchkit-entrypoint ARGV...`, so a spec needs nothing but bash and git.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

# Library parts first (functions only), the main flow last.
PARTS = ("lib.sh", "nccl.sh", "launchers.sh", "bytecode.sh", "entrypoint.sh")

ENTRYPOINT_NAME = "launchkit-entrypoint"  # $0 of the embedded script


@lru_cache(maxsize=1)
def entrypoint_script() -> str:
    """The complete entrypoint as one bash script."""
    folder = Path(__file__).parent  # a plain package directory (wheel or checkout); no importlib.resources
    return "\n".join(f"# ---- {part}\n" + (folder / part).read_text() for part in PARTS)
