"""`launchkit logs`."""

from __future__ import annotations

import typer

from launchkit.cli.state import not_yet


def register(app: typer.Typer) -> None:
    @app.command("logs")
    def _cmd() -> None:
        """(not yet available)"""
        not_yet("logs")
