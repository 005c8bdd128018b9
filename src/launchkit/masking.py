"""Secret values masked in a run's output (`follow`, `logs`): the job was given its secrets by name
(the spec), so launchkit can read their values (Backend.secret_values) and print `***` wherever one
appears. `--no-mask` shows them. Peers print them verbatim (skypilot #7343, dstack #1000).

`Masker` is a streaming filter over bytes: a value split across two writes is still masked, with the
output the same as if the whole stream had been filtered at once. It holds back only a chunk's tail
that could be the start of a value (logs arrive as lines: usually nothing), and `end()` lets the rest
out. Values shorter than MIN_LENGTH are not masked (they would mask ordinary words); each line of a
multi-line value (a key file) is masked on its own too.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Any

from launchkit.errors import LaunchkitError

if TYPE_CHECKING:
    from launchkit.application import Application
    from launchkit.backends import Backend, RunInfo

MASK = b"***"
MIN_LENGTH = 4


def patterns(values: Iterable[str]) -> list[bytes]:
    """What to mask for these secret values: each value, stripped, and each of its lines, as UTF-8."""
    out: set[bytes] = set()
    for value in values:
        for v in {value, value.strip(), *(line.strip() for line in value.splitlines())}:
            if len(data := v.encode()) >= MIN_LENGTH:
                out.add(data)
    return sorted(out, key=len, reverse=True)


class Masker:
    """Replace every occurrence of `values` (bytes) in a stream of writes with MASK."""

    def __init__(self, values: Iterable[bytes]) -> None:
        self.values = sorted(set(values), key=len, reverse=True)
        self.regex = re.compile(b"|".join(map(re.escape, self.values))) if self.values else None
        self.longest = len(self.values[0]) if self.values else 0
        self.prefixes = {v[:i] for v in self.values for i in range(1, len(v))}  # unfinished values
        self.inner = {b for v in self.values for b in v[:-1]}  # the bytes an unfinished value ends with
        self.firsts = {v[0] for v in self.values}
        self.pending = b""

    def feed(self, data: bytes) -> bytes:
        """The part of the stream so far that can be shown: every value in it masked."""
        if self.regex is None:
            return data
        buf, out, pos = self.pending + data, bytearray(), 0
        while True:
            hold = self._hold(buf, pos)
            m = self.regex.search(buf, pos)
            # a match starting before `hold` is final: at least `longest` bytes follow its start, or
            # none of the longer values can still begin there
            if m is None or m.start() >= hold:
                out += buf[pos:hold]
                self.pending = buf[hold:]
                return bytes(out)
            out += buf[pos : m.start()] + MASK
            pos = m.end()

    def end(self) -> bytes:
        """The held-back tail at the end of the stream (masked when it is most of a value)."""
        rest, self.pending = self.pending, b""
        if rest and any(v.startswith(rest) and len(rest) >= MIN_LENGTH for v in self.values):
            return MASK
        return rest

    def _hold(self, buf: bytes, pos: int) -> int:
        """Where the tail that may begin an unfinished value starts (len(buf): nothing to hold)."""
        if not buf or buf[-1] not in self.inner:  # a line's end, usually
            return len(buf)
        for i in range(max(pos, len(buf) - self.longest + 1), len(buf)):
            if buf[i] in self.firsts and buf[i:] in self.prefixes:
                return i
        return len(buf)


class MaskedOutput:
    """An output stream (IO[bytes]) that masks secret values, read on the first write (`values`).
    `end()` writes out what the filter held back; the stream itself stays open."""

    def __init__(self, out: IO[bytes], values: Callable[[], Iterable[str]]) -> None:
        self.out, self._values = out, values
        self._masker: Masker | None = None
        self._lock = threading.Lock()  # replicas' lines may be written from several threads

    def write(self, data: Any) -> int:
        with self._lock:
            if self._masker is None:
                self._masker = Masker(patterns(self._values()))
            self.out.write(self._masker.feed(bytes(data)))
        return len(data)

    def end(self) -> None:
        try:
            with self._lock:
                if self._masker is not None and (rest := self._masker.end()):
                    self.out.write(rest)
            self.out.flush()
        except BrokenPipeError:  # the reader went away: what it missed does not matter
            pass

    def flush(self) -> None:
        self.out.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.out, name)


def secret_values(app: Application, backend: Backend, run: RunInfo) -> list[str]:
    """The values of the secrets `run` was given, to mask; one that cannot be read is named in one
    warning line (and not masked)."""
    try:
        found = backend.secret_values(run)
    except LaunchkitError as e:
        app.warn(f"{run.id}: cannot read its secrets' values to mask them ({e.one_line()}): output unmasked")
        return []
    if unread := sorted(n for n, v in found.items() if v is None):
        app.warn(
            f"{run.id}: cannot read the value of secret {', '.join(unread)} to mask it in the output "
            "(no access?): it is shown as the job printed it"
        )
    app.debug(
        f"masking the values of {len(found) - len(unread)} secret(s) of {run.id} (--no-mask shows them)"
    )
    return [v for v in found.values() if v]


def mask_text(text: str, values: Iterable[str]) -> str:
    """`text` with every one of these secret values masked (as a stream of it would be)."""
    m = Masker(patterns(values))
    return (m.feed(text.encode()) + m.end()).decode("utf-8", "replace")


def masked_run(app: Application, backend: Backend, run: RunInfo) -> RunInfo:
    """`run` with what its job printed and launchkit shows masked: its progress token (`list`, `why`)
    and the stop line that quotes it (`... (last: step=12 at ...; --stall-timeout)`). The secrets'
    values are read only when there is such a text."""
    end = run.end
    quoted = end is not None and end.by == "launchkit"
    if run.progress is None and not quoted:
        return run
    values = secret_values(app, backend, run)
    if not values:
        return run
    update: dict[str, Any] = {}
    if run.progress is not None:
        update["progress"] = run.progress.model_copy(update={"text": mask_text(run.progress.text, values)})
    if end is not None and quoted:
        update["end"] = end.model_copy(update={"line": mask_text(end.line, values)})
    return run.model_copy(update=update)


def masked(
    app: Application, backend: Backend, run: RunInfo, out: IO[bytes], *, mask: bool = True
) -> MaskedOutput:
    """`out` with the values of the secrets `run` was given masked (`mask=False`: shown). A value that
    cannot be read is named in one warning line, and not masked. Call `end()` when the stream ends."""

    def values() -> list[str]:
        return secret_values(app, backend, run) if mask else []

    return MaskedOutput(out, values)
