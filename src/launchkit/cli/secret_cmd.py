"""`launchkit secret set NAME` / `launchkit secret list`: Beaker workspace secrets, by name only."""

from __future__ import annotations

import getpass
import os
import sys
from typing import TYPE_CHECKING

import typer

from launchkit.backends import Capability, secret_store
from launchkit.cli.backend_choice import backend_with
from launchkit.cli.context import get_app
from launchkit.cli.options import yes_option
from launchkit.cli.panels import PanelCommand
from launchkit.core.parse import SECRET
from launchkit.core.redact import secret_value_kind
from launchkit.errors import UsageError
from launchkit.userfile import SECRET_FILE_LIMIT, read_user_file, size_text

if TYPE_CHECKING:
    from launchkit.backends import SecretStore

# Extra arguments and unknown options reach the command (ctx.args), which refuses them without
# quoting them: Click's own usage error would print them, and they may be the secret's value.
_EXTRA_ARGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def _read_value(name: str, from_file: str | None = None) -> str:
    """The value: from `from_file` (`-`: stdin), piped in, or typed at a hidden prompt. One final
    newline is dropped (what `echo TOKEN > file` adds)."""
    if from_file is not None and from_file != "-":
        data = read_user_file(
            os.path.expanduser(from_file),
            f"--from-file {from_file!r}",
            limit=SECRET_FILE_LIMIT,
            hint="give a readable file holding the value",
        )
        value = _decoded(name, data, f"--from-file {from_file}")
    elif sys.stdin is None:
        raise _usage("no stdin to read the secret value from")
    elif sys.stdin.isatty() and from_file is None:
        try:
            value = getpass.getpass(f"value for {name} (hidden): ")
        except EOFError:  # Ctrl-D at the prompt
            value = ""
    else:
        limit = SECRET_FILE_LIMIT
        data = sys.stdin.buffer.read(limit + 1) if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        if len(data) > limit:
            raise _usage(f"the value for secret {name} (stdin) is larger than {size_text(limit)}")
        value = _decoded(name, data, "stdin")
    if not value:
        raise _usage(f"empty value for secret {name}" + (f" (--from-file {from_file})" if from_file else ""))
    return value


def _decoded(name: str, data: bytes, source: str) -> str:
    """`data` as text, less one final newline; never echoes it, only where it is not UTF-8."""
    try:
        value = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(
            f"the value for secret {name} ({source}) is not UTF-8 text (byte {e.start + 1} of {len(data)})",
            hint="Beaker secrets are text: store binary data base64-encoded (`base64 -w0 FILE | "
            f"launchkit secret set {name}`) and decode it in the job",
        ) from None
    if (nul := data.find(b"\0")) >= 0:
        raise UsageError(
            f"the value for secret {name} ({source}) has a NUL byte (byte {nul + 1} of {len(data)})",
            hint="an environment variable cannot carry one: store binary data base64-encoded (`base64 -w0 "
            f"FILE | launchkit secret set {name}`) and decode it in the job",
        )
    if value.endswith("\n"):
        value = value[:-2] if value.endswith("\r\n") else value[:-1]
    return value


def _usage(msg: str) -> Exception:
    return UsageError(
        msg, hint="pipe the value in (`launchkit secret set NAME < file`) or type it at the prompt"
    )


def _check_name(name: str, extra: list[str] | None) -> None:
    """NAME is valid and no value came with it; no message quotes what may be the value."""
    key, sep, _ = name.partition("=")
    if sep or extra:  # `secret set NAME VALUE` or `NAME=VALUE`: never echoed, never stored
        shown = key if SECRET.fullmatch(key) else "NAME"
        raise UsageError(
            f"secret set {shown}: {len(extra or []) or 1} word(s) after the name, not shown (a value on the "
            "command line ends up in your shell history), nothing was stored",
            hint=f"pipe it in (`launchkit secret set {shown} < file`) or type it at the hidden prompt",
        )

    if secret_value_kind(name):  # `secret set hf_...`: the value given as the name
        raise UsageError(
            "secret set: the name looks like a secret value itself (not shown), nothing was stored",
            hint="give the name, the value on stdin: `launchkit secret set HF_TOKEN < file`",
        )
    bad = next((i for i, c in enumerate(name) if not SECRET.fullmatch(c)), None)
    if not name or bad is not None:  # the same rule as `run --env-secret NAME=SECRET`
        where = f"character {bad + 1} of {len(name)}" if bad is not None else "it is empty"
        raise UsageError(f"invalid secret name ({where})", hint="use letters, digits, _ . - only")


def _store(ctx: typer.Context) -> SecretStore:
    """The backend that keeps workspace secrets (Capability.secrets), through its typed interface."""
    return secret_store(backend_with(get_app(ctx), Capability.secrets))


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
    # extra words (a value?) are collected, not echoed by the parser; so are words after `--`
    _check_name(name, [*ctx.args, *(get_app(ctx).user_command or [])])
    value = _read_value(name, from_file)
    app = get_app(ctx)
    ws = _store(ctx).set_secret(name, value, workspace)
    app.info(f"secret {name} set in workspace {ws}")


def list_secrets(
    ctx: typer.Context,
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Beaker workspace (org/name)."),
    as_json: bool = typer.Option(False, "--json", help="JSON output (a list of names)."),
) -> None:
    """List the names of the workspace's secrets."""
    app = get_app(ctx)
    names = _store(ctx).secret_names(workspace)
    if as_json:
        app.print_json(names)
        return
    for n in names:
        sys.stdout.write(n + "\n")


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
    if token is not None or ctx.args or get_app(ctx).user_command:
        raise UsageError(
            "a token on the command line ends up in your shell history",
            hint="pipe it in: `gh auth token | launchkit config set-gh-token`",
        )
    name = secret or get_app(ctx).config.get("git_token_secret") or "GITHUB_TOKEN"
    set_secret(ctx, name, workspace, from_file=None)


def config_group() -> typer.Typer:
    """`launchkit config`: gantry's command group (hidden from help; `secret` is launchkit's)."""
    group = typer.Typer(help="gantry's `config` commands.", no_args_is_help=True)
    group.command("set-gh-token", cls=PanelCommand, context_settings=_EXTRA_ARGS)(set_gh_token)
    return group


def secret_group() -> typer.Typer:
    """`launchkit secret ...`, a sub-app with its own commands."""
    group = typer.Typer(help="Beaker workspace secrets (values are never printed).", no_args_is_help=True)
    group.command("set", cls=PanelCommand, context_settings=_EXTRA_ARGS)(set_secret)
    group.command("list", cls=PanelCommand)(list_secrets)
    return group
