"""An invocation builds only its own command (launchkit.cli.app.build_app(only=...)); `CMD --help` too."""

from __future__ import annotations

import pytest
import typer.main

from launchkit.cli import app as cli_app


def test_commands_list_every_registered_command():
    group = typer.main.get_command(cli_app.build_app())
    assert set(group.list_commands(None)) == cli_app.COMMANDS  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["run", "--dry-run"], "run"),
        (["-v", "-q", "list"], "list"),
        (["--beaker-timeout", "5", "logs", "x"], "logs"),
        (["--log-level", "debug", "secret", "set", "X"], "secret"),
        (["lst"], None),  # a typo: the whole tree, for "did you mean"
        (["--help"], None),
        ([], None),
    ],
)
def test_command_of(args, command):
    assert cli_app._command_of(args) == command


def test_completion_sees_the_whole_tree(monkeypatch):
    monkeypatch.setenv("_LAUNCHKIT_COMPLETE", "complete_bash")
    assert cli_app._command_of(["run"]) is None


def test_only_the_command_is_built():
    group = typer.main.get_command(cli_app.build_app(only="list"))
    assert group.list_commands(None) == ["list"]  # type: ignore[attr-defined]
