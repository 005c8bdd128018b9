"""Typer, made fast and plain for launchkit: panel help without rich, lazy option coercion.

- Help: rendering through rich costs ~80 ms of imports (rich.markdown, pygments, ...) on every
  `--help`. `PanelCommand`/`PanelGroup` use click's own formatter, with one section per
  `rich_help_panel`, so `--help` stays near the Typer floor and is plain text (NO_COLOR-proof).
- Parsing: Typer 0.2x builds a pydantic TypeAdapter per option on every call (~0.5 ms each; `run`
  has ~70 options, nearly all unset). `_LazyRuntimeParam` builds one only when a value needs coercion.
"""

from __future__ import annotations

import typer
from typer.core import TyperCommand, TyperGroup


class _LazyRuntimeParam:
    """Typer's per-option coercion, built on first use and shared by options of the same plain type."""

    def __init__(self, desc: object, cache: dict[str, object], key: str):
        self._desc, self._cache, self._key = desc, cache, key
        self._plain = _plain_type(getattr(desc, "annotation", None))

    def _real(self) -> object:
        if self._key not in self._cache:
            from typer._coercion import build_runtime_param

            self._cache[self._key] = build_runtime_param(self._desc)  # type: ignore[arg-type]
        return self._cache[self._key]

    def coerce(self, value: object, param: typer.core._click.Parameter, ctx: typer.Context) -> object:
        if value is None:
            return () if (param.multiple or param.nargs == -1) else None
        if self._plain is not None and type(value) is self._plain:
            return value  # already the declared type (e.g. a str option given a str): nothing to coerce
        if self._plain in (int, float) and type(value) is str:
            try:
                return self._plain(value)  # "8" -> 8; anything odd gets Typer's own coercion and message
            except ValueError:
                pass
        return self._real().coerce(value, param=param, ctx=ctx)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._real(), name)


def _plain_type(annotation: object) -> type | None:
    """`str`, `int`, `float` or `bool` for those (or Optional of those) annotations, else None."""
    import typing

    if annotation in (str, int, float, bool):
        return annotation  # type: ignore[return-value]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if len(args) == 1 and args[0] in (str, int, float, bool) else None


def _share_runtime_params(params: list[typer.core._click.Parameter]) -> None:
    cache: dict[str, object] = {}
    for param in params:
        desc = getattr(param, "type_descriptor", None)
        if desc is None or getattr(param, "_runtime_param", False) is not None:
            continue  # not a Typer parameter of this Typer version, or already built
        info = desc.parameter_info
        if getattr(desc, "file_annotation", None) is not None or any(
            getattr(info, attr, None) is not None for attr in ("parser", "click_type", "min", "max")
        ):
            continue
        key = repr(
            (
                desc.annotation,
                getattr(info, "case_sensitive", None),
                getattr(info, "formats", None),
                getattr(info, "clamp", None),
            )
        )
        param._runtime_param = _LazyRuntimeParam(desc, cache, key)  # type: ignore[attr-defined]


class PanelCommand(TyperCommand):
    """A command with plain-text help, its options grouped in panels (`rich_help_panel`)."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        _share_runtime_params(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        return [self.options_metavar or ""] + [
            piece
            for param in self.get_params(ctx)
            if not getattr(param, "hidden", False)
            for piece in param.get_usage_pieces(ctx)
        ]

    def format_options(self, ctx: typer.Context, formatter: typer.core._click.HelpFormatter) -> None:
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        for panel, rows in sorted(panels.items(), key=lambda item: item[0] != "Options"):
            with formatter.section(panel):
                formatter.write_dl(rows)


class PanelGroup(TyperGroup):
    """The root group, with the same plain-text panel help."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        _share_runtime_params(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def format_options(self, ctx: typer.Context, formatter: typer.core._click.HelpFormatter) -> None:
        PanelCommand.format_options(self, ctx, formatter)  # type: ignore[arg-type]
        self.format_commands(ctx, formatter)

    def format_commands(self, ctx: typer.Context, formatter: typer.core._click.HelpFormatter) -> None:
        rows = [
            (name, cmd.get_short_help_str(formatter.width - 20))
            for name in self.list_commands(ctx)
            if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
