"""The plan, said first: what a launch asks for, in one line before anything is created (no I/O).

AI2's guidance for agents that launch Beaker jobs asks for the cluster, GPUs x nodes, priority,
preemption behaviour and timeout before every launch (issue 43). `run` and `run --dry-run` print
`Plan.line()` on stderr, `run --json` puts `Plan.to_json()` first, `api.Request.plan()` returns it.
Everything comes from the spec as it would be sent (after the backend's prepare) and what the backend
already knew without another call (`start_now`).

What a preemption means follows Beaker's rules (reference fact sheet 11.2-11.4): a job without a min
runtime is unallocated backfill, preemptible any time; with `--min-runtime D` it is protected for D;
the deprecated `preemptible` flag makes it preemptible any time; a preempted job is started again as a
new job unless `--no-auto-resume` (auto-resume is Beaker's default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from launchkit.core.specview import SpecView
from launchkit.core.units import span

NS = 1_000_000_000
SHOWN_CLUSTERS = 4  # clusters named in the line; the rest counted


@dataclass(frozen=True)
class Plan:
    """What a launch asks for. `here`: it runs on this machine (no cluster, no preemption)."""

    backend: str
    here: bool
    clusters: tuple[str, ...]  # empty: any cluster the backend allows
    tasks: int
    gpus: int  # per replica (the largest task's)
    replicas: int
    priority: str | None  # None: the backend's default
    preemptible: bool | None  # the deprecated `preemptible: true` on a task (None: this machine)
    min_runtime: float | None  # seconds protected from preemption (None: none)
    resumed: bool | None  # a preempted job is started again (None: not applicable)
    task_timeout: float | None  # seconds (None: none)
    not_preemptible: bool = False  # the deprecated --not-preemptible was given
    start_now: tuple[str, ...] | None = None  # clusters where every replica could start now (None: unknown)
    experiments: bool = False  # --sweep-experiments: each task is an experiment (a run) of its own

    def _where(self) -> str:
        if self.here:
            return "this machine"
        if not self.clusters:
            return "any cluster"
        shown = ", ".join(self.clusters[:SHOWN_CLUSTERS])
        more = len(self.clusters) - SHOWN_CLUSTERS
        return shown + (f" (+{more} more)" if more > 0 else "")

    def _size(self) -> str:
        gpus = "no GPU" if not self.gpus else f"{self.gpus} GPU" + ("s" if self.gpus > 1 else "")
        size = f"{gpus} x {self.replicas} replica" + ("s" if self.replicas > 1 else "")
        unit = "experiments" if self.experiments else "tasks"
        return f"{self.tasks} {unit}, each {size}" if self.tasks > 1 else size

    def may_be_preempted(self) -> bool | None:
        """Whether Beaker may preempt the job (after `min_runtime` when one is given); None: it runs
        here. Only the deprecated --not-preemptible, without --min-runtime, makes it never."""
        if self.here or self.preemptible is None:
            return None
        return self.preemptible or bool(self.min_runtime) or not self.not_preemptible

    def _preemption(self) -> str:
        may = self.may_be_preempted()
        if may is None:
            return "not preemptible (runs here)"
        if not may:
            return "not preemptible (--not-preemptible, deprecated by Beaker)"
        if self.min_runtime and not self.preemptible:
            when = f"preemptible after {span(self.min_runtime)} (--min-runtime)"
        else:
            when = "preemptible any time" + ("" if self.preemptible else " (no --min-runtime)")
        then = "a preemption starts it again" if self.resumed else "a preemption ends it (--no-auto-resume)"
        return f"{when}, {then}"

    def _start(self) -> str | None:
        if self.start_now is None:
            return None
        if not self.start_now:
            return "no allowed cluster has room for it now"
        return "could start now on " + ", ".join(self.start_now[:SHOWN_CLUSTERS])

    def line(self) -> str:
        """`plan: ai2/jupiter · 8 GPUs x 2 replicas · priority high · preemptible after 2h (--min-runtime),
        a preemption starts it again · task timeout 1d · could start now on ai2/jupiter`."""
        parts = [self._where(), self._size()]
        if not self.here:
            parts.append(f"priority {self.priority}" if self.priority else "default priority")
        parts.append(self._preemption())
        parts.append(f"task timeout {span(self.task_timeout)}" if self.task_timeout else "no task timeout")
        if start := self._start():
            parts.append(start)
        return "plan: " + " · ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The plan for programs (`run --json`, docs/run.md#json): fixed keys, null when not known."""
        return {
            "backend": self.backend,
            "here": self.here,
            "clusters": list(self.clusters),
            "tasks": 1 if self.experiments else self.tasks,
            "experiments": self.tasks if self.experiments else 1,
            "gpus": self.gpus,
            "replicas": self.replicas,
            "priority": self.priority,
            "preemptible": self.may_be_preempted(),
            "min_runtime": self.min_runtime,
            "resumed_after_preemption": self.resumed,
            "task_timeout": self.task_timeout,
            "start_now": None if self.start_now is None else list(self.start_now),
            "line": self.line(),
        }


def make_plan(
    spec: SpecView,
    *,
    backend: str,
    here: bool,
    start_now: tuple[str, ...] | None = None,
    experiments: bool = False,
) -> Plan:
    """The plan of a spec as it would be sent (after prepare: clusters resolved); `experiments`: its
    tasks are launched as experiments of their own (--sweep-experiments)."""
    tasks = spec.tasks
    clusters = tuple(dict.fromkeys(c for t in tasks for c in t.clusters))
    gpus = max((t.gpus or 0 for t in tasks), default=0)
    replicas = max((t.replicas for t in tasks), default=1)
    priorities = list(dict.fromkeys(t.priority for t in tasks if t.priority))
    timeouts = [t.timeout_ns for t in tasks if t.timeout_ns]
    mins = [t.min_runtime_ns for t in tasks if t.min_runtime_ns]
    names = {t.name for t in tasks}
    if here:
        preemptible: bool | None = None
        min_runtime = resumed = None
    else:
        preemptible = any(t.preemptible for t in tasks)
        min_runtime = min(mins) / NS if mins else None
        resumed = all(t.auto_resume is not False for t in tasks)
    not_preemptible = not here and any(t.preemptible_given is False for t in tasks)
    return Plan(
        backend=backend,
        here=here,
        clusters=() if here else clusters,
        tasks=max(1, len(names)),
        experiments=experiments,
        gpus=gpus,
        replicas=replicas,
        priority=None if here else (", ".join(priorities) or None),
        preemptible=preemptible,
        min_runtime=min_runtime,
        resumed=resumed,
        task_timeout=min(timeouts) / NS if timeouts else None,
        not_preemptible=not_preemptible,
        start_now=None if here else start_now,
    )
