"""Per-job log storage: explicit lines plus lazily generated synthetic ranges, exact ns timestamps."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field


@dataclass
class _Explicit:
    ts: list[int] = field(default_factory=list)
    msgs: list[bytes] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ts)

    def first_ts(self) -> int:
        return self.ts[0]

    def last_ts(self) -> int:
        return self.ts[-1]

    def index_at_or_after(self, t: int) -> int:
        return bisect.bisect_left(self.ts, t)

    def get(self, i: int) -> tuple[int, bytes]:
        return self.ts[i], self.msgs[i]


@dataclass
class _Synthetic:
    """`count` lines, line i = fmt.format(i=first_number + i), timestamp start + i*step (step >= 1)."""

    start: int
    step: int
    count: int
    fmt: str
    first_number: int

    def __len__(self) -> int:
        return self.count

    def first_ts(self) -> int:
        return self.start

    def last_ts(self) -> int:
        return self.start + (self.count - 1) * self.step

    def index_at_or_after(self, t: int) -> int:
        if t <= self.start:
            return 0
        return min(self.count, -(-(t - self.start) // self.step))

    def get(self, i: int) -> tuple[int, bytes]:
        return self.start + i * self.step, self.fmt.format(i=self.first_number + i).encode()


class JobLogs:
    """Append-only log of one job. Timestamps never decrease; `since` lookups are binary searches."""

    def __init__(self) -> None:
        self._segments: list[_Explicit | _Synthetic] = []
        self._offsets: list[int] = []  # global index of each segment's first line
        self._seg_first_ts: list[int] = []
        self.count = 0

    @property
    def last_ts(self) -> int | None:
        return self._segments[-1].last_ts() if self._segments else None

    def append(self, lines: Iterable[tuple[int, bytes]]) -> None:
        seg = self._segments[-1] if self._segments and isinstance(self._segments[-1], _Explicit) else None
        last = self.last_ts
        for ts, msg in lines:
            if last is not None and ts < last:
                raise ValueError(f"log timestamps must not decrease ({ts} < {last})")
            if seg is None:
                seg = _Explicit()
                self._add_segment(seg, ts)
            seg.ts.append(ts)
            seg.msgs.append(msg)
            self.count += 1
            last = ts

    def append_synthetic(self, count: int, start: int, step: int, fmt: str, first_number: int) -> None:
        if count <= 0:
            return
        if step < 1:
            raise ValueError("step must be >= 1 ns")
        last = self.last_ts
        if last is not None and start < last:
            raise ValueError("synthetic logs must start after the last line")
        self._add_segment(_Synthetic(start, step, count, fmt, first_number), start)
        self.count += count

    def _add_segment(self, seg, first_ts: int) -> None:
        self._segments.append(seg)
        self._offsets.append(self.count)
        self._seg_first_ts.append(first_ts)

    def index_at_or_after(self, t: int) -> int:
        """Index of the first line with timestamp >= t (`since` is inclusive)."""
        k = bisect.bisect_right(self._seg_first_ts, t) - 1
        if k < 0:
            return 0
        # lines with equal timestamps may span segments: step back while the previous segment ends at >= t
        while k > 0 and self._segments[k - 1].last_ts() >= t:
            k -= 1
        seg = self._segments[k]
        return self._offsets[k] + seg.index_at_or_after(t)

    def iter_from(self, start: int, stop: int | None = None) -> Iterator[tuple[int, bytes]]:
        """Lines [start, stop) as (timestamp_ns, message); reads the current state lazily."""
        stop = self.count if stop is None else min(stop, self.count)
        if start >= stop:
            return
        k = bisect.bisect_right(self._offsets, start) - 1
        i = start
        while i < stop:
            seg = self._segments[k]
            off = self._offsets[k]
            end = min(stop, off + len(seg))
            if isinstance(seg, _Explicit):
                ts, msgs = seg.ts, seg.msgs
                for j in range(i - off, end - off):
                    yield ts[j], msgs[j]
            else:
                for j in range(i - off, end - off):
                    yield seg.get(j)
            i = end
            k += 1

    def line(self, i: int) -> tuple[int, bytes]:
        k = bisect.bisect_right(self._offsets, i) - 1
        return self._segments[k].get(i - self._offsets[k])
