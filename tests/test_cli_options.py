"""Options several commands share are declared once (cli/options.py), and `--yes` skips one
confirmation helper that fails fast without a terminal."""

from __future__ import annotations

import io

import pytest
import typer

from launchkit.cli import options
from launchkit.cli.app import REGISTRY, root_group
from launchkit.errors import UsageError

SHARED = {
    "--latest": (["-l", "--latest"], None),
    "--replica": (["-r", "--replica"], "RANK"),
    "--yes": (["-y", "--yes"], None),
}


def _commands():
    group = root_group()
    for entry in REGISTRY:
        command = group.get_command(None, entry.name)  # type: ignore[arg-type]
        yield from ((f"{entry.name} {n}", c) for n, c in getattr(command, "commands", {}).items())
        yield entry.name, command


def test_latest_replica_and_yes_are_the_same_option_everywhere():
    seen = set()
    for name, command in _commands():
        for param in command.params:
            flag = next((o for o in param.opts if o in SHARED), None)
            if flag is None:
                continue
            seen.add(flag)
            opts, metavar = SHARED[flag]
            assert (sorted(param.opts), param.metavar) == (sorted(opts), metavar), name
    assert seen == set(SHARED)


def test_without_a_terminal_confirmation_is_a_usage_error_naming_yes(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    with pytest.raises(UsageError, match="stop needs confirmation, but stdin is not a terminal") as e:
        options.confirm("Stop x?", command="stop")
    assert e.value.hint == "pass --yes"


@pytest.mark.parametrize(("answer", "goes_on"), [(True, True), (False, False)])
def test_the_answer_decides(monkeypatch, answer, goes_on):
    stdin = io.StringIO()
    stdin.isatty = lambda: True  # type: ignore[method-assign]
    monkeypatch.setattr("sys.stdin", stdin)
    asked = []
    monkeypatch.setattr(typer, "confirm", lambda q, default, err: asked.append((q, default, err)) or answer)
    if goes_on:
        options.confirm("Remove 2 local runs (1.0 MiB)?", command="prune")
    else:
        with pytest.raises(SystemExit) as exited:
            options.confirm("Remove 2 local runs (1.0 MiB)?", command="prune")
        assert exited.value.code == 1
    assert asked == [("Remove 2 local runs (1.0 MiB)?", False, True)]  # no by default, on stderr
