"""`launchkit --help` and `launchkit CMD --help` stay light: no beaker-py, grpc, GitPython, yaml or pydantic;
the common launch reads git without GitPython (see bench/ for timings)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

HEAVY = ("beaker", "grpc", "git", "yaml", "pydantic", "rich", "google")


def imported_modules(*args: str, cwd=None, env=None) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "launchkit", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", proc.stderr, re.MULTILINE)
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [["--help"], ["run", "--help"], ["run", "-h"], ["list", "--help"], ["session", "--help"], ["--version"]],
)
def test_help_imports_nothing_heavy(args, repo):
    """Stock Typer coerces every processed option through a pydantic TypeAdapter (even an absent one):
    `CMD --help` is answered by the command itself, without processing the root group's options."""
    (repo.path / "pyproject.toml").write_text('[tool.launchkit]\nworkspace = "ai2/x"\n')
    mods = imported_modules(*args, cwd=repo.path)
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY)
    assert not heavy, heavy


@pytest.mark.slow
def test_dry_run_does_not_load_the_beaker_client(repo):
    """The dry run needs beaker-py's spec types only: no gRPC client, requests, PyYAML or GitPython (a
    branch at its upstream is read with plain git calls), nor Typer's pydantic coercion."""
    mods = imported_modules("run", "--dry-run", "--", "python", "train.py", cwd=repo.path)
    assert "beaker.beaker_pb2" in mods  # beaker.types itself loads via importlib (not listed)
    assert not sorted(_unneeded(mods))


def _unneeded(mods: set[str]) -> set[str]:
    """What a launch must not load: gRPC, requests, PyYAML, GitPython, beaker-py's client, and Typer's
    pydantic coercion (cli/params.py processes the options)."""
    return {
        m
        for m in mods
        if m.split(".")[0] in ("grpc", "requests", "yaml", "git", "gitdb")
        or m in ("beaker._client", "typer._adapters")
    }


@pytest.mark.slow
def test_local_run_loads_no_gitpython_or_beaker_client(repo, tmp_path):
    """`run --local --no-python --follow -- echo hi`: no GitPython, gRPC, requests or PyYAML, nor Typer's
    pydantic coercion or the spec's YAML."""
    env_home = {"LAUNCHKIT_LOCAL_HOME": str(tmp_path / "state")}
    mods = imported_modules(
        "run", "--local", "--no-python", "--follow", "--", "echo", "hi", cwd=repo.path, env=env_home
    )
    assert not sorted(_unneeded(mods))
    assert "launchkit.core.yamlout" not in mods  # the spec's YAML is for --dry-run and --save-spec


def test_version():
    proc = subprocess.run(
        [sys.executable, "-m", "launchkit", "--version"], capture_output=True, text=True, timeout=60
    )
    from launchkit import __version__

    assert proc.returncode == 0 and proc.stdout.strip() == f"launchkit {__version__}"


# Every value a corpus of argv-like inputs gives each parameter of every command (and the root):
# cli/params.plain either leaves it to Typer (SLOW) or returns exactly what Typer's pydantic coercion does.
CORPUS = (None, (), ("a", "b"), ["x"], "x", "", "7", "-3", "+5", "007", "1_0", "3.0", "2.5", "1e3", " 5")
CORPUS += (True, False, 0, 3, 2.5)


def _all_params():
    import typer.main

    from launchkit.cli import app as cli_app
    from launchkit.cli.panels import PanelCommand, PanelGroup
    from launchkit.cli.params import PlainCommand

    group = typer.main.get_command(cli_app.build_app())
    ctx = typer.Context(group, info_name="launchkit")
    todo = [(group, ctx)]
    while todo:
        command, command_ctx = todo.pop()
        for param in command.get_params(command_ctx):
            yield param, command_ctx, isinstance(command, (PanelCommand, PanelGroup, PlainCommand))
        for name in getattr(command, "commands", {}):
            sub = command.commands[name]
            todo.append((sub, typer.Context(sub, info_name=name, parent=command_ctx)))


def test_plain_values_are_what_typer_makes_of_them():
    from launchkit.cli.params import SLOW, PlainArgument, PlainOption, plain

    taken = slow = panel = 0
    for param, ctx, in_panel in _all_params():
        if in_panel:  # the commands launchkit builds (not the secret and config groups' own)
            assert isinstance(param, (PlainOption, PlainArgument)), param.name
            panel += 1
        for value in CORPUS:
            fast = plain(param, value)
            if fast is SLOW:
                slow += 1
                continue
            taken += 1
            typers = param.get_runtime_param().coerce(value, param=param, ctx=ctx)
            assert (type(fast), fast) == (type(typers), typers), (param.name, value)
    assert panel > 200 and taken > 1000 and slow > 1000, (panel, taken, slow)


def test_every_command_processes_plain_values_itself():
    import typer.main

    from launchkit.cli import app as cli_app
    from launchkit.cli.panels import PanelCommand, PanelGroup
    from launchkit.cli.params import PlainCommand

    group = typer.main.get_command(cli_app.build_app())
    kinds = {name: type(c) for name, c in group.commands.items()}  # type: ignore[attr-defined]
    assert all(issubclass(k, (PanelCommand, PanelGroup, PlainCommand)) for k in kinds.values()), kinds


def test_run_is_parsed_without_pydantic():
    """`run`'s and `session`'s options and the root's, given or not, are processed without pydantic."""
    code = """
import sys, typer.main
from launchkit.cli.app import build_app
group = typer.main.get_command(build_app(only="run"))
ctx = group.make_context("launchkit", ["-vv", "--beaker-timeout", "5", "run", "--gpus", "2"])
run = group.get_command(ctx, "run")
args = ["--gpus", "2", "--cpus", "1.5", "--env", "A=1", "--env", "B=2", "--follow", "--dry-run", "x"]
sub = run.make_context("run", args, parent=ctx)
p = sub.params
assert (p["gpus"], p["cpus"], p["env"], p["follow"], p["dry_run"], p["preemptible"]) == (
    2, 1.5, ["A=1", "B=2"], True, True, None), p
assert ctx.params["verbose"] == 2 and ctx.params["beaker_timeout"] == 5.0, ctx.params
group = typer.main.get_command(build_app(only="session"))  # its own options too (--port: list[int])
ctx = group.make_context("launchkit", ["session"])
group.get_command(ctx, "session").make_context("session", ["--gpus", "1"], parent=ctx)
assert "pydantic" not in sys.modules and "typer._adapters" not in sys.modules
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


SCANNED = """
import os, sys
import pydantic.plugin._loader as loader
plugins = loader.get_plugins
def get_plugins():
    if os.environ.get("PYDANTIC_DISABLE_PLUGINS") is None:  # a model built outside building_models
        raise SystemExit("pydantic scanned the entry points for plugins")
    return plugins()
loader.get_plugins = get_plugins
from launchkit.cli.app import main
main(sys.argv[1:])
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["run", "--dry-run", "--offline", "--", "python", "train.py"],
        ["run", "--local", "--no-python", "--follow", "--", "echo", "hi"],
    ],
)
def test_a_launch_does_not_scan_for_pydantic_plugins(args, repo, tmp_path):
    """Every launchkit model a launch builds is built with pydantic's plugins off (cli/launching.py:
    building_models): the scan of every installed package's entry points costs ~10-15 ms."""
    env = {**os.environ, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "state")}
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    proc = subprocess.run(
        [sys.executable, "-c", SCANNED, *args],
        cwd=repo.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_start_up_pauses_the_gc_until_the_command_runs(monkeypatch):
    """The console script parses with Python's cyclic GC paused (what start-up allocates lives until
    exit) and the command itself runs with it on again: `follow` or a local job's supervisor may run
    for hours (cli/entry.py)."""
    import gc

    import typer

    import launchkit.cli.open_cmd as open_cmd
    from launchkit.cli import app as cli_app
    from launchkit.cli import entry

    seen: dict[str, bool] = {}
    command_of = cli_app._command_of

    def parsing(args):
        seen["parsing"] = gc.isenabled()
        return command_of(args)

    def open_page(ctx) -> None:
        seen["command"] = gc.isenabled()

    open_page.__annotations__["ctx"] = typer.Context  # this module's annotations are strings

    monkeypatch.setattr(cli_app, "_command_of", parsing)
    monkeypatch.setattr(open_cmd, "open_page", open_page)
    monkeypatch.setattr(sys, "argv", ["launchkit", "open"])
    try:
        with pytest.raises(SystemExit) as exited:
            entry.main()
    finally:
        gc.enable()
    assert exited.value.code == 0
    assert seen == {"parsing": False, "command": True}


def test_in_process_callers_keep_their_gc(monkeypatch):
    """Only the console script pauses: `main(argv)` called in-process leaves the caller's GC alone."""
    import gc

    from launchkit.cli.app import main

    assert gc.isenabled()
    with pytest.raises(SystemExit):
        main(["--version"])
    assert gc.isenabled()


@pytest.mark.parametrize("plugins_env", [None, "__all__"])
def test_models_are_built_with_the_gc_paused(monkeypatch, plugins_env):
    """building_models() pauses the cyclic GC and turns it back on, also when the block raises."""
    import gc

    from launchkit.cli.launching import building_models

    if plugins_env is None:
        monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    else:
        monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", plugins_env)
    assert gc.isenabled()
    with building_models():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), building_models():
        raise RuntimeError("model failed")
    assert gc.isenabled()
    gc.disable()  # a caller that paused it already gets it back paused
    try:
        with building_models():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
