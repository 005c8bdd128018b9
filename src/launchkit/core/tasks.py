"""Several tasks from one `run`: `--multi` commands and `--sweep` grids (docs/run.md, "Several tasks").

`expand_tasks(request)` turns a request into the tasks it launches, each with its name, its label
(what `follow` and `logs` print in front of its lines), its argv and its extra env. Pure: no I/O.

- `--multi`: every `--` after the first one separates commands (mason's `-- cmd1 -- cmd2`); a
  command that needs a literal `--` writes `\\--`. Without `--multi` every `--` reaches the command.
- `--sweep KEY=V1,V2` (repeatable): the grid of all values, in the order given (the last key varies
  fastest). Each task gets `LAUNCHKIT_SWEEP=k=v,k=v`, and every `{key}` in its command is replaced by
  the value. Other braces (JSON arguments) stay as they are.

The spec carries each task's own values once: `LAUNCHKIT_SWEEP_<KEY>=<value>` and
`LAUNCHKIT_TASK_LABEL` are derived on the node (runtime/entrypoint.sh: lk_task_env) and by `label_of`,
so the label is in the spec only when it says more than `LAUNCHKIT_SWEEP` (`--multi` with `--sweep`).
"""

from __future__ import annotations

import itertools
import re

from pydantic import BaseModel, ConfigDict

from launchkit.core.request import LaunchRequest

ENV_SWEEP = "LAUNCHKIT_SWEEP"  # k=v,k=v (the task's label)
ENV_SWEEP_PREFIX = "LAUNCHKIT_SWEEP_"  # + KEY upper-cased: the value
ENV_TASK_LABEL = "LAUNCHKIT_TASK_LABEL"  # what follow/logs print in front of the task's lines
ENV_TASK_INDEX = "LAUNCHKIT_TASK_INDEX"

SEPARATOR = "--"
ESCAPED_SEPARATOR = "\\--"
# One experiment holds them all: Beaker creates jobs synchronously (~0.2 s each; the create's timeout
# grows with them, backends/beaker/submit.py), so 1,000 tasks is one create of a few minutes.
MAX_TASKS = 1000
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class TaskVariant(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int
    name: str
    label: str
    command: list[str]
    env: list[tuple[str, str]] = []
    sweep: dict[str, str] = {}


def split_commands(argv: list[str]) -> list[list[str]]:
    """`--multi`: argv split at each `--`; `\\--` stands for a literal `--`. Empty parts are kept (the
    caller reports them)."""
    parts: list[list[str]] = [[]]
    for arg in argv:
        if arg == SEPARATOR:
            parts.append([])
        else:
            parts[-1].append(SEPARATOR if arg == ESCAPED_SEPARATOR else arg)
    return parts


def grid(axes: list[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """All combinations, the first axis varying slowest."""
    if not axes:
        return [{}]
    keys = [k for k, _ in axes]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))]


def sweep_label(point: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in point.items())


def _name_part(point: dict[str, str]) -> str:
    return "__".join(f"{k}_{_UNSAFE.sub('_', v)}" for k, v in point.items())


def _substitute(command: list[str], point: dict[str, str]) -> list[str]:
    out = []
    for arg in command:
        for k, v in point.items():
            arg = arg.replace("{" + k + "}", v)
        out.append(arg)
    return out


def expand_tasks(request: LaunchRequest) -> list[TaskVariant]:
    """The tasks the request launches, in order. One task unless --multi or --sweep."""
    commands = request.commands or [request.command]
    points = grid([(a.key, a.values) for a in request.sweep])
    several_commands, swept = len(commands) > 1, bool(request.sweep)
    out: list[TaskVariant] = []
    for (ci, command), point in itertools.product(enumerate(commands), points):
        parts = [request.task_name]
        if several_commands:
            parts.append(str(ci))
        if swept:
            parts.append(_name_part(point))
        name = "__".join(parts)
        label = sweep_label(point) if swept else name
        if several_commands and swept:
            label = f"{ci}:{label}"
        env = [(ENV_TASK_INDEX, str(len(out)))] if (several_commands or swept) else []
        if swept:
            env.append((ENV_SWEEP, sweep_label(point)))
        if label != (sweep_label(point) if swept else name):  # else the node derives it (label_of)
            env.append((ENV_TASK_LABEL, label))
        out.append(
            TaskVariant(
                index=len(out),
                name=name,
                label=label,
                command=_substitute(command, point),
                env=env,
                sweep=point,
            )
        )
    return out


def label_of(env: dict[str, str | None]) -> str | None:
    """A task's label from its env as the spec carries it: `LAUNCHKIT_TASK_LABEL` when the spec gives
    one, else `LAUNCHKIT_SWEEP` (None: the task's name is its label). The node derives the same."""
    return env.get(ENV_TASK_LABEL) or env.get(ENV_SWEEP) or None
