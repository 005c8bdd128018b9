"""launchkit: launch ML jobs from a git repository onto Beaker (or this machine)."""

__version__ = "0.1.0"
