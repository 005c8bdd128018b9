"""The root Typer app: global options, command registration, and the single error boundary.

Rule: nothing imported at module level here or in any `launchkit.cli.*` module may load beaker-py,
grpc, GitPython, pydantic or yaml. Commands import what they need inside their bodies
(tests/test_startup.py guards this).
"""

from __future__ import annotations

import os
import sys

import typer
from typer.exceptions import TyperException

from launchkit import __version__
from launchkit.cli import (
    find_gpus_cmd,
    follow_cmd,
    list_cmd,
    logs_cmd,
    open_cmd,
    run_cmd,
    secret_cmd,
    stop_cmd,
)
from launchkit.cli import state

app = typer.Typer(
    name="launchkit",
    help="Launch ML jobs from your git repository onto Beaker GPU clusters, or run them right here.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"launchkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, help="More output (repeatable)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only errors and the data you asked for."),
    beaker_timeout: float = typer.Option(None, "--beaker-timeout", metavar="SECONDS",
                                         help="Give up when Beaker does not answer for this long (default 60)."),
) -> None:
    state.verbosity = -1 if quiet else verbose
    state.beaker_timeout = beaker_timeout


for module in (run_cmd, follow_cmd, logs_cmd, stop_cmd, list_cmd, find_gpus_cmd, open_cmd, secret_cmd):
    module.register(app)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Everything after the first `--` is the user's command, verbatim."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" in args:
        cut = args.index("--")
        args, state.user_command = args[:cut], args[cut + 1:]
    else:
        state.user_command = None
    code = 0
    try:
        app(args=args, prog_name="launchkit", standalone_mode=False)
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        state.console().error("aborted")
        code = 130
    except TyperException as e:  # usage errors from option parsing
        if type(e).__name__ == "NoArgsIsHelpError":
            sys.stdout.write(e.format_message() + "\n")
        else:
            state.console().error(_usage_message(e))
            code = e.exit_code
    except KeyboardInterrupt:
        code = 130
    except Exception as e:  # noqa: BLE001 - the one error boundary
        from launchkit.errors import LaunchkitError

        if not isinstance(e, LaunchkitError) or state.verbosity > 0 or os.environ.get("LAUNCHKIT_DEBUG"):
            raise
        state.console().error(e.one_line())
        code = e.exit_code
    sys.exit(code)


def _usage_message(e: TyperException) -> str:
    msg = e.format_message()
    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        msg += f" (see `{ctx.command_path} --help`)"
    return msg
