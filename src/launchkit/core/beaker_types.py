"""beaker-py's spec types, without paying for its gRPC client.

`import beaker` loads grpc, requests and every service stub (~250 ms here). The spec dataclasses
live in `beaker.types`, which needs only the protobuf messages. When the full package is not
loaded yet we import `beaker.types` under a temporary package shell, then drop the shell so a later
`import beaker` initialises the real package and reuses the very same `beaker.types` module.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types


def spec_types() -> types.ModuleType:
    """Return the `beaker.types` module (the real one, shared with a full `import beaker`)."""
    if "beaker.types" in sys.modules:
        return sys.modules["beaker.types"]
    if "beaker" in sys.modules:
        return importlib.import_module("beaker.types")
    found = importlib.util.find_spec("beaker")
    if found is None or not found.submodule_search_locations:
        raise ImportError("beaker-py is not installed")
    shell = types.ModuleType("beaker")
    shell.__path__ = list(found.submodule_search_locations)
    shell.__spec__ = found
    sys.modules["beaker"] = shell
    try:
        return importlib.import_module("beaker.types")
    finally:
        if sys.modules.get("beaker") is shell:
            del sys.modules["beaker"]


def import_beaker() -> types.ModuleType:
    """`import beaker` (the full client), re-binding submodules that `spec_types()` loaded early."""
    import beaker

    for name, module in list(sys.modules.items()):
        if name.startswith("beaker.") and name.count(".") == 1 and module is not None:
            setattr(beaker, name.split(".", 1)[1], module)
    return beaker
