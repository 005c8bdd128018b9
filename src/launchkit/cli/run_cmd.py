"""`launchkit run [OPTIONS] -- COMMAND...`: launch the committed and pushed repo state as a job.

The options come from one table, launchkit.core.run_options.RUN_OPTIONS: `run_command()` builds the
command's signature from it (Typer reads `__signature__`). Options only collect raw values here; all
validation lives in launchkit.core.parse.
"""

from __future__ import annotations

import inspect
from typing import Any

import typer

from launchkit.cli.completing import RUN_COMPLETERS
from launchkit.cli.context import get_app
from launchkit.core.run_options import RUN_OPTIONS, Kind, Opt

_ANNOTATIONS: dict[Kind, Any] = {
    Kind.STR: str | None,
    Kind.LIST: list[str] | None,
    Kind.INT: int | None,
    Kind.FLOAT: float | None,
    Kind.FLAG: bool,
    Kind.TRISTATE: bool | None,
}


def run(ctx: typer.Context, extra: list[str] | None = None, **given: Any) -> None:
    """Launch the committed, pushed state of this repository as a job.

    Everything after `--` is the command, passed to the job exactly as given.
    Defaults come from [tool.launchkit] in pyproject.toml, the user config file and LAUNCHKIT_*
    variables (the command line wins); `[default: ...]` shows where one came from.
    """
    from launchkit.cli.launching import launch

    app = get_app(ctx)
    launch(app, given, extra=extra or [], command=app.user_command)


def _help(opt: Opt, defaults: dict[str, tuple[Any, str]]) -> str:
    """The option's help; with a configured default, that value and where it came from."""
    if opt.key not in defaults:
        return opt.help
    value, label = defaults[opt.key]
    if isinstance(value, dict):
        value = " ".join(f"{k}={v}" for k, v in value.items())
    elif isinstance(value, list):
        value = ", ".join(map(str, value))
    elif isinstance(value, bool):
        value = str(value).lower()
    return opt.help.split("  [default:")[0] + f"  [default: {value} (from {label})]"


def _parameter(opt: Opt, defaults: dict[str, tuple[Any, str]]) -> inspect.Parameter:
    default = False if opt.kind is Kind.FLAG else None
    option = typer.Option(
        default,
        *opt.flags,
        *opt.aliases,
        hidden=opt.hidden,
        autocompletion=RUN_COMPLETERS.get(opt.name),
        help=_help(opt, defaults),
        metavar=opt.metavar,
        rich_help_panel=opt.panel,
        show_default=False,
    )
    return inspect.Parameter(
        opt.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=_ANNOTATIONS[opt.kind]
    )


def run_command(handler: Any = None, own: tuple[inspect.Parameter, ...] = ()) -> Any:
    """`run` with one parameter per RUN_OPTIONS row; `[default: ...]` in the help shows config defaults.

    `handler` (default: `run`) with `own` extra parameters builds another command on the same options
    (`launchkit session`)."""
    from launchkit.config import help_defaults

    handler = handler or run
    defaults = help_defaults()
    params = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        inspect.Parameter(
            "extra",
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=typer.Argument(None, hidden=True),
            annotation=list[str] | None,
        ),
        *own,
        *(_parameter(opt, defaults) for opt in RUN_OPTIONS),
    ]

    def command(ctx: typer.Context, extra: list[str] | None = None, **given: Any) -> None:
        handler(ctx, extra, **given)

    command.__doc__ = handler.__doc__
    command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    return command
