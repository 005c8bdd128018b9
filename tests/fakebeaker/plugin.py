"""pytest plugin (registered in tests/conftest.py): the `fake_beaker` fixture.

`fake_beaker` is a started `FakeBeaker` with the `basic` scenario whose environment (BEAKER_CONFIG,
BEAKER_TOKEN, BEAKER_ADDR, CA variables, NO_PROXY...) is also applied to this process with monkeypatch,
so `Beaker.from_env()` in-process and `run_cli(...)` subprocesses both reach it.
"""

from __future__ import annotations

import os

import pytest

from .server import FakeBeaker
from .tls import tls_material

# grpc reads GRPC_DEFAULT_SSL_ROOTS_FILE_PATH once per process, at the first TLS channel that uses the
# default roots. Point it, before any test runs, at the fake's CA plus the system roots, so the first
# channel (whichever test opens it) trusts every fake of this process (they share one CA).
os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(tls_material().bundle_file)


@pytest.fixture
def fake_beaker(monkeypatch, tmp_path):
    fake = FakeBeaker(scenario="basic", directory=tmp_path / "fakebeaker").start()
    try:
        for k, v in fake.env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", str(fake.tls.bundle_file))
        yield fake
    finally:
        fake.stop()
