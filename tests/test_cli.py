"""Global CLI behaviour: help panels, quiet, python -m, backends that are not there yet."""

from __future__ import annotations

from conftest import run_cli
from inproc import run_main

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


def test_no_color_errors_are_plain(repo):
    r = run_cli("run", "--gpus", "0", *CMD, cwd=repo.path, env={"NO_COLOR": "1"})
    assert r.code == 2 and "\x1b[" not in r.stderr


def test_bare_invocation_shows_help():
    r = run_cli()
    assert r.code == 0 and "Commands:" in r.stdout and "run" in r.stdout


def test_tables_are_plain_when_piped_and_rich_on_a_terminal(capsys, monkeypatch):
    from launchkit.cli.table import print_table

    rows = [["local-1", "failed"], ["local-22", "succeeded"]]
    print_table(["ID", "STATUS"], rows, status_column="STATUS")
    assert capsys.readouterr().out.splitlines() == [
        "ID        STATUS",
        "local-1   failed",
        "local-22  succeeded",
    ]
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    print_table(["ID", "STATUS"], rows, status_column="STATUS")
    out = capsys.readouterr().out
    assert "local-22" in out and "succeeded" in out and "ID" in out
