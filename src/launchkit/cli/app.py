"""The root Typer app: global options, command registration, and the single error boundary.

Rule: nothing imported at module level here or in any `launchkit.cli.*` module may load beaker-py,
grpc, GitPython, pydantic or yaml. Commands import what they need inside their bodies
(tests/test_startup.py guards this).
"""

from __future__ import annotations

import gc
import os
import sys

# Started as the `launchkit` program (console script or `python -m launchkit`), not imported as a library.
AS_PROGRAM = os.path.basename(sys.argv[0]) == "launchkit" or sys.argv[0].endswith(
    os.path.join("launchkit", "__main__.py")
)

# Start-up allocates hundreds of thousands of long-lived objects (Typer's command tree, pydantic
# schemas); cyclic GC passes over them are wasted work (~15 ms). `run` turns GC back on once the
# spec is built (launchkit.launch); every other command gets it back in main().
if AS_PROGRAM:
    gc.disable()

import typer
from typer.core import TyperCommand
from typer.exceptions import TyperException

from launchkit import __version__


def _skip_pydantic_plugins() -> None:
    """The CLI uses no pydantic plugins; pydantic would scan all installed packages' entry points
    (importlib.metadata, ~10-15 ms) before building the first model. Only for the program itself."""
    if AS_PROGRAM and "pydantic.plugin._loader" not in sys.modules:
        import types

        stub = types.ModuleType("pydantic.plugin._loader")
        stub.get_plugins = lambda: ()  # type: ignore[attr-defined]
        sys.modules["pydantic.plugin._loader"] = stub


_skip_pydantic_plugins()

from launchkit.cli import (
    find_gpus_cmd,
    follow_cmd,
    list_cmd,
    logs_cmd,
    open_cmd,
    profiles_cmd,
    prune_cmd,
    run_cmd,
    secret_cmd,
    state,
    stop_cmd,
)
from launchkit.cli.typer_support import PanelCommand, PanelGroup

app = typer.Typer(
    name="launchkit",
    cls=PanelGroup,
    help="Launch ML jobs from your git repository onto Beaker GPU clusters, or run them right here.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"launchkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, show_default=False, help="More output (repeatable)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only errors and the data you asked for."),
    beaker_timeout: float = typer.Option(
        None,
        "--beaker-timeout",
        metavar="SECONDS",
        help="Give up when Beaker does not answer for this long (default 60).",
    ),
) -> None:
    state.verbosity = -1 if quiet else verbose
    state.beaker_timeout = beaker_timeout


for module in (
    run_cmd,
    follow_cmd,
    logs_cmd,
    stop_cmd,
    list_cmd,
    find_gpus_cmd,
    open_cmd,
    secret_cmd,
    profiles_cmd,
    prune_cmd,
):
    module.register(app)
for _info in app.registered_commands:
    if _info.cls in (None, TyperCommand):
        _info.cls = PanelCommand


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Everything after the first `--` is the user's command, verbatim."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" in args:
        cut = args.index("--")
        args, state.user_command = args[:cut], args[cut + 1 :]
    else:
        state.user_command = None
    state.fast_exit = False
    positional = [a for a in args if not a.startswith("-")]
    if positional[:1] == ["run"] and not {"-h", "--help"} & set(args):
        from launchkit.git import prefetch

        prefetch()  # git answers while Python imports the rest
    else:
        gc.enable()
    code = 0
    try:
        returned = app(args=args, prog_name="launchkit", standalone_mode=False)
        if isinstance(returned, int):  # typer.Exit(code) comes back as a value without standalone mode
            code = returned
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        state.console().error("aborted")
        code = 130
    except TyperException as e:  # usage errors from option parsing
        if type(e).__name__ == "NoArgsIsHelpError":
            sys.stdout.write(e.format_message() + "\n")
        else:
            state.console().error(_usage_message(e, args))
            code = e.exit_code
    except KeyboardInterrupt:
        code = 130
    except Exception as e:
        from launchkit.errors import LaunchkitError

        if not isinstance(e, LaunchkitError) or state.verbosity > 0 or os.environ.get("LAUNCHKIT_DEBUG"):
            raise
        state.console().error(e.one_line())
        code = e.exit_code
    finally:
        if "launchkit.git" in sys.modules:
            sys.modules["launchkit.git"].reap()
    if state.fast_exit and argv is None:
        # Nothing left to clean up (a dry run): skip the interpreter's teardown (~10-15 ms).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    gc.enable()  # in-process callers (tests) get a normal interpreter back
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
