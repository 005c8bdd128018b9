"""Tables: plain text in every cell, and every table command fits the terminal (80 columns unless
`COLUMNS` says otherwise), on a real terminal and piped."""

from __future__ import annotations

import re

import pytest

from conftest import run_cli
from ptyrun import run_in_pty

WS = "ai2/launchkit"
ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def _widest(text: str) -> int:
    return max(len(ANSI.sub("", line)) for line in text.splitlines())


@pytest.fixture
def failed_runs(fake_beaker):
    """Runs whose free-text message holds rich markup, and long names."""
    st = fake_beaker.state
    for i, message in enumerate(
        ["pull failed: [/] closing tag", "[bold red]not markup[/bold red] " + "x" * 90]
    ):
        exp = st.add_experiment(WS, f"markup-{i}-" + "n" * 40, author="alice", description="[launchkit] run")
        st.fail_job(exp, message=message)
    return fake_beaker


@pytest.mark.slow  # a real terminal and the fake Beaker
def test_list_on_a_terminal_shows_markup_as_text(failed_runs):
    code, shown = run_in_pty("list", env={"TERM": "xterm", "COLUMNS": "400"}, unset=("NO_COLOR",))
    assert code == 0 and "Traceback" not in shown, shown
    plain = ANSI.sub("", shown)
    assert "pull failed: [/] closing tag" in plain and "[bold red]not markup" in plain, plain
    assert "\x1b[31mfailed" in shown and "\x1b[1mID" in shown  # statuses coloured, header bold
    code, shown = run_in_pty("list", env={"TERM": "xterm"}, unset=("NO_COLOR",))
    assert code == 0 and _widest(shown) <= 100, shown  # ptyrun's COLUMNS


@pytest.mark.slow
@pytest.mark.parametrize("columns", ["", "80", "200", "40"])
def test_list_fits_the_terminal(failed_runs, columns):
    r = run_cli("list", env={"COLUMNS": columns}, timeout=60)  # "": none set, piped: 80
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3 and lines[1].startswith("01M"), r.stdout  # one line a row, ids whole
    if columns == "40":  # narrower than the columns' floors: as narrow as they get
        assert lines[1].split()[:3] == [lines[1].split()[0], "marku…", "failed"], r.stdout
    else:
        assert _widest(r.stdout) <= int(columns or 80), r.stdout
    if columns == "200":  # room for the whole reason
        assert "(pull failed: [/] closing tag)" in r.stdout, r.stdout


@pytest.mark.slow
def test_find_gpus_fits_the_terminal(fake_beaker):
    for args in (
        ["find-gpus"],
        ["find-gpus", "--all"],
        ["find-gpus", "--gpus", "1"],
        ["find-gpus", "--gpus", "8"],
    ):
        r = run_cli(*args, env={"COLUMNS": "80"}, timeout=60)
        assert r.code == 0 and "CLUSTER" in r.stdout.splitlines()[1 if "--gpus" in args else 0], r.stderr
        assert _widest(r.stdout) <= 80, r.stdout


def test_a_cut_keeps_the_first_and_status_columns_whole(capsys, monkeypatch):
    from launchkit.cli.table import print_table

    monkeypatch.setenv("COLUMNS", "40")
    rows = [["01JABCDEFGHIJKLMNOPQRSTUVW", "succeeded", "a reason that is much too long to fit here"]]
    print_table(["ID", "STATUS", "REASON"], rows, status_column="STATUS")
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("01JABCDEFGHIJKLMNOPQRSTUVW  succeeded  a rea…"), out
    assert max(map(len, out)) <= 46  # the kept columns are wider than 40 themselves: the rest is cut to 6


def test_every_status_has_a_colour():
    from launchkit.cli.table import STATUS_STYLES
    from launchkit.core.status import RunStatus

    assert set(STATUS_STYLES) == {s.value for s in RunStatus}


def test_one_status_vocabulary():
    """Run statuses are declared once (core/status.py): no other module spells out a list of them."""
    import ast
    from pathlib import Path

    import launchkit
    from launchkit.core.status import RunStatus

    words = {s.value for s in RunStatus}
    src = Path(launchkit.__file__).parent
    copies = []
    for path in src.rglob("*.py"):
        if path.name == "status.py" or "node" in path.relative_to(src).parts:
            continue  # the job's runtime cannot import launchkit: its words are Slack events (EMOJI)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict, ast.ClassDef)):
                if isinstance(node, ast.ClassDef):
                    names = [
                        t.id
                        for s in node.body
                        if isinstance(s, ast.Assign)
                        for t in s.targets
                        if isinstance(t, ast.Name)
                    ]
                else:
                    elts = node.keys if isinstance(node, ast.Dict) else node.elts
                    names = [
                        e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                    ]
                if len(words & set(names)) >= 3:
                    copies.append(f"{path.relative_to(src)}:{node.lineno}")
    assert copies == []


def test_headers_stack_at_underscores_when_cutting_is_not_enough():
    from launchkit.cli.table import fit

    header = ["CLUSTER", "REPLICAS_NOW", "CORDONED_NODES", "GPU_TYPES"]
    rows = [["ai2/jupiter", "12", "0", "NVIDIA H100"]]
    assert fit(header, rows, 80) == [header, rows[0]]  # fits on one line: as it is
    assert fit(header, rows, 40) == [
        ["", "REPLICAS", "CORDONED", "GPU"],
        ["CLUSTER", "NOW", "NODES", "TYPES"],
        ["ai2/jupiter", "12", "0", "NVIDIA…"],
    ]


@pytest.mark.slow  # a real terminal
def test_profiles_prose_wraps_on_a_terminal_and_stays_whole_piped(repo):
    code, shown = run_in_pty("profiles", cwd=repo.path, env={"COLUMNS": "80"})
    assert code == 0 and _widest(shown) <= 80, shown
    assert "\n      jupiter* or host titan*" in shown  # the cause's line goes on indented
    r = run_cli("profiles", cwd=repo.path, env={"COLUMNS": "80"})
    assert r.code == 0 and "(ai2-weka: host jupiter* or host titan*" in r.stdout, r.stdout


def test_one_cause_vocabulary():
    """Why a run or a job ended is one enum (core/status.py `Cause`): no other enum in src repeats its
    members, and the names of the two it replaced (`EndKind`, `Stop`) and of the status aliases are gone."""
    import ast
    import re
    from pathlib import Path

    import launchkit
    from launchkit.core.status import Cause

    words = {c.value for c in Cause}
    src = Path(launchkit.__file__).parent
    found = []
    for path in src.rglob("*.py"):
        text = path.read_text()
        if re.search(r"\b(EndKind|JobState|OutcomeState)\b|\bStop\.|class Stop\b", text):
            found.append(f"{path.relative_to(src)}: an old name")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.name not in ("Cause", "RunStatus"):  # where, not why
                names = {
                    t.id
                    for s in node.body
                    if isinstance(s, ast.Assign)
                    for t in s.targets
                    if isinstance(t, ast.Name)
                }
                if len(words & names) >= 3:
                    found.append(f"{path.relative_to(src)}:{node.lineno} {node.name}")
    assert found == []
