"""launchkit's Python API: what `launchkit run` does, for scripts and notebooks (docs/api.md).

    from launchkit import api

    req = api.request(["python", "train.py"], gpus=1, cluster=["ai2/jupiter"])
    print(req.spec())               # the bytes `launchkit run --dry-run --offline` prints
    print(req.plan().line())        # the `plan:` line `launchkit run` prints first
    run = req.launch()              # submitted; a `Run`
    for line in (f := run.follow()):
        print(line)
    print(f.exit_code, run.why())

A request takes `run`'s options by their Python names (`launchkit run --help`, core/run_options.py)
with the same values and defaults (config files and LAUNCHKIT_* variables included). The CLI's `run`
builds its request with `request_from_options` and launches it through `launchkit.launch`, as `launch()`
here does: one place decides what a launch means.
"""

from __future__ import annotations

import io
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, cast

from launchkit import events
from launchkit.application import Application
from launchkit.backends import Backend, Capability, LogQuery, RunInfo, RunStatus, registry
from launchkit.backends.ending import describe
from launchkit.config import gantry_notice
from launchkit.core.parse import build_request
from launchkit.core.plan import Plan
from launchkit.core.request import LaunchRequest
from launchkit.core.run_options import RUN_OPTIONS, BackendChoice, Kind
from launchkit.errors import UsageError
from launchkit.events import Event
from launchkit.launch import Launch, backend_name, plan, submit
from launchkit.masking import masked

__all__ = [
    "ALL_COMPLETED",
    "FIRST_FAILURE",
    "Event",
    "Follow",
    "Request",
    "Run",
    "get_run",
    "request",
    "request_from_options",
    "runs",
    "wait",
]
FIRST_FAILURE, ALL_COMPLETED = "FIRST_FAILURE", "ALL_COMPLETED"  # wait()'s return_when, as concurrent.futures

_OPTIONS = {opt.name for opt in RUN_OPTIONS}
# What a request object does with its methods instead: `spec()`, `launch()`, `Run.follow()`.
_METHODS = {
    "dry_run": "spec()",
    "offline": "spec()",
    "save_spec": "spec() and write it",
    "follow": "launch().follow()",
    "show_logs": "launch().follow()",
    "json_output": "plan() (and Plan.to_json())",
}


def request(command: Sequence[str], *, app: Application | None = None, **options: Any) -> Request:
    """A launch request for `command` (the words after `--`), with `run`'s options by name:
    `request(["python", "train.py"], gpus=1, env=["A=1"], local=True)`. A list option also takes one
    string (as in a config file). Wrong names or values raise `launchkit.errors.UsageError` naming
    the option and the fix."""
    for name in options:
        if name not in _OPTIONS:
            raise UsageError(f"{name}: not an option of `launchkit run`", hint="see `launchkit run --help`")
        if name in _METHODS:
            raise UsageError(f"{name}: not a request option here", hint=f"use the request's {_METHODS[name]}")
    return request_from_options(app or Application(), options, list(command))


def request_from_options(
    app: Application,
    given: dict[str, Any],
    command: list[str] | None,
    extra: Sequence[str] = (),
    *,
    python: bool = False,
) -> Request:
    """The request `run`'s command line gives (`given`: option name -> value, absent ones left out or
    None/False). Config defaults apply and each deprecated or ineffective option is named once, by its
    flag; `python`: for a Python caller (gantry's API), which names no flags, so none of those lines."""
    config = app.config
    if notice := gantry_notice(config):
        app.info(notice)
    for layer in config.layers:
        app.debug(
            f"defaults from {layer.label}"
            + (f" ({layer.path})" if layer.path else "")
            + ": "
            + ", ".join(sorted(layer.values))
        )
    given = {o.name: False if o.kind is Kind.FLAG else None for o in RUN_OPTIONS} | given
    choice = BackendChoice(known=tuple(registry.names()), here=registry.here_name())
    req = build_request({**given, "extra": list(extra)}, command, config=config, backends=choice)
    if python:
        return Request(app, req)
    name = backend_name(app, req)
    for opt in RUN_OPTIONS:
        if opt.deprecated and given.get(opt.name):
            app.warn(f"{opt.flag} is deprecated (gantry removed it before 3.7): {opt.deprecated}")
    if given.get("start_timeout") and not req.follow:
        app.warn(
            "--start-timeout has no effect: run does not wait for the job (add --follow, or --timeout N)"
        )
    capabilities = registry.info(name).capabilities
    if req.groups and Capability.workspaces not in capabilities:
        how = (
            Capability.this_machine.value if Capability.this_machine in capabilities else f"--backend {name}"
        )
        app.warn(
            f"--group has no effect with {how}: it names a Beaker group "
            "(for a dependency group of the project use --uv-group NAME)"
        )
    if req.preemptible is not None:
        app.warn(
            "--preemptible/--not-preemptible is deprecated by Beaker: prefer --min-runtime "
            "(0 = preemptible any time) and --no-auto-resume"
        )
    return Request(app, req)


class Request:
    """A validated launch request (`request()`); `launch_request` is the typed model."""

    def __init__(self, app: Application, launch_request: LaunchRequest) -> None:
        self.app = app
        self.launch_request = launch_request

    def resolve(self) -> Launch:
        """The launch resolved once: backend, git state, profiles, the spec as it would be sent."""
        return plan(self.app, self.launch_request)

    def plan(self) -> Plan:
        """What it asks for, as `run` says it first (`Plan.line()`, `Plan.to_json()`): clusters, GPUs x
        replicas, priority, preemption, task timeout, where it could start now when known."""
        return self.resolve().plan

    def spec(self) -> str:
        """The spec offline: the exact bytes `launchkit run --dry-run --offline` prints. Submits nothing."""
        offline = self.launch_request.model_copy(update={"dry_run": True, "offline": True})
        return plan(self.app, offline).spec_yaml

    def launch(self) -> Run:
        """Submit it (for --sweep-experiments, one run each: the handle is the last one's)."""
        return launched(self.app, self.resolve())


def launched(app: Application, launch: Launch) -> Run:
    """Submit a planned launch; its handle."""
    run = submit(app, launch)
    assert launch.backend is not None  # submit() refuses a dry run
    return Run(app, launch.backend, run)


class Follow:
    """A run's output, line by line as it comes (`str`, newline kept, the values of its secrets
    masked as `***`); `exit_code` is the job's once the lines have ended."""

    def __init__(self, run: Run, **options: Any) -> None:
        self.exit_code: int | None = None
        self._lines: queue.Queue[str | BaseException | None] = queue.Queue()
        self._thread = threading.Thread(target=self._stream, args=(run, options), daemon=True)
        self._thread.start()

    def _stream(self, run: Run, options: dict[str, Any]) -> None:
        sink = _LineSink(self._lines)
        shown = masked(run.app, run.backend, run.info, cast("IO[bytes]", sink))
        try:
            self.exit_code = run.backend.follow(run.info, cast("IO[bytes]", shown), **options)
            shown.end()
            sink.close()
            self._lines.put(None)
        except BaseException as e:  # noqa: BLE001 (raised again in the reader's thread)
            self._lines.put(e)

    def __iter__(self) -> Iterator[str]:
        while (item := self._lines.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
        self._thread.join()


class _LineSink(io.RawIOBase):
    """Bytes in, whole decoded lines out to a queue (the last one at close, if unterminated)."""

    def __init__(self, lines: queue.Queue[Any]) -> None:
        self._lines, self._buf = lines, b""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._buf += bytes(data)
        *whole, self._buf = self._buf.split(b"\n")
        for line in whole:
            self._lines.put(line.decode("utf-8", "replace") + "\n")
        return len(data)

    def close(self) -> None:
        if self._buf:
            self._lines.put(self._buf.decode("utf-8", "replace"))
            self._buf = b""
        super().close()


class Run:
    """A handle on one run: `info` is its state when the handle was made or last refreshed."""

    def __init__(self, app: Application, backend: Backend, info: RunInfo) -> None:
        self.app, self.backend, self.info = app, backend, info

    @property
    def id(self) -> str:
        return self.info.id

    def refresh(self) -> RunInfo:
        """The run's state now."""
        self.info = self.backend.get(self.info.id)
        return self.info

    def follow(
        self, *, replica: int | None = None, all_replicas: bool = False, tail: int | None = None
    ) -> Follow:
        """Stream the run's output until it finishes (`for line in run.follow()`); then `exit_code`."""
        return Follow(self, replica=replica, all_replicas=all_replicas, tail=tail)

    def events(
        self, *, poll: float = events.POLL, progress_every: float = events.PROGRESS_EVERY
    ) -> Iterator[Event]:
        """Its events until it ends, typed (`events.Event`: kind, time, replica, attempt, line, fix,
        progress), the same `launchkit follow ID --json` prints: `for ev in run.events(): ...`."""
        return events.stream(self.app, self.backend, self.info, poll=poll, progress_every=progress_every)

    def why(self) -> str:
        """Why it ended (or where it stands), in one line with the fix, as `launchkit why` says it."""
        return describe(self.refresh())

    def logs(self, *, replica: int | None = None, tail: int | None = None, head: int | None = None) -> str:
        """Its output so far (secrets masked), as `launchkit logs` prints it."""
        out = io.BytesIO()
        shown = masked(self.app, self.backend, self.info, out)
        query = LogQuery(replica=replica, tail=tail, head=head)
        self.backend.write_logs(self.info, query, cast("IO[bytes]", shown))
        shown.end()
        return out.getvalue().decode("utf-8", "replace")

    def stop(self) -> RunInfo:
        """Stop it; its state after."""
        self.info = self.backend.stop(self.info)
        return self.info

    def results(self, dest: str | None = None) -> list[str]:
        """Download its results into `dest` (default: the backend's); the directories holding them."""
        return self.backend.download_results(self.refresh(), dest)


def _backend(app: Application, backend: str | None, local: bool, run_id: str | None = None) -> Backend:
    name = registry.resolve_name(backend, local)
    if name is None:
        name = registry.for_run_id(run_id).name if run_id else registry.configured_name(app.config)
    return registry.load(name, app, workspace=app.config.get("workspace"))


def get_run(
    run_id: str, *, backend: str | None = None, local: bool = False, app: Application | None = None
) -> Run:
    """A handle on run `run_id` (its backend from the id's shape, unless named)."""
    app = app or Application()
    b = _backend(app, backend, local, run_id)
    return Run(app, b, b.get(run_id))


def runs(
    *, backend: str | None = None, local: bool = False, limit: int = 20, app: Application | None = None
) -> list[RunInfo]:
    """Your newest runs on the backend (default: the configured one), newest first, as `launchkit list`."""
    app = app or Application()
    return _backend(app, backend, local).list_runs(limit=limit)


def wait(
    runs: Sequence[Run],
    *,
    return_when: str = ALL_COMPLETED,
    timeout: float | None = None,
    poll: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[Run], list[Run]]:
    """Wait for runs (a sweep's) as `concurrent.futures.wait` does: (finished, not finished), each run's
    `info` refreshed. `return_when`: ALL_COMPLETED, or FIRST_FAILURE (as soon as one ended other than
    succeeded, else when all have). `timeout` seconds (None: no limit); each look asks every unfinished
    run's state once, every `poll` seconds."""
    if return_when not in (FIRST_FAILURE, ALL_COMPLETED):
        raise UsageError(
            f"return_when={return_when!r}: not a choice", hint="use api.FIRST_FAILURE or api.ALL_COMPLETED"
        )
    start = clock()
    while True:
        for r in runs:
            if not r.info.status.finished:
                r.refresh()
        done = [r for r in runs if r.info.status.finished]
        failed = any(r.info.status != RunStatus.succeeded for r in done)
        if len(done) == len(runs) or (return_when == FIRST_FAILURE and failed):
            break
        if timeout is not None and clock() - start >= timeout:
            break
        sleep(poll if timeout is None else max(0.0, min(poll, timeout - (clock() - start))))
    return done, [r for r in runs if not r.info.status.finished]
