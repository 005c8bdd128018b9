"""The root Typer app: global options, command registration, and the single error boundary.

Rule: nothing imported at module level here or in any `launchkit.cli.*` module may load beaker-py,
grpc, GitPython, pydantic or yaml. Commands import what they need inside their bodies
(tests/test_startup.py guards this).

Commands are module-level functions in `launchkit.cli.<name>_cmd`; `build_app()` registers them.
Each gets the invocation's `Application` with `get_app(ctx)` (launchkit.cli.context).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from typing import Any

import typer
from typer._click.exceptions import NoArgsIsHelpError, NoSuchOption  # the click typer vendors
from typer.exceptions import TyperException

from launchkit import __version__
from launchkit.application import Application
from launchkit.cli.backend_choice import stdout_closed
from launchkit.cli.context import get_app
from launchkit.cli.entry import resume_gc
from launchkit.cli.panels import PanelCommand, PanelGroup
from launchkit.cli.params import PlainCommand


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
    resume_gc()  # the command line is parsed: what follows may run for hours
    app = get_app(ctx)
    app.verbosity = -1 if quiet else verbose
    if beaker_timeout is not None:  # checked here for every command, whichever backend it uses
        from launchkit.core.units import UnitError, positive_seconds
        from launchkit.errors import UsageError

        try:
            positive_seconds(beaker_timeout)
        except UnitError as e:
            raise UsageError(f"--beaker-timeout {beaker_timeout!r}: {e.problem}", hint=e.hint) from None
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


# Every command, in registration order (Typer lists the groups last): (name, module, attribute,
# how). The command is `launchkit.cli.<module>.<attribute>`; how: "factory" (call it for the
# command), "group" (a Typer group, added with add_typer); the rest goes to Typer as it is.
REGISTRY: tuple[tuple[str, str, str, dict[str, Any]], ...] = (
    (
        "run",
        "run_cmd",
        "run_command",
        {
            "factory": True,
            "options_metavar": "[OPTIONS] -- COMMAND...",
            "short_help": "Launch the committed, pushed state of this repository as a job.",
        },
    ),
    ("follow", "follow_cmd", "follow", {}),
    ("logs", "logs_cmd", "logs", {}),
    ("stop", "stop_cmd", "stop", {}),
    ("list", "list_cmd", "list_runs", {}),
    ("why", "why_cmd", "why", {}),
    ("find-gpus", "find_gpus_cmd", "find_gpus", {}),
    ("open", "open_cmd", "open_page", {}),
    ("profiles", "profiles_cmd", "profiles", {}),
    ("prune", "prune_cmd", "prune", {}),
    ("secret", "secret_cmd", "secret_group", {"group": True}),
    ("results", "results_cmd", "results", {}),
    (
        "session",
        "session_cmd",
        "session_command",
        {
            "factory": True,
            "options_metavar": "[OPTIONS] [-- COMMAND...]",
            "short_help": "Interactive Beaker session with the resources of run.",
        },
    ),
    (
        "mason",
        "mason_cmd",
        "mason",
        {
            "cls": PlainCommand,  # Typer's own command: mason's argv passes through, with its own --help
            "options_metavar": "[MASON OPTIONS] -- COMMAND [-- COMMAND...]",
            "short_help": "Launch with open-instruct's mason.py command line, as it is.",
            "context_settings": {
                "ignore_unknown_options": True,
                "allow_extra_args": True,
                "help_option_names": [],
            },
        },
    ),
    ("completion", "completion_cmd", "completion", {}),
    ("config", "secret_cmd", "config_group", {"group": True, "hidden": True}),  # gantry's
)


def build_app(only: str | None = None) -> typer.Typer:
    """The `launchkit` command tree; with `only`, the root and that one command (what an invocation
    of it needs: Typer turns every registered command into a click command on each call, and `run`
    and `session` have a hundred options each)."""
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
    for name, module, attribute, how in REGISTRY:
        if only is not None and name != only:
            continue  # launchkit.cli.<module> is imported only for a command that is built
        kwargs = dict(how)
        command = getattr(importlib.import_module(f"launchkit.cli.{module}"), attribute)
        if kwargs.pop("group", False):
            cli.add_typer(command(), name=name, cls=PanelGroup, **kwargs)
            continue
        if kwargs.pop("factory", False):
            command = command()
        kwargs.setdefault("cls", PanelCommand)
        cli.command(name, **kwargs)(command)
    return cli


COMMANDS = frozenset(name for name, *_ in REGISTRY)
ROOT_VALUE_OPTIONS = frozenset({"--beaker-timeout", "--log-level"})  # root options that take a value


def _command_of(args: list[str]) -> str | None:
    """The command an argv invokes (after the root's options), or None (root help, a typo, completion)."""
    if any(k.endswith("_COMPLETE") and k.startswith("_") for k in os.environ):
        return None  # shell completion walks the whole tree
    i = 0
    while i < len(args):
        token = args[i]
        if not token.startswith("-"):
            return token if token in COMMANDS else None
        i += 2 if token in ROOT_VALUE_OPTIONS else 1
    return None


_app: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    """`launchkit.cli.app.app`: the whole tree, built on first use (an invocation builds only its command)."""
    global _app
    if name != "app":
        raise AttributeError(name)
    if _app is None:
        _app = build_app()
    return _app


def main(argv: list[str] | None = None) -> None:
    """The CLI (the console script calls it through cli/entry.py). Everything after the first `--` is
    the user's command, verbatim."""
    args = list(sys.argv[1:] if argv is None else argv)
    application = Application()
    if "--" in args:
        cut = args.index("--")
        args, application.user_command = args[:cut], args[cut + 1 :]
    code = 0
    try:
        command = _command_of(args)
        if _subcommand_help(args, application):
            returned = None
        else:
            cli = build_app(only=command)  # None: the whole tree
            returned = cli(args=args, prog_name="launchkit", standalone_mode=False, obj=application)
        if isinstance(returned, int):  # typer.Exit(code) comes back as a value without standalone mode
            code = returned
        sys.stdout.flush()  # a write error (full disk, /dev/full) belongs inside the boundary
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        application.error("aborted")
        code = 130
    except TyperException as e:  # usage errors from option parsing
        if isinstance(e, NoArgsIsHelpError):
            sys.stdout.write(e.format_message() + "\n")
        else:
            application.error(_usage_message(e, args, application.user_command))
            code = e.exit_code
    except KeyboardInterrupt:
        code = 130
    except SystemExit as e:  # commands exit with a job's code; flush inside the boundary first
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        code = _flushed(application, code)
    except BaseException as e:  # noqa: BLE001 - the one error boundary: every failure is one line
        code = _report(application, e)
    if argv is None:  # the program (not an in-process caller): the outcome is decided, and a late
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C must not become a KeyboardInterrupt at exit
    if application.fast_exit and argv is None:
        # Nothing left to clean up (a dry run): skip the interpreter's teardown (~10-15 ms).
        code = _flushed(application, code)
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _subcommand_help(args: list[str], application: Application) -> bool:
    """`launchkit CMD --help`: the command's help without processing the root's options first. Typer
    coerces every processed option value through a pydantic TypeAdapter, so going through the root
    group costs importing pydantic (~50 ms) for nothing the help needs. False when `args` is not that."""
    if len(args) != 2 or args[1] not in ("--help", "-h") or args[0].startswith("-"):
        return False
    group = typer.main.get_command(build_app(only=args[0] if args[0] in COMMANDS else None))
    with typer.Context(group, info_name="launchkit", obj=application, **group.context_settings) as parent:
        command = group.get_command(parent, args[0])  # type: ignore[attr-defined]
        if command is None or command.context_settings.get("help_option_names") == []:
            return False  # an unknown command (the usual error), or `mason` (its own --help)
        command.make_context(args[0], [args[1]], parent=parent)  # prints the help, raises typer.Exit
    return True


def _flushed(application: Application, code: int) -> int:
    """`code`, or the write error's exit code when stdout cannot take what is buffered."""
    try:
        sys.stdout.flush()
    except Exception as e:  # noqa: BLE001 - reported as one line like any other failure
        return _report(application, e)
    return code


def _report(application: Application, e: BaseException) -> int:
    """Report a failure once, as one line; return the exit code. -v adds detail, never another code."""
    from launchkit.errors import LaunchkitError, from_exception

    if isinstance(e, BrokenPipeError):  # `launchkit list | head`: the reader has gone, nothing to say
        return stdout_closed()
    err = e if isinstance(e, LaunchkitError) else from_exception(e)
    if isinstance(e, OSError):
        try:
            sys.stdout.flush()
        except OSError:
            stdout_closed()  # what stdout still buffers would fail again at exit
    if _debug():
        import traceback

        traceback.print_exception(e, file=application.stderr or sys.stderr)
    application.error(err.one_line())
    if application.verbose:
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        cause = e.__cause__ or e.__context__
        application.debug(
            f"{type(e).__module__}.{type(e).__qualname__}"
            + (f" raised at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else "")
            + (f", caused by {type(cause).__name__}: {cause}" if cause is not None else "")
            + " (LAUNCHKIT_DEBUG=1 shows the traceback)"
        )
    return err.exit_code


def _debug() -> bool:
    """LAUNCHKIT_DEBUG: a traceback with every error (a value that is not yes/no asks for it too)."""
    from launchkit.envflags import env_flag
    from launchkit.errors import UsageError

    try:
        return env_flag("LAUNCHKIT_DEBUG")
    except UsageError:
        return True


def _usage_message(e: TyperException, args: list[str], command: list[str] | None) -> str:
    """Typer/click's parse error as one line that names the bad value when there is one."""
    msg = e.format_message()
    param = getattr(e, "param", None)
    ctx = getattr(e, "ctx", None)
    if command is None and isinstance(e, NoSuchOption) and ctx is not None:
        forgot = _command_without_separator(ctx, args)
        name = e.option_name or "?"
        # `launchkit run python train.py --lr 3e-4`: the user's own flags reached click
        if any(t == name or t.startswith(name + "=") for t in forgot[1:]):
            return (
                f"{name} is not a `{ctx.info_name}` option: put the command "
                f"after `--` (launchkit {ctx.info_name} [OPTIONS] -- {' '.join(forgot)})"
            )
    for opt in getattr(param, "opts", None) or []:
        value = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == opt), None)
        value = value or next((a.split("=", 1)[1] for a in args if a.startswith(opt + "=")), None)
        if value is not None:
            msg = f"{opt} {value!r}: {getattr(e, 'message', msg)}"
            break
    if ctx is not None:
        msg += f" (see `{ctx.command_path} --help`)"
    return msg.replace("\n", " ")


def _command_without_separator(ctx: typer.Context, args: list[str]) -> list[str]:
    """The tokens from the first one that is neither an option of the command nor an option's value
    (the user's command, when `--` was forgotten); [] when every token is an option."""
    if ctx.command.name != "run" or ctx.info_name not in args:
        return []
    takes_value = {o for p in ctx.command.params if getattr(p, "is_flag", True) is False for o in p.opts}
    tokens = args[args.index(ctx.info_name) + 1 :]
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("-") or token == "-":
            return tokens[i:]
        i += 2 if token in takes_value else 1
    return []
