"""The bodies of `launchkit secret set NAME` / `launchkit secret list` and gantry's `launchkit config
set-gh-token` (cli/secret_cmd.py declares them): Beaker workspace secrets, by name only."""

from __future__ import annotations

import getpass
import os
import sys
from typing import TYPE_CHECKING

import typer

from launchkit.backends import Capability, secret_store
from launchkit.cli.backend_choice import backend_with
from launchkit.cli.context import get_app
from launchkit.core.parse import SECRET
from launchkit.core.redact import secret_value_kind
from launchkit.errors import UsageError
from launchkit.userfile import SECRET_FILE_LIMIT, read_user_file, size_text

if TYPE_CHECKING:
    from launchkit.backends import SecretStore


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
    name: str,
    workspace: str | None,
    from_file: str | None,
) -> None:
    """`launchkit secret set` (cli/secret_cmd.py declares its options)."""
    # extra words (a value?) are collected, not echoed by the parser; so are words after `--`
    _check_name(name, [*ctx.args, *(get_app(ctx).user_command or [])])
    value = _read_value(name, from_file)
    app = get_app(ctx)
    ws = _store(ctx).set_secret(name, value, workspace)
    app.info(f"secret {name} set in workspace {ws}")


def list_secrets(
    ctx: typer.Context,
    workspace: str | None,
    as_json: bool,
) -> None:
    """`launchkit secret list` (cli/secret_cmd.py declares its options)."""
    app = get_app(ctx)
    names = _store(ctx).secret_names(workspace)
    if as_json:
        app.print_json(names)
        return
    for n in names:
        sys.stdout.write(n + "\n")


def set_gh_token(
    ctx: typer.Context,
    token: str | None,
    workspace: str | None,
    secret: str | None,
    yes: bool,
) -> None:
    """`launchkit config set-gh-token` (cli/secret_cmd.py declares its options)."""
    if token is not None or ctx.args or get_app(ctx).user_command:
        raise UsageError(
            "a token on the command line ends up in your shell history",
            hint="pipe it in: `gh auth token | launchkit config set-gh-token`",
        )
    name = secret or get_app(ctx).config.get("git_token_secret") or "GITHUB_TOKEN"
    set_secret(ctx, name, workspace, from_file=None)
