"""Ray across replicas: the head runs on rank 0 next to the driver (the user command); the other ranks
join as workers, watch the head, and exit 0 once it is gone (docs/multi-node.md). `ray start --block`
runs in its own process group, so stopping it stops raylet, GCS and the rest."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from typing import Callable, NamedTuple, Sequence

from . import EXIT_EXEC, LaunchError, log, watchdog
from .procs import Children, run_forwarding, spawn, stop_group

_SECTION = re.compile(r"^([A-Z][A-Za-z ]*):\s*$")
_ENTRY = re.compile(r"^\s+(\d+)\s+\S")


def count_nodes(status: str) -> int:
    """The nodes `ray status` lists as up: Active plus Idle (the v2 autoscaler puts a node with nothing
    to do under Idle, the v1 one under Active), each entry `COUNT NODE_TYPE`."""
    section, n = "", 0
    for line in status.splitlines():
        head = _SECTION.match(line)
        if head:
            section = head.group(1)
            continue
        if not line.strip() or not line.startswith(" "):
            section = ""  # a blank line or another block (Resources, ...) ends the node list
            continue
        entry = _ENTRY.match(line)
        if entry and section in ("Active", "Idle"):
            n += int(entry.group(1))
    return n


class Settings(NamedTuple):
    """The Ray knobs users set with `run --env` (docs/multi-node.md)."""

    start_args: list[str]  # LK_RAY_START_ARGS: every `ray start`
    head_args: list[str]  # LK_RAY_HEAD_ARGS: the head's only
    wait: float  # LK_RAY_WAIT: seconds to wait for the head, and for every node to join
    poll: float  # LK_RAY_POLL: seconds between a worker's checks of the head


def settings(env: dict[str, str]) -> Settings:
    def seconds(name: str, default: str) -> float:
        value = env.get(name) or default
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not number >= 0:  # also NaN
            raise LaunchError(100, f"{name} must be a number of seconds, got '{value}'")
        return number

    return Settings(
        (env.get("LK_RAY_START_ARGS") or "").split(),
        (env.get("LK_RAY_HEAD_ARGS") or "").split(),
        seconds("LK_RAY_WAIT", "600"),
        seconds("LK_RAY_POLL", "5"),
    )


def status(ray: Sequence[str], address: str, env: dict[str, str], timeout: float = 60) -> str | None:
    """`ray status --address=...`'s output, or None while the head does not answer."""
    try:
        out = subprocess.run(
            [*ray, "status", f"--address={address}"],
            check=False,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def reachable(ip: str, port: int, timeout: float = 5) -> bool:
    """Is something listening at ip:port?"""
    try:
        socket.create_connection((ip, port), timeout=timeout).close()
    except OSError:
        return False
    return True


def _start(argv: list[str], env: dict[str, str]) -> int:
    try:
        return spawn(argv, env, new_group=True)
    except OSError as e:
        raise LaunchError(EXIT_EXEC, f"cannot start {argv[0]}: {e.strerror or e}") from None


class Clock(NamedTuple):
    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def head(
    ray: Sequence[str],
    ip: str,
    port: int,
    nnodes: int,
    driver: list[str],
    env: dict[str, str],
    children: Children,
    clock: Clock = Clock(),
    ray_status: Callable[[], str | None] | None = None,
    starting: Callable[[], None] = lambda: None,
    watched: watchdog.Settings | None = None,
) -> int:
    """Rank 0: start the head, wait until every replica has joined, run the driver (`starting()` right
    before it; under the watchdog with `watched`); its exit code."""
    cfg = settings(env)
    probe = ray_status or (lambda: status(ray, f"{ip}:{port}", env))
    head_pid = _start(
        [
            *ray,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            f"--node-ip-address={ip}",
            "--disable-usage-stats",
        ]
        + cfg.start_args
        + cfg.head_args,
        env,
    )

    def stopped(_signum: int, _frame: object) -> None:  # until the driver runs: stop the head, end
        stop_group(head_pid, 5, children, clock.sleep)
        raise SystemExit(143)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stopped)

    def fail(message: str) -> LaunchError:
        stop_group(head_pid, 5, children, clock.sleep)
        return LaunchError(EXIT_EXEC, message)

    deadline = clock.now() + cfg.wait
    text = probe()
    while text is None:
        code = children.poll(head_pid)
        if code is not None:
            raise LaunchError(EXIT_EXEC, f"ray head failed to start (exit {code})")
        if clock.now() >= deadline:
            raise fail(f"ray head did not come up within {cfg.wait:g}s")
        clock.sleep(1)
        text = probe()
    n = count_nodes(text)
    while n < nnodes:  # the driver starts once every replica has joined
        code = children.poll(head_pid)
        if code is not None:
            raise LaunchError(EXIT_EXEC, f"ray head stopped before the driver started (exit {code})")
        if clock.now() >= deadline:
            log(
                f"warning: only {n} of {nnodes} ray nodes joined within {cfg.wait:g}s"
                "; starting the driver anyway"
            )
            break
        clock.sleep(1)
        n = count_nodes(probe() or "")
    log(f"ray head at {ip}:{port} with {n} node(s); starting the driver")
    starting()
    try:
        if watched is not None:  # it ends a stalled or silent driver and says why (backends/ending.py)
            rc = watchdog.run(driver, env, watched)
        else:
            rc = run_forwarding(driver, env, children, ("SIGTERM", "SIGINT", "SIGHUP"), as_signal="SIGTERM")
    except OSError as e:
        log(f"error: cannot run {driver[0]}: {e.strerror or e}")
        rc = 127 if isinstance(e, FileNotFoundError) else 126
    stop_group(head_pid, 5, children, clock.sleep)  # the job is over: no need for a long drain
    log(f"driver exited with {rc}; ray head stopped")
    return rc


def worker(
    ray: Sequence[str],
    ip: str,
    port: int,
    env: dict[str, str],
    children: Children,
    clock: Clock = Clock(),
    head_up: Callable[[], bool] | None = None,
) -> int:
    """Other ranks: join the head as a worker; exit 0 once the head is gone (two missed checks)."""
    cfg = settings(env)
    up = head_up or (lambda: reachable(ip, port))
    deadline = clock.now() + cfg.wait
    while not up():
        if clock.now() >= deadline:
            raise LaunchError(EXIT_EXEC, f"ray head {ip}:{port} not reachable within {cfg.wait:g}s")
        clock.sleep(1)
    worker_pid = _start(
        [*ray, "start", f"--address={ip}:{port}", "--block", "--disable-usage-stats"] + cfg.start_args, env
    )

    def stopped(_signum: int, _frame: object) -> None:
        stop_group(worker_pid, 20, children, clock.sleep)
        log("ray worker stopped by a signal")
        raise SystemExit(0)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stopped)
    log(f"ray worker joining {ip}:{port}; it exits when the head stops")
    misses = 0
    while misses < 2:
        clock.sleep(cfg.poll)
        misses = 0 if up() else misses + 1
        code = children.poll(worker_pid)
        if misses == 0 and code is not None:
            stop_group(worker_pid, 3, children, clock.sleep)  # what its raylet left behind
            raise LaunchError(EXIT_EXEC, f"ray worker stopped while the head is still up (exit {code})")
    stop_group(
        worker_pid, 3, children, clock.sleep
    )  # no head to drain to: don't wait for Ray's drain timeout
    log(f"ray head {ip}:{port} is gone; worker exiting 0")
    return 0
