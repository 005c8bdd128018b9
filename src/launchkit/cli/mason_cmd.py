"""`launchkit mason [MASON OPTIONS] -- COMMAND [-- COMMAND ...]`: open-instruct's `mason.py` command line.

`python mason.py ARGS` becomes `launchkit mason ARGS` (docs/from-mason.md). The declaration
(cli/declared.py): mason's argv passes through to the body, cli/mason_body.py; `-h`/`--help` prints
mason.py's own help (its parser, core/mason_args.py), as `python mason.py --help` does.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from launchkit.cli.declared import BodyCommand
from launchkit.cli.params import PlainArgument, PlainOption
from launchkit.core.mason_args import parser
from launchkit.core.run_options import Kind

MASON_HELP = """Launch with open-instruct's mason.py command line, as it is.

`launchkit mason --cluster ai2/jupiter --gpus 8 -- python ...`, as `python mason.py ...`.
Takes mason.py's options as they are (`--help` lists them); each `--`-separated command becomes
one task. launchkit's own: --dry-run, --offline, --save-spec FILE, --follow.
"""


def _mason_help(ctx: typer.Context, param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        sys.stdout.write(parser().format_help())
        raise typer.Exit()


def mason_command() -> BodyCommand:
    return BodyCommand(
        "mason",
        handler="launchkit.cli.mason_body:mason",
        params=[
            PlainArgument("args", nargs=-1, metavar="[MASON OPTIONS]"),
            PlainOption(
                "-h",
                "--help",
                kind=Kind.FLAG,
                is_eager=True,
                expose_value=False,
                hidden=True,
                callback=_mason_help,
                help="mason.py's options.",
            ),
        ],
        help=MASON_HELP,
        options_metavar="[MASON OPTIONS] -- COMMAND [-- COMMAND...]",
        rich_markup_mode=None,
        # mason's argv passes through (unknown options too); its help is mason.py's, not click's
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    )
