"""Command-line parameters declared from launchkit's own tables (the root's options, `run`'s rows in
core/run_options.py), converted by their kind: no pydantic, no function signatures.

Typer 0.29 carries click inside itself (`typer._click`, private, without click's `Option` class); its
public `typer.core.TyperOption`/`TyperArgument` are the click parameters it parses with. Their
constructor takes a `TypeDescriptor` (private) and their `process_value` coerces through a pydantic
TypeAdapter; `PlainOption`/`PlainArgument` subclass them and convert the kinds a table declares
themselves (a string, strings, a flag, a count, a whole or decimal number); Typer's shell
completion (its shells, its script) comes from here too. This is the one module that imports
Typer's private modules (tests/test_startup.py guards it); pyproject.toml caps Typer below its
next minor, and `.ci/typer-next` runs the fast tier at that minor when one is out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption, UsageError
from typer._coercion import TypeDescriptor
from typer._completion_classes import completion_init  # Typer's shells for click's completion
from typer._completion_shared import get_completion_script  # what Typer's --show-completion prints
from typer.core import TyperArgument, TyperOption

from launchkit.core.run_options import Kind, number

__all__ = [
    "NoArgsIsHelpError",
    "NoSuchOption",
    "PlainArgument",
    "PlainOption",
    "UsageError",
    "completion_init",
    "get_completion_script",
]

# What Typer's help and completion read of an option's type (never its coercion: ours replaces it)
_ANNOTATIONS: dict[Kind, Any] = {
    Kind.STR: str,
    Kind.LIST: list[str],
    Kind.INT: int,
    Kind.FLOAT: float,
    Kind.FLAG: bool,
    Kind.TRISTATE: bool,
}
METAVARS = {Kind.STR: "TEXT", Kind.LIST: "TEXT", Kind.INT: "N", Kind.FLOAT: "NUMBER"}


def _descriptor(kind: Kind) -> TypeDescriptor:
    return TypeDescriptor(
        annotation=_ANNOTATIONS[kind], parameter_info=typer.Option(None), file_annotation=None
    )


def convert(kind: Kind, value: Any, param: Any, ctx: Any, item: Callable[[str], Any] = str) -> Any:
    """The value click's parser collected, as `kind` says: a flag's bool (a tristate's None when not
    given), a string, a list (each through `item`), a whole or a decimal number; a bad number is a
    usage error naming the option."""
    if kind is Kind.LIST:
        return [_number(item, v, param, ctx) if item is not str else v for v in value or ()]
    if value is None or kind in (Kind.STR, Kind.TRISTATE):
        return value
    if kind is Kind.FLAG:
        return bool(value)
    return _number(int if kind is Kind.INT else float, value, param, ctx)


def _number(kind: Callable[[str], Any], value: Any, param: Any, ctx: Any) -> Any:
    try:
        return number(kind, value if type(value) in (int, float) else str(value))
    except ValueError as e:
        raise typer.BadParameter(str(e), ctx=ctx, param=param) from None


class PlainOption(TyperOption):
    """An option of a given `Kind`: `--x VALUE` (STR, INT, FLOAT), repeatable (LIST), `--x` (FLAG),
    `--x/--no-x` (TRISTATE: None when neither is given), or `count=True` (`-vv`)."""

    def __init__(
        self,
        *decls: str,
        kind: Kind,
        panel: str | None = None,
        metavar: str | None = None,
        item: Callable[[str], Any] = str,
        count: bool = False,
        **attrs: Any,
    ) -> None:
        flag = kind in (Kind.FLAG, Kind.TRISTATE) or count
        attrs.setdefault("default", 0 if count else (False if kind is Kind.FLAG else None))
        super().__init__(
            param_decls=list(decls),
            type_descriptor=_descriptor(kind),
            is_flag=flag and not count,
            count=count,
            multiple=kind is Kind.LIST,
            metavar=None if flag else metavar or METAVARS[kind],
            rich_help_panel=panel,
            **attrs,
        )
        self.kind, self.item = kind, item

    def process_value(self, ctx: typer.Context, value: Any) -> Any:  # type: ignore[override]
        value = value if self.count else convert(self.kind, value, self, ctx, self.item)
        if self.callback is not None:
            value = self.callback(ctx, self, value)
        return value


class PlainArgument(TyperArgument):
    """Positional words, as strings: one (`nargs=1`) or all that are left (`nargs=-1`, a list)."""

    def __init__(self, name: str, *, nargs: int = 1, **attrs: Any) -> None:
        kind = Kind.STR if nargs == 1 else Kind.LIST
        super().__init__(param_decls=[name], type_descriptor=_descriptor(kind), nargs=nargs, **attrs)
        self.kind = kind

    def process_value(self, ctx: typer.Context, value: Any) -> Any:  # type: ignore[override]
        value = convert(self.kind, value, self, ctx)
        if self.required and self.value_is_missing(value):
            raise typer.BadParameter("missing", ctx=ctx, param=self)
        if self.callback is not None:
            value = self.callback(ctx, self, value)
        return value
