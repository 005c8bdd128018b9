"""`launchkit find-gpus`: GPUs available to the chosen backend."""

from __future__ import annotations

import typer

from launchkit.application import OutputFormat
from launchkit.cli.backend_choice import backend_option, choose, local_option
from launchkit.cli.context import get_app


def find_gpus(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
    gpu_type: list[str] | None = typer.Option(
        None, "--gpu-type", "-g", help="Beaker: only clusters with this GPU type (substring)."
    ),
    show_all: bool = typer.Option(False, "--all", "-a", help="Beaker: also clusters with no free GPU."),
    backend: str | None = backend_option(),
    local: bool = local_option(),
) -> None:
    """Show GPUs: on this machine with --local (via nvidia-smi), or free GPUs on Beaker clusters."""
    from launchkit.backends import Capability, require

    app = get_app(ctx)
    if as_json:
        app.output_format = OutputFormat.json
    b = choose(app, backend, local)
    require(b, Capability.gpu_filters, gpu_type=gpu_type, all=show_all)
    gpus = b.find_gpus(gpu_types=gpu_type, include_all=show_all)
    from launchkit.cli.completing import remember_clusters

    remember_clusters(str(g["cluster"]) for g in gpus if "cluster" in g)
    if app.json:
        app.print_json(gpus)
        return
    if not gpus:
        here = Capability.this_machine in b.capabilities
        app.info("no GPUs here" + (" (nvidia-smi finds none)" if here else ""))
        return
    from launchkit.cli.table import print_table

    keys = list(gpus[0])
    print_table([k.upper() for k in keys], [[_cell(g.get(k, "")) for k in keys] for g in gpus])


def _cell(value: object) -> str:
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
