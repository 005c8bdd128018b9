"""`launchkit mason`'s body (cli/mason_cmd.py declares it): open-instruct's `mason.py` command line.

`python mason.py ARGS` becomes `launchkit mason ARGS` (docs/from-mason.md). The translation is
launchkit.core.mason (pure); here are the parts that need the launching machine, in mason's order: the
Beaker user, the local dataset-cache run, then launchkit's usual spec -> prepare -> submit
(launchkit/launch.py). Without Beaker credentials it prints the commands, as mason does for external users.
"""

from __future__ import annotations

import getpass
import os
import random
import secrets
import shlex
import string
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from launchkit.backends import Capability, accounts, registry
from launchkit.cli.backend_choice import choose
from launchkit.cli.context import get_app
from launchkit.cli.launching import launch_request
from launchkit.core import mason as m
from launchkit.core.parse import UTF8_HINT
from launchkit.core.request import LaunchRequest
from launchkit.errors import PreconditionError, UsageError
from launchkit.launch import offline_reason, plan, read_state

if TYPE_CHECKING:
    from launchkit.application import Application
    from launchkit.core.mason_args import MasonArgs

CACHE_FOUND = "✅ Found cached dataset at"  # open-instruct's line after a cache run


def mason(
    ctx: typer.Context,
    args: list[str] | None,
) -> None:
    """`launchkit mason` (cli/mason_cmd.py declares its options)."""
    app = get_app(ctx)
    argv = list(args or [])
    _refuse_non_utf8(argv, app.user_command or [])
    margs = m.parse_args(argv, run_name=os.environ.get("RUN_NAME"))
    commands = m.split_commands(app.user_command)
    name = registry.with_capability(Capability.accounts).name  # mason.py launches on Beaker
    has_credentials = offline_reason(_probe(), name) is None
    external = not has_credentials and not margs.dry_run  # mason's external user: print, launch nothing
    why_offline = "--offline" if margs.offline else (None if has_credentials else "no Beaker credentials")
    backend = None
    whoami: str | None = None
    if why_offline and not external:
        whoami = _assumed_user()
        app.info(
            f"offline: assuming Beaker user {whoami!r} (your login name) for the automatic "
            "--output_dir/--checkpoint_state_dir; at submit it is the Beaker account's"
        )
    elif not external:
        backend = choose(app, name, False)
        whoami = accounts(backend).user_name()
    launch = m.Launch(whoami=whoami, wandb_id=_wandb_id(), now=_now(), rand=_rand(), environ=dict(os.environ))
    if warning := m.interconnect_warning(margs):
        app.warn(warning)
    for note in m.secret_reference_notes(margs):
        app.warn(note)
    request = m.to_request(margs, commands, launch)
    unpushed = Capability.unpushed in registry.info(name).capabilities
    git = None if external else read_state(app, request, unpushed=unpushed)  # before the (long) cache run
    if margs.dry_run:
        if m.cache_commands(commands, margs):
            app.info("dry run: the local dataset cache (--cache_dataset_only) is not run")
    else:
        run_cache(app, margs, commands, launch.user)
    if external:
        app.info(
            "no Beaker credentials (BEAKER_TOKEN or ~/.beaker/config.yml): these commands would run in the "
            "job (one task each); nothing launched. Log in to Beaker to launch, or --dry-run for the spec"
        )
        for command in request.commands or [request.command]:
            sys.stdout.write(command[0] + "\n")
        return
    if not margs.pure_docker_mode and git is not None:
        app.info(
            f"mason would `cd {os.getcwd()}` (a shared filesystem) first; launchkit runs the command in a "
            f"clone of commit {git.commit[:12]} instead, with the repository's own environment"
        )
    launch_request(app, request, plan(app, request, backend=(name, backend, why_offline), git=git))


def _refuse_non_utf8(argv: list[str], command: list[str]) -> None:
    """argv bytes that are not UTF-8 refused up front, as `run` does (values unshown: may be secrets)."""
    for where, args in (("of `launchkit mason`", argv), ("of the command", command)):
        for i, arg in enumerate(args):
            try:
                arg.encode("utf-8")
            except UnicodeEncodeError:
                of = f" (the value of {args[i - 1]})" if i and args[i - 1].startswith("-") else ""
                raise UsageError(f"argument {i + 1} {where}{of} is not valid UTF-8", hint=UTF8_HINT) from None


def _probe() -> Any:
    """A stand-in request for `offline_reason`: a Beaker dry run, so only the credentials decide."""
    return LaunchRequest(command=["true"], dry_run=True)


def _assumed_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "user"


def _wandb_id() -> str:
    """mason's `generate_id()`: 8 characters of [a-z0-9], one per invocation."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


def _now() -> float:
    return time.time()


def _rand() -> int:
    return random.randint(0, 1_000_000)  # mason's checkpoint-dir suffix


def run_cache(app: Application, margs: MasonArgs, commands: list[list[str]], user: str) -> None:
    """mason's local dataset cache: `python SCRIPT ARGS --cache_dataset_only` in this directory, before
    launching, output streamed (to stderr: stdout is for the run id); a failure stops the launch."""

    for argv in m.cache_commands(commands, margs):
        if not Path(argv[0]).is_file():
            app.info(
                f"dataset cache skipped: {argv[0]} is not in {os.getcwd()} (run from an open-instruct "
                "checkout to cache locally; --no_auto_dataset_cache skips it)"
            )
            continue
        if sys.platform == "darwin":
            app.warn("on macOS, consider --no_auto_dataset_cache (vllm is not available for local caching)")
        gs = m.gs_tokenizer(argv, margs, user)
        if gs is not None:
            argv = gs.argv
            if not Path(gs.folder).exists():
                Path(gs.folder).mkdir(parents=True, exist_ok=True)
                _stream(app, f"{m.GSUTIL_CP} {shlex.join(gs.files)} {shlex.quote(gs.folder)}", "gsutil copy")
        line = "python " + shlex.join(argv)
        app.info(f"dataset cache: {line}")
        for out in _stream(app, line, "the dataset cache command"):
            if CACHE_FOUND in out:
                app.debug(f"cached dataset at {out.split(CACHE_FOUND, 1)[1].strip()}")


def _stream(app: Application, line: str, what: str) -> list[str]:
    """Run a shell line as mason does (`shell=True`), its output copied to stderr as it comes."""

    lines: list[str] = []
    err = app.stderr or sys.stderr
    pipe, devnull, merged = subprocess.PIPE, subprocess.DEVNULL, subprocess.STDOUT
    with subprocess.Popen(line, shell=True, text=True, stdout=pipe, stderr=merged, stdin=devnull) as proc:
        assert proc.stdout is not None
        for out in proc.stdout:
            err.write(out)
            err.flush()
            lines.append(out)
    if proc.returncode != 0:
        raise PreconditionError(
            f"{what} exited with {proc.returncode}: {line[:200]}",
            hint="fix it (its output is above), or pass --no_auto_dataset_cache",
        )
    return lines
