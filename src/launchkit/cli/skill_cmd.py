"""`launchkit skill [--install DIR]`: a skill file for coding agents, made from this launchkit's own
help, option table, exit codes and JSON forms, so it says what this version does (it cannot drift).

The declaration (cli/declared.py); the body is cli/skill_body.py."""

from __future__ import annotations

import typer


def skill(
    ctx: typer.Context,
    install: str | None = typer.Option(
        None,
        "--install",
        metavar="DIR",
        help="Write it as DIR/launchkit/SKILL.md (e.g. ~/.claude/skills or .claude/skills), not to stdout.",
    ),
) -> None:
    """Print a skill file for coding agents (Markdown), made from this launchkit's own help.

    What launchkit is, the commands an agent needs, the plan to state before every launch, the exit
    codes and the JSON forms, as this version has them.
    """
