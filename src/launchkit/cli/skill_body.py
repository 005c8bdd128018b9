"""`launchkit skill`'s body (cli/skill_cmd.py declares it): a skill file for coding agents, made from
this launchkit's own help, option table, exit codes and JSON forms, so it says what this version does
(it cannot drift)."""

from __future__ import annotations

from pathlib import Path

import typer

from launchkit import __version__
from launchkit.backends import registry
from launchkit.cli.app import HELP, REGISTRY
from launchkit.cli.context import get_app
from launchkit.core import phases as ph
from launchkit.core.plan import Plan
from launchkit.core.run_options import BY_NAME
from launchkit.errors import (
    EXIT_BACKEND,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_JOB_FAILED,
    EXIT_NOT_FOUND,
    EXIT_PRECONDITION,
    EXIT_USAGE,
    KINDS,
    UsageError,
)

NAME = "launchkit"  # the skill's name: DIR/launchkit/SKILL.md
DESCRIPTION = (
    "Launch ML jobs from a git repository onto AI2's Beaker GPU clusters (or run them on this machine) "
    f"with launchkit {__version__}; check a launch with a dry run, state its plan first, read why a run "
    "ended or waits. Use when asked to launch, follow, debug or stop a Beaker job."
)
# the run options an agent states or chooses before a launch (the plan's parts), in the plan's order
PLAN_OPTIONS = ("cluster", "gpus", "replicas", "priority", "min_runtime", "no_auto_resume", "task_timeout")
# what an agent runs to look before it launches: each line is run by tests/test_skill.py
LOOK = (
    ("launchkit --help", "every command, one line each"),
    ("launchkit run --help", "every option of `run`"),
    ("launchkit run --dry-run -- python train.py", "the spec `run` would submit, and the `plan:` line"),
    ("launchkit run --dry-run --json -- python train.py", "the same as one JSON object: `plan`, `spec`"),
    (
        "launchkit run --dry-run --json --gpus 1 --replicas 2 --torchrun -- python train.py",
        "two nodes of one GPU, wired for torchrun",
    ),
    ("launchkit run --dry-run --offline -- python train.py", "without asking Beaker (no credentials needed)"),
    ("launchkit run --dry-run --local -- python train.py", "the same job on this machine"),
    ("launchkit why --help", "why a run ended or waits, and where its time went"),
    ("launchkit list --help", "runs, newest first (`--json`)"),
    ("launchkit follow --help", "stream a run's output; exits with its exit code"),
    ("launchkit logs --help", "a run's logs"),
    ("launchkit stop --help", "stop runs (only your own)"),
    ("launchkit find-gpus --help", "where a job of N GPUs could start now"),
    ("launchkit stats --help", "where recent runs' time went, per cluster"),
)
EXIT_CODES = (
    (0, "success"),
    (EXIT_JOB_FAILED, "the job failed (`follow`, `run --follow`: the job's own exit code passes through)"),
    (EXIT_USAGE, "bad input: fix the named option or value"),
    (
        EXIT_PRECONDITION,
        "a precondition: commit, push, set the secret, pick another cluster (the fix is named)",
    ),
    (EXIT_NOT_FOUND, "no such run or object"),
    (EXIT_BACKEND, "Beaker or the local supervisor failed or did not answer: retry later"),
    (EXIT_INTERNAL, "a launchkit bug"),
    (EXIT_INTERRUPTED, "interrupted"),
)


def skill(
    ctx: typer.Context,
    install: str | None,
) -> None:
    """`launchkit skill` (cli/skill_cmd.py declares its options)."""
    app = get_app(ctx)
    text = skill_text()
    if install is None:
        typer.echo(text, nl=False)
        return
    path = Path(install).expanduser() / NAME / "SKILL.md"
    if path.parent.parent.exists() and not path.parent.parent.is_dir():
        raise UsageError(
            f"--install {install!r}: not a directory", hint="give the directory agent skills live in"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    app.info(f"wrote {path}")


def _option_line(name: str) -> str:
    opt = BY_NAME[name]
    flag = opt.flags[0].split("/")[0] + (f" {opt.metavar}" if opt.metavar else "")
    return f"- `{flag}`: {opt.help.split('  [default:')[0]}"


def skill_text() -> str:
    """The skill file, from the command table, the option table, the exit codes and the JSON forms."""
    sample = Plan(
        backend=registry.default_name(),
        here=False,
        clusters=("ai2/jupiter",),
        tasks=1,
        gpus=8,
        replicas=2,
        priority="high",
        preemptible=False,
        min_runtime=7200.0,
        resumed=True,
        task_timeout=86400.0,
    )
    commands = "\n".join(f"| `launchkit {e.name}` | {e.summary} |" for e in REGISTRY if not e.hidden)
    look = "\n".join(f"{cmd:<84} # {what}" for cmd, what in LOOK)
    exits = "\n".join(f"| {code} | {what} |" for code, what in EXIT_CODES)
    plan_keys = ", ".join(f"`{k}`" for k in sample.to_json())
    options = "\n".join(_option_line(n) for n in PLAN_OPTIONS)
    return f"""---
name: {NAME}
description: {DESCRIPTION}
---

# launchkit {__version__}

{HELP} `launchkit run` launches the **committed and pushed** state of the repository: commit and
push first (a dirty tree or an unpushed commit is refused with exit 3). Everything after `--` is the
job's command, passed on unchanged.

## Commands

| command | what it does |
|---|---|
{commands}

## Look before you launch

Each of these only reads; none creates anything:

```bash
{look}
```

## The plan, stated before every launch

Before any launch, run the same command with `--dry-run` and tell the user its `plan:` line (stderr),
or the `plan` object of `--dry-run --json`: the cluster(s), GPUs x replicas, priority, whether it can
be preempted and what a preemption does, the task timeout, and where it could start now when known.
Launch only what the user agreed to. The options that set it:

{options}

`run` prints the same line first when it launches. Example: `{sample.line()}`

## Exit codes

| code | meaning |
|---|---|
{exits}

Every error is one line on stderr naming the bad value and the fix; never parse tracebacks.

## JSON forms

- `launchkit run --json ...`: one object on stdout, `{{"plan": {{...}}, "id": "...", "url": "..."}}`;
  with `--dry-run`, `{{"plan": {{...}}, "spec": {{...}}}}`. `plan` keys: {plan_keys}.
- A refusal with `--json` (any command): `{{"error": {{"kind", "message", "fix", "exit_code"}}}}`, `kind`
  one of {", ".join(f"`{k}`" for k in KINDS)}.
- `launchkit why --json ID` and `launchkit list --json`: runs with `status`, `exit_code`, `end`
  (`kind`, `line`, `fix`), `waiting` (`kind`, `line`, `fix`), `phases` (seconds or null:
  {", ".join(f"`{k}`" for k in ph.KEYS)}) and `gpu_hours`; `why --json` also `phases_detail` (each
  job's: `task`, `attempt`, `replica`, `phases`) and, for a queued run, `phase_notes.estimate`
  (`at`, `at_utc`, `basis`, `sooner`: an upper bound from what Beaker lists) or null with
  `phase_notes.no_estimate_reason`.
- `launchkit stats --json`: per cluster, `runs`, `gpu_hours`, and each phase's `n`, `p50`, `p90`.

## After a launch

`run` prints the run's id on stdout (`ID=$(launchkit -q run ...)`). Then `launchkit follow ID`
(exits with the job's exit code), `launchkit why ID` (why it ended or waits, with the fix, and where
its time went), `launchkit logs ID --tail 100`, `launchkit stop ID --yes` (only your own runs).
"""
