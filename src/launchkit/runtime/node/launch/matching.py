"""Progress matching with a budget (docs/runtime.md, "Watchdog"): the one matcher of the job's
watchdog (watchdog.py) and of `launchkit list`/`why` (launchkit/backends/progress.py).

Python's `re` cannot be interrupted from another thread (a match holds the interpreter lock), so a
pattern that backtracks for ever, `(a+)+$` on a long line, would freeze whichever process ran it.
Hence, in layers:

- `unsafe(pattern)`: the shapes that backtrack exponentially (a repeat inside a repeat, a repeat of
  alternatives that can start alike), refused at launch in one line (`--progress-pattern`);
- only the first SLICE characters of a line are matched (what is left is at most polynomial there);
- the user's own patterns run in a separate process, this file run as a script (`argv()`, `serve()`):
  its reader never waits for it, and it ends itself (SIGALRM's default action, which stops even a
  match in C) when one batch of lines takes over BUDGET seconds. The watchdog then gives progress
  matching up, once, with one warning line, and the command runs on. The default patterns, known to
  be linear, are matched in the reader's process (`progress_in`).

The protocol: the matcher gets its patterns as arguments and lines on stdin as `SEQ TEXT\\n` (TEXT:
one line's slice, UTF-8); after each batch it writes `LAST MATCHED TEXT\\n`: the last SEQ it read,
the newest SEQ in the batch that matched (`-` if none), and what that line's progress said.

Standard library only, no import of the package (it runs as a script), Python 3.8 syntax.
"""

from __future__ import annotations

import collections
import importlib
import os
import re
import select
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Sequence, Tuple

    Hit = Tuple[int, str, Optional[float]]  # (line number, progress text, step or None)
    Seen = Tuple[str, Optional[float], float, float]  # (progress text, step, seen at, wall clock)

try:  # the `re` module's own parser (3.11+: re._parser; before: sre_parse, deprecated since)
    _sre: Any = importlib.import_module("re._parser")
except ImportError:  # Python < 3.11
    _sre = importlib.import_module("sre_parse")

SLICE = 1024  # characters of each line that are matched (progress is told at a line's start)
BUDGET = 5.0  # seconds one batch of lines may take in the matcher process before it gives up
LATE = 3 * BUDGET  # seconds a line may wait for its answer (the matcher's own start included)
REQUEST_MAX = 4000  # bytes of one request: below PIPE_BUF, so that a write is whole or refused
TEXT_MAX = 80  # characters of the progress text kept

# Progress lines of common trainers (docs/runtime.md lists them with examples); linear on a slice.
# Each names its `step` (what resume verification compares) without changing what it matches.
DEFAULT_PATTERNS = (
    r"\[step=(?P<step>\d+)(/\d+)?",  # OLMo-core: [step=1200/5000,epoch=1] ...
    r"(?P<step>\d+)/\d+ \[\d",  # tqdm, as Hugging Face Trainer's bar: 12/500 [00:03<01:40, 4.8it/s]
    # Hugging Face Trainer's logging: {'loss': 1.2, ..., 'epoch': 0.5} (its step: the epoch)
    r"\{'loss': .*'epoch': (?=(?P<step>\d+(\.\d+)?))",
    # PyTorch Lightning's bar: Epoch 0:  40%|####  | 40/100 [00:02<..., 18.1it/s] (its step: the epoch)
    r"Epoch (?P<step>\d+): .*it/s",
    r"(?i)\bstep[ =:]\s*(?P<step>\d+)",  # plain: step 12, Step: 12, step=12
)
NUMBER = re.compile(r"\d+(\.\d+)?")

_REPEATS = tuple(
    getattr(_sre, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(_sre, n)
)


def pattern_texts(given: Sequence[str]) -> list[str]:
    """The run's progress patterns (its policy's: node/policy.py), else DEFAULT_PATTERNS (a str is one
    pattern, never its characters)."""
    return [p for p in ([given] if isinstance(given, str) else given) if p] or list(DEFAULT_PATTERNS)


def is_default(texts: Sequence[str]) -> bool:
    return tuple(texts) == DEFAULT_PATTERNS


def compile_all(texts: Sequence[str]) -> list[re.Pattern[str]]:
    """The compiled patterns; ValueError names a pattern that is not a regular expression."""
    try:
        return [re.compile(p) for p in texts]
    except re.error as e:
        raise ValueError(f"--progress-pattern: not a regular expression ({e})") from None


def _items(av: Any) -> list[Any]:
    """The sub-patterns of one parsed item (its argument `av`)."""
    found: list[Any] = []
    for x in av if isinstance(av, (list, tuple)) else [av]:
        if isinstance(x, _sre.SubPattern):
            found.append(x)
        elif isinstance(x, (list, tuple)):
            found.extend(_items(x))
    return found


def _first(sub: Any) -> set[int] | None:
    """The characters a match of `sub` can start with; None: any, or not known."""
    for op, av in sub:
        if op == _sre.AT:
            continue  # zero width: the next item starts it
        if op == _sre.LITERAL:
            return {av}
        if op == _sre.IN and all(o in (_sre.LITERAL, _sre.RANGE) for o, _ in av):
            chars: set[int] = set()
            for o, a in av:
                chars.update([a] if o == _sre.LITERAL else range(a[0], min(a[1], a[0] + 256) + 1))
            return chars
        if op == _sre.SUBPATTERN and av[-1].getwidth()[0] > 0:
            return _first(av[-1])
        if op in _REPEATS and av[0] > 0:
            return _first(av[2])
        if op == _sre.BRANCH:
            union: set[int] = set()
            for alt in av[1]:
                f = _first(alt) if alt.getwidth()[0] > 0 else None
                if f is None:
                    return None
                union |= f
            return union
        return None
    return None


def _overlap(alternatives: Sequence[Any]) -> bool:
    """Whether two alternatives can match alike: both empty, or starting with the same character."""
    seen: set[int] = set()
    empty = 0
    for alt in alternatives:
        if alt.getwidth()[0] == 0:
            empty += 1
            continue
        f = _first(alt)
        if f is None or f & seen:
            return True
        seen |= f
    return empty > 1


def _shape(sub: Any, in_repeat: bool) -> str | None:
    for op, av in sub:
        inner = in_repeat
        if op in _REPEATS:
            lo, hi, _ = av
            if in_repeat and lo != hi:
                return "a repeat inside a repeat, as (a+)+"
            inner = in_repeat or hi > 1
        elif op == _sre.BRANCH and in_repeat and _overlap(av[1]):
            return "a repeat of alternatives that can match alike, as (a|a)+"
        for child in _items(av):
            why = _shape(child, inner)
            if why is not None:
                return why
    return None


def unsafe(pattern: str) -> str | None:
    """What makes a pattern backtrack exponentially on a long line (launch refuses it), or None.
    The pattern must compile (`re.error` otherwise)."""
    return _shape(_sre.parse(pattern), False)


def progress_step(line: str, patterns: Sequence[re.Pattern[str]]) -> tuple[str, float | None] | None:
    """(the progress text, its step) of a line, or None: the step is the pattern's `step` group, else
    the first number of what it matched (None: it has none). Only the line's first SLICE characters
    are matched."""
    part = line[:SLICE]
    for p in patterns:
        m = p.search(part)
        if m:
            step = m.groupdict().get("step")
            n = NUMBER.search(step if step is not None else m.group(0))
            return m.group(0).strip("[]{} ")[:TEXT_MAX], None if n is None else float(n.group(0))
    return None


def progress_in(line: str, patterns: Sequence[re.Pattern[str]]) -> str | None:
    """The progress a line shows (`step=1200/5000`), or None."""
    found = progress_step(line, patterns)
    return None if found is None else found[0]


# ---- the matcher process
def argv(python: str, texts: Sequence[str]) -> list[str]:
    """The command line of a matcher process for these patterns (an isolated interpreter, no site)."""
    return [python, "-I", "-S", os.path.abspath(__file__), *texts]


def request(seq: int, line: str) -> bytes:
    """One line for the matcher: its number and its slice (no line breaks), as UTF-8."""
    text = line[:SLICE].replace("\n", " ").replace("\r", " ")
    return f"{seq} {text}".encode("utf-8", "replace")[:REQUEST_MAX] + b"\n"


def _hit_text(hit: Hit | None) -> str:
    if hit is None:
        return "-\t-\t"
    return f"{hit[0]}\t{'-' if hit[2] is None else repr(hit[2])}\t{hit[1]}".replace("\n", " ")


def _hit(seq: str, step: str, text: str) -> Hit | None:
    if not seq.isdigit():
        return None
    try:
        value = None if step == "-" else float(step)
    except ValueError:
        value = None
    return int(seq), text, value


def replies(data: bytes) -> list[tuple[int, Hit | None, Hit | None]]:
    """Per complete reply in data: (the last line read, the batch's first hit, its newest hit); a
    hit is (line number, progress text, step or None)."""
    out = []
    for raw in data.split(b"\n"):
        parts = raw.decode("utf-8", "replace").split("\t")
        if len(parts) == 7 and parts[0].isdigit():
            out.append((int(parts[0]), _hit(*parts[1:4]), _hit(*parts[4:7])))
    return out


def serve(texts: Sequence[str], stdin: int = 0, stdout: int = 1, budget: float = BUDGET) -> int:
    """The matcher process: batches of lines in, one reply per batch out, until stdin ends. A batch
    that takes over `budget` seconds ends the process (SIGALRM, default action)."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)  # the job's signals are not ours: stdin's end is
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    compiled = compile_all(texts)
    pending = b""
    while True:
        data = os.read(stdin, 65536)
        if not data:
            return 0
        lines = (pending + data).split(b"\n")
        pending = lines.pop()
        last, first, newest = -1, None, None
        signal.setitimer(signal.ITIMER_REAL, budget)
        for raw in lines:
            seq, _, text = raw.decode("utf-8", "replace").partition(" ")
            if not seq.isdigit():
                continue
            last = int(seq)
            found = progress_step(text, compiled)
            if found is not None:
                newest = (last, found[0].replace("\t", " "), found[1])
                first = first or newest
        signal.setitimer(signal.ITIMER_REAL, 0)
        if last >= 0:
            out = f"{last}\t{_hit_text(first)}\t{_hit_text(newest)}\n".encode("utf-8", "replace")
            while out:
                out = out[os.write(stdout, out) :]


class Remote:
    """The watchdog's side of a matcher process: lines are handed over without ever waiting (a
    matcher that cannot take them has fallen behind), answers read when they come (`fileno`).
    `failed` says why it was given up (then it is closed): it ended, or a line waited too long."""

    def __init__(self, texts: Sequence[str], python: str = sys.executable, late: float = LATE) -> None:
        in_r, self._in = os.pipe()
        self._out, out_w = os.pipe()
        null = os.open(os.devnull, os.O_WRONLY)
        actions = [
            (os.POSIX_SPAWN_DUP2, in_r, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, null, 2),
        ]
        try:
            self.pid = os.posix_spawn(python, argv(python, texts), {"PATH": os.defpath}, file_actions=actions)
        except BaseException:
            os.close(self._in)
            os.close(self._out)
            raise
        finally:
            for fd in (in_r, out_w, null):
                os.close(fd)
        os.set_blocking(self._in, False)
        self._late = late
        self._seq = 0
        self._sent: collections.deque[tuple[int, float, float]] = (
            collections.deque()
        )  # (seq, seen at, wall clock)
        self._buf = b""
        self.failed: str | None = None

    def fileno(self) -> int:
        return self._out

    def feed(self, lines: Sequence[str], now: float, wall: float) -> None:
        """Hand lines over (oldest first), seen at `now` (monotonic) and `wall`."""
        for line in lines:
            if self.failed is not None:
                return
            self._seq += 1
            try:
                os.write(self._in, request(self._seq, line))
            except BlockingIOError:
                self._fail("it fell behind the command's output")
                return
            except OSError:
                self._fail("it ended")
                return
            self._sent.append((self._seq, now, wall))

    def heard(self) -> tuple[Seen | None, Seen | None]:
        """Read the answers that came: (the first, the newest) progress among them, each as (text,
        step, seen at, wall clock), or None."""
        try:
            data = os.read(self._out, 65536)
        except OSError:
            data = b""
        if not data:
            self._fail(f"a line took over {BUDGET:g}s to match, or the matcher failed")
            return None, None
        *complete, self._buf = (self._buf + data).split(b"\n")
        first: Seen | None = None
        newest: Seen | None = None
        for last, early, late in replies(b"\n".join(complete)):
            while self._sent and self._sent[0][0] <= last:
                seq, t, w = self._sent.popleft()
                for hit in (early, late):
                    if hit is not None and hit[0] == seq:
                        newest = (hit[1], hit[2], t, w)
                        first = first or newest
        return first, newest

    def pending(self) -> bool:
        """Whether lines handed over still wait for their answers."""
        return self.failed is None and bool(self._sent)

    def late(self, now: float) -> bool:
        """Whether it has been given up, or a line has waited for its answer for too long."""
        if self.failed is None and self._sent and now - self._sent[0][1] > self._late:
            self._fail(f"a line waited over {self._late:g}s for it")
        return self.failed is not None

    def _fail(self, why: str) -> None:
        if self.failed is None:
            self.failed = why
            self.close()

    def close(self) -> None:
        """End the matcher, reap it (unless the caller's waitpid(-1) did) and close its pipes."""
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:  # (ChildProcessError: reaped already)
            pass
        for fd in (self._in, self._out):
            try:
                os.close(fd)
            except OSError:
                pass
        self._in = self._out = -1


def scan(
    lines: Sequence[str],
    patterns: Sequence[re.Pattern[str]],
    budget: float = BUDGET,
    python: str = sys.executable,
) -> tuple[Hit | None, Hit | None]:
    """The (first, newest) progress of these lines, oldest first: each (index, text, step), or None.
    The defaults are matched here; other patterns in a matcher process given `budget` seconds for
    all the lines (then (None, None)): for `list`, `why` and the local supervisor, which must not
    hang on a job's pattern."""
    texts = [p.pattern for p in patterns]
    if is_default(texts):
        first = newest = None
        for i, line in enumerate(lines):
            found = progress_step(line, patterns)
            if found is not None:
                newest = (i, found[0], found[1])
                first = first or newest
        return first, newest
    return _scan_apart(lines, texts, budget, python)


def _scan_apart(
    lines: Sequence[str], texts: Sequence[str], budget: float, python: str
) -> tuple[Hit | None, Hit | None]:
    data = b"".join(request(i, line) for i, line in enumerate(lines))
    in_r, to = os.pipe()
    back, out_w = os.pipe()
    null = os.open(os.devnull, os.O_WRONLY)
    actions = [(os.POSIX_SPAWN_DUP2, fd, n) for fd, n in ((in_r, 0), (out_w, 1), (null, 2))]
    try:
        pid = os.posix_spawn(python, argv(python, texts), {"PATH": os.defpath}, file_actions=actions)
    except OSError:
        for fd in (in_r, to, back, out_w, null):
            os.close(fd)
        return None, None
    for fd in (in_r, out_w, null):
        os.close(fd)
    os.set_blocking(to, False)
    deadline = time.monotonic() + budget
    got, done = b"", False
    try:
        while not done:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, None  # it took too long: killed below
            writing = [to] if to >= 0 else []
            readable, writable, _ = select.select([back], writing, [], left)
            if writable:
                try:
                    data = data[os.write(to, data[:65536]) :]
                except OSError:
                    data = b""
                if not data:
                    os.close(to)
                    to = -1
            if readable:
                chunk = os.read(back, 65536)
                got += chunk
                done = not chunk
    finally:
        if to >= 0:
            os.close(to)
        os.close(back)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:  # (a supervisor's reaper may have reaped it)
            pass
    first = newest = None
    upto = -1
    for last, early, late in replies(got):
        first, newest, upto = first or early, late or newest, last
    return (first, newest) if upto == len(lines) - 1 else (None, None)  # else it was given up


if __name__ == "__main__":
    try:
        sys.exit(serve(sys.argv[1:]))
    except Exception:  # noqa: BLE001 - its reader tells it in one line (it ended)
        sys.exit(1)
