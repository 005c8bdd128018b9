"""`launchkit open [TARGET]...`: open Beaker pages (experiment, workspace, cluster, image, dataset,
group), or print their URLs.

The declaration (cli/declared.py); the body is cli/open_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.options import (
    latest_option,
)


def open_page(
    ctx: typer.Context,
    targets: list[str] | None = typer.Argument(
        None,
        metavar="[TARGET]...",
        help="Experiment, workspace, cluster, image, dataset or group (id or name); default: the workspace.",
    ),
    latest: bool = latest_option("Your newest experiment."),
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Beaker workspace (org/name)."),
    print_only: bool = typer.Option(False, "--print", "-p", help="Only print the URLs."),
) -> None:
    """Open Beaker pages in the browser; the URLs are printed when there is no browser or no TTY."""
