"""Where a run's time went: its phases, from the platform's timestamps and the runtime's markers (no I/O).

    queued        created -> scheduled on a node (each waiting reason and how long it held: `Wait`)
    starting      scheduled -> the container started (image pull, container start)
    setup         the runtime's own steps: clone, environment (env store hit or miss), hooks, profile;
                  the runtime's `setup done in 2.31s (clone 0.36s, ...)` line says how long
    first_output  the command started (that line) -> its first line of output
    running       the container started -> it ended (or now): what the GPUs were held for, setup
                  included (so a backend tells it from its timestamps alone)

A backend gives the timestamps it has (Beaker: the job's `created/scheduled/started/exited`; local: the
run's record) and the job's first log records (`setup_seen`); `phases()` turns them into seconds, None
where a phase is not known (not reached, or not read). `Phases.line()` is `why`'s line; the model's
JSON (`why --json`, `list --json`) has exactly the five keys. `waits()` folds a job's raw waiting
events (newest reason first in `why`) into a history: one `Wait` per change of reason.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from launchkit.core.estimate import Estimate
from launchkit.core.units import span

NS = 1_000_000_000
SETUP_DONE = b"[launchkit] setup done in "  # runtime/lib.sh lk_timing_line, node/launch/launchers.py
RUNTIME = b"[launchkit] "
ENV_STORE = b"[launchkit] env store: "  # node/environment/envstore.py: "reused ..." (a hit) or "built ..."
SETUP_LINES = 2000  # the most log lines read from a job's start looking for its markers (a budget)
_DURATION = re.compile(rb"([0-9]+(?:\.[0-9]+)?)s")


class Phases(BaseModel):
    """Seconds per phase; None when not known (not reached yet, or not read)."""

    model_config = ConfigDict(frozen=True)

    queued: float | None = None
    starting: float | None = None
    setup: float | None = None
    first_output: float | None = None
    running: float | None = None


class Wait(BaseModel):
    """One waiting reason and how long it held: `kind` (core WaitReason kinds: slot_limit, no_node,
    cordoned, budget, priority, queued), its words, from `start` to `end` (ns since the epoch; `end`
    None: it still holds)."""

    model_config = ConfigDict(frozen=True)

    kind: str
    words: str
    start: int
    end: int | None = None


class PhaseNotes(BaseModel):
    """What the phases line says beside the seconds: each waiting reason (oldest first), the env
    store's answer (`hit`/`miss`, None: not said) and the runtime's step timings."""

    model_config = ConfigDict(frozen=True)

    waits: list[Wait] = []
    env_cache: str | None = None
    steps: str | None = None  # "clone 0.36s, uv+venv 1.15s, install[uv.lock] 1.12s"
    attempt: int = 1  # the attempt the phases are of (a resumed or retried run: the newest)
    # a queued job: how many jobs wait ahead of it for the same kind of node (None: not read), of how
    # many queued jobs read (`read_all` False: the listing was cut there, so at least `ahead`)
    ahead: int | None = None
    queue_read: int = 0
    read_all: bool = True
    elsewhere: str | None = None  # a job waiting for nodes: what would start now (`would start now on ...`)
    # a queued job: when it could start at the latest, with its basis (core/estimate.py); else why not
    estimate: Estimate | None = None
    no_estimate_reason: str | None = None


class PhaseDetail(BaseModel):
    """The phases of one job of a run (an attempt of a replica of a task): `why`'s detail where
    replicas or attempts differ (`differ`), `why --json`'s `phases_detail`."""

    model_config = ConfigDict(frozen=True)

    task: str
    attempt: int
    replica: int
    phases: Phases
    env_cache: str | None = None  # the env store's answer (`hit`/`miss`; None: not said or not read)


MATERIAL = 60.0  # seconds: a phase that differs this much between jobs differs materially
MATERIAL_SMALL = 5.0  # ... or this much, when one is at least twice the other
COMPARED = ("queued", "starting", "setup", "first_output")  # `running`: a failed attempt ran less, of course


def differ(details: list[PhaseDetail]) -> bool:
    """Whether the jobs' phases differ materially (one replica placed minutes after another, a setup of
    40 s on a cache miss beside 2 s on a hit): worth a line each."""
    if len(details) < 2:
        return False
    for key in COMPARED:
        values = [v for d in details if (v := getattr(d.phases, key)) is not None]
        if len(values) < 2:
            continue
        hi, lo = max(values), min(values)
        if hi - lo >= MATERIAL or (hi - lo >= MATERIAL_SMALL and hi >= 2 * lo):
            return True
    return len({d.env_cache for d in details if d.env_cache}) > 1


def detail_label(d: PhaseDetail, details: list[PhaseDetail]) -> str:
    """`replica 1`, `attempt 2`, `attempt 2, replica 1`, `task b replica 0` as the run needs to tell them
    apart."""
    parts = []
    if len({x.task for x in details}) > 1:
        parts.append(f"task {d.task}")
    if len({x.attempt for x in details}) > 1:
        parts.append(f"attempt {d.attempt}")
    if len({x.replica for x in details}) > 1:
        parts.append(f"replica {d.replica}")
    return ", ".join(parts) or "job"


@dataclass
class SetupSeen:
    """What the first lines of a job's log say (`setup_seen`)."""

    setup: float | None = None  # seconds, the runtime's own total
    steps: str | None = None
    command_at: int | None = None  # ns: the `setup done` line's time (the command starts right after)
    first_output_at: int | None = None  # ns: the command's first line
    env_cache: str | None = None
    lines: int = 0
    extra: list[str] = field(default_factory=list)


def setup_seen(records: Iterable[tuple[int, bytes]], budget: int = SETUP_LINES) -> SetupSeen:
    """The runtime's markers in a job's first log records ((ns, line), oldest first): read until the
    command's first line of output after `setup done`, or `budget` lines."""
    seen = SetupSeen()
    for ts, line in records:
        seen.lines += 1
        if seen.command_at is None:
            if line.startswith(ENV_STORE) and seen.env_cache is None:
                rest = line[len(ENV_STORE) :]
                seen.env_cache = (
                    "hit" if rest.startswith(b"reused") else "miss" if rest.startswith(b"built") else None
                )
            elif line.startswith(SETUP_DONE):
                seen.command_at = ts
                rest = line[len(SETUP_DONE) :]
                total = _DURATION.match(rest)
                seen.setup = float(total.group(1)) if total else None
                inside = rest.partition(b"(")[2].rpartition(b")")[0]
                seen.steps = inside.decode("utf-8", "replace") or None
        elif not line.startswith(RUNTIME):
            seen.first_output_at = ts
            break
        if seen.lines >= budget:
            break
    return seen


def _sec(later: int | None, earlier: int | None) -> float | None:
    if later is None or earlier is None:
        return None
    return max(0.0, (later - earlier) / NS)


def phases(
    *,
    created: int | None,
    scheduled: int | None,
    started: int | None,
    ended: int | None,
    now: int,
    seen: SetupSeen | None = None,
) -> Phases:
    """The phases of one job from its timestamps (ns since the epoch; None: not reached) and what its
    log's first lines said. `now` for what is still going (a queued job's wait so far, a running
    command's time)."""
    end = ended if ended is not None else now
    queued = _sec(scheduled if scheduled is not None else (end if started is None else None), created)
    if scheduled is None and started is not None:
        queued = _sec(started, created)  # a backend without a separate schedule time (local)
    command_at = seen.command_at if seen else None
    return Phases(
        queued=queued,
        starting=_sec(started, scheduled) if scheduled is not None else None,
        setup=seen.setup if seen else None,
        first_output=_sec(seen.first_output_at, command_at) if seen else None,
        running=_sec(end, started) if started is not None else None,
    )


def gpu_hours(jobs: Iterable[tuple[int, int | None, int | None]], now: int) -> float | None:
    """GPU-hours of jobs given as (GPUs, started ns, ended ns): every attempt and replica that ran."""
    total = 0.0
    ran = False
    for gpus, started, ended in jobs:
        if started is None:
            continue
        ran = True
        total += gpus * max(0, (ended if ended is not None else now) - started) / NS / 3600
    return round(total, 3) if ran else None


def waits(events: Iterable[tuple[int, str, str]], *, until: int | None) -> list[Wait]:
    """The waiting history of a job: its waiting events as (ns, kind, words), oldest first, folded into
    one `Wait` per change of reason (a reason seen again after another is a new `Wait`); each holds
    until the next one starts, the last until `until` (when the job was scheduled; None: it waits)."""
    out: list[Wait] = []
    for ts, kind, words in events:
        if out and out[-1].kind == kind:
            if words != out[-1].words:  # the same reason, newer numbers (64/64 -> 63/64)
                out[-1] = out[-1].model_copy(update={"words": words})
            continue
        if out:
            out[-1] = out[-1].model_copy(update={"end": ts})
        out.append(Wait(kind=kind, words=words, start=ts))
    if out and until is not None:
        out[-1] = out[-1].model_copy(update={"end": max(until, out[-1].start)})
    return out


def _clock(ns: int) -> str:
    return time.strftime("%H:%M", time.gmtime(ns / NS))


def history(ws: list[Wait]) -> str:
    """`slot limit (08:01-17:33), then no node with 8 free GPUs (17:33-17:39)` (UTC)."""
    parts = []
    for w in ws:
        end = "now" if w.end is None else _clock(w.end)
        parts.append(f"{w.words} ({_clock(w.start)}-{end})")
    return ", then ".join(parts)


def line(p: Phases, notes: PhaseNotes | None = None, *, gpu_hours: float | None = None, now: int = 0) -> str:
    """`queued 3m12s (slot limit, then no node with 8 free GPUs) · starting 41s · setup 2.3s (env cache
    hit) · first output +4m01s · running 1h02m · 3.2 GPU-hours` (only the phases known)."""
    notes = notes or PhaseNotes()
    parts = []
    if p.queued is not None:
        reasons = ", then ".join(dict.fromkeys(w.words for w in notes.waits))
        parts.append(f"queued {span(p.queued)}" + (f" ({reasons})" if reasons else ""))
    if p.starting is not None:
        parts.append(f"starting {span(p.starting)}")
    if p.setup is not None:
        cache = f"env cache {notes.env_cache}" if notes.env_cache else ""
        parts.append(f"setup {span(p.setup)}" + (f" ({cache})" if cache else ""))
    if p.first_output is not None:
        parts.append(f"first output +{span(p.first_output)}")
    if p.running is not None:
        parts.append(f"running {span(p.running)}")
    if gpu_hours:
        parts.append(f"{gpu_hours:g} GPU-hours")
    attempt = f"attempt {notes.attempt}: " if notes.attempt > 1 else ""
    return attempt + " · ".join(parts) if parts else ""


KEYS = tuple(Phases.model_fields)  # queued, starting, setup, first_output, running


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank percentile `q` (0-100) of `values` (not empty)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n * q / 100), at least 1
    return ordered[int(rank) - 1]


def summary(runs: list[tuple[str, Phases | None, float | None]]) -> dict[str, dict[str, Any]]:
    """`stats`: per cluster (runs given as (cluster, phases, GPU-hours)), how many runs, their GPU-hours
    and per phase p50/p90 over the runs that know it (`n`); clusters by most runs."""
    by: dict[str, list[tuple[Phases | None, float | None]]] = {}
    for cluster, p, hours in runs:
        by.setdefault(cluster, []).append((p, hours))
    out: dict[str, dict[str, Any]] = {}
    for cluster, rows in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        phases: dict[str, Any] = {}
        for key in KEYS:
            values = [v for p, _ in rows if p is not None and (v := getattr(p, key)) is not None]
            phases[key] = (
                {"n": len(values), "p50": percentile(values, 50), "p90": percentile(values, 90)}
                if values
                else None
            )
        spent = [h for _, h in rows if h is not None]
        out[cluster] = {
            "runs": len(rows),
            "gpu_hours": round(sum(spent), 3) if spent else None,
            "phases": phases,
        }
    return out


def slowest(summary_: dict[str, dict[str, Any]]) -> tuple[str, str, float] | None:
    """(cluster, phase, p90) of the phase with the largest p90 before the command runs (queued,
    starting, setup, first_output): where "slow" went, by name."""
    found = [
        (cluster, key, s["p90"])
        for cluster, row in summary_.items()
        for key, s in row["phases"].items()
        if s is not None and key != "running"
    ]
    return max(found, key=lambda f: f[2]) if found else None
