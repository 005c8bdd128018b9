"""`launchkit mason [MASON OPTIONS] -- COMMAND [-- COMMAND ...]`: open-instruct's `mason.py` command line.

`python mason.py ARGS` becomes `launchkit mason ARGS` (docs/from-mason.md); cli/mason_body.py launches it.

The declaration (cli/declared.py); the body is cli/mason_body.py."""

from __future__ import annotations

import typer


def mason(
    ctx: typer.Context,
    args: list[str] | None = typer.Argument(None, metavar="[MASON OPTIONS]", show_default=False),
) -> None:
    """Launch with open-instruct's mason.py command line, as it is.

    `launchkit mason --cluster ai2/jupiter --gpus 8 -- python ...`, as `python mason.py ...`.
    Takes mason.py's options as they are (`--help` lists them); each `--`-separated command becomes
    one task. launchkit's own: --dry-run, --offline, --save-spec FILE, --follow.
    """
