"""`launchkit completion bash|zsh|fish`: print the shell's completion script (gantry's command).

`eval "$(launchkit completion bash)"` in ~/.bashrc, or `launchkit --install-completion` (Typer's).

The declaration (cli/declared.py); the body is cli/completion_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.completing import choices


def completion(
    shell: str = typer.Argument(..., metavar="bash|zsh|fish", autocompletion=choices("bash", "zsh", "fish")),
) -> None:
    """Print the completion script for SHELL, e.g. eval "$(launchkit completion bash)"."""
