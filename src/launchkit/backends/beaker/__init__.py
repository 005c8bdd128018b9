"""The Beaker backend (beaker-py). Imported lazily: only commands that talk to Beaker load it."""

from launchkit.core.beaker_types import import_beaker

import_beaker()  # the full client, even when `spec_types()` loaded `beaker.types` first

from launchkit.backends.beaker.backend import BeakerBackend  # noqa: E402 - after import_beaker()

__all__ = ["BeakerBackend"]
