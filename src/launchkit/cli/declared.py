"""A command in two modules: its declaration and its body.

`cli/<name>_cmd.py` declares a command (its options, help and completers) with light imports: that
is all `launchkit CMD --help` and TAB completion load. Its body, the handler "module:function" (taking
the context, then the options by name), lives in `cli/<name>_body.py` and is imported when the
command runs (`BodyCommand.invoke`). A Typer function declares the options of most commands
(`declared`: its parameters, its docstring, no body); `run` and `session` declare theirs from the
option table (cli/run_cmd.py). tests/test_help_imports.py lists what each `--help` imports.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import typer
import typer.main

from launchkit.cli.panels import PanelCommand
from launchkit.cli.params import PlainArgument, PlainOption


class BodyCommand(PanelCommand):
    """A declared command: `handler` ("module:function") is imported when it runs; `dry_run_handler`,
    when given, instead of it for --dry-run (a dry run prints: it loads nothing only a launch needs)."""

    def __init__(
        self, *args: Any, handler: str = "", dry_run_handler: str | None = None, **attrs: Any
    ) -> None:
        super().__init__(*args, **attrs)
        self.handler = handler
        self.dry_run_handler = dry_run_handler

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        handler = self.dry_run_handler if self.dry_run_handler and ctx.params.get("dry_run") else self.handler
        module, _, function = handler.partition(":")
        return ctx.invoke(getattr(importlib.import_module(module), function), ctx, **given(self, ctx))


def given(command: Any, ctx: typer.Context) -> dict[str, Any]:
    """The options' values as a Typer function gets them: a repeatable option or a list argument of a
    Typer declaration that was not given is None when its default is None, else a list (click
    collects a tuple); launchkit's own parameters (PlainOption, PlainArgument) convert themselves."""
    values = dict(ctx.params)
    for param in command.params:
        if isinstance(param, (PlainOption, PlainArgument)) or param.name not in values:
            continue
        value = values[param.name]
        if value is not None and (getattr(param, "multiple", False) or param.nargs == -1):
            values[param.name] = None if param.default is None and not value else list(value)
    return values


def declared(declaration: Callable[..., None], handler: str, **settings: Any) -> BodyCommand:
    """The command a Typer function declares (its parameters the options, its docstring the help),
    run by `handler`; `settings` as Typer's `command()` takes them (name, context_settings, ...)."""
    holder = typer.Typer(rich_markup_mode=None, add_completion=False)
    holder.command(cls=BodyCommand, **settings)(declaration)
    command = typer.main.get_command(holder)
    assert isinstance(command, BodyCommand)
    command.handler = handler
    return command
