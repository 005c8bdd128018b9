"""`launchkit completion`'s body (cli/completion_cmd.py declares it): print the shell's completion
script (gantry's command).

`eval "$(launchkit completion bash)"` in ~/.bashrc, or `launchkit --install-completion` (Typer's).
"""

from __future__ import annotations

import sys

import typer

from launchkit.cli.params import get_completion_script
from launchkit.errors import UsageError

COMPLETE_VAR = "_LAUNCHKIT_COMPLETE"  # Typer/click's variable for prog_name "launchkit"


def completion(ctx: typer.Context, shell: str) -> None:
    """`launchkit completion` (cli/completion_cmd.py declares its options)."""
    if shell not in ("bash", "zsh", "fish"):
        raise UsageError(f"unknown shell {shell!r}", hint="use bash, zsh or fish")
    sys.stdout.write(
        get_completion_script(prog_name="launchkit", complete_var=COMPLETE_VAR, shell=shell) + "\n"
    )
