"""Typer's parameters, processed without pydantic when the value is plain.

Stock Typer coerces every processed parameter, given or not, through a pydantic TypeAdapter: the first
one imports typer._adapters (and pydantic) and each builds a schema (~40 ms of wall time for `run`'s
~100 options on the bench machine, bench/bench_startup.py). What argv gives is already plain: None,
a bool from a flag, a string, a tuple of strings, an int from a count. `plain(param, value)` returns
exactly what Typer's coercion returns for those and `SLOW` for anything else (a parser, a path, a
choice, an int written `1_000`, a missing required value...), which goes to Typer's own
`process_value`: the same values, messages and exit codes. `fast(params)` makes Typer's own
`TyperOption`/`TyperArgument` objects process that way (click's `process_value` hook).
"""

from __future__ import annotations

from typing import Any, get_origin

import typer
from typer.core import TyperArgument, TyperCommand, TyperOption

SLOW: Any = object()  # not a plain value: Typer's coercion decides


def _decimal(value: str, *, point: bool) -> bool:
    """`-?[0-9]+`, or with `point` also `-?[0-9]+.[0-9]+` (ASCII digits only: int() takes others; a `+`
    is left to Typer: pydantic 2.7 refuses "+5", later ones take it)."""
    digits = value[1:] if value[:1] == "-" else value
    parts = digits.split(".", 1) if point else [digits]
    return all(p.isascii() and p.isdigit() for p in parts)


def plain(param: TyperOption | TyperArgument, value: Any) -> Any:
    """What Typer's coercion makes of `value`, or SLOW when it takes more than a plain conversion."""
    desc = getattr(param, "type_descriptor", None)  # Typer's; without it (another Typer), Typer decides
    info = getattr(desc, "parameter_info", None)
    if desc is None or info is None:
        return SLOW
    if info.parser is not None or desc.is_file or desc.is_path or desc.is_choice or desc.is_tuple:
        return SLOW
    multi = param.multiple or param.nargs == -1
    if value is None:
        return SLOW if param.required else (() if multi else None)
    annotation = desc.annotation
    if multi:
        if not isinstance(value, (list, tuple)) or get_origin(annotation) is not list:
            return SLOW
        if not value or (annotation == list[str] and all(type(v) is str for v in value)):
            return list(value)
        return SLOW
    if annotation is bool or annotation is str:
        return value if type(value) is annotation else SLOW
    if annotation is int or annotation is float:
        if info.min is not None or info.max is not None or getattr(param, "min", None) not in (None, 0):
            return SLOW
        if type(value) is annotation or (annotation is float and type(value) is int):
            return annotation(value)
        if isinstance(value, str) and _decimal(value, point=annotation is float):
            return annotation(value)
    return SLOW


def _process(param: Any, ctx: typer.Context, value: Any, slow: Any) -> Any:
    result = plain(param, value)
    if result is SLOW or (param.required and param.value_is_missing(result)):
        return slow(ctx, value)
    if param.callback is not None:
        result = param.callback(ctx, param, result)
    return result


class PlainOption(TyperOption):
    """A TyperOption whose plain values skip pydantic (see the module's docstring)."""

    def process_value(self, ctx: typer.Context, value: Any) -> Any:  # type: ignore[override]
        return _process(self, ctx, value, super().process_value)


class PlainArgument(TyperArgument):
    """A TyperArgument whose plain values skip pydantic (see the module's docstring)."""

    def process_value(self, ctx: typer.Context, value: Any) -> Any:  # type: ignore[override]
        return _process(self, ctx, value, super().process_value)


def fast(params: list[Any]) -> list[Any]:
    """`params` with Typer's own parameters (exactly TyperOption/TyperArgument, as Typer builds them)
    made plain-fast in place: the same objects, help, completion and errors; only `process_value`
    differs."""
    for param in params:
        if type(param) is TyperOption:
            param.__class__ = PlainOption
        elif type(param) is TyperArgument:
            param.__class__ = PlainArgument
    return params


class PlainCommand(TyperCommand):
    """Typer's own command (its help, its parsing), with plain values processed without pydantic."""

    def get_params(self, ctx: typer.Context) -> list[Any]:  # type: ignore[override]
        return fast(super().get_params(ctx))
