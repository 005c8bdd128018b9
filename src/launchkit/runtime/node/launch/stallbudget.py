"""`--stall-timeout auto` (docs/runtime.md, "An automatic stall budget"): the watchdog's budget derived
from the job's own step intervals, as PortOS does: K times the slowest of the last WINDOW intervals
between progress lines, never below FLOOR nor above CAP. Until MIN_INTERVALS intervals are known, and
while the log shows a checkpoint or an evaluation phase (a line PHASE matches, up to the next progress
line), the budget is CAP: a long save or eval is not a stall, and a hang in one is still caught. The
watchdog says the budget in force when it changes (`change()`), so the log shows what a stop was
measured against. Pure: times are parameters.
"""

from __future__ import annotations

import re
from collections import deque

K = 5.0  # times the slowest recent step interval
FLOOR = 300.0  # seconds: never stopped sooner (a fast loop's hiccup, a slow logging step)
CAP = 7200.0  # seconds: never waits longer (and the budget until steps are known, and in a phase)
WINDOW = 20  # recent intervals considered
MIN_INTERVALS = 3  # intervals needed before the budget is derived from them
RETELL = 0.25  # a derived budget is told again when it moved by this share of the last told one

# A checkpoint or evaluation phase starting (common trainers' lines: OLMo-core, Hugging Face, Lightning,
# torch.distributed.checkpoint); it ends at the next progress line.
PHASE = re.compile(
    r"(?i)\b(sav(e|ing)|writ(e|ing)|upload(ing)?|persist(ing)?)\b[^\n]{0,40}\bcheckpoint"
    r"|\bcheckpoint(ing)?\b[^\n]{0,20}\b(sav|writ|to )"
    r"|\b(running|starting|begin(ning)?)\b[^\n]{0,20}\b(eval(uation)?|validation)\b"
    r"|\*\*\*\*\* Running Evaluation \*\*\*\*\*"
    r"|^\s*(Validation|Evaluating)\b"
)


def fmt_interval(seconds: float) -> str:
    """A step interval: under 10 s with a tenth (0.05 -> "0.1s"), else as `fmt`."""
    return f"{seconds:.1f}s" if seconds < 10 else fmt(seconds)


def fmt(seconds: float) -> str:
    """90 -> "1m30s" (watchdog.fmt_secs's form)."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{n}{u}" for n, u in ((h, "h"), (m, "m"), (s, "s")) if n) or "0s"


class AutoBudget:
    """The budget in force: fed with progress times (`progress`) and other lines (`line`)."""

    def __init__(self, k: float = K, floor: float = FLOOR, cap: float = CAP) -> None:
        self.k, self.floor, self.cap = k, floor, cap
        self.last: float | None = None  # the newest progress line's time
        self.gaps: deque[float] = deque(maxlen=WINDOW)  # step intervals (not those spanning a phase)
        self.phase: str | None = None  # the line that began a checkpoint/eval phase
        self.phase_at = 0.0  # when it was seen
        self._told: tuple[float, str | None] | None = None  # (budget, phase) last told

    def progress(self, now: float, after_phase: bool = True) -> None:
        """A progress line at `now`; `after_phase`: it came after the phase line (when its place among
        the lines is not known, only a later time ends the phase)."""
        if self.phase is not None and not after_phase and now <= self.phase_at:
            return
        if (
            self.last is not None and self.phase is None and now > self.last
        ):  # a save or an eval is not a step
            self.gaps.append(now - self.last)
        self.last, self.phase = now, None

    def line(self, text: str, now: float = 0.0) -> None:
        """A line that is not progress: a phase may begin."""
        if self.phase is None and PHASE.search(text):
            self.phase, self.phase_at = text.strip()[:80], now

    def slowest(self) -> float | None:
        """The slowest of the recent step intervals (None: fewer than MIN_INTERVALS known)."""
        return max(self.gaps) if len(self.gaps) >= MIN_INTERVALS else None

    def budget(self) -> float:
        slowest = self.slowest()
        if self.phase is not None or slowest is None:
            return self.cap
        return min(self.cap, max(self.floor, self.k * slowest))

    def why(self) -> str:
        """How the budget in force was made, in a few words."""
        slowest = self.slowest()
        if self.phase is not None:
            return f"the cap, while the log shows a checkpoint or evaluation phase: {self.phase!r}"
        if slowest is None:
            return f"the cap, until {MIN_INTERVALS} step intervals are known"
        n = len(self.gaps)
        bound = (
            " (the floor)"
            if self.k * slowest < self.floor
            else " (the cap)"
            if self.k * slowest > self.cap
            else ""
        )
        return f"{self.k:g} x the slowest of the last {n} step intervals ({fmt_interval(slowest)}){bound}"

    def change(self) -> str | None:
        """The line to say when the budget in force changed (a phase began or ended, steps became
        known, or it moved by RETELL), else None."""
        now = (self.budget(), self.phase)
        told = self._told
        if told is not None and told[1] == now[1]:
            if told[0] == now[0] or (told[0] != self.cap and abs(now[0] - told[0]) < RETELL * told[0]):
                return None
        self._told = now
        limits = f"floor {fmt(self.floor)}, cap {fmt(self.cap)}"
        return f"stall budget {fmt(now[0])}: {self.why()} (--stall-timeout auto; {limits})"
