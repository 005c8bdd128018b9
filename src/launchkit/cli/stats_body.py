"""`launchkit stats`'s body (cli/stats_cmd.py declares it): where your recent runs' time went, p50/p90
of each phase per cluster."""

from __future__ import annotations

import sys

import typer

from launchkit.cli.backend_choice import choose_listing
from launchkit.cli.context import get_app
from launchkit.cli.table import print_table
from launchkit.core import phases as ph
from launchkit.core.units import span

NOT_PLACED = "(not placed)"  # runs that never got a node


def stats(
    ctx: typer.Context,
    last: int,
    as_json: bool,
    workspace: str | None,
    backend: str | None,
    local: bool,
) -> None:
    """`launchkit stats` (cli/stats_cmd.py declares its options)."""
    app = get_app(ctx, as_json)
    b = choose_listing(app, backend, local, workspace)  # no credentials: this machine's runs
    runs = [b.phases(r, where=True) for r in b.list_runs(limit=last)]
    summary = ph.summary([(r.cluster or NOT_PLACED, r.phases, r.gpu_hours) for r in runs])
    if app.json:
        app.print_json({"runs": len(runs), "clusters": summary})
        return
    if not runs:
        app.info("no runs yet")
        return
    rows = []
    for cluster, row in summary.items():
        for key, s in row["phases"].items():
            if s is not None:
                rows.append([cluster, key, str(s["n"]), span(s["p50"]), span(s["p90"])])
    print_table(["CLUSTER", "PHASE", "RUNS", "P50", "P90"], rows)
    hours = [row["gpu_hours"] for row in summary.values() if row["gpu_hours"] is not None]
    sys.stdout.flush()  # the table before the summary line (stderr)
    told = f"{len(runs)} run{'s' if len(runs) != 1 else ''}" + (
        f", {sum(hours):g} GPU-hours" if hours else ""
    )
    if worst := ph.slowest(summary):
        cluster, key, p90 = worst
        told += f"; slowest before the command runs: {key} on {cluster} (p90 {span(p90)})"
    app.info(told)
