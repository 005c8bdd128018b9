"""A fake Beaker server for tests and benchmarks: the unmodified beaker-py client talks to it over gRPC (TLS)
and HTTPS, like moto for AWS. See README.md in this directory."""

from .faults import Faults
from .server import FakeBeaker
from .state import AutoRun, NotFound, State

__all__ = ["AutoRun", "FakeBeaker", "Faults", "NotFound", "State"]
