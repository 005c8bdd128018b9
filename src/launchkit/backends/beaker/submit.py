"""Exactly-once experiment creation: bounded retries with the connection's RetryPolicy, never two
experiments, and no trust in clocks.

Each submission carries a launch token (env var LAUNCHKIT_LAUNCH_TOKEN in its first task, made here, at
submit: a dry run cannot show it). After an ambiguous failure (the request may or may not have reached
Beaker) we read the experiment of that name (GetWorkload: read-after-write, never a lagging listing);
it is ours exactly when it carries our token.
"""

from __future__ import annotations

import secrets
from typing import Any

from beaker import exceptions as bx

from launchkit.application import Application
from launchkit.backends.beaker.client import Connection, http_status, rate_limited
from launchkit.backends.registry import BEAKER_NAME_LIMIT
from launchkit.core.specview import EnvVar, SpecView, beaker_spec
from launchkit.errors import BackendError, UsageError

MAX_ATTEMPTS = 5
RENAME_ATTEMPTS = 5
ENV_LAUNCH_TOKEN = "LAUNCHKIT_LAUNCH_TOKEN"
MAX_NAME = BEAKER_NAME_LIMIT  # Beaker refuses longer experiment names (HTTP 400)
SUFFIX = 5  # "-" + 4 hex digits, added when the name is taken


def check_name(name: str) -> None:
    """A usage error for a name Beaker would refuse for its length (before anything is sent)."""
    if len(name) > MAX_NAME:
        raise UsageError(
            f"--name is {len(name)} characters; Beaker allows at most {MAX_NAME}",
            hint=f"shorten it (e.g. {name[: MAX_NAME - 8]!r}...)",
        )


def renamed(name: str) -> str:
    """`name` with a random `-xxxx` suffix, shortened so that the whole stays within MAX_NAME."""
    return f"{name[: MAX_NAME - SUFFIX].rstrip('-_.') or name[:1]}-{secrets.token_hex(2)}"


def with_token(spec: SpecView, token: str) -> SpecView:
    """The spec with LAUNCHKIT_LAUNCH_TOKEN=token in its first task (a copy; `_token_of` reads the
    first task that has one, and a 1,000-task sweep need not carry it 1,000 times)."""
    tasks = spec.tasks
    if not tasks:
        return spec.copy()
    return spec.with_tasks([tasks[0].with_env(EnvVar(ENV_LAUNCH_TOKEN, token)), *tasks[1:]])


def launch_token(spec: SpecView) -> str | None:
    return spec.env_value(ENV_LAUNCH_TOKEN)


def _token_of(conn: Connection, wl: Any) -> str | None:
    """The launch token an experiment carries: from its tasks' env (when the server includes it in the
    workload), else from its spec (GetExperimentYamlSpec)."""
    for task in wl.experiment.tasks:
        for env in task.container_spec.environment_variables:
            if env.name == ENV_LAUNCH_TOKEN:
                return str(env.literal)
    return SpecView(conn.beaker.experiment.get_spec(wl).to_json()).env_value(ENV_LAUNCH_TOKEN)


def _ours(conn: Connection, wl: Any, token: str) -> bool:
    """Made by this submission: it carries our launch token (whatever the server's clock says)."""
    return _token_of(conn, wl) == token


def _lookup(conn: Connection, name: str) -> Any | None:
    try:
        return conn.beaker.workload.get(f"{conn.me().name}/{name}")
    except bx.BeakerWorkloadNotFound:
        return None


_parsed = parsed_spec = beaker_spec  # what create() sends is parsed_spec(json).to_json() (prepare.py)

TRANSIENT_GRPC = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "UNKNOWN", "ABORTED", "RESOURCE_EXHAUSTED"}
CREATE_SECONDS_PER_JOB = 0.5  # Beaker creates jobs synchronously: ~0.2 s each (128 replicas > 30 s)


def _final(e: Exception) -> bool:
    """True when the server definitely refused the create (retrying cannot help and nothing was made):
    HTTP 4xx (beaker-py raises plain BeakerError("[code=400] ...")), client/permission errors, a bad
    token, or any non-transient gRPC status."""
    import grpc

    if rate_limited(e):  # HTTP 429 / RESOURCE_EXHAUSTED: nothing was done; transient
        return False
    status = http_status(e)
    if status is not None:
        return 400 <= status < 500
    if isinstance(e, (bx.BeakerClientError, bx.BeakerPermissionsError, NotImplementedError)):
        return True
    if isinstance(e, grpc.RpcError) and isinstance(e, grpc.Call):
        return e.code().name not in TRANSIENT_GRPC
    return not isinstance(e, (OSError, bx.BeakerError))  # an unexpected error: not worth retrying


def _allow_for_replicas(conn: Connection, spec: SpecView) -> None:
    """Give the create's HTTP request time that grows with the number of jobs it makes."""
    jobs = spec.jobs
    timeout = conn.call_timeout + CREATE_SECONDS_PER_JOB * jobs
    conn.beaker.TIMEOUT = timeout  # type: ignore[misc]
    conn.deadline = max(conn.deadline, conn.clock() + timeout + conn.timeout)


def create_once(conn: Connection, workspace: Any, name: str, spec: SpecView, app: Application) -> Any:
    """Create the experiment (pb2.Workload), retrying ambiguous failures without duplicating it."""
    check_name(name)
    token = launch_token(spec) or secrets.token_hex(8)  # prepare() puts one in; a spec file may not
    spec = with_token(spec, token)
    parsed = beaker_spec(spec)
    _allow_for_replicas(conn, spec)
    ambiguous = False
    renames = 0
    last_error: Exception | None = None
    for attempt in range(MAX_ATTEMPTS):
        if ambiguous:
            found = _lookup(conn, name)
            if found is not None and _ours(conn, found, token):
                return found
        try:
            created = conn.beaker.experiment.create(spec=parsed, name=name, workspace=workspace)
            conn.renew()
            return created
        except bx.BeakerExperimentConflict:
            if ambiguous:
                found = _lookup(conn, name)
                if found is not None and _ours(conn, found, token):
                    return found
            renames += 1
            if renames > RENAME_ATTEMPTS:
                raise BackendError(f"experiment name {name!r} is taken", hint="pass another --name") from None
            new = renamed(name)
            app.info(f"experiment name {name!r} is taken; using {new!r}")
            name, ambiguous = new, False
            continue
        except Exception as e:
            if _final(e):  # the server answered no: one attempt, its own message (Connection.errors)
                raise
            last_error = e  # network errors, timeouts, 5xx, UNAVAILABLE: maybe created, maybe not
            ambiguous = ambiguous or not rate_limited(e)  # a rate limit did nothing
        app.debug(f"creating the experiment failed ({type(last_error).__name__}); retrying")
        if not conn.backoff(attempt, last_error, what="CreateExperiment", quiet=True):
            break
    found = _lookup(conn, name) if ambiguous else None
    if found is not None and _ours(conn, found, token):
        return found
    if last_error is None:  # every attempt hit a taken name
        raise BackendError(f"experiment name {name!r} is taken", hint="pass another --name")
    if rate_limited(last_error) and not ambiguous:
        raise conn.translate(last_error)
    raise BackendError(
        f"could not create the experiment on Beaker: {last_error}",
        hint="nothing was created; try again later or raise --beaker-timeout",
    )
