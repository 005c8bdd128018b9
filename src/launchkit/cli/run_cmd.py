"""`launchkit run [OPTIONS] -- COMMAND...`: launch the committed and pushed repo state as a job.

The options come from one table, launchkit.core.run_options.RUN_OPTIONS: `run_command()` makes one
click option per row (cli/params.PlainOption). Options only collect raw values here; all validation
lives in launchkit.core.parse. The command's body (cli/launching.py: `run`; with --dry-run,
cli/dry_run.py: `run`) is imported when it runs (cli/declared.py): `run --help` needs only the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launchkit.cli.completing import RUN_COMPLETERS
from launchkit.cli.declared import BodyCommand
from launchkit.cli.params import PlainArgument, PlainOption
from launchkit.config import help_defaults
from launchkit.core.run_options import RUN_OPTIONS, Opt

RUN_HELP = """Launch the committed, pushed state of this repository as a job.

Everything after `--` is the command, passed to the job exactly as given.
Defaults come from [tool.launchkit] in pyproject.toml, the user config file and LAUNCHKIT_*
variables (the command line wins); `[default: ...]` shows where one came from.
"""


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


def _completion(completer: Callable[[str], list[str]] | None) -> Any:
    """A completer of the value typed so far, as click's completion calls it (ctx, args, incomplete)."""
    if completer is None:
        return None
    return lambda ctx, args, incomplete: completer(incomplete)


def _option(opt: Opt, defaults: dict[str, tuple[Any, str]]) -> PlainOption:
    return PlainOption(
        *opt.flags,
        *opt.aliases,
        opt.name,
        kind=opt.kind,
        panel=opt.panel,
        metavar=opt.metavar,
        hidden=opt.hidden,
        help=_help(opt, defaults),
        autocompletion=_completion(RUN_COMPLETERS.get(opt.name)),
    )


def run_command(
    handler: str = "launchkit.cli.launching:run",
    help: str = RUN_HELP,
    own: tuple[PlainOption, ...] = (),
    name: str = "run",
    dry_run_handler: str | None = "launchkit.cli.dry_run:run",
) -> BodyCommand:
    """`run`: one option per RUN_OPTIONS row; `[default: ...]` in the help shows config defaults.

    Another `handler` with `own` extra options is another command on the same options (`session`)."""
    defaults = help_defaults()
    return BodyCommand(
        name,
        handler=handler,
        dry_run_handler=dry_run_handler,
        params=[
            PlainArgument("extra", nargs=-1, hidden=True),  # words before `--`: parse says to add it
            *own,
            *(_option(opt, defaults) for opt in RUN_OPTIONS),
        ],
        help=help,
        options_metavar="[OPTIONS] -- COMMAND..." if name == "run" else "[OPTIONS] [-- COMMAND...]",
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
