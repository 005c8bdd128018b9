"""`launchkit prune [--older-than 7d] [--dry-run] [--yes]`: remove old local runs that have ended.

The declaration (cli/declared.py); the body is cli/prune_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.options import (
    yes_option,
)


def prune(
    ctx: typer.Context,
    older_than: str = typer.Option(
        "7d", "--older-than", metavar="DURATION", help="Only runs that ended longer ago (7d, 12h)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only list what would be removed."),
    yes: bool = yes_option(),
) -> None:
    """Remove old local runs (their directories and logs). Running runs are never touched."""
