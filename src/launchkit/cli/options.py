"""Options several commands share, declared once (`--latest`, `--replica`, `--yes`), and the one
confirmation prompt `--yes` skips. (`--backend`, `--local`, `--workspace`: cli/backend_choice.py.)"""

from __future__ import annotations

import sys
from typing import Any

import typer

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


def confirm(question: str, *, command: str) -> None:
    """Ask `question` on the terminal (default: no) and exit 1 unless the answer is yes. Without a
    terminal it fails fast: a usage error naming --yes (never a prompt nobody can answer)."""
    if not sys.stdin.isatty():
        raise UsageError(f"{command} needs confirmation, but stdin is not a terminal", hint="pass --yes")
    if not typer.confirm(question, default=False, err=True):
        sys.exit(1)
