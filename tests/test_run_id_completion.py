"""TAB completion of run ids reads the backends' own stores through their registry rows (`run_ids`):
the CLI never opens a backend's storage (docs/architecture.md; issue 40 item 7)."""

from __future__ import annotations

import ast
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from launchkit.backends.local.store import HOME_VAR, SCHEMA

CLI = Path(__file__).resolve().parent.parent / "src" / "launchkit" / "cli"


def test_the_cli_imports_no_backends_storage():
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("launchkit.backends.local"), (path.name, node.module)
        assert "runs.db" not in path.read_text(), path.name


def test_run_ids_complete_from_the_local_store(tmp_path):
    home = tmp_path / "lk"
    home.mkdir()
    with sqlite3.connect(home / "runs.db") as conn:
        conn.executescript(SCHEMA)
        for i, rid in enumerate(("local-aaa1", "local-aab2", "local-b3")):
            conn.execute(
                "INSERT INTO runs (id, name, status, created, replicas) VALUES (?, 'n', 'running', ?, 1)",
                (rid, float(i)),
            )
    env = {**os.environ, HOME_VAR: str(home), "_LAUNCHKIT_COMPLETE": "complete_bash"}
    r = subprocess.run(
        [sys.executable, "-m", "launchkit"],
        env={**env, "COMP_WORDS": "launchkit why local-aa", "COMP_CWORD": "2"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.stdout.split() == ["local-aab2", "local-aaa1"], r.stderr  # newest first
