"""launchkit's node-side runtime in Python: what the bash bootstrap hands over to once a Python exists.

Standard library only, and Python 3.8 syntax: it runs under the job's own interpreter (the image's
or uv's), not launchkit's. On the node the package is importable as `launchkit_node` and run as
`python -m launchkit_node SUBCOMMAND ARGS...`; bash starts it through `boot.py` (`lk_node PYTHON
SUBCOMMAND ARGS...`, lib.sh), the one file in syntax every Python reads, which refuses one too old;
launchkit's tests import it as `launchkit.runtime.node`. Modules import each other relatively, at
the top, with no cycle: `environment/` (the job's Python environment and its caches) and `launch/`
(running the command) never import each other; what both use is here (tests/test_runtime_node.py).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

OFF = ("0", "false", "no", "off")


def switched_off(environ: Mapping[str, str], name: str) -> bool:
    """A LAUNCHKIT_* switch that is on by default, turned off with 0/false/no/off (launchkit/envflags.py)."""
    return environ.get(name, "").strip().lower() in OFF
