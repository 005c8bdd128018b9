"""Tables for `list`, `find-gpus` and friends, fitted to the terminal's width (`COLUMNS`, else the
terminal's, else 80): the widest columns are cut with `…`, never the first (a run id, a cluster).
Cells are plain text (a service's free-text message is never read as markup). On a terminal the
header is bold and statuses coloured; piped output is the same text, plain (use `--json` for a
contract).
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

from launchkit.core.status import RunStatus

STATUS_STYLES = {  # a status's value -> its colour
    s.value: style
    for s, style in (
        (RunStatus.queued, "dim"),
        (RunStatus.starting, "cyan"),
        (RunStatus.running, "cyan"),
        (RunStatus.stopping, "yellow"),
        (RunStatus.uploading, "cyan"),
        (RunStatus.succeeded, "green"),
        (RunStatus.failed, "red"),
        (RunStatus.canceled, "yellow"),
        (RunStatus.preempted, "yellow"),
        (RunStatus.lost, "red"),
    )
}
GAP = 2  # spaces between columns
NARROWEST = 6  # a cut column keeps at least this many characters (or its header's)


def width() -> int:
    return shutil.get_terminal_size((80, 24)).columns


def wrap(lines: list[str], *, always: bool = False) -> str:
    """Prose lines, on a terminal wrapped to its width (a wrapped line goes on indented under itself);
    piped, one line each, for grep, unless `always` (a listing meant to be read at COLUMNS). A word
    longer than the width (a path, NAME=VALUE) is never cut: it goes whole on a line of its own."""
    if not always and not sys.stdout.isatty():
        return "\n".join(lines)

    out = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")))
        more = textwrap.wrap(
            line,
            width(),
            subsequent_indent=indent + "    ",
            break_on_hyphens=False,
            break_long_words=False,
        )
        out += more or [line]
    return "\n".join(out)


def fit(
    header: list[str],
    rows: list[list[str]],
    columns: int,
    keep: tuple[int, ...] = (0,),
    first: tuple[int, ...] = (),
) -> list[list[str]]:
    """The table's lines as cells, header first, cut so every line fits in `columns` characters: the
    columns at `first` are cut first, then the widest ones, with `…` (never those at `keep`); if that
    is not enough, headers are stacked at their `_`s (bottom-aligned, over several lines)."""
    cells = [[" ".join(c.split("\n")) for c in r] for r in rows]
    for stacked in (False, True):
        heads = [h.split("_") if stacked else [h] for h in header]
        named = [max(map(len, parts)) for parts in heads]
        widths = [max([named[i], *(len(r[i]) for r in cells)]) for i in range(len(header))]
        floor = [w if i in keep else min(w, max(NARROWEST, named[i])) for i, w in enumerate(widths)]
        over = sum(widths) + GAP * (len(widths) - 1) - columns
        while over > 0:
            cut = [k for k in first if widths[k] > floor[k]] or range(len(widths))
            i = max(cut, key=lambda k: widths[k] - floor[k])
            if widths[i] <= floor[i]:
                break  # as narrow as it gets: wider than the terminal, still one line per row
            widths[i] -= 1
            over -= 1
        if over <= 0:
            break
    height = max(map(len, heads))
    padded = [[""] * (height - len(parts)) + parts for parts in heads]
    table = [[parts[j] for parts in padded] for j in range(height)]
    table += [[c if len(c) <= w else c[: w - 1] + "…" for c, w in zip(r, widths, strict=True)] for r in cells]
    return table


def _width(table: list[list[str]]) -> int:
    return sum(max(len(r[i]) for r in table) for i in range(len(table[0]))) + GAP * (len(table[0]) - 1)


def print_table(
    header: list[str],
    rows: list[list[str]],
    *,
    status_column: str | None = None,
    optional: str | None = None,
    spill: tuple[str, ...] = (),
) -> None:
    """`optional`: a column cut before the others, and left out when cutting it is not enough.
    `spill`: columns of long values (GPU types, tags) that, when the table is wider than the terminal,
    move to a table of their own under it, keyed by the first column: whole rather than cut."""
    columns = width()
    moved = [header.index(h) for h in spill if h in header]
    if moved and _width([header, *rows]) > columns:
        stay = [i for i in range(len(header)) if i not in moved]
        print_table(
            [header[i] for i in stay],
            [[r[i] for i in stay] for r in rows],
            status_column=status_column,
            optional=optional,
        )
        side = [[r[0], *(r[i] for i in moved)] for r in rows if any(r[i] for i in moved)]
        if side:
            sys.stdout.write("\n")
            print_table([header[0], *(header[i] for i in moved)], side)
        return
    at = header.index(optional) if optional in header else None
    if at is not None:
        others = tuple(i for i in range(len(header)) if i != at)
        if _width(fit(header, rows, columns, keep=others)) > columns:  # only it cut
            header = header[:at] + header[at + 1 :]
            rows = [r[:at] + r[at + 1 :] for r in rows]
            at = None
    status_at = header.index(status_column) if status_column in header else None
    keep = (0,) if status_at is None else (0, status_at)
    table = fit(header, rows, columns, keep=keep, first=() if at is None else (at,))
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = [(" " * GAP).join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    heads = len(table) - len(rows)
    if not sys.stdout.isatty() or "NO_COLOR" in os.environ:
        sys.stdout.write("".join(line + "\n" for line in lines))
        return
    from rich.console import Console
    from rich.text import Text

    out = [Text(line, style="bold") for line in lines[:heads]]
    for r, line in zip(table[heads:], lines[heads:], strict=True):
        text = Text(line)  # plain text: never parsed as markup
        style = STATUS_STYLES.get(r[status_at], "") if status_at is not None else ""
        if style and status_at is not None:
            start = sum(widths[:status_at]) + GAP * status_at
            text.stylize(style, start, start + len(r[status_at]))
        out.append(text)
    console = Console(highlight=False, soft_wrap=True)
    for text in out:
        console.print(text)
