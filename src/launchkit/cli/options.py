"""Options several commands share, declared once (`--latest`, `--replica`, `--yes`, `--backend`,
`--local`, `--workspace`, a run id's completion), and the one confirmation prompt `--yes` skips.
Commands' declarations import this module (cli/declared.py): it stays light (the backend registry's
names, no backend)."""

from __future__ import annotations

import sys
from typing import Any

import typer

from launchkit.backends import registry
from launchkit.core.units import MAX_COUNT
from launchkit.errors import UsageError


def latest_option(help: str = "Your newest run.") -> Any:
    return typer.Option(False, "--latest", "-l", help=help)


def replica_option() -> Any:
    return typer.Option(
        None, "--replica", "-r", metavar="RANK", help="Only this replica (rank).", min=0, max=MAX_COUNT
    )


def yes_option(help: str = "Don't ask for confirmation.") -> Any:
    return typer.Option(False, "--yes", "-y", help=help)


P_BACKEND = "Backend"


def backend_option() -> Any:
    return typer.Option(
        None,
        "--backend",
        help=" or ".join(registry.names())
        + f" (default: `backend` from config or $LAUNCHKIT_BACKEND, else {registry.default_name()}).",
        rich_help_panel=P_BACKEND,
    )


def local_option() -> Any:
    return typer.Option(
        False, "--local", help=f"Shortcut for --backend {registry.here_name()}.", rich_help_panel=P_BACKEND
    )


def workspace_option() -> Any:
    return typer.Option(
        None,
        "--workspace",
        "-w",
        metavar="ORG/NAME",
        help="Beaker workspace (default: `workspace` from config, else Beaker's default).",
    )


def run_ids(incomplete: str) -> list[str]:
    """Completion: ids of recent runs starting with `incomplete`, from the backends that keep them on
    this machine (the registry row's `run_ids` hook: the CLI never reads a backend's storage)."""
    return registry.recent_run_ids(incomplete)


def confirm(question: str, *, command: str) -> None:
    """Ask `question` on the terminal (default: no) and exit 1 unless the answer is yes. Without a
    terminal it fails fast: a usage error naming --yes (never a prompt nobody can answer)."""
    if not sys.stdin.isatty():
        raise UsageError(f"{command} needs confirmation, but stdin is not a terminal", hint="pass --yes")
    if not typer.confirm(question, default=False, err=True):
        sys.exit(1)
