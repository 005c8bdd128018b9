"""`launchkit completion bash|zsh|fish`: print the shell's completion script (gantry's command).

`eval "$(launchkit completion bash)"` in ~/.bashrc, or `launchkit --install-completion` (Typer's).
"""

from __future__ import annotations

import os

import typer

from launchkit.cli.completing import choices

COMPLETE_VAR = "_LAUNCHKIT_COMPLETE"  # Typer/click's variable for prog_name "launchkit"


def completion(
    shell: str = typer.Argument(..., metavar="bash|zsh|fish", autocompletion=choices("bash", "zsh", "fish")),
) -> None:
    """Print the completion script for SHELL, e.g. eval "$(launchkit completion bash)"."""
    from launchkit.errors import UsageError

    if shell not in ("bash", "zsh", "fish"):
        raise UsageError(f"unknown shell {shell!r}", hint="use bash, zsh or fish")
    from launchkit.cli.app import build_app

    # As gantry does: re-enter the CLI in click's "source" mode, which prints the script and exits.
    os.environ[COMPLETE_VAR] = f"source_{shell}"  # Typer keeps the pre-click-8 order
    try:
        build_app()(args=[], prog_name="launchkit", standalone_mode=False)
    finally:
        os.environ.pop(COMPLETE_VAR, None)
