"""Global CLI behaviour: help panels, quiet, python -m, backends that are not there yet."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest

from conftest import run_cli
from inproc import run_main
from ptyrun import run_in_pty

CMD = ["--", "python", "train.py"]


def test_run_help_groups_options_in_panels():
    r = run_cli("run", "--help", env={"COLUMNS": "120"})
    assert r.code == 0 and r.stdout.startswith("Usage: launchkit run [OPTIONS] -- COMMAND...")
    for panel in (
        "Workload:",
        "Launch:",
        "Constraints:",
        "Resources (per replica):",
        "Inputs:",
        "Git:",
        "Task:",
        "Multi-node:",
        "Runtime:",
        "Python:",
    ):
        assert f"\n{panel}\n" in r.stdout, panel
    assert "\x1b[" not in r.stdout  # plain text (NO_COLOR or not)


def test_quiet_hides_messages_but_not_data(repo):
    loud = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    quiet = run_main("-q", "run", "--dry-run", *CMD, cwd=repo.path)
    assert loud.stdout == quiet.stdout and "dry run" in loud.stderr and quiet.stderr == ""


@pytest.mark.slow
def test_errors_are_red_on_a_terminal_and_plain_with_no_color(repo):
    code, shown = run_in_pty("run", "--gpus", "-1", *CMD, cwd=repo.path, unset=("NO_COLOR",))
    assert code == 2 and shown.startswith("\x1b[1;31merror: \x1b[0m--gpus -1: "), shown
    code, shown = run_in_pty("run", "--gpus", "-1", *CMD, cwd=repo.path, env={"NO_COLOR": "1"})
    assert code == 2 and shown.startswith("error: --gpus -1: ") and "\x1b[" not in shown, shown


def test_bare_invocation_shows_help():
    r = run_cli()
    assert r.code == 0 and r.stdout == run_cli("--help").stdout


def test_tables_are_plain_when_piped(capsys):
    from launchkit.cli.table import print_table

    rows = [["local-1", "failed"], ["local-22", "succeeded"]]
    print_table(["ID", "STATUS"], rows, status_column="STATUS")
    assert capsys.readouterr().out == "ID        STATUS\nlocal-1   failed\nlocal-22  succeeded\n"


TABLE_SCRIPT = """
from launchkit.cli.table import print_table
print_table(["ID", "STATUS"], [["local-1", "failed"], ["local-22", "succeeded"], ["x", "odd"]],
            status_column="STATUS")
"""


def _table_on_a_terminal(env: dict[str, str]) -> str:
    leader, follower = pty.openpty()
    proc = subprocess.run(
        [sys.executable, "-c", TABLE_SCRIPT], stdout=follower, stderr=subprocess.PIPE, env=env, timeout=60
    )
    os.close(follower)
    shown = os.read(leader, 65536).decode()
    os.close(leader)
    assert proc.returncode == 0, proc.stderr
    return shown.replace("\r\n", "\n")


def test_tables_are_rich_with_status_colours_on_a_terminal():
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | {"COLUMNS": "80", "TERM": "xterm"}
    shown = _table_on_a_terminal(env)
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).rstrip() for line in shown.splitlines()]
    assert lines == ["ID        STATUS", "local-1   failed", "local-22  succeeded", "x         odd"]
    assert "\x1b[31mfailed" in shown and "\x1b[32msucceeded" in shown  # red and green
    assert "\x1b[1mID" in shown  # bold header
    plain = _table_on_a_terminal({**env, "NO_COLOR": "1"})
    assert "\x1b[" not in plain and plain.splitlines()[1].rstrip() == "local-1   failed"
