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
    os.path.join("launchkit", "__main__.py"))

# Start-up allocates hundreds of thousands of long-lived objects (Typer's command tree, pydantic
# schemas); cyclic GC passes over them are wasted work (~15 ms). `run` turns GC back on once the
# spec is built (launchkit.launch); every other command gets it back in main().
if AS_PROGRAM:
    gc.disable()

import typer
from typer.core import TyperCommand, TyperGroup
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
    run_cmd,
    stop_cmd,
)
from launchkit.cli import state

class _LazyRuntimeParam:
    """Typer's per-option coercion, built on first use and shared by options of the same plain type.

    Typer 0.2x builds a pydantic TypeAdapter for every option on every call (~0.5 ms each; `run` has
    ~70 options, nearly all unset). An unset option needs no adapter at all.
    """

    def __init__(self, desc: object, cache: dict[str, object], key: str):
        self._desc, self._cache, self._key = desc, cache, key
        self._plain = _plain_type(getattr(desc, "annotation", None))

    def _real(self) -> object:
        if self._key not in self._cache:
            from typer._coercion import build_runtime_param

            self._cache[self._key] = build_runtime_param(self._desc)  # type: ignore[arg-type]
        return self._cache[self._key]

    def coerce(self, value: object, param: typer.core._click.Parameter, ctx: typer.Context) -> object:
        if value is None:
            return () if (param.multiple or param.nargs == -1) else None
        if self._plain is not None and type(value) is self._plain:
            return value  # already the declared type (e.g. a str option given a str): nothing to coerce
        return self._real().coerce(value, param=param, ctx=ctx)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._real(), name)


def _plain_type(annotation: object) -> type | None:
    """`str`, `int`, `float` or `bool` for those (or Optional of those) annotations, else None."""
    import typing

    if annotation in (str, int, float, bool):
        return annotation  # type: ignore[return-value]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if len(args) == 1 and args[0] in (str, int, float, bool) else None


def _share_runtime_params(params: list[typer.core._click.Parameter]) -> None:
    cache: dict[str, object] = {}
    for param in params:
        desc = getattr(param, "type_descriptor", None)
        if desc is None or getattr(param, "_runtime_param", False) is not None:
            continue  # not a Typer parameter of this Typer version, or already built
        info = desc.parameter_info
        if getattr(desc, "file_annotation", None) is not None or any(
                getattr(info, attr, None) is not None for attr in ("parser", "click_type", "min", "max")):
            continue
        key = repr((desc.annotation, getattr(info, "case_sensitive", None), getattr(info, "formats", None),
                    getattr(info, "clamp", None)))
        param._runtime_param = _LazyRuntimeParam(desc, cache, key)  # type: ignore[attr-defined]


class PanelCommand(TyperCommand):
    """Plain-text help with the options grouped in panels (`rich_help_panel`).

    Rendering help through rich costs ~80 ms of imports (rich.markdown, pygments, ...) on every
    `--help`; click's own formatter with panel sections keeps `--help` near the Typer floor.
    """

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        _share_runtime_params(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        return [self.options_metavar or ""] + [
            piece for param in self.get_params(ctx) if not getattr(param, "hidden", False)
            for piece in param.get_usage_pieces(ctx)]

    def format_options(self, ctx: typer.Context, formatter: typer.core._click.HelpFormatter) -> None:
        panels: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        for panel, rows in sorted(panels.items(), key=lambda item: item[0] != "Options"):
            with formatter.section(panel):
                formatter.write_dl(rows)


class PanelGroup(TyperGroup):
    """The root group, with the same plain-text panel help."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        _share_runtime_params(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def format_options(self, ctx: typer.Context, formatter: typer.core._click.HelpFormatter) -> None:
        PanelCommand.format_options(self, ctx, formatter)  # type: ignore[arg-type]
        self.format_commands(ctx, formatter)

    def format_commands(self, ctx: typer.Context, formatter: typer.core._click.HelpFormatter) -> None:
        rows = [(name, cmd.get_short_help_str(formatter.width - 20)) for name in self.list_commands(ctx)
                if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


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
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
    verbose: int = typer.Option(0, "--verbose", "-v", count=True, show_default=False,
                                 help="More output (repeatable)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only errors and the data you asked for."),
) -> None:
    state.verbosity = -1 if quiet else verbose


for module in (run_cmd, follow_cmd, logs_cmd, stop_cmd, list_cmd, find_gpus_cmd, open_cmd):
    module.register(app)
for _info in app.registered_commands:
    if _info.cls in (None, TyperCommand):
        _info.cls = PanelCommand


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Everything after the first `--` is the user's command, verbatim."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" in args:
        cut = args.index("--")
        args, state.user_command = args[:cut], args[cut + 1:]
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
            state.console().error(_usage_message(e, args))
            code = e.exit_code
    except KeyboardInterrupt:
        code = 130
    except Exception as e:  # noqa: BLE001 - the one error boundary
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
