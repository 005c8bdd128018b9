"""Per-replica log files: one record per output line, `<ns-timestamp><sep><raw bytes>\\n`.

`sep` is a space when the line ended with its own newline, `~` when the job's output ended
without one (the record's final newline is then not part of the output). Bytes are never decoded.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False  # the supervisor imports this module and starts without `typing`
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import IO


def log_file(rdir: str | os.PathLike[str], rank: int, attempt: int = 1) -> str:
    """The log of replica `rank`'s `attempt` in run dir `rdir` (a retry's: `replica-N.attempt-K.log`)."""
    name = f"replica-{rank}" + (f".attempt-{attempt}" if attempt > 1 else "")
    return os.path.join(rdir, "logs", f"{name}.log")


def pump(stream: IO[bytes], path: str, wrote: Callable[[], None] = lambda: None) -> None:
    """Copy a child's output into a log file, one timestamped record per line, unbuffered;
    `wrote()` after each."""
    with open(path, "ab", buffering=0) as f:
        for line in iter(stream.readline, b""):
            ts = time.time_ns()
            if line.endswith(b"\n"):
                f.write(b"%d %s" % (ts, line))
            else:
                f.write(b"%d~%s\n" % (ts, line))
            wrote()


def note(path: str, text: str) -> None:
    """Append one line of launchkit's own (`[launchkit] TEXT`) to a log, after its output."""
    with open(path, "ab", buffering=0) as f:
        f.write(b"%d [launchkit] %s\n" % (time.time_ns(), text.encode("utf-8", "replace")))


def parse(buf: bytes) -> tuple[list[tuple[int, bytes]], int]:
    """Complete records in `buf` as (ns, raw bytes), and how many bytes they used."""
    out: list[tuple[int, bytes]] = []
    pos = 0
    while (nl := buf.find(b"\n", pos)) >= 0:
        i = pos
        while 48 <= buf[i] <= 57:
            i += 1
        ts = int(buf[pos:i])
        out.append((ts, buf[i + 1 : nl + 1] if buf[i : i + 1] == b" " else buf[i + 1 : nl]))
        pos = nl + 1
    return out, pos


def read_records(path: str) -> list[tuple[int, bytes]]:
    try:
        with open(path, "rb") as f:
            return parse(f.read())[0]
    except FileNotFoundError:
        return []


def lines(path: str) -> Iterator[bytes]:
    """The output lines of a log file from its start, read as they are asked for (no timestamps)."""
    try:
        with open(path, "rb") as f:
            for record in f:
                i = 0
                while i < len(record) and 48 <= record[i] <= 57:
                    i += 1
                yield record[i + 1 :]
    except FileNotFoundError:
        return


def head_records(path: str, size: int = 1 << 20) -> list[tuple[int, bytes]]:
    """The records (ns, output line) in the first `size` bytes of a log file (one bounded read)."""
    try:
        with open(path, "rb") as f:
            buf = f.read(size)
    except FileNotFoundError:
        return []
    return parse(buf)[0]


def last_lines(path: str, size: int = 8192) -> list[bytes]:
    """The output lines in the last `size` bytes of a log file (one bounded read; no timestamps)."""
    return [line for _, line in last_records(path, size)]


def last_records(path: str, size: int = 8192) -> list[tuple[int, bytes]]:
    """The records (ns, output line) in the last `size` bytes of a log file (one bounded read)."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            f.seek(max(0, end - size))
            buf = f.read(size)
    except FileNotFoundError:
        return []
    if end > size:
        buf = buf[buf.find(b"\n") + 1 :]  # the first record was cut
    return parse(buf)[0]


class Tail:
    """Incremental reader of one log file (for follow)."""

    def __init__(self, path: str):
        self.path, self.offset, self.rest = path, 0, b""

    def read(self) -> Iterator[tuple[int, bytes]]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return iter(())
        self.offset += len(data)
        records, used = parse(self.rest + data)
        self.rest = (self.rest + data)[used:]
        return iter(records)
