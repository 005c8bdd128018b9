"""`launchkit secret set NAME` / `launchkit secret list`: Beaker workspace secrets, by name only; and
gantry's hidden `launchkit config set-gh-token`.

The declarations (cli/declared.py); the bodies are cli/secret_body.py."""

from __future__ import annotations

import typer

from launchkit.cli.declared import declared
from launchkit.cli.options import yes_option
from launchkit.cli.panels import PanelGroup

BODY = "launchkit.cli.secret_body:"
# Extra arguments and unknown options reach the command (ctx.args), which refuses them without
# quoting them: Click's own usage error would print them, and they may be the secret's value.
_EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def set_secret(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="Secret name, e.g. HF_TOKEN or <user>_HF_TOKEN."),
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Beaker workspace (org/name)."),
    from_file: str | None = typer.Option(
        None,
        "--from-file",
        metavar="FILE",
        help="Read the value from FILE (- for stdin), less one final newline.",
    ),
) -> None:
    """Set secret NAME from a file, stdin or a hidden prompt (never from the command line)."""


def list_secrets(
    ctx: typer.Context,
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Beaker workspace (org/name)."),
    as_json: bool = typer.Option(False, "--json", help="JSON output (a list of names)."),
) -> None:
    """List the names of the workspace's secrets."""


def set_gh_token(
    ctx: typer.Context,
    token: str | None = typer.Argument(None, metavar="[TOKEN]", help="Refused: pipe the token in instead."),
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Beaker workspace (org/name)."),
    secret: str | None = typer.Option(
        None, "--secret", "-s", help="Secret name (default: git_token_secret from config, else GITHUB_TOKEN)."
    ),
    yes: bool = yes_option("Accepted: launchkit does not prompt here."),
) -> None:
    """gantry's `config set-gh-token`: store a GitHub token for cloning private repositories."""


def config_group() -> PanelGroup:
    """`launchkit config`: gantry's command group (hidden from help; `secret` is launchkit's)."""
    return PanelGroup(
        name="config",
        help="gantry's `config` commands.",
        no_args_is_help=True,
        hidden=True,
        rich_markup_mode=None,
        commands=[
            declared(set_gh_token, BODY + "set_gh_token", name="set-gh-token", context_settings=_EXTRA_ARGS)
        ],
    )


def secret_group() -> PanelGroup:
    """`launchkit secret ...`, a group with its own commands."""
    return PanelGroup(
        name="secret",
        help="Beaker workspace secrets (values are never printed).",
        no_args_is_help=True,
        rich_markup_mode=None,
        commands=[
            declared(set_secret, BODY + "set_secret", name="set", context_settings=_EXTRA_ARGS),
            declared(list_secrets, BODY + "list_secrets", name="list"),
        ],
    )
