"""Plain-text help with options grouped in panels (`rich_help_panel`), without rich.

Rendering help through rich costs ~80 ms of imports (rich.markdown, pygments, ...) on every `--help`.
`PanelCommand`/`PanelGroup` override the public `format_options`/`format_commands` hooks of Typer's
command classes and write through the formatter they are given: one section per panel, plain text
(NO_COLOR-proof). Typer vendors click (typer._click, private), so the formatter is typed by what
is used of it and the context as `typer.Context` (hence the `ignore[override]`s).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import typer
from typer.core import TyperCommand, TyperGroup

from launchkit.cli.params import fast
from launchkit.core.run_options import ALIAS_FLAGS


class HelpFormatter(Protocol):
    width: int

    def section(self, name: str) -> AbstractContextManager[None]: ...

    def write_dl(self, rows: Sequence[tuple[str, str]]) -> None: ...


def _panels(
    command: TyperCommand | TyperGroup, ctx: typer.Context
) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """(panel, help rows) with the ungrouped "Options" first, then the panels in declaration order."""
    panels: dict[str, list[tuple[str, str]]] = {}
    for param in command.get_params(ctx):
        record = shown_param(param).get_help_record(ctx)
        if record is not None:
            panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
    yield from sorted(panels.items(), key=lambda item: item[0] != "Options")


def shown_param(param: Any) -> Any:
    """The parameter as help shows it: gantry's alias spellings (run_options.ALIAS_FLAGS) left out."""
    names = [*param.opts, *getattr(param, "secondary_opts", [])]
    if not ALIAS_FLAGS.intersection(names):
        return param
    shown = copy.copy(param)
    shown.opts = [o for o in param.opts if o not in ALIAS_FLAGS]
    if hasattr(shown, "secondary_opts"):
        shown.secondary_opts = [o for o in param.secondary_opts if o not in ALIAS_FLAGS]
    return shown


def _write_options(command: TyperCommand | TyperGroup, ctx: typer.Context, formatter: HelpFormatter) -> None:
    for panel, rows in _panels(command, ctx):
        with formatter.section(panel):
            formatter.write_dl(rows)


class PanelCommand(TyperCommand):
    """A command with plain-text help, its options grouped in panels; plain values skip pydantic."""

    def get_params(self, ctx: typer.Context) -> list[Any]:  # type: ignore[override]
        return fast(super().get_params(ctx))

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [self.options_metavar or ""] + [
            piece
            for param in self.get_params(ctx)
            if not getattr(param, "hidden", False)
            for piece in param.get_usage_pieces(ctx)
        ]

    def format_options(self, ctx: typer.Context, formatter: HelpFormatter) -> None:  # type: ignore[override]
        _write_options(self, ctx, formatter)


class PanelGroup(TyperGroup):
    """A group (the root app, `secret`) with the same plain-text panel help; plain values skip pydantic."""

    def get_params(self, ctx: typer.Context) -> list[Any]:  # type: ignore[override]
        return fast(super().get_params(ctx))

    LAST = ("completion",)  # set-up commands, listed after the everyday ones

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        names = super().list_commands(ctx)
        return [n for n in names if n not in self.LAST] + [n for n in names if n in self.LAST]

    def format_options(self, ctx: typer.Context, formatter: HelpFormatter) -> None:  # type: ignore[override]
        _write_options(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def format_commands(self, ctx: typer.Context, formatter: HelpFormatter) -> None:  # type: ignore[override]
        rows = [
            (name, cmd.get_short_help_str(formatter.width - 20))
            for name in self.list_commands(ctx)
            if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
