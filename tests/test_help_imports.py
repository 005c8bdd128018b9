"""Help costs what printing help costs (issue 46): `launchkit CMD --help`, for every command the app
has (found from its table and its groups, so a new command is covered), imports the command's
declaration (cli/<name>_cmd.py) and nothing it needs only to run: no body (cli/<name>_body.py), no
backend, no pydantic models, no sqlite3, no beaker-py/grpc/GitPython/PyYAML, no rich."""

from __future__ import annotations

import functools
import inspect
import os
import re
import subprocess
import sys
from typing import Any

import pytest
import typer

from launchkit.cli.app import command_words, root_group
from launchkit.cli.declared import BodyCommand

# Libraries a --help never needs (by top-level package; the standard library's where they cost).
LIBRARIES = (
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "sqlite3",
    "_sqlite3",
    "beaker",
    "grpc",
    "google",
    "git",
    "gitdb",
    "yaml",
    "requests",
    "urllib3",
    "rich",
    "pygments",
    "markdown_it",
    "platformdirs",  # on Linux the config path is XDG's, without it (config.py)
    "json",  # a help writes no JSON (~1 ms)
)
# launchkit's modules a command needs only when it runs (a prefix, or the module itself).
OURS = (
    "launchkit.backends.",  # but launchkit.backends.registry: the --backend option lists its names
    "launchkit.core.request",
    "launchkit.events",
    "launchkit.notify",
    "launchkit.masking",
    "launchkit.launch",
    "launchkit.runtime",
    "launchkit.cli.backend_choice",
    "launchkit.cli.following",
    "launchkit.cli.launching",
    "launchkit.cli.dry_run",
    "typer._adapters",  # Typer's pydantic coercion of option values
)
LIGHT = ("launchkit.backends.registry",)
# The commands whose help shows where a default came from (`[default: 4 (from pyproject.toml)]`): only
# they read the config layers for --help.
CONFIG_IN_HELP = ("run", "session")


def heavy(module: str) -> bool:
    if module in LIGHT:
        return False
    return (
        module.split(".")[0] in LIBRARIES
        or module.startswith(OURS)
        or re.fullmatch(r"launchkit\.cli\.\w+_body", module) is not None
    )


# Every help's `python -m launchkit ... --help` (runpy, as -m runs it) in one fresh interpreter: each forked
# from it once it has loaded launchkit.cli.app, which every command loads first, so what a help adds is
# its own; each child sends back the modules it has (sys.modules: -X importtime leaves out what
# importlib.import_module loads, e.g. a command's declaration). One interpreter, not one per command.
HELPS = """import os, runpy, sys
import launchkit.cli.app
out = sys.stdout.buffer
for line in sys.argv[1:]:
    out.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        sys.argv = ["-c", *line.split()]
        code = 0
        try:
            runpy.run_module("launchkit", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else int(bool(e.code))
        except BaseException as e:
            sys.stderr.write(f"{line}: {e!r}\\n")
            code = 1
        sys.stderr.flush()
        data = " ".join(sys.modules).encode()
        while data:
            data = data[os.write(w, data) :]
        os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    out.write(b"%s\\t%d\\t%s\\n" % (line.encode(), code, b"".join(chunks)))
"""


@functools.cache
def helps() -> dict[tuple[str, ...], tuple[int, set[str]]]:
    """Each command's words -> (its `--help`'s exit code, the modules it loaded), read once."""
    lines = [" ".join((*words, "--help")) for words in [(), *command_words()]]
    proc = subprocess.run(
        [sys.executable, "-c", HELPS, *lines],
        capture_output=True,
        text=True,
        timeout=120,
        # no user config or Beaker config read by a help; coverage's own imports are not ours
        env={k: v for k, v in os.environ.items() if not k.startswith(("COVERAGE_", "LAUNCHKIT_", "BEAKER_"))},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = {}
    for row in proc.stdout.splitlines():
        line, code, mods = row.split("\t")
        found[tuple(line.split()[:-1])] = (int(code), set(mods.split()))
    assert len(found) == len(lines), proc.stderr[-2000:]
    return found


def imported(*words: str) -> set[str]:
    """The modules `python -m launchkit WORDS --help` loaded, as a fresh interpreter loads them."""
    code, mods = helps()[words]
    assert code == 0, words
    return mods


def test_every_command_is_found():
    """The discovery (cli/app.py: command_words) sees the groups' commands and the hidden ones: a new
    command is covered as it is added."""
    found = command_words()
    assert {("list",), ("secret", "set"), ("config", "set-gh-token"), ("mason",), ("run",)} <= set(found)
    assert len(found) >= 20


@pytest.mark.parametrize("words", [(), *command_words()], ids=lambda words: " ".join(words) or "launchkit")
def test_help_imports_only_the_declaration(words):
    mods = imported(*words)
    assert not sorted(m for m in mods if heavy(m)), sorted(m for m in mods if m.startswith("launchkit"))
    if not words or words[0] not in CONFIG_IN_HELP:  # the Application reads its config on first use
        assert "launchkit.config" not in mods
    if words:  # the command's own declaration, and no other command's
        declarations = {m for m in mods if re.fullmatch(r"launchkit\.cli\.\w+_cmd", m)}
        assert len(declarations) == 1 or words[0] == "session", declarations  # session: run's table too


def command_of(words: tuple[str, ...]) -> Any:
    command: Any = root_group()
    for word in words:
        command = command.get_command(typer.Context(command), word)
    return command


@pytest.mark.parametrize(
    "words", [w for w in command_words() if not hasattr(command_of(w), "commands")], ids=" ".join
)
def test_a_body_takes_the_options_its_declaration_declares(words):
    """Every command is declared apart from its body (a group's every command): the body (its handler)
    is called with the declared options by name, so an option renamed or added in one module and not
    the other fails here, not when a user runs the command."""
    command = command_of(words)
    assert isinstance(command, BodyCommand), words
    for handler in filter(None, (command.handler, command.dry_run_handler)):
        module, _, function = handler.partition(":")
        body = getattr(__import__(module, fromlist=[function]), function)
        params = list(inspect.signature(body).parameters.values())
        assert params[0].name == "ctx", handler
        if any(p.kind is p.VAR_KEYWORD for p in params):  # run's and session's: the whole table
            continue
        declared = {p.name for p in command.params if p.expose_value}
        assert {p.name for p in params[1:]} == declared, handler


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--cluster", "ai2/x", "--help"]])
def test_mason_help_is_mason_py_s_own(args, capsys):
    """`launchkit mason --help` prints mason.py's parser's help (core/mason_args.py), wherever the flag
    is among mason's options, as `python mason.py --help` does."""
    from launchkit.cli.app import main

    with pytest.raises(SystemExit) as exited:
        main(["mason", *args])
    out = capsys.readouterr().out
    assert exited.value.code == 0 and out.startswith("usage: launchkit mason --cluster CLUSTER")
    assert "--no_auto_dataset_cache" in out and "--dry-run" in out
