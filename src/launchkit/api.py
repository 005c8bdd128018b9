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

import difflib
import io
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, cast

from launchkit import events, run_request
from launchkit.application import Application
from launchkit.backends import Backend, LogQuery, RunInfo, RunStatus, registry
from launchkit.backends.ending import describe
from launchkit.core.digest import TaskState
from launchkit.core.plan import Plan
from launchkit.core.redact import url_host_only
from launchkit.core.request import LaunchRequest
from launchkit.core.run_options import RUN_OPTIONS, Kind, number
from launchkit.core.units import MAX_COUNT
from launchkit.errors import UsageError, from_exception
from launchkit.events import Event
from launchkit.launch import Launch, plan, submit
from launchkit.masking import masked
from launchkit.runtime.node.launch.notify import url_problem

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
_KINDS = {opt.name: opt.kind for opt in RUN_OPTIONS}
_FLAGS = {opt.name: opt.flag for opt in RUN_OPTIONS}
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
    """A launch request for `command` (the words after `--`, a list of strings), with `run`'s options
    by name: `request(["python", "train.py"], gpus=1, env=["A=1"], local=True)`. A list option also
    takes one string, as one item (as in a config file). Wrong names or values raise
    `launchkit.errors.UsageError` naming the option and the fix, before anything is read or written."""
    words = _words("command", command, hint='give the words as a list, e.g. ["python", "train.py"]')
    given = {}
    for name, value in options.items():
        if name not in _OPTIONS:
            close = difflib.get_close_matches(name, sorted(_OPTIONS - set(_METHODS)), n=1)
            hint = f"did you mean `{close[0]}`?" if close else "see `launchkit run --help`"
            raise UsageError(f"{name}: not an option of `launchkit run`", hint=hint)
        if name in _METHODS:
            raise UsageError(f"{name}: not a request option here", hint=f"use the request's {_METHODS[name]}")
        given[name] = _option_value(_KINDS[name], name, value)
    return request_from_options(app or Application(), given, words)


def _words(name: str, value: Any, *, hint: str) -> list[str]:
    """A list of strings; a `str` (which Python would take as its characters) is refused."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise UsageError(
            f"{name}={value!r}: must be a list of strings, not {type(value).__name__}", hint=hint
        )
    for item in value:
        if not isinstance(item, str):
            raise UsageError(f"{name}: {item!r} is not a string", hint=hint)
    return list(value)


def _option_value(kind: Kind, name: str, value: Any) -> Any:
    """`value` as the CLI's `--name` gives it to the request (cli/params.py: convert): a list option
    takes a list of strings or one string (one item), a number a number (or its digits), a flag a
    bool; None is "not given". The ranges are build_request's, as for the CLI."""
    if value is None:
        return None
    where = _FLAGS[name].removeprefix("--")
    if kind is Kind.LIST:
        if isinstance(value, str):
            return [value]
        return _words(name, value, hint=f"give --{where}'s values as a list of strings, or one string")
    if kind in (Kind.FLAG, Kind.TRISTATE):
        if not isinstance(value, bool):
            raise UsageError(
                f"--{where} {value!r}: must be True or False", hint=f"pass {name}=True to give --{where}"
            )
        return value
    if kind in (Kind.INT, Kind.FLOAT):
        try:
            return number(int if kind is Kind.INT else float, value)
        except ValueError as e:
            raise UsageError(f"--{where} {value!r}: {e}", hint=f"give --{where} a number") from None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # `task_timeout=3600` as `--task-timeout 3600`
    if not isinstance(value, str):
        raise UsageError(f"--{where} {value!r}: must be a string", hint=f"give --{where}'s value as a string")
    return value


def _count(name: str, value: Any, *, least: int = 0) -> int | None:
    """An optional whole number as the CLI's options take it (`min`, MAX_COUNT), or a UsageError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(
            f"{name}={value!r}: must be a whole number", hint=f"give e.g. {name}={max(least, 1)}"
        )
    if not least <= value <= MAX_COUNT:
        raise UsageError(
            f"{name}={value}: must be between {least} and {MAX_COUNT}",
            hint=f"give e.g. {name}={max(least, 1)}",
        )
    return value


def _seconds(name: str, value: Any, *, zero: bool = False) -> float:
    """A finite number of seconds, above 0 (`zero`: or 0), or a UsageError."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not zero):
        least = "0 or more" if zero else "above 0"
        raise UsageError(
            f"{name}={value!r}: must be a number of seconds, {least}", hint=f"give e.g. {name}=10"
        )
    return float(value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{name}={value!r}: must be True or False", hint=f"pass {name}=True or leave it out")
    return value


def _name(name: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise UsageError(
            f"{name}={value!r}: must be a non-empty string", hint=f"give {name} by name, or leave it out"
        )
    return value


def request_from_options(
    app: Application,
    given: dict[str, Any],
    command: list[str] | None,
    extra: Sequence[str] = (),
    *,
    python: bool = False,
) -> Request:
    """The request `run`'s command line gives (`given`: option name -> value, absent ones left out or
    None/False), as `launchkit run` builds it (launchkit/run_request.py). Config defaults apply and
    each deprecated or ineffective option is named once, by its flag; `python`: for a Python caller
    (gantry's API), which names no flags, so none of those lines."""
    return Request(app, run_request.request_from_options(app, given, command, extra, python=python))


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

    def launch_all(self) -> list[Run]:
        """Submit it: a handle on every run it makes (one, or one per --sweep-experiments combination),
        e.g. for `wait(runs, notify_url=...)`, which posts the sweep's digest."""
        launch = self.resolve()
        made: list[RunInfo] = []
        submit(self.app, launch, made.append)
        assert launch.backend is not None  # submit() refuses a dry run
        return [Run(self.app, launch.backend, info) for info in made]


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
        replica, tail = _count("replica", replica), _count("tail", tail)
        return Follow(self, replica=replica, all_replicas=_flag("all_replicas", all_replicas), tail=tail)

    def events(
        self, *, poll: float = events.POLL, progress_every: float = events.PROGRESS_EVERY
    ) -> Iterator[Event]:
        """Its events until it ends, typed (`events.Event`: kind, time, replica, attempt, line, fix,
        progress), the same `launchkit follow ID --json` prints: `for ev in run.events(): ...`."""
        poll, progress_every = _seconds("poll", poll), _seconds("progress_every", progress_every)
        return events.stream(self.app, self.backend, self.info, poll=poll, progress_every=progress_every)

    def why(self) -> str:
        """Why it ended (or where it stands), in one line with the fix, as `launchkit why` says it."""
        return describe(self.refresh())

    def logs(self, *, replica: int | None = None, tail: int | None = None, head: int | None = None) -> str:
        """Its output so far (secrets masked), as `launchkit logs` prints it."""
        replica, tail, head = _count("replica", replica), _count("tail", tail), _count("head", head)
        if head is not None and tail is not None:
            raise UsageError("head and tail cannot be combined", hint="pick one")
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
        if dest is not None and not isinstance(dest, (str, os.PathLike)):
            raise UsageError(f"dest={dest!r}: must be a path", hint="give a directory path, or leave it out")
        try:
            return self.backend.download_results(self.refresh(), None if dest is None else os.fspath(dest))
        except OSError as e:  # as the CLI reports it: the path and the fix (exit 3)
            raise from_exception(e) from None


def _backend(app: Application, backend: str | None, local: bool, run_id: str | None = None) -> Backend:
    name = registry.resolve_name(backend, local)
    if name is None:
        name = registry.for_run_id(run_id).name if run_id else registry.configured_name(app.config)
    return registry.load(name, app, workspace=app.config.get("workspace"))


def get_run(
    run_id: str, *, backend: str | None = None, local: bool = False, app: Application | None = None
) -> Run:
    """A handle on run `run_id` (its backend from the id's shape, unless named)."""
    if not isinstance(run_id, str) or not run_id.strip():
        raise UsageError(f"run_id={run_id!r}: must be a run id", hint="give an id `launchkit list` shows")
    backend, local = _name("backend", backend), _flag("local", local)
    app = app or Application()
    b = _backend(app, backend, local, run_id)
    return Run(app, b, b.get(run_id))


def runs(
    *, backend: str | None = None, local: bool = False, limit: int = 20, app: Application | None = None
) -> list[RunInfo]:
    """Your newest runs on the backend (default: the configured one), newest first, as `launchkit list`."""
    backend, local = _name("backend", backend), _flag("local", local)
    checked = _count("limit", limit, least=1)
    limit = 20 if checked is None else checked
    app = app or Application()
    return _backend(app, backend, local).list_runs(limit=limit)


def _digest(runs: Sequence[Run], slack: str | None, events: str | None, every: float) -> Any:
    """The digest poster of `wait` (launchkit/notify.py: SweepDigest): the URLs given, else the first
    run's own hooks (a sweep's runs share them); None without either."""
    if not runs:
        return None
    from launchkit.notify import SweepDigest, sweep_digest

    first = runs[0]
    label = f"launchkit sweep of {len(runs)} runs ({first.info.name}, ...)"
    for name, url in (("slack_webhook_url", slack), ("notify_url", events)):
        problem = None if url is None else url_problem(url)
        if problem is not None:
            raise UsageError(f"{name} {url_host_only(str(url))}: {problem}", hint="give an https:// URL")
    if slack or events:
        return SweepDigest(first.app, label, first.id, slack, events, every)
    return sweep_digest(first.app, first.backend, first.info, label=label, every=every)


def wait(
    runs: Sequence[Run],
    *,
    return_when: str = ALL_COMPLETED,
    timeout: float | None = None,
    poll: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    slack_webhook_url: str | None = None,
    notify_url: str | None = None,
    digest_every: float = 60.0,
) -> tuple[list[Run], list[Run]]:
    """Wait for runs (a sweep's) as `concurrent.futures.wait` does: (finished, not finished), each run's
    `info` refreshed. `return_when`: ALL_COMPLETED, or FIRST_FAILURE (as soon as one ended other than
    succeeded, else when all have). `timeout` seconds (None: no limit); each look asks every unfinished
    run's state once, every `poll` seconds. A sweep's digest (`980 succeeded · 12 failed (exit 1) · 3
    running`: docs/notifications.md) is posted to `slack_webhook_url` and/or `notify_url` (as JSON), or
    else to the hooks the runs were launched with (--slack-webhook-secret, --notify-url,
    --notify-secret), once per change, at most every `digest_every` seconds, and when they have all
    ended."""
    if isinstance(runs, (str, bytes, Run)) or not isinstance(runs, Sequence):
        raise UsageError(f"runs={runs!r}: must be a list of runs", hint="give e.g. [run1, run2]")
    if bad := [r for r in runs if not isinstance(r, Run)]:
        raise UsageError(
            f"runs: {bad[0]!r} is not a Run", hint="give the handles launch() or get_run() returned"
        )
    poll = _seconds("poll", poll)
    timeout = None if timeout is None else _seconds("timeout", timeout, zero=True)
    if return_when not in (FIRST_FAILURE, ALL_COMPLETED):
        raise UsageError(
            f"return_when={return_when!r}: not a choice", hint="use api.FIRST_FAILURE or api.ALL_COMPLETED"
        )
    digest = _digest(runs, slack_webhook_url, notify_url, _seconds("digest_every", digest_every, zero=True))
    start = clock()
    while True:
        for r in runs:
            if not r.info.status.finished:
                r.refresh()
        if digest is not None:
            digest.update([TaskState.of_run(r.info) for r in runs])
        done = [r for r in runs if r.info.status.finished]
        failed = any(r.info.status != RunStatus.succeeded for r in done)
        if len(done) == len(runs) or (return_when == FIRST_FAILURE and failed):
            break
        if timeout is not None and clock() - start >= timeout:
            break
        sleep(poll if timeout is None else max(0.0, min(poll, timeout - (clock() - start))))
    return done, [r for r in runs if not r.info.status.finished]
