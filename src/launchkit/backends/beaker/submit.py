"""Idempotent experiment creation: bounded retries, exponential backoff, never two experiments.

After an ambiguous failure (the request may or may not have reached Beaker) we look the experiment
up by name before creating again; if it is there and carries our run id, that is our experiment.
"""

from __future__ import annotations

import secrets
import time
import warnings
from typing import Any

from beaker import exceptions as bx
from beaker.types import BeakerDataSource, BeakerExperimentSpec

from launchkit.application import Application
from launchkit.backends.beaker.client import Connection
from launchkit.core.contract import ENV_RUN_ID
from launchkit.errors import BackendError

MAX_ATTEMPTS = 5
CLOCK_SKEW = 120  # seconds
RENAME_ATTEMPTS = 5
PREEMPTIBLE_WARNING = "The 'preemptible' field is deprecated"


def _run_id(spec: dict[str, Any]) -> str | None:
    for task in spec.get("tasks", []):
        for env in task.get("envVars") or []:
            if env.get("name") == ENV_RUN_ID:
                value = env.get("value")
                return str(value) if value is not None else None
    return None


def _ours(conn: Connection, wl: Any, spec: dict[str, Any], started: float) -> bool:
    """Created by this submission: made after it started (clock skew allowed) and, when the spec has
    one, with our run id (run ids repeat for identical invocations, so the time check stays)."""
    if wl.experiment.created.seconds < int(started) - CLOCK_SKEW:
        return False
    want = _run_id(spec)
    if want is None:
        return True
    try:
        return _run_id(conn.beaker.experiment.get_spec(wl).to_json()) == want
    except bx.BeakerError:
        return True  # made within this submission's window under our name: ours


def _lookup(conn: Connection, name: str) -> Any | None:
    try:
        return conn.beaker.workload.get(f"{conn.me().name}/{name}")
    except bx.BeakerWorkloadNotFound:
        return None


def _parsed(spec: dict[str, Any]) -> BeakerExperimentSpec:
    """from_json, plus a fix for beaker-py 2.8.1 leaving each mount's `source` a dict (snake_case keys),
    which breaks submitting any spec with mounts (see tests/test_spec_golden.py host_path bug).
    beaker-py warns about `preemptible` while parsing though it sends it (core/spec.py): not the user's."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", PREEMPTIBLE_WARNING, DeprecationWarning)
        parsed = BeakerExperimentSpec.from_json(spec)
    for task in parsed.tasks:
        for mount in task.datasets or []:
            if isinstance(mount.source, dict):
                mount.source = BeakerDataSource(**mount.source)
    return parsed


parsed_spec = _parsed  # what create() sends is parsed_spec(json).to_json() (backends/beaker/prepare.py)

TRANSIENT_GRPC = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "UNKNOWN", "ABORTED", "RESOURCE_EXHAUSTED"}
CREATE_SECONDS_PER_JOB = 0.5  # Beaker creates jobs synchronously: ~0.2 s each (128 replicas > 30 s)


def _final(e: Exception) -> bool:
    """True when the server definitely refused the create (retrying cannot help and nothing was made):
    HTTP 4xx (beaker-py raises plain BeakerError("[code=400] ...")), client/permission errors, a bad
    token, or any non-transient gRPC status."""
    import grpc

    from launchkit.backends.beaker.client import http_status

    status = http_status(e)
    if status is not None:
        return 400 <= status < 500
    if isinstance(e, (bx.BeakerClientError, bx.BeakerPermissionsError, NotImplementedError)):
        return True
    if isinstance(e, grpc.RpcError) and isinstance(e, grpc.Call):
        return e.code().name not in TRANSIENT_GRPC
    return not isinstance(e, (OSError, bx.BeakerError))  # an unexpected error: not worth retrying


def _allow_for_replicas(conn: Connection, spec: dict[str, Any]) -> None:
    """Give the create's HTTP request time that grows with the number of jobs it makes."""
    jobs = sum(max(1, int(t.get("replicas") or 1)) for t in spec.get("tasks", []))
    timeout = conn.call_timeout + CREATE_SECONDS_PER_JOB * jobs
    conn.beaker.TIMEOUT = timeout  # type: ignore[misc]
    conn.deadline = max(conn.deadline, time.monotonic() + timeout + conn.timeout)


def create_once(conn: Connection, workspace: Any, name: str, spec: dict[str, Any], app: Application) -> Any:
    """Create the experiment (pb2.Workload), retrying ambiguous failures without duplicating it."""
    beaker_spec = _parsed(spec)
    started = time.time()
    _allow_for_replicas(conn, spec)
    ambiguous = False
    renames = 0
    last_error: Exception | None = None
    for attempt in range(MAX_ATTEMPTS):
        if ambiguous:
            found = _lookup(conn, name)
            if found is not None and _ours(conn, found, spec, started):
                return found
        try:
            created = conn.beaker.experiment.create(spec=beaker_spec, name=name, workspace=workspace)
            conn.renew()
            return created
        except bx.BeakerExperimentConflict:
            if ambiguous:
                found = _lookup(conn, name)
                if found is not None and _ours(conn, found, spec, started):
                    return found
            renames += 1
            if renames > RENAME_ATTEMPTS:
                raise BackendError(f"experiment name {name!r} is taken", hint="pass another --name") from None
            new = f"{name}-{secrets.token_hex(2)}"
            app.info(f"experiment name {name!r} is taken; using {new!r}")
            name, ambiguous = new, False
            continue
        except Exception as e:
            if _final(e):  # the server answered no: one attempt, its own message (Connection.errors)
                raise
            last_error = e  # network errors, timeouts, 5xx, UNAVAILABLE: maybe created, maybe not
            ambiguous = True
        delay = min(0.5 * 2**attempt, 8.0)
        if time.monotonic() + delay > conn.deadline:
            break
        app.debug(f"creating the experiment failed ({type(last_error).__name__}); retrying in {delay:g}s")
        time.sleep(delay)
    found = _lookup(conn, name) if ambiguous else None
    if found is not None and _ours(conn, found, spec, started):
        return found
    if last_error is None:  # every attempt hit a taken name
        raise BackendError(f"experiment name {name!r} is taken", hint="pass another --name")
    raise BackendError(
        f"could not create the experiment on Beaker: {last_error}",
        hint="nothing was created; try again later or raise --beaker-timeout",
    )
