"""Plain-text help with options grouped in panels (`rich_help_panel`), without rich.

Rendering help through rich costs ~80 ms of imports (rich.markdown, pygments, ...) on every `--help`.
`PanelCommand`/`PanelGroup` override the public `format_options`/`format_commands` hooks of Typer's
command classes and write through the formatter they are given: one section per panel, plain text
(NO_COLOR-proof), each value shown by a metavar in words (`--tail N`, `[ID]...`), never a Python type.
Typer vendors click (typer._click, private), so the formatter is typed by what is used of it and the
context as `typer.Context` (hence the `ignore[override]`s).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

import typer
from typer.core import TyperCommand, TyperGroup

from launchkit.cli.params import PlainOption
from launchkit.core.run_options import ALIAS_FLAGS, Kind


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
        record = help_record(shown_param(param), ctx)
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


def metavar(param: Any) -> str:
    """The word help shows for a parameter's value: its metavar, else its name in capitals."""
    name = param.metavar or (param.name or "value").upper()
    if param.param_type_name == "argument":  # `[ID]` or `ID...` as declared: usage_piece adds those
        name = name.removesuffix("...")
        name = name[1:-1] if name[:1] == "[" and name[-1:] == "]" else name
    return name


def usage_piece(param: Any) -> str:
    """An argument as the usage line shows it: `ID`, `[ID]`, `ID...` or `[ID]...`."""
    name = metavar(param)
    if not param.required:
        name = f"[{name}]"
    return name + ("..." if param.nargs != 1 else "")


def help_record(param: Any, ctx: typer.Context) -> tuple[str, str] | None:
    """(what to type, what it does) for the help's list: `-t, --tail N` or `[ID]`, never a Python type."""
    if getattr(param, "hidden", False):
        return None
    if param.param_type_name == "argument":
        return usage_piece(param), param.help or ""
    flags = ", ".join(sorted(param.opts, key=lambda o: o.startswith("--")))  # -n, --name
    if param.secondary_opts:
        flags += " / " + ", ".join(param.secondary_opts)
    if param.count:
        return flags, param.help or ""
    if not param.is_flag:
        flags += " " + metavar(param)
    help_text = param.help or ""
    if param.show_default and param.default not in (None, False, (), []) and not callable(param.default):
        shown = param.show_default if isinstance(param.show_default, str) else param.default
        help_text += f"  [default: {shown}]"
    return flags, help_text


def _show_help(ctx: typer.Context, param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        typer.echo(ctx.get_help(), color=ctx.color)
        raise typer.Exit()


def help_option(command: Any, ctx: typer.Context) -> PlainOption | None:
    """`-h/--help` as a PlainOption (Typer's own coerces its absent value through pydantic): click's
    `get_help_option`, made once per command."""
    names = command.get_help_option_names(ctx)
    if not names or not command.add_help_option:
        return None
    if command.plain_help is None:
        command.plain_help = PlainOption(
            *names,
            kind=Kind.FLAG,
            is_eager=True,
            expose_value=False,
            callback=_show_help,
            help="Show this message and exit.",
        )
    return command.plain_help  # type: ignore[no-any-return]


def _write_options(command: TyperCommand | TyperGroup, ctx: typer.Context, formatter: HelpFormatter) -> None:
    for panel, rows in _panels(command, ctx):
        with formatter.section(panel):
            formatter.write_dl(rows)


class PanelCommand(TyperCommand):
    """A command with plain-text help, its options grouped in panels."""

    plain_help: PlainOption | None = None

    def get_help_option(self, ctx: typer.Context) -> PlainOption | None:  # type: ignore[override]
        return help_option(self, ctx)

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [self.options_metavar or ""] + [
            usage_piece(param)
            for param in self.get_params(ctx)
            if param.param_type_name == "argument" and not getattr(param, "hidden", False)
        ]

    def format_options(self, ctx: typer.Context, formatter: HelpFormatter) -> None:  # type: ignore[override]
        _write_options(self, ctx, formatter)


class PanelGroup(TyperGroup):
    """A group (`secret`; the root is `cli.app.LazyGroup`) with the same plain-text panel help."""

    plain_help: PlainOption | None = None

    def get_help_option(self, ctx: typer.Context) -> PlainOption | None:  # type: ignore[override]
        return help_option(self, ctx)

    def format_options(self, ctx: typer.Context, formatter: HelpFormatter) -> None:  # type: ignore[override]
        _write_options(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def format_commands(self, ctx: typer.Context, formatter: HelpFormatter) -> None:  # type: ignore[override]
        rows = [
            (name, summary(cmd))
            for name in self.list_commands(ctx)
            if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def summary(command: Any) -> str:
    """A command's line in its group's list: its short help, else its help's first sentence, whole."""
    text = command.short_help or " ".join((command.help or "").split("\n\n")[0].split())
    end = text.find(". ")
    return text[: end + 1] if end >= 0 else text
