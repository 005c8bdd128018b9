"""The Beaker backend (beaker-py). Imported lazily: only commands that talk to Beaker load it."""

from launchkit.backends.beaker.backend import BeakerBackend

__all__ = ["BeakerBackend"]
