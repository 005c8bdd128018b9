"""The typed spec past `build_spec`: what a Submission carries (`Submission.spec`, a `SpecView`).

The JSON beaker-py made (`BeakerExperimentSpec.to_json()`) stays the storage, so what is printed and
sent is byte for byte what beaker-py made; `SpecView`, `TaskView`, `Mount` and `EnvVar` read and edit
it by field. This module is the one place that knows the spec's JSON keys (tests/test_spec_fields.py
fails on a string-key walk anywhere else in src/); it is stdlib only, as the local supervisor reads the
spec back with it. The JSON is taken out only where the spec is sent (`beaker_spec`: beaker-py's own
`BeakerExperimentSpec` of it, with the one field beaker-py 2.8.1 fails to parse, a mount's `source`,
tests/test_spec_golden.py::test_beaker_py_host_path_bug, repaired), printed (`SpecView.printable`) or
written for the local supervisor (`SpecView.to_json`, read back with `SpecView.read`).
"""

from __future__ import annotations

import json
import warnings

from launchkit.core.beaker_types import spec_types
from launchkit.runtime.node.policy import ENV_WEBHOOK, Policy

TYPE_CHECKING = False  # not typing's: the local supervisor imports this and skips `typing`
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

PREEMPTIBLE_WARNING = "The 'preemptible' field is deprecated"


class EnvVar:
    """One `envVars` entry: a literal `value`, or the name of a `secret` (never its value)."""

    __slots__ = ("name", "secret", "value")

    def __init__(self, name: str, value: str | None = None, secret: str | None = None) -> None:
        self.name, self.value, self.secret = name, value, secret

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EnvVar:
        return cls(str(data["name"]), data.get("value"), data.get("secret"))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.secret is not None:
            out["secret"] = self.secret
        else:
            out["value"] = self.value
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EnvVar) and (self.name, self.value, self.secret) == (
            other.name,
            other.value,
            other.secret,
        )

    def __repr__(self) -> str:  # a secret by name only
        return f"EnvVar({self.name!r}, " + (f"secret={self.secret!r})" if self.secret else f"{self.value!r})")


class Mount:
    """One `datasets` entry: a Beaker dataset, a secret, Weka or a host path at `mount_path`. Edits
    write through to the JSON."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def _source(self) -> dict[str, Any]:
        return self.raw.get("source") or {}

    @property
    def mount_path(self) -> str:
        return str(self.raw["mountPath"])

    @property
    def sub_path(self) -> str | None:
        return self.raw.get("subPath") or None

    @property
    def beaker(self) -> str | None:
        """The Beaker dataset mounted (a name or an id)."""
        return self._source().get("beaker") or None

    @beaker.setter
    def beaker(self, dataset: str) -> None:
        self.raw.setdefault("source", {})["beaker"] = dataset

    @property
    def secret(self) -> str | None:
        return self._source().get("secret") or None

    @property
    def weka(self) -> str | None:
        return self._source().get("weka") or None

    @property
    def host_path(self) -> str | None:
        return self._source().get("hostPath") or None

    def sources(self) -> list[str]:
        """Every value of the mount's source, whatever its kind."""
        return [str(v) for v in self._source().values()]


class TaskView:
    """One task of the spec JSON. Edits write through to the JSON."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    @property
    def name(self) -> str:
        return str(self.raw.get("name") or "")

    # -- env
    def _env_key(self) -> str:
        return "env_vars" if "env_vars" in self.raw and "envVars" not in self.raw else "envVars"

    @property
    def env(self) -> list[EnvVar]:
        return [EnvVar.from_json(e) for e in self.raw.get(self._env_key()) or []]

    def env_named(self, name: str) -> EnvVar | None:
        return next((e for e in self.env if e.name == name), None)

    def env_value(self, name: str) -> str | None:
        """The literal value of env var `name` (None: unset, empty, or a secret)."""
        e = self.env_named(name)
        return str(e.value) if e is not None and e.value else None

    def policy(self) -> Policy:
        """The run's policy this task carries (runtime/node/policy.py), decoded once; PolicyError
        (a ValueError) names a malformed one."""
        env = self.env
        policy = Policy.from_env({e.name: e.value for e in env if not e.secret})
        if policy.webhook_secret is None:  # a run launched before the policy said it
            secret = next((e.secret for e in env if e.name == ENV_WEBHOOK and e.secret), None)
            policy = policy.replace(webhook_secret=secret) if secret else policy
        return policy

    def env_list(self, name: str) -> list[str]:
        """A comma-separated env var's items."""
        return [v.strip() for v in (self.env_value(name) or "").split(",") if v.strip()]

    def add_env(self, var: EnvVar) -> None:
        self.raw.setdefault(self._env_key(), []).append(var.to_json())

    def remove_env(self, name: str) -> None:
        """Drop env var `name` (in place)."""
        key = self._env_key()
        if key in self.raw:
            self.raw[key] = [e for e in self.raw[key] or [] if e.get("name") != name]

    def _env_with(self, var: EnvVar) -> list[dict[str, Any]]:
        kept = [e for e in self.raw.get(self._env_key()) or [] if e.get("name") != var.name]
        return [*kept, var.to_json()]

    def set_env(self, var: EnvVar) -> None:
        """`var` last (replacing any of its name), in place."""
        self.raw[self._env_key()] = self._env_with(var)

    def with_env(self, var: EnvVar) -> TaskView:
        """A copy of the task with `var` last (replacing any of its name)."""
        return TaskView({**self.raw, self._env_key(): self._env_with(var)})

    def secrets(self) -> list[str]:
        """Secret names the task references: env vars, then mounted secrets (--dataset-secret)."""
        names = [e.secret for e in self.env if e.secret]
        names += [m.secret for m in self.mounts if m.secret]
        return names

    # -- mounts
    @property
    def mounts(self) -> list[Mount]:
        return [Mount(m) for m in self.raw.get("datasets") or []]

    @mounts.setter
    def mounts(self, mounts: list[Mount]) -> None:
        self.raw["datasets"] = [m.raw for m in mounts] or None

    # -- image
    @property
    def beaker_image(self) -> str | None:
        return (self.raw.get("image") or {}).get("beaker") or None

    @beaker_image.setter
    def beaker_image(self, image: str) -> None:
        self.raw.setdefault("image", {})["beaker"] = image

    @property
    def docker_image(self) -> str | None:
        return (self.raw.get("image") or {}).get("docker") or None

    # -- what runs
    @property
    def command(self) -> list[str]:
        return [str(a) for a in self.raw.get("command") or []]

    @property
    def arguments(self) -> list[str]:
        return [str(a) for a in self.raw.get("arguments") or []]

    @property
    def replicas(self) -> int:
        return max(1, int(self.raw.get("replicas") or 1))

    @property
    def propagate_failure(self) -> bool:
        return bool(self.raw.get("propagateFailure"))

    @property
    def host_networking(self) -> bool:
        return bool(self.raw.get("hostNetworking"))

    @property
    def timeout_ns(self) -> int | None:
        """--task-timeout, in nanoseconds (None: none)."""
        value = self.raw.get("timeout")
        return int(value) if value else None

    # -- resources (None: not asked for)
    def _resources(self) -> dict[str, Any]:
        return self.raw.get("resources") or {}

    @property
    def gpus(self) -> int | None:
        value = self._resources().get("gpuCount")
        return None if value is None else int(value)

    @property
    def cpus(self) -> float | None:
        return self._resources().get("cpuCount")

    @property
    def memory(self) -> str | None:
        return self._resources().get("memory")

    @property
    def shared_memory(self) -> str | None:
        return self._resources().get("sharedMemory")

    # -- where and how it is scheduled
    @property
    def priority(self) -> str | None:
        return (self.raw.get("context") or {}).get("priority") or None

    @property
    def preemptible(self) -> bool:
        return bool((self.raw.get("context") or {}).get("preemptible"))

    @property
    def preemptible_given(self) -> bool | None:
        """The deprecated `preemptible` as given (None: not in the spec)."""
        value = (self.raw.get("context") or {}).get("preemptible")
        return None if value is None else bool(value)

    @property
    def min_runtime_ns(self) -> int | None:
        """--min-runtime, in nanoseconds (None: none given)."""
        value = (self.raw.get("context") or {}).get("minRuntime")
        return None if value is None else int(value)

    @property
    def auto_resume(self) -> bool | None:
        """Whether a preempted job is started again (None: Beaker's default, which resumes)."""
        value = (self.raw.get("context") or {}).get("autoResume")
        return None if value is None else bool(value)

    @property
    def clusters(self) -> list[str]:
        return list((self.raw.get("constraints") or {}).get("cluster") or [])

    @clusters.setter
    def clusters(self, names: list[str]) -> None:
        constraints = self.raw.get("constraints") or {}
        constraints["cluster"] = names
        self.raw["constraints"] = constraints

    @property
    def hostnames(self) -> list[str]:
        return list((self.raw.get("constraints") or {}).get("hostname") or [])


_TOP_ORDER = ("version", "description", "budget", "groups", "retry", "tasks")  # what the YAML shows first
_TASK_ORDER = (
    "name",
    "image",
    "arguments",
    "envVars",
    "datasets",
    "resources",
    "constraints",
    "context",
    "result",
    "replicas",
    "leaderSelection",
    "hostNetworking",
    "propagateFailure",
    "propagatePreemption",
    "synchronizedStartTimeout",
    "timeout",
    "command",
)


def _ordered(data: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    keys = [k for k in order if k in data] + [k for k in data if k not in order]
    return {k: data[k] for k in keys}


class SpecView:
    """The spec: beaker-py's JSON of it (`BeakerExperimentSpec.to_json()`), read and edited through
    typed accessors. A Submission's is not edited: a backend edits its `copy()`."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    @classmethod
    def read(cls, text: str) -> SpecView:
        """The spec `to_json()` wrote (as JSON text)."""
        return cls(json.loads(text))

    def to_json(self) -> dict[str, Any]:
        """The JSON, for sending or writing (not to be walked by key: read it through the view)."""
        return self.raw

    def copy(self) -> SpecView:
        return SpecView(json.loads(json.dumps(self.raw)))

    def printable(self) -> dict[str, Any]:
        """The JSON with the interesting fields first, the entrypoint's command last (the YAML's order)."""
        data = _ordered(self.raw, _TOP_ORDER)
        data["tasks"] = [_ordered(task, _TASK_ORDER) for task in data.get("tasks", [])]
        return data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpecView) and self.raw == other.raw

    def __repr__(self) -> str:
        return f"SpecView({len(self.tasks)} task(s))"  # env values stay out of reprs

    # -- experiment fields
    @property
    def description(self) -> str:
        return str(self.raw.get("description") or "")

    @description.setter
    def description(self, text: str) -> None:
        self.raw["description"] = text

    @property
    def budget(self) -> str | None:
        return self.raw.get("budget") or None

    @budget.setter
    def budget(self, name: str) -> None:
        self.raw["budget"] = name

    @property
    def groups(self) -> list[str]:
        return [str(g) for g in self.raw.get("groups") or []]

    @groups.setter
    def groups(self, refs: list[str]) -> None:
        self.raw["groups"] = refs

    @property
    def task_retries(self) -> int:
        """Beaker's `retry.allowedTaskRetries` (0: none)."""
        retries = (self.raw.get("retry") or {}).get("allowedTaskRetries")
        return retries if isinstance(retries, int) and retries > 0 else 0

    # -- tasks
    @property
    def tasks(self) -> list[TaskView]:
        return [TaskView(t) for t in self.raw.get("tasks") or []]

    def with_tasks(self, tasks: list[TaskView]) -> SpecView:
        """A spec of the same experiment fields with `tasks` (shared, not copied)."""
        return SpecView({**self.raw, "tasks": [t.raw for t in tasks]})

    def env(self) -> Iterator[EnvVar]:
        for task in self.tasks:
            yield from task.env

    def env_value(self, name: str) -> str | None:
        """The first task's literal value of `name` (specs give every task the contract's env)."""
        return next((v for v in (t.env_value(name) for t in self.tasks) if v), None)

    def policy(self) -> Policy:
        """The first task's policy (every task of a launch carries the same)."""
        tasks = self.tasks
        return tasks[0].policy() if tasks else Policy()

    def env_list(self, name: str) -> list[str]:
        """A comma-separated env var's items over every task, in order, each once."""
        return list(dict.fromkeys(v for t in self.tasks for v in t.env_list(name)))

    def has_env(self, name: str) -> bool:
        """Whether any task sets `name` (to a non-empty value, or a secret)."""
        return any(e.name == name and (e.value or e.secret) for e in self.env())

    def secrets(self) -> list[str]:
        return [n for t in self.tasks for n in t.secrets()]

    def with_task_env(self, var: EnvVar) -> SpecView:
        """A copy of the spec with `var` last in every task (replacing any of its name)."""
        return self.with_tasks([t.with_env(var) for t in self.tasks])

    @property
    def jobs(self) -> int:
        """Jobs Beaker makes for the spec: every task's replicas."""
        return sum(t.replicas for t in self.tasks)


def beaker_spec(spec: SpecView) -> Any:
    """beaker-py's `BeakerExperimentSpec` of the spec: what create() sends is its `to_json()`.

    beaker-py 2.8.1 leaves each mount's `source` a dict (snake_case keys), which breaks sending any spec
    with mounts: repaired here. It also warns about `preemptible` while parsing though it sends it
    (core/spec.py): not the user's doing, so not shown."""

    t = spec_types()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", PREEMPTIBLE_WARNING, DeprecationWarning)
        parsed = t.BeakerExperimentSpec.from_json(spec.to_json())
    for task in parsed.tasks:
        for mount in task.datasets or []:
            if isinstance(mount.source, dict):
                mount.source = t.BeakerDataSource(**mount.source)
    return parsed
