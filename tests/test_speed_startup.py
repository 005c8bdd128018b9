"""One lazy command group (cli/app.py: LazyGroup): `launchkit --help` lists the table without importing a
command's module; an invocation imports only its own command's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from launchkit.cli import app as cli_app


def test_commands_list_every_registered_command():
    assert set(cli_app.root_group().list_commands(None)) == cli_app.COMMANDS  # type: ignore[arg-type]


def test_each_summary_is_its_commands_own_first_sentence():
    """The root's list shows each command's summary whole: the table's line is where its own help starts."""
    group = cli_app.root_group()
    for entry in cli_app.REGISTRY:
        command = group.get_command(None, entry.name)  # type: ignore[arg-type]
        own = " ".join((command.help or "").split())
        assert entry.summary.endswith(".") and own.startswith(entry.summary[:-1]), entry.name
        assert command.hidden == entry.hidden, entry.name


def _loaded(*args: str) -> set[str]:
    code = f"import sys; from launchkit.cli.app import main\ntry: main({list(args)!r})\nexcept SystemExit: pass\n"
    code += "print(' '.join(m for m in sys.modules if m.startswith('launchkit.cli.') and m.endswith('_cmd')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return set(proc.stdout.splitlines()[-1].split()) if proc.stdout.strip() else set()


def test_only_the_invoked_command_is_imported():
    assert _loaded("--version") == set()
    assert _loaded("--help") == set()  # the table's summaries
    assert _loaded("profiles", "--help") == {"launchkit.cli.profiles_cmd"}
    assert _loaded("lst") == set()  # a typo: "did you mean" from the table


@pytest.mark.parametrize(
    ("words", "expected"),
    [("launchkit lo", "logs"), ("launchkit run --priority h", "high"), ("launchkit secret l", "list")],
)
def test_shell_completion_walks_the_lazy_tree(words, expected):
    env = {**os.environ, "_LAUNCHKIT_COMPLETE": "complete_bash", "COMP_WORDS": words}
    env["COMP_CWORD"] = str(len(words.split()) - 1)
    proc = subprocess.run(
        [sys.executable, "-m", "launchkit"], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.stdout.split() == [expected], proc.stdout + proc.stderr
