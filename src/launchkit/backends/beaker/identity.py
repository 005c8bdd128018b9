"""Which Beaker experiments are launchkit's, whatever their jobs write (fact sheet 11.8, issue 40).

The experiment's description is not launchkit's to keep: OLMo-core's `BeakerCallback` replaces the
whole of it while training (`[pct%, step/max] description\\nurl`), open-instruct's callback rewrites it
from the first one it read, and `UpdateWorkload` has no version (last write wins). What no job can
change is the spec its experiment was created from: every task launchkit makes carries
`LAUNCHKIT_VERSION` (core/spec.py). So a run is launchkit's when

1. a task's container spec, as `ListWorkloads` and `GetWorkload` return it, names `LAUNCHKIT_VERSION`
   (no extra call); or the description still has launchkit's marker (`[launchkit]`, in every
   description launchkit writes: runs made before this, listings without the tasks' specs); or
2. this machine launched it (launches.py: its own record of its launches); or, when the listing
   carries no task's environment at all (real Beaker's listing may leave the specs out: the fake's
   `list_task_specs` switch),
3. the experiment's spec says so (`GetExperimentYamlSpec`, one call per such row, made at once for a
   page of rows, as gantry's `list` recognises its own); what a spec said is kept on this machine
   (launches.py: a spec never changes), so a later `list` asks again only about new rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import yaml
from beaker import beaker_pb2 as pb2

from launchkit.backends.beaker.unwrapped import rpc
from launchkit.core.contract import DESCRIPTION_MARKER, ENV_VERSION
from launchkit.core.specview import SpecView

SPEC_LOOKUPS = 8  # GetExperimentYamlSpec calls at once (rows the listing cannot tell)


def from_listing(wl: Any) -> bool | None:
    """What the workload itself says: True (launchkit's), False (its tasks' container specs are there
    and none is launchkit's), None (cannot tell: no marker, and no task's container spec in the answer)."""
    ex = wl.experiment
    if DESCRIPTION_MARKER in ex.description:
        return True
    specs = [t.container_spec for t in ex.tasks if t.container_spec.ByteSize()]
    if any(v.name == ENV_VERSION for spec in specs for v in spec.environment_variables):
        return True
    return False if specs else None


def spec_is_launchkits(text: str) -> bool:
    """The experiment's spec (Beaker's YAML of it) was made by launchkit."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and SpecView(data).has_env(ENV_VERSION)


class Recognizer:
    """Tells launchkit's runs among listed workloads, in as few calls as the listing allows. `known`:
    what earlier specs said (an experiment's spec never changes: launches.spec_verdicts); `remember`
    is given what this one's spec lookups said."""

    def __init__(
        self,
        beaker: Any,
        launched: Iterable[str],
        debug: Callable[[str], None],
        known: dict[str, bool] | None = None,
        remember: Callable[[dict[str, bool]], None] | None = None,
    ) -> None:
        self.beaker = beaker
        self.launched = set(launched)  # ids this machine launched (launches.launched_ids)
        self.debug = debug
        self.known = dict(known or {})
        self.remember = remember
        self.spec_calls = 0

    def _from_spec(self, wl: Any) -> bool | None:
        """What the experiment's spec says; None when it cannot be read (then not shown, not kept)."""
        try:
            answer = rpc(
                self.beaker.experiment,
                "GetExperimentYamlSpec",
                pb2.GetExperimentYamlSpecResponse,
                pb2.GetExperimentYamlSpecRequest(experiment_id=wl.experiment.id),
            )
        except Exception as e:  # noqa: BLE001 # (a spec that cannot be read: not shown as launchkit's)
            self.debug(f"the spec of {wl.experiment.id} could not be read: {e}")
            return None
        return spec_is_launchkits(answer.experiment_spec)

    def select(self, workloads: list[Any]) -> list[bool]:
        """Per workload, whether it is launchkit's; the specs of those the listing, this machine's
        launches and earlier lookups cannot tell are read at once."""
        told = [from_listing(wl) for wl in workloads]
        for i, wl in enumerate(workloads):
            if told[i] is None:
                eid = wl.experiment.id
                told[i] = True if eid in self.launched else self.known.get(eid)
        unknown = [i for i, t in enumerate(told) if t is None]
        if unknown:
            self.spec_calls += len(unknown)
            learned: dict[str, bool] = {}
            with ThreadPoolExecutor(max_workers=min(SPEC_LOOKUPS, len(unknown))) as pool:
                found = pool.map(self._from_spec, [workloads[i] for i in unknown])
                for i, ours in zip(unknown, found, strict=True):
                    told[i] = ours
                    if ours is not None:
                        learned[workloads[i].experiment.id] = ours
            self.known.update(learned)
            if learned and self.remember is not None:
                self.remember(learned)
        return [bool(t) for t in told]
