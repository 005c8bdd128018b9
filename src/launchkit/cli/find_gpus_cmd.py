"""`launchkit find-gpus`: GPUs available to the chosen backend.

The declaration (cli/declared.py); the body is cli/find_gpus_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.options import (
    backend_option,
    local_option,
    workspace_option,
)


def find_gpus(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
    gpu_type: list[str] | None = typer.Option(
        None, "--gpu-type", "-g", help="Beaker: only clusters with this GPU type (substring)."
    ),
    show_all: bool = typer.Option(False, "--all", "-a", help="Beaker: also clusters with no free GPU."),
    gpus: int | None = typer.Option(
        None,
        "--gpus",
        min=1,
        help="Beaker: where a replica of N GPUs can start now, per cluster and node, soonest first "
        "(with the workspace's slot limit and the budget's clusters).",
    ),
    replicas: int = typer.Option(1, "--replicas", min=1, help="Beaker, with --gpus: R replicas of N GPUs."),
    workspace: str | None = workspace_option(),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Show GPUs: on this machine with --local (via nvidia-smi), or free GPUs on Beaker clusters."""
