import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def test_run_reference_is_up_to_date():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_run_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_every_run_option_is_documented():
    doc = (ROOT / "docs" / "run.md").read_text()
    for flag in (
        "--dry-run",
        "--save-spec",
        "--env-secret",
        "--uv-cache-dir",
        "--synchronized-start-timeout",
    ):
        assert f"{flag}" in doc


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "uv run pytest" in readme and "\nuv run pytest\n" in ci


def test_hello_example_runs(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "hello" / "train.py"), "--steps", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"RESULTS_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0 and "final loss 0.2500" in proc.stdout
    assert (Path(tmp_path) / "metrics.json").exists()


@pytest.mark.slow
def test_readme_main_job_works_as_written(tmp_path):
    """The README's main-job line, run as written (launchkit via this interpreter) in a fresh clone."""
    import shlex

    line = next(
        ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("uv run launchkit run ")
    )
    argv = shlex.split(line)[len(["uv", "run", "launchkit"]) :]
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    proc = subprocess.run(
        [sys.executable, "-m", "launchkit", *argv], cwd=clone, capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    assert "final loss 0.1250" in proc.stdout and "succeeded" in proc.stderr
