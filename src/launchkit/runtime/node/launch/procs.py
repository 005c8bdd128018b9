"""Child processes of the runtime: spawn one (in its own process group or not), wait for it while
reaping every other child (orphans too, when the runtime is the container's PID 1, as bash does), stop
a group with a grace period, and start a child that the job's signals are passed on to (spawn_forwarding:
where the bash exec method, Ray's driver and the watchdog all start the command)."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, Callable, Sequence

# Python ignores these; a child must not inherit that (subprocess's restore_signals does the same).
_RESET = tuple(getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, n))


def exit_code(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal that ended it."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def which(name: str, path: str | None = None) -> str | None:
    """name's executable file in one of `path`'s directories (default: PATH), as `command -v`; None
    when there is none."""
    for folder in (os.environ.get("PATH", os.defpath) if path is None else path).split(os.pathsep):
        candidate = os.path.join(folder or ".", name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def restore_signals() -> None:
    """Default dispositions for what Python ignores, before an exec."""
    for sig in _RESET:
        signal.signal(sig, signal.SIG_DFL)


def spawn(
    argv: Sequence[str],
    env: dict[str, str],
    new_group: bool = False,
    *,
    own_group: bool = False,
    file_actions: Sequence[tuple[int, ...]] = (),
) -> int:
    """Start argv (looked up in env's PATH); its pid. new_group: its own session and process group;
    own_group: its own process group in this session. file_actions: as os.posix_spawn's."""
    kwargs: dict[str, Any] = {"setsigdef": _RESET, "file_actions": list(file_actions)}
    if own_group:
        kwargs["setpgroup"] = 0
    if new_group:
        try:
            return os.posix_spawnp(argv[0], list(argv), env, setsid=True, **kwargs)
        except NotImplementedError:  # no POSIX_SPAWN_SETSID: as bash without setsid, the same group
            pass
    return os.posix_spawnp(argv[0], list(argv), env, **kwargs)


class Children:
    """Exit codes of this process's children, reaped with waitpid(-1): every child, known or not."""

    def __init__(self) -> None:
        self.codes: dict[int, int] = {}

    def _reap(self, block: bool) -> bool:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return False
        self.codes[pid] = exit_code(status)
        return True

    def poll(self, pid: int) -> int | None:
        """pid's exit code if it has ended, else None (reaps whatever has ended meanwhile)."""
        while pid not in self.codes and self._reap(block=False):
            pass
        return self.codes.get(pid)

    def wait(self, pid: int) -> int:
        """Block until pid ends (signals are handled meanwhile); its exit code."""
        while pid not in self.codes:
            if not self._reap(block=True):
                return self.codes.get(pid, 0)  # not our child (already reaped elsewhere)
        return self.codes[pid]


def stop_group(
    pid: int,
    grace: float,
    children: Children,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """TERM pid's process group, KILL what is left after `grace` seconds, reap pid."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except OSError:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            children.poll(pid)
            return
    for _ in range(int(grace * 5)):
        if children.poll(pid) is not None:
            break
        sleep(0.2)
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            break
        except OSError:
            continue
    children.wait(pid)


FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2")


def spawn_forwarding(
    argv: Sequence[str],
    env: dict[str, str],
    forwarded: Sequence[str] = FORWARDED,
    as_signal: str | None = None,
    *,
    own_group: bool = False,
    file_actions: Sequence[tuple[int, ...]] = (),
    on_signal: Callable[[int], None] | None = None,
) -> int:
    """Start argv as a child (see spawn) and pass the signals named in `forwarded` on to it from now on
    (each as itself, or all as `as_signal`): to its process group with own_group, else to it. A signal
    that arrives while the child is being started is passed on right after. `on_signal(signum)` hears
    of each first. Its pid."""
    child: list[int] = []
    pending: list[int] = []
    kill = os.killpg if own_group else os.kill

    def send(sig: int) -> None:
        try:
            kill(child[0], sig)
        except OSError:
            pass

    def forward(signum: int, _frame: object) -> None:
        if on_signal is not None:
            on_signal(signum)
        sig = getattr(signal, as_signal) if as_signal else signum
        if child:
            send(sig)
        else:
            pending.append(sig)

    for name in forwarded:
        signal.signal(getattr(signal, name), forward)
    sys.stdout.flush()
    sys.stderr.flush()
    child.append(spawn(argv, env, own_group=own_group, file_actions=file_actions))
    for sig in pending:
        send(sig)
    return child[0]


def run_forwarding(
    argv: Sequence[str],
    env: dict[str, str],
    children: Children,
    forwarded: Sequence[str] = FORWARDED,
    as_signal: str | None = None,
) -> int:
    """Run argv as a child and wait for it, passing the signals on (spawn_forwarding); its exit code."""
    return children.wait(spawn_forwarding(argv, env, forwarded, as_signal))
