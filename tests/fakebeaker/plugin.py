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
def make_fake_beaker(monkeypatch, tmp_path):
    """Factory: `make_fake_beaker(state=None, scenario="basic", user=None, **FakeBeaker kwargs)` starts a
    fake and points this process's environment at it (as `user`); all are stopped after the test."""
    fakes: list[FakeBeaker] = []

    def make(state=None, scenario: str = "basic", user: str | None = None, **kwargs) -> FakeBeaker:
        env_options = os.environ.get("FAKEBEAKER_OPTIONS")
        if env_options and "options" not in kwargs and state is None:  # a whole-suite run in one setting
            import json

            kwargs["options"] = json.loads(env_options)
        fake = FakeBeaker(state, scenario=scenario, directory=tmp_path / f"fakebeaker{len(fakes)}", **kwargs)
        fakes.append(fake)
        fake.start()
        for k, v in fake.env_for(user).items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", str(fake.tls.bundle_file))
        return fake

    try:
        yield make
    finally:
        for fake in fakes:
            fake.stop()


@pytest.fixture
def fake_beaker(make_fake_beaker, request):
    """A started fake with the `basic` scenario; the environment points at it as user alice.
    Parametrize it indirectly with a dict of `state.Options` to switch behaviours (see `both_ways`)."""
    options = getattr(request, "param", None)
    return make_fake_beaker(options=options) if options else make_fake_beaker()


def both_ways(option: str, values: tuple = (False, True), **fixed):
    """Run a test that uses `fake_beaker` once per value of an option whose real behaviour is unknown:
    `@both_ways("tie_timestamps")`, `@both_ways("auth_error", ("unauthenticated", "permission_denied"))`."""
    return pytest.mark.parametrize(
        "fake_beaker",
        [pytest.param({option: v, **fixed}, id=f"{option}={v}") for v in values],
        indirect=True,
    )


UNKNOWN = {  # the switches for behaviour the fact sheet calls unknown, with both settings
    "resolve_cluster_aliases": (False, True),
    "auth_error": ("unauthenticated", "permission_denied"),
    "tie_timestamps": (False, True),
    "replica_task_names": ("same", "distinct"),
    "job_creation_delay": (0.0, 0.4),
    "oom_report": ("message", "exit_code"),
    "retry_node_loss": (False, True),
    "resume_resend": ("none", "second", "all"),
    "impossible_after": (None, 0.05),
    "list_task_specs": (True, False),
    "list_job_timeouts": (True, False),
}
