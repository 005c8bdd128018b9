"""The runtime the job runs (on Beaker, or here with the local backend): a bash bootstrap and the
stdlib-only Python package `node/` it hands over to once a Python exists.

The script is assembled from the `*.sh` parts in this folder, in `PARTS` order, plus a generated part
that unpacks `node/*.py` (as the package `launchkit_node`) when first needed, and embedded in the spec
as `bash -c <script> launchkit-entrypoint ARGV...`, so a spec needs nothing but bash and git.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

# Library parts first (functions only), the main flow last.
PARTS = ("lib.sh", "nccl.sh", "launchers.sh", "entrypoint.sh")

ENTRYPOINT_NAME = "launchkit-entrypoint"  # $0 of the embedded script
NODE_PACKAGE = "launchkit_node"  # the name node/ has on the node

_FOLDER = Path(__file__).parent  # a plain package directory (wheel or checkout); no importlib.resources


@lru_cache(maxsize=1)
def node_files() -> dict[str, str]:
    """The node-side Python package: file name -> source, sorted by name."""
    return {p.name: p.read_text() for p in sorted((_FOLDER / "node").glob("*.py"))}


def _node_unpack_part() -> str:
    """Bash defining `lk_node_unpack`: writes node_files() to a fresh directory, sets LK_NODE_DIR."""
    lines = [
        "lk_node_unpack() { # sets LK_NODE_DIR (a fresh directory holding the launchkit_node package)",
        "    [[ -n ${LK_NODE_DIR:-} ]] && return 0",
        '    LK_NODE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/launchkit-node.XXXXXX") || return 1',
        f'    mkdir -- "$LK_NODE_DIR/{NODE_PACKAGE}" || return 1',
    ]
    for name, text in node_files().items():
        tag = "LK_EOF_" + hashlib.sha256(text.encode()).hexdigest()[:16]
        body = text if text.endswith("\n") else text + "\n"
        lines.append(f"    cat >\"$LK_NODE_DIR/{NODE_PACKAGE}/{name}\" <<'{tag}' || return 1\n{body}{tag}")
    lines.append("}")
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=1)
def entrypoint_script() -> str:
    """The complete entrypoint as one bash script."""
    parts = {part: (_FOLDER / part).read_text() for part in PARTS}
    parts = {"node (generated from runtime/node/*.py)": _node_unpack_part(), **parts}
    return "\n".join(f"# ---- {name}\n{text}" for name, text in parts.items())
