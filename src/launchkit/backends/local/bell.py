"""Doorbells: `follow` sleeps until the supervisor says the run's logs or record changed.

A follower binds a Unix datagram socket as `<run dir>/bells/<name>` (or, when that path is too long
for AF_UNIX, in a short temp dir, with a symlink to it there) and waits on it with a timeout. The
supervisor rings every bell there after it writes output or the record: a notifier thread, woken by
an Event, sends one byte to each (non-blocking; at most one round per RING_INTERVAL) and removes
bells nobody listens on any more. A bell only says "look again": followers always re-read the record
and logs, and wait at most their timeout, so a dead supervisor or a lost bell only slows them down.

Standard library only, and `socket` only once it is needed: the supervisor imports this module.
"""

from __future__ import annotations

import errno
import os
import select
import stat
import threading
import time

TYPE_CHECKING = False  # the supervisor imports this module and starts without `typing`
if TYPE_CHECKING:
    import socket
    from types import TracebackType
    from typing import Any

    Dir = str | os.PathLike[str]

BELLS = "bells"
# Seconds from one round of rings to the next, so that bursts coalesce: RING_INTERVAL after a quiet
# spell, BUSY_INTERVAL while output keeps coming, IDLE_INTERVAL while nobody follows (a follower
# that comes hears its first ring by then).
RING_INTERVAL, BUSY_INTERVAL, IDLE_INTERVAL = 0.002, 0.005, 0.02
MAX_PATH = 100  # AF_UNIX path limit: 108 bytes on Linux, 104 on macOS, with the final NUL
TEMP_PREFIX = "lkb-"  # a bell's own temp dir, when the run dir's path is too long
GONE = (errno.ECONNREFUSED, errno.ENOENT, errno.ENOTSOCK)  # nobody listens there any more


def _ours(target: str) -> bool:
    """Whether `target` is a bell socket Doorbell made in a temp dir of its own (`<tmp>/lkb-*/s`, a
    socket of this user): what a symlinked bell may point to. Anything else a link points to (a job
    can write the run dir) is left alone."""
    import tempfile

    folder = os.path.dirname(target)
    if os.path.basename(target) != "s" or not os.path.basename(folder).startswith(TEMP_PREFIX):
        return False
    if os.path.dirname(folder) not in {tempfile.gettempdir(), "/tmp"}:
        return False
    try:
        st = os.lstat(target)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()


def _remove(entry: str) -> None:
    """Remove a bell: its entry (a socket or a symlink in a real `bells` dir, nothing else), and for a
    symlinked one the socket and the temp dir it is in, when they are ours (`_ours`)."""
    try:
        st = os.lstat(entry)
    except OSError:
        return
    if os.path.islink(os.path.dirname(entry)) or not (stat.S_ISSOCK(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        return  # not a bell: a file or a folder (or a `bells` link) the job put there
    target: str | None = None
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(entry)
        except OSError:
            target = None
    if target is not None and not _ours(target):
        target = None  # not one of ours: leave it alone
    for path in (entry, target):
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass
    if target is not None:
        try:
            os.rmdir(os.path.dirname(target))
        except OSError:
            pass


def clear(rdir: Dir) -> None:
    """Remove every bell of a run (before its run dir is deleted)."""
    folder = os.path.join(rdir, BELLS)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        _remove(os.path.join(folder, name))


class Doorbell:
    """A follower's bell (a context manager). Without one (unwritable run dir, ...), `wait` sleeps."""

    def __init__(self, rdir: Dir):
        self.entry: str | None = None
        self.sock: socket.socket | None = None
        folder = os.path.join(rdir, BELLS)
        entry = os.path.join(folder, f"{os.getpid()}-{os.urandom(4).hex()}")
        import socket

        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        except OSError:
            return
        try:
            try:
                os.mkdir(folder)  # not makedirs: never re-create a removed run dir
            except FileExistsError:
                pass
            if len(os.fsencode(entry)) < MAX_PATH:
                sock.bind(entry)
            else:  # bind where the path is short enough, and point to it from the run dir
                import tempfile

                short = tempfile.mkdtemp(prefix=TEMP_PREFIX)
                if len(os.fsencode(short)) + 2 >= MAX_PATH:
                    os.rmdir(short)
                    short = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir="/tmp")
                target = os.path.join(short, "s")
                try:
                    sock.bind(target)
                    os.symlink(target, entry)
                except OSError:
                    _remove(target)
                    os.rmdir(short)
                    raise
        except OSError:
            sock.close()
            return
        sock.setblocking(False)
        self.entry, self.sock = entry, sock

    def wait(self, timeout: float) -> None:
        """Until the bell rings or `timeout` seconds pass; then take every ring there is."""
        if self.sock is None:
            time.sleep(timeout)
            return

        if select.select([self.sock], [], [], timeout)[0]:
            try:
                while self.sock.recv(64):
                    pass
            except OSError:  # BlockingIOError: nothing more
                pass

    def close(self) -> None:
        if self.sock is not None and self.entry is not None:
            self.sock.close()
            _remove(self.entry)
            self.sock = self.entry = None

    def __enter__(self) -> Doorbell:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Ringer:
    """The supervisor's side: `ring()` never blocks; a notifier thread rings every bell of the run."""

    def __init__(self, rdir: str, *, start: bool = True):
        self.folder = os.path.join(rdir, BELLS)
        self.wanted = threading.Event()
        self.closing = threading.Event()  # also cuts a pause short: the last ring goes at once
        self.sock: Any = None  # created when there is a first bell to ring
        self.thread = threading.Thread(target=self._notify, name="bells", daemon=True)
        self.started = False
        if start:
            self.start()

    def start(self) -> None:
        """Start the notifier (`start=False`: rings until then wait for it)."""
        if not self.started:
            self.started = True
            self.thread.start()

    def ring(self) -> None:
        if not self.wanted.is_set():
            self.wanted.set()

    def close(self) -> None:
        """Ring once more (after the final record) and end the notifier."""
        self.closing.set()
        self.wanted.set()
        self.start()
        self.thread.join(timeout=2)

    def _notify(self) -> None:
        previous: float | None = None
        while True:
            self.wanted.wait()
            self.wanted.clear()
            last = self.closing.is_set()  # read after clear(): close()'s own set() is never lost
            heard = self._ring_all()
            if last:
                return
            now = time.monotonic()
            busy = previous is not None and now - previous < 2 * BUSY_INTERVAL
            previous = now
            self.closing.wait(IDLE_INTERVAL if not heard else BUSY_INTERVAL if busy else RING_INTERVAL)

    def _ring_all(self) -> bool:
        """Ring every bell; False when there is none."""
        try:
            names = os.listdir(self.folder)
        except OSError:
            return False
        if names and self.sock is None:
            import socket

            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.sock.setblocking(False)
        for name in names:
            entry = os.path.join(self.folder, name)
            try:
                target = os.readlink(entry) if os.path.islink(entry) else entry
                if target is not entry and not _ours(target):  # rung nowhere, and what it names left alone
                    if not os.path.lexists(target):
                        _remove(entry)  # a bell whose socket is gone
                    continue
                self.sock.sendto(b"!", target)
            except OSError as e:
                if e.errno in GONE:  # a follower killed before it could remove its bell
                    _remove(entry)
                # else full (EAGAIN, ENOBUFS): it has a ring waiting already
        return bool(names)
