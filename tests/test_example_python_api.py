"""examples/python-api/sweep.py as a user runs it: a sweep launched from Python on this machine (real
processes), every run followed to its end, its results downloaded and read."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

EXAMPLE = ROOT / "examples" / "python-api"


@pytest.mark.slow
def test_the_python_api_sweep_example_launches_follows_and_collects(repo, tmp_path):
    repo.commit({"train.py": (EXAMPLE / "train.py").read_text()}, "the example's train.py")
    r = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE / "sweep.py"),
            "--lr",
            "0.1",
            "--lr",
            "0.01",
            "--results",
            str(tmp_path / "res"),
        ],
        cwd=repo.path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert sorted(row["lr"] for row in rows) == [0.01, 0.1]
    assert "[lr=0.1] step=3 lr=0.1" in r.stdout and "[lr=0.01] step=3" in r.stdout
    assert "best: lr=0.1" in r.stderr and "(2 of 2 runs)" in r.stderr
    assert len(list((tmp_path / "res").rglob("metrics.json"))) == 2


@pytest.mark.slow
def test_the_sweep_example_says_runs_succeeded_without_metrics(repo, tmp_path):
    """Runs that end well but write no metrics.json are not "no run succeeded" (issue 45)."""
    repo.commit({"train.py": "import sys\nprint('lr', sys.argv[2])\n"}, "a train.py without metrics")
    r = subprocess.run(
        [sys.executable, str(EXAMPLE / "sweep.py"), "--lr", "0.1", "--results", str(tmp_path / "res")],
        cwd=repo.path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert r.returncode == 1, r.stderr
    assert "no run succeeded" not in r.stderr
    assert "1 of 1 runs succeeded, none wrote metrics.json" in r.stderr
