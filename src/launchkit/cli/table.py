"""Tables for `list`, `find-gpus` and friends: a rich table on a terminal, plain columns otherwise.

Piped output stays plain, aligned and stable for scripts (use `--json` for a contract).
"""

from __future__ import annotations

import os
import sys

STATUS_STYLES = {
    "succeeded": "green",
    "failed": "red",
    "canceled": "yellow",
    "preempted": "yellow",
    "running": "cyan",
    "starting": "cyan",
    "queued": "dim",
}


def print_table(header: list[str], rows: list[list[str]], *, status_column: str | None = None) -> None:
    if sys.stdout.isatty() and "NO_COLOR" not in os.environ:
        _rich_table(header, rows, status_column)
        return
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _rich_table(header: list[str], rows: list[list[str]], status_column: str | None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    for name in header:
        table.add_column(name, overflow="fold")
    status_at = header.index(status_column) if status_column in header else None
    for r in rows:
        cells = list(r)
        if status_at is not None and cells[status_at] in STATUS_STYLES:
            cells[status_at] = f"[{STATUS_STYLES[cells[status_at]]}]{cells[status_at]}[/]"
        table.add_row(*cells)
    Console().print(table)
