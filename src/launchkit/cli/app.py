"""The root command group: global options, the command table, and the single error boundary.

`LazyGroup` (click's `list_commands`/`get_command`, as datadog-agent-dev's `DynamicGroup`) imports a
command's module only when that command runs or shows its own help; `launchkit --help` lists the
table's summaries without importing any. Heavy libraries (beaker-py, grpc) are imported inside the
functions that use them (tests/test_startup.py lists each such import).

Commands are module-level functions in `launchkit.cli.<name>_cmd`; each gets the invocation's
`Application` with `get_app(ctx)` (launchkit.cli.context).
"""

from __future__ import annotations

import difflib
import importlib
import os
import signal
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

import typer
import typer.completion
from typer.exceptions import TyperException

from launchkit import __version__
from launchkit.application import Application
from launchkit.cli.context import get_app, stdout_closed
from launchkit.cli.declared import declared
from launchkit.cli.panels import PanelGroup
from launchkit.cli.params import NoArgsIsHelpError, NoSuchOption, PlainOption, UsageError, completion_init
from launchkit.core.run_options import Kind
from launchkit.core.units import UnitError, positive_seconds
from launchkit.envflags import env_flag
from launchkit.errors import LaunchkitError, from_exception
from launchkit.errors import UsageError as LaunchkitUsageError

HELP = "Launch ML jobs from your git repository onto Beaker GPU clusters, or run them right here."


def _version(ctx: typer.Context, param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        print(f"launchkit {__version__}")
        raise typer.Exit()


def root_options() -> list[Any]:
    """The root's own options, and Typer's --install-completion/--show-completion."""
    completion = typer.completion
    return [
        PlainOption(
            "--version",
            kind=Kind.FLAG,
            callback=_version,
            is_eager=True,
            expose_value=False,
            help="Show the version and exit.",
        ),
        PlainOption("--verbose", "-v", kind=Kind.INT, count=True, help="More output (repeatable)."),
        PlainOption(
            "--quiet/--not-quiet", "-q", kind=Kind.FLAG, help="Only errors and the data you asked for."
        ),
        PlainOption(
            "--log-level", kind=Kind.STR, hidden=True, help="gantry's spelling: debug = -v, error = -q."
        ),
        PlainOption(
            "--check-for-upgrades/--no-check-for-upgrades",
            kind=Kind.TRISTATE,
            hidden=True,
            help="gantry's; see docs/from-gantry.md.",
        ),
        PlainOption(
            "--beaker-timeout",
            kind=Kind.FLOAT,
            metavar="SECONDS",
            help="Give up when Beaker does not answer for this long (default 60).",
        ),
        PlainOption(
            "--install-completion",
            kind=Kind.FLAG,
            callback=completion.install_callback,
            expose_value=False,
            help="Install completion for the current shell.",
        ),
        PlainOption(
            "--show-completion",
            kind=Kind.FLAG,
            callback=completion.show_callback,
            expose_value=False,
            help="Show completion for the current shell, to copy it or customize the installation.",
        ),
    ]


def apply_root_options(
    app: Application,
    *,
    verbose: int,
    quiet: bool,
    log_level: str | None,
    check_for_upgrades: bool | None,
    beaker_timeout: float | None,
) -> None:
    """The root's options, onto the invocation's Application (checked for every command, whichever
    backend it uses)."""
    app.verbosity = -1 if quiet else verbose
    if beaker_timeout is not None:
        try:
            positive_seconds(beaker_timeout)
        except UnitError as e:
            raise LaunchkitUsageError(
                f"--beaker-timeout {beaker_timeout!r}: {e.problem}", hint=e.hint
            ) from None
    app.beaker_timeout = beaker_timeout
    if log_level is not None:  # gantry 3.7.0's global option
        levels = {"debug": 1, "info": 0, "warning": 0, "error": -1}
        if log_level.lower() not in levels:
            raise LaunchkitUsageError(
                f"--log-level {log_level!r}: unknown level", hint="use debug, info, warning or error"
            )
        app.verbosity = min(app.verbosity, -1) if quiet else max(verbose, levels[log_level.lower()])
    if check_for_upgrades:
        raise LaunchkitUsageError(
            "--check-for-upgrades is not supported: launchkit never checks PyPI by itself",
            hint="upgrade with your package manager (uv tool upgrade launchkit)",
        )


@dataclass(frozen=True)
class Entry:
    """One command: `launchkit.cli.<module>.<attribute>`, its one-sentence summary for the root's
    help (tests/test_smoke.py checks it against the command's own help), and how it is built:
    "function" (a Typer function declaring its options, run by the function of the same name in
    `launchkit.cli.<body>`: cli/declared.py), "command" (called, it returns the click command)."""

    name: str
    module: str
    attribute: str
    summary: str
    how: str = "function"
    body: str = ""  # "function": the module of its body (imported when the command runs)
    hidden: bool = False
    settings: dict[str, Any] = field(default_factory=dict)  # for Typer's `command()`


# Every command, in the order `launchkit --help` lists them.
REGISTRY: tuple[Entry, ...] = (
    Entry(
        "run",
        "run_cmd",
        "run_command",
        "Launch the committed, pushed state of this repository as a job.",
        "command",
    ),
    Entry("follow", "follow_cmd", "follow", "Stream a run's output live.", body="follow_body"),
    Entry(
        "logs",
        "logs_cmd",
        "logs",
        "Print a run's logs: raw bytes, exactly as the job wrote them.",
        body="logs_body",
    ),
    Entry("stop", "stop_cmd", "stop", "Stop runs.", body="stop_body"),
    Entry("list", "list_cmd", "list_runs", "List runs, newest first.", body="list_body"),
    Entry("why", "why_cmd", "why", "Why a run ended, from the backend's own record.", body="why_body"),
    Entry(
        "find-gpus",
        "find_gpus_cmd",
        "find_gpus",
        "Show GPUs: on this machine with --local (via nvidia-smi), or free GPUs on Beaker clusters.",
        body="find_gpus_body",
    ),
    Entry("open", "open_cmd", "open_page", "Open Beaker pages in the browser.", body="open_body"),
    Entry(
        "profiles",
        "profiles_cmd",
        "profiles",
        "Show which cluster profile a job on the given clusters gets, what it adds and why.",
        body="profiles_body",
    ),
    Entry(
        "prune",
        "prune_cmd",
        "prune",
        "Remove old local runs (their directories and logs).",
        body="prune_body",
    ),
    Entry(
        "results",
        "results_cmd",
        "results",
        "Download a run's results, one directory per task and replica when there are several.",
        body="results_body",
    ),
    Entry(
        "session",
        "session_cmd",
        "session_command",
        "Start an interactive Beaker session with the resources, env, mounts and secrets `run` would use.",
        "command",
    ),
    Entry(
        "mason",
        "mason_cmd",
        "mason_command",
        "Launch with open-instruct's mason.py command line, as it is.",
        "command",
    ),
    Entry(
        "secret",
        "secret_cmd",
        "secret_group",
        "Beaker workspace secrets (values are never printed).",
        "command",
    ),
    Entry(
        "stats", "stats_cmd", "stats", "Where your recent runs' time went, per cluster.", body="stats_body"
    ),
    Entry(
        "skill",
        "skill_cmd",
        "skill",
        "Print a skill file for coding agents (Markdown), made from this launchkit's own help.",
        body="skill_body",
    ),
    Entry(
        "completion",
        "completion_cmd",
        "completion",
        "Print the completion script for SHELL.",
        body="completion_body",
    ),
    Entry("config", "secret_cmd", "config_group", "gantry's `config` commands.", "command", hidden=True),
)
BY_NAME = {entry.name: entry for entry in REGISTRY}
COMMANDS = frozenset(BY_NAME)


def build(entry: Entry) -> Any:
    """The click command of a table row (importing its declaration's module, not its body's)."""
    made = getattr(importlib.import_module(f"launchkit.cli.{entry.module}"), entry.attribute)
    if entry.how == "command":
        return made()
    handler = f"launchkit.cli.{entry.body}:{entry.attribute}"
    return declared(made, handler, name=entry.name, hidden=entry.hidden, **entry.settings)


class LazyGroup(PanelGroup):
    """The root: its commands come from REGISTRY, each module imported when the command is used."""

    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [entry.name for entry in REGISTRY]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:  # type: ignore[override]
        if cmd_name not in self.commands and cmd_name in BY_NAME:
            self.commands[cmd_name] = build(BY_NAME[cmd_name])
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        rows = [(entry.name, entry.summary) for entry in REGISTRY if not entry.hidden]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(self, ctx: typer.Context, args: list[str]) -> Any:  # type: ignore[override]
        try:
            return super().resolve_command(ctx, args)
        except UsageError as e:
            close = difflib.get_close_matches(args[0], [e.name for e in REGISTRY if not e.hidden])
            if close and "Did you mean" not in e.message:
                e.message = e.message.rstrip(".") + ". Did you mean " + ", ".join(map(repr, close)) + "?"
            raise

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        apply_root_options(get_app(ctx), **ctx.params)  # before the command, as a root callback
        return super().invoke(ctx)


def root_group() -> LazyGroup:
    """The `launchkit` command tree (its commands built on first use)."""
    completion_init()  # TAB completion through Typer's shells (_LAUNCHKIT_COMPLETE=complete_bash ...)
    return LazyGroup(
        name="launchkit",
        params=root_options(),
        help=HELP,
        no_args_is_help=True,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )


def command_words() -> list[tuple[str, ...]]:
    """Every command's words, hidden ones and a group's commands too (`secret set`): what
    tests/test_help_imports.py and bench/bench_startup.py run `--help` of (imports every declaration)."""
    group = root_group()
    root = typer.Context(group, info_name="launchkit")
    words: list[tuple[str, ...]] = []
    for name in group.list_commands(root):
        command = group.get_command(root, name)
        words.append((name,))
        if isinstance(command, PanelGroup):
            ctx = typer.Context(command, info_name=name, parent=root)
            words += [(name, sub) for sub in command.list_commands(ctx)]
    return words


def main(argv: list[str] | None = None) -> None:
    """The CLI (the console script). Everything after the first `--` is the user's command, verbatim."""
    args = list(sys.argv[1:] if argv is None else argv)
    application = Application()
    if "--" in args:
        cut = args.index("--")
        args, application.user_command = args[:cut], args[cut + 1 :]
    application.json_errors = "--json" in args  # a refusal is a JSON object too (docs/run.md#json)
    code = 0
    try:
        returned = root_group().main(args=args, prog_name="launchkit", standalone_mode=False, obj=application)
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
            message = _usage_message(e, args, application.user_command)
            application.error(message)
            code = e.exit_code
            _json_error(application, "usage", message, None, code)
    except KeyboardInterrupt:
        code = 130
        _json_error(application, "interrupted", "interrupted", None, code)
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


def _flushed(application: Application, code: int) -> int:
    """`code`, or the write error's exit code when stdout cannot take what is buffered."""
    try:
        sys.stdout.flush()
    except Exception as e:  # noqa: BLE001 - reported as one line like any other failure
        return _report(application, e)
    return code


def _report(application: Application, e: BaseException) -> int:
    """Report a failure once, as one line; return the exit code. -v adds detail, never another code."""
    if isinstance(e, BrokenPipeError):  # `launchkit list | head`: the reader has gone, nothing to say
        return stdout_closed()
    err = e if isinstance(e, LaunchkitError) else from_exception(e)
    if isinstance(e, OSError):
        try:
            sys.stdout.flush()
        except OSError:
            stdout_closed()  # what stdout still buffers would fail again at exit
    if _debug():
        traceback.print_exception(e, file=application.stderr or sys.stderr)
    application.error(err.one_line())
    _json_error(application, err.kind, err.message, err.hint, err.exit_code)
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


def _json_error(application: Application, kind: str, message: str, fix: str | None, code: int) -> None:
    """In --json mode, a failure is also one JSON object on stdout: `{"error": {"kind", "message",
    "fix", "exit_code"}}` (`kind`: launchkit.errors.KINDS); the one line on stderr stays."""
    if not application.json_errors:
        return
    import json

    try:
        sys.stdout.write(
            json.dumps({"error": {"kind": kind, "message": message, "fix": fix, "exit_code": code}}) + "\n"
        )
        sys.stdout.flush()
    except OSError:  # stdout is gone: the stderr line said it
        pass


def _debug() -> bool:
    """LAUNCHKIT_DEBUG: a traceback with every error (a value that is not yes/no asks for it too)."""
    try:
        return env_flag("LAUNCHKIT_DEBUG")
    except LaunchkitUsageError:
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
