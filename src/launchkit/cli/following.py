"""Following a run until it finishes: shared by `follow`, `logs -f` and `run --follow/--timeout`.

gantry's waiting limits (`run --timeout`, `--start-timeout`, `--inactive-timeout`,
`--inactive-soft-timeout`) are enforced here, for every backend: a watchdog thread looks at the
clock, the run's status and the time of the last log byte, and stops the run when a limit passes;
the backend's follow loop then ends as the run finishes.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, cast

from launchkit.application import Application
from launchkit.backends import Backend, Cause, RunInfo, RunStatus
from launchkit.backends.ending import describe, launchkit_stopped
from launchkit.cli.context import stdout_closed
from launchkit.core.digest import TaskState
from launchkit.core.status import task_summary
from launchkit.errors import EXIT_INTERRUPTED
from launchkit.masking import masked
from launchkit.notify import SweepDigest, events_notifier, sweep_digest

if TYPE_CHECKING:
    from launchkit.notify import SlackNotifier

EXIT_TIMED_OUT = 124  # a waiting limit passed and launchkit stopped the run (as timeout(1) does)
SOFT_REPEAT = 3600.0  # gantry warns again about inactivity at most once per max(soft, 1 h)

Clock = Callable[[], float]  # seconds from an arbitrary origin (time.monotonic counts from boot)


class FirstOutput:
    """A byte stream wrapper that calls `callback` once, when the job's first output arrives."""

    def __init__(self, out: IO[bytes], callback: Any) -> None:
        self._out = out
        self._callback: Any = callback

    def write(self, data: bytes) -> int:
        n = self._out.write(data)
        if self._callback is not None and data:
            cb, self._callback = self._callback, None
            cb()
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


@dataclass(frozen=True)
class Limits:
    """Seconds; None = no limit. `timeout` counts from the start of following."""

    timeout: float | None = None
    start: float | None = None
    inactive: float | None = None
    inactive_soft: float | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.timeout, self.start, self.inactive, self.inactive_soft))


class _Sink:
    """The output stream the backend writes logs to: records when bytes last arrived; discards them
    when the logs are not shown (`run --no-follow --timeout N`)."""

    def __init__(self, out: IO[bytes], show: bool, clock: Clock = time.monotonic):
        self.out, self.show, self.clock = out, show, clock
        self.last = clock()

    def write(self, data: Any) -> int:
        self.last = self.clock()
        return self.out.write(data) if self.show else len(data)

    def flush(self) -> None:
        if self.show:
            self.out.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.out, name)


class _Watchdog:
    """Runs in its own thread (`start`), or step by step (`check`) with the sink's clock; `done` ends it.

    Times are compared only with times read from the same clock: never with zero, since a monotonic
    clock's origin is arbitrary (Linux counts from boot, so a freshly started machine reads ~0)."""

    POLL = 0.2
    STATUS_EVERY = 1.0  # seconds between status checks while waiting for the start

    def __init__(self, app: Application, backend: Backend, run: RunInfo, sink: _Sink, limits: Limits):
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.app, self.backend, self.run_info, self.sink, self.limits = app, backend, run, sink, limits
        self.clock = sink.clock
        self.t0 = self.clock()
        self.started_at: float | None = None
        self.checked: float | None = None  # last status check
        self.warned: float | None = None  # last soft-inactivity warning
        self.done = threading.Event()
        self.reason: str | None = None

    def _job_started(self) -> bool:
        status = self.backend.get(self.run_info.id).status
        return status not in (RunStatus.queued, RunStatus.starting)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)

    def _watch(self) -> None:
        try:
            while not self.done.wait(self.POLL):
                if self.check():
                    return
        except Exception as e:  # noqa: BLE001 - report; following goes on
            self.app.error(f"watching {self.run_info.id} failed: {e}")

    def check(self) -> bool:
        """One look at the clock and the run; True once a limit passed and the run was stopped."""
        now = self.clock()
        lim = self.limits
        if self.started_at is None and (lim.start or lim.inactive or lim.inactive_soft):
            if self.checked is None or now - self.checked >= self.STATUS_EVERY:
                self.checked = now
                if self._job_started():
                    self.started_at = now
                    self.sink.last = max(self.sink.last, now)
        if lim.timeout is not None and now - self.t0 >= lim.timeout:
            return self._stop_run(f"--timeout {_secs(lim.timeout)} passed")
        if self.started_at is None:
            if lim.start is not None and now - self.t0 >= lim.start:
                return self._stop_run(f"it did not start within --start-timeout {_secs(lim.start)}")
            return False
        quiet = now - self.sink.last
        if lim.inactive is not None and quiet >= lim.inactive:
            return self._stop_run(f"no log output for --inactive-timeout {_secs(lim.inactive)}")
        soft = lim.inactive_soft
        if soft is not None and quiet >= soft:
            if self.warned is None or now - self.warned >= max(soft, SOFT_REPEAT):
                self.warned = now
                self.app.warn(f"{self.run_info.id}: no log output for {_secs(quiet)}")
        return False

    def _stop_run(self, why: str) -> bool:
        self.reason = why
        self.app.warn(f"stopping {self.run_info.id}: {why}")
        self.backend.stop(self.run_info, reason=why)  # told as launchkit's stop (ending.launchkit_stopped)
        return True


def _secs(seconds: float) -> str:
    return f"{seconds:g}s"


SUMMARY_OVER = 8  # a run with more tasks is followed by a status summary, not every task's lines
SUMMARY_POLL = 5.0  # seconds between looks at a summarised run


def summarised(run: RunInfo, replica: int | None, all_replicas: bool, task: str | None) -> bool:
    """Whether `follow` shows the run's task counts instead of its tasks' logs."""
    return run.tasks > SUMMARY_OVER and replica is None and not all_replicas and task is None


def follow_summary(
    app: Application,
    backend: Backend,
    run: RunInfo,
    *,
    poll: float = SUMMARY_POLL,
    sleep: Callable[[float], None] = time.sleep,
    digest: SweepDigest | None = None,
) -> int:
    """Say how many tasks are in each state whenever that changes, until the run finishes; the run's
    exit code (1 when a task failed without one). One task's lines: `follow ID --task NAME`. With a
    sweep's `digest`, it is posted as the tasks change (at most every `digest.every` s; the end always)."""
    app.info(
        f"{run.id} has {run.tasks} tasks: their states, not their logs, are shown "
        f"(one task: launchkit follow {run.id} --task NAME, or launchkit logs {run.id} --task NAME)"
    )
    last = ""
    info = run
    while True:
        line = task_summary(info.task_statuses or {info.status.value: info.tasks})
        if line != last:
            app.info(line)
            last = line
        if digest is not None:
            digest.update(_members(info), final=info.status.finished)
        if info.status.finished:
            break
        sleep(poll)
        info = backend.get(run.id)
    return info.status.shell_code(info.exit_code)


def _members(info: RunInfo) -> list[TaskState]:
    """The run's tasks (core/digest.py): each as `get` read it, else by their states' counts alone."""
    if info.tasks_detail:
        return list(info.tasks_detail)
    counts = info.task_statuses or {info.status.value: info.tasks}
    return [TaskState(name=f"{s}-{i}", status=RunStatus(s)) for s, n in counts.items() for i in range(n)]


def follow_run(
    app: Application,
    backend: Backend,
    run: RunInfo,
    *,
    replica: int | None = None,
    all_replicas: bool = False,
    tail: int | None = None,
    limits: Limits | None = None,
    show_logs: bool = True,
    notifier: SlackNotifier | None = None,
    clock: Clock = time.monotonic,
    task: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    mask: bool = True,
) -> int:
    """Follow until the run finishes. Ctrl-C detaches (the job keeps running) and says how to resume.

    With `limits`, the run is stopped when one passes and the exit code is EXIT_TIMED_OUT. With a
    `notifier`, Slack hears when the job's first output arrives and how it ended. `mask`: the values of
    the run's secrets show as *** (launchkit.masking)."""
    app.info(f"following {run.id} (Ctrl-C detaches; the job keeps running)")
    digest = None
    if run.tasks > 1 and replica is None and not all_replicas and task is None:  # a sweep's: one digest
        digest = sweep_digest(app, backend, run, notifier.url if notifier is not None else None)
        if digest is not None:
            notifier = None  # (no message for the experiment as one run: the digest tells it)
    told = events_notifier(app, backend, run) if digest is None else None  # its JSON events' end
    limits = limits or Limits()
    shown = masked(app, backend, run, sys.stdout.buffer, mask=mask)
    out: IO[bytes] = cast("IO[bytes]", shown)
    if notifier is not None:
        out = cast("IO[bytes]", FirstOutput(out, lambda: notifier.on_start(run)))
    sink = _Sink(out, show_logs, clock)
    dog = _Watchdog(app, backend, run, sink, limits) if limits.any else None
    kwargs: dict[str, Any] = {"replica": replica, "all_replicas": all_replicas}
    if tail is not None:
        kwargs["tail"] = tail
    if task is not None:
        kwargs["task"] = task  # Capability.tasks (the CLI checks)
    try:
        if dog is not None:
            dog.start()
        if digest is not None or summarised(run, replica, all_replicas, task):
            code = follow_summary(app, backend, run, sleep=sleep, digest=digest)
        else:
            code = backend.follow(run, sink, **kwargs)  # type: ignore[arg-type]
    except BrokenPipeError:
        return stdout_closed()
    except KeyboardInterrupt:
        sys.stdout.flush()
        app.info(
            f"\ndetached from {run.id}; it keeps running. Resume with: launchkit follow {run.id}"
            + (f" --replica {replica}" if replica is not None else "")
            + (" --all-replicas" if all_replicas else "")
            + (f" --task {task}" if task is not None else "")
        )
        return EXIT_INTERRUPTED
    finally:
        shown.end()  # the tail the mask held back (it might have begun a secret)
        if dog is not None:
            dog.done.set()
    if dog is not None:
        dog.join(timeout=5)
        if dog.reason:
            app.error(f"{run.id} {launchkit_stopped(dog.reason).text()}")
            if notifier is not None:
                notifier.on_stop(run, dog.reason)
            if told is not None:
                told.on_end(backend.get(run.id))
            return EXIT_TIMED_OUT
    final = backend.get(run.id)
    if notifier is not None:
        notifier.on_end(final)
    if told is not None:
        told.on_end(final)

    why = describe(final)  # one line from the backend's own fields: how it ended, and the fix
    if final.status == RunStatus.succeeded:
        app.info(f"{run.id} {why}")
    elif final.end is not None and final.end.kind == Cause.canceled:
        app.info(f"{run.id} {why}")
    else:
        app.error(f"{run.id} {why}")
    app.info(backend.results_location(final))
    return code


__all__ = ["EXIT_TIMED_OUT", "Limits", "follow_run", "follow_summary", "task_summary"]
