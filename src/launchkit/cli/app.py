"""The root Typer app: global options, command registration, and the single error boundary.

Rule: nothing imported at module level here or in any `launchkit.cli.*` module may load beaker-py,
grpc, GitPython, pydantic or yaml. Commands import what they need inside their bodies
(tests/test_startup.py guards this).

Commands are module-level functions in `launchkit.cli.<name>_cmd`; `build_app()` registers them.
Each gets the invocation's `Application` with `get_app(ctx)` (launchkit.cli.context).
"""

from __future__ import annotations

import os
import sys

import typer
from typer.exceptions import TyperException

from launchkit import __version__
from launchkit.application import Application
from launchkit.cli import (
    completion_cmd,
    find_gpus_cmd,
    follow_cmd,
    list_cmd,
    logs_cmd,
    open_cmd,
    profiles_cmd,
    run_cmd,
    secret_cmd,
    stop_cmd,
)
from launchkit.cli.context import get_app
from launchkit.cli.panels import PanelCommand, PanelGroup


def _version(value: bool) -> None:
    if value:
        print(f"launchkit {__version__}")
        raise typer.Exit()


def root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, show_default=False, help="More output (repeatable)."
    ),
    quiet: bool = typer.Option(
        False, "--quiet/--not-quiet", "-q", help="Only errors and the data you asked for."
    ),
    log_level: str | None = typer.Option(
        None, "--log-level", hidden=True, help="gantry's spelling: debug = -v, error = -q."
    ),
    check_for_upgrades: bool | None = typer.Option(
        None,
        "--check-for-upgrades/--no-check-for-upgrades",
        hidden=True,
        help="gantry's; see docs/from-gantry.md.",
    ),
    beaker_timeout: float = typer.Option(
        None,
        "--beaker-timeout",
        metavar="SECONDS",
        help="Give up when Beaker does not answer for this long (default 60).",
    ),
) -> None:
    app = get_app(ctx)
    app.verbosity = -1 if quiet else verbose
    app.beaker_timeout = beaker_timeout
    if log_level is not None:  # gantry 3.7.0's global option
        levels = {"debug": 1, "info": 0, "warning": 0, "error": -1}
        if log_level.lower() not in levels:
            from launchkit.errors import UsageError

            raise UsageError(
                f"--log-level {log_level!r}: unknown level", hint="use debug, info, warning or error"
            )
        app.verbosity = min(app.verbosity, -1) if quiet else max(verbose, levels[log_level.lower()])
    if check_for_upgrades:
        from launchkit.errors import UsageError

        raise UsageError(
            "--check-for-upgrades is not supported: launchkit never checks PyPI by itself",
            hint="upgrade with your package manager (uv tool upgrade launchkit)",
        )


def build_app() -> typer.Typer:
    """The `launchkit` command tree."""
    cli = typer.Typer(
        name="launchkit",
        cls=PanelGroup,
        help="Launch ML jobs from your git repository onto Beaker GPU clusters, or run them right here.",
        no_args_is_help=True,
        add_completion=True,  # Typer's --install-completion / --show-completion
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    cli.callback()(root)
    cli.command(
        "run",
        cls=PanelCommand,
        options_metavar="[OPTIONS] -- COMMAND...",
        short_help="Launch the committed, pushed state of this repository as a job.",
    )(run_cmd.run_command())
    for name, command in (
        ("follow", follow_cmd.follow),
        ("logs", logs_cmd.logs),
        ("stop", stop_cmd.stop),
        ("list", list_cmd.list_runs),
        ("find-gpus", find_gpus_cmd.find_gpus),
        ("open", open_cmd.open_page),
        ("profiles", profiles_cmd.profiles),
    ):
        cli.command(name, cls=PanelCommand)(command)
    cli.add_typer(secret_cmd.secret_group(), name="secret", cls=PanelGroup)
    cli.command("completion", cls=PanelCommand)(completion_cmd.completion)
    cli.add_typer(secret_cmd.config_group(), name="config", cls=PanelGroup, hidden=True)  # gantry's
    return cli


app = build_app()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Everything after the first `--` is the user's command, verbatim."""
    args = list(sys.argv[1:] if argv is None else argv)
    application = Application()
    if "--" in args:
        cut = args.index("--")
        args, application.user_command = args[:cut], args[cut + 1 :]
    code = 0
    try:
        returned = app(args=args, prog_name="launchkit", standalone_mode=False, obj=application)
        if isinstance(returned, int):  # typer.Exit(code) comes back as a value without standalone mode
            code = returned
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        application.error("aborted")
        code = 130
    except TyperException as e:  # usage errors from option parsing
        if type(e).__name__ == "NoArgsIsHelpError":
            sys.stdout.write(e.format_message() + "\n")
        else:
            application.error(_usage_message(e, args))
            code = e.exit_code
    except KeyboardInterrupt:
        code = 130
    except Exception as e:
        from launchkit.errors import LaunchkitError

        if not isinstance(e, LaunchkitError) or application.verbose or os.environ.get("LAUNCHKIT_DEBUG"):
            raise
        application.error(e.one_line())
        code = e.exit_code
    if application.fast_exit and argv is None:
        # Nothing left to clean up (a dry run): skip the interpreter's teardown (~10-15 ms).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _usage_message(e: TyperException, args: list[str]) -> str:
    """Typer/click's parse error as one line that names the bad value when there is one."""
    msg = e.format_message()
    param = getattr(e, "param", None)
    for opt in getattr(param, "opts", None) or []:
        value = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == opt), None)
        value = value or next((a.split("=", 1)[1] for a in args if a.startswith(opt + "=")), None)
        if value is not None:
            msg = f"{opt} {value!r}: {getattr(e, 'message', msg)}"
            break
    ctx = getattr(e, "ctx", None)
    if ctx is not None:
        msg += f" (see `{ctx.command_path} --help`)"
    return msg.replace("\n", " ")
