"""A typed view of a spec past `build_spec`: the JSON a Submission carries (`Submission.spec`).

The JSON stays the storage, so what is printed and sent is byte for byte what beaker-py made; the view
reads and edits it by field instead of by string key. `EnvVar`, `TaskView` and `SpecView` are the
small typed layer (stdlib only: the local supervisor reads specs with it); `beaker_spec` is beaker-py's
own `BeakerExperimentSpec` of the JSON, with the one field beaker-py 2.8.1 fails to parse (a mount's
`source`, tests/test_spec_golden.py::test_beaker_py_host_path_bug) repaired.
"""

from __future__ import annotations

import warnings

from launchkit.core.beaker_types import spec_types

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

    def with_env(self, var: EnvVar) -> dict[str, Any]:
        """A copy of the task's JSON with `var` last (replacing any of its name)."""
        key = self._env_key()
        kept = [e for e in self.raw.get(key) or [] if e.get("name") != var.name]
        return {**self.raw, key: [*kept, var.to_json()]}

    def secrets(self) -> list[str]:
        """Secret names the task references: env vars, then mounted secrets (--dataset-secret)."""
        names = [e.secret for e in self.env if e.secret]
        names += [m["source"]["secret"] for m in self.mounts if (m.get("source") or {}).get("secret")]
        return names

    # -- the rest
    @property
    def mounts(self) -> list[dict[str, Any]]:
        return list(self.raw.get("datasets") or [])

    @property
    def image(self) -> dict[str, Any]:
        return dict(self.raw.get("image") or {})

    @property
    def clusters(self) -> list[str]:
        return list((self.raw.get("constraints") or {}).get("cluster") or [])

    @clusters.setter
    def clusters(self, names: list[str]) -> None:
        constraints = self.raw.get("constraints") or {}
        constraints["cluster"] = names
        self.raw["constraints"] = constraints

    @property
    def replicas(self) -> int:
        return max(1, int(self.raw.get("replicas") or 1))


class SpecView:
    """The spec JSON (`BeakerExperimentSpec.to_json()`), read and edited through typed accessors."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    @property
    def tasks(self) -> list[TaskView]:
        return [TaskView(t) for t in self.raw.get("tasks") or []]

    def env(self) -> Iterator[EnvVar]:
        for task in self.tasks:
            yield from task.env

    def env_value(self, name: str) -> str | None:
        """The first task's literal value of `name` (specs give every task the contract's env)."""
        return next((v for v in (t.env_value(name) for t in self.tasks) if v), None)

    def env_list(self, name: str) -> list[str]:
        """A comma-separated env var's items over every task, in order, each once."""
        return list(dict.fromkeys(v for t in self.tasks for v in t.env_list(name)))

    def has_env(self, name: str) -> bool:
        """Whether any task sets `name` (to a non-empty value, or a secret)."""
        return any(e.name == name and (e.value or e.secret) for e in self.env())

    def secrets(self) -> list[str]:
        return [n for t in self.tasks for n in t.secrets()]

    def with_task_env(self, var: EnvVar) -> dict[str, Any]:
        """A copy of the spec JSON with `var` last in every task (replacing any of its name)."""
        return {**self.raw, "tasks": [t.with_env(var) for t in self.tasks]}

    @property
    def jobs(self) -> int:
        """Jobs Beaker makes for the spec: every task's replicas."""
        return sum(t.replicas for t in self.tasks)


def beaker_spec(spec: dict[str, Any]) -> Any:
    """beaker-py's `BeakerExperimentSpec` of the JSON: what create() sends is its `to_json()`.

    beaker-py 2.8.1 leaves each mount's `source` a dict (snake_case keys), which breaks sending any spec
    with mounts: repaired here. It also warns about `preemptible` while parsing though it sends it
    (core/spec.py): not the user's doing, so not shown."""

    t = spec_types()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", PREEMPTIBLE_WARNING, DeprecationWarning)
        parsed = t.BeakerExperimentSpec.from_json(spec)
    for task in parsed.tasks:
        for mount in task.datasets or []:
            if isinstance(mount.source, dict):
                mount.source = t.BeakerDataSource(**mount.source)
    return parsed
