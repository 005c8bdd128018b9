"""`launchkit find-gpus`'s body (cli/find_gpus_cmd.py declares it): GPUs available to the chosen
backend."""

from __future__ import annotations

import sys

import typer

from launchkit.backends import Capability, require
from launchkit.cli.backend_choice import choose
from launchkit.cli.completing import remember_clusters
from launchkit.cli.context import get_app
from launchkit.cli.table import print_table
from launchkit.errors import UsageError


def find_gpus(
    ctx: typer.Context,
    as_json: bool,
    gpu_type: list[str] | None,
    show_all: bool,
    gpus: int | None,
    replicas: int,
    workspace: str | None,
    backend: str | None,
    local: bool,
) -> None:
    """`launchkit find-gpus` (cli/find_gpus_cmd.py declares its options)."""
    app = get_app(ctx, as_json)
    b = choose(app, backend, local, workspace=workspace)
    require(b, Capability.gpu_filters, gpu_type=gpu_type, all=show_all, gpus=gpus, replicas=replicas > 1)
    if replicas > 1 and gpus is None:
        raise UsageError("--replicas needs --gpus", hint="e.g. find-gpus --gpus 8 --replicas 4")
    rows = b.find_gpus(gpu_types=gpu_type, include_all=show_all, gpus=gpus, replicas=replicas)

    remember_clusters(str(g["cluster"]) for g in rows if "cluster" in g)
    if app.json:
        app.print_json(rows)
        return
    if not rows:
        if Capability.this_machine in b.capabilities:
            app.info("no GPUs here (nvidia-smi finds none)")
        else:
            kind = f" of type {' or '.join(gpu_type)}" if gpu_type else ""
            app.info(
                f"no cluster has free GPUs{kind} now" + ("" if show_all else " (--all lists every cluster)")
            )
        return

    nodes = []  # --gpus: the nodes a replica can start on now, in a table of their own
    for g in rows:
        listed = g.pop("nodes", [])
        nodes += (
            [(str(g["cluster"]), n) for n in listed if isinstance(n, dict)]
            if isinstance(listed, list)
            else []
        )
    keys = [
        k for k in rows[0] if any(_cell(k, g.get(k, "")) for g in rows)
    ]  # a column with no value says nothing
    table = [[_cell(k, g.get(k, "")) for k in keys] for g in rows]
    print_table([k.upper() for k in keys], table, spill=("BUDGET", "GPU_TYPES", "TAGS"))
    if nodes:
        sys.stdout.write("\n")
        cols = ["node", "gpu_type", "free_gpus", "gpus"]
        node_rows = [[c, *(_cell(k, n[k]) for k in cols)] for c, n in nodes]
        print_table(["CLUSTER", *(c.upper() for c in cols)], node_rows)
    shown = {g.get("start") for g in rows}
    if said := [f"{short} = {long}" for long, short in SHORT_START.items() if long in shown]:
        sys.stdout.write("\nSTART: " + "; ".join(said) + "\n")  # (--json has the long form)


# `start` as the table says it (the JSON keeps the backend's own words): short enough that it is never cut
SHORT_START = {
    "when nodes free up": "nodes free",
    "when cordoned nodes return": "cordon",
    "after the workspace's slot limit": "slot limit",
}
VENDORS = ("NVIDIA ", "AMD ")  # said once by the column, not in every cell: `A100 40GB` vs `A100 80GB`


def _cell(key: str, value: object) -> str:
    if key in ("gpu_types", "gpu_type"):
        values = value if isinstance(value, (list, tuple)) else [value]
        value = [str(v).removeprefix(VENDORS[0]).removeprefix(VENDORS[1]) for v in values if v]
    elif key == "start":
        value = SHORT_START.get(str(value), value)
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
