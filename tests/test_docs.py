import os
import re
import shlex
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


def test_hello_example_run_plainly_leaves_the_clone_clean(tmp_path):
    """The README's plain run of the hello example, from a clone's root, leaves nothing untracked: its
    results/ is ignored, so later launches do not warn about it (issue 45)."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "RESULTS_DIR"}
    proc = subprocess.run(
        [sys.executable, "examples/hello/train.py", "--steps", "1"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert status == "", status


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


# -- every command example in docs/ and examples/ that needs no network runs as written ------------
FENCE = re.compile(r"^\s*```")


def command_examples(path: Path) -> list[tuple[int, list[str]]]:
    """(line, argv after `launchkit`) of each `launchkit ...` command in the file's code blocks
    (`$ ` and `uv run ` dropped, `\\` continuations joined, cut at `&&`, pipes, `;` and `#`)."""
    found, inside, pending = [], False, ""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            inside, pending = not inside, ""
            continue
        text = pending + line.strip()
        if not inside or text.endswith("\\"):
            pending = text[:-1] + " " if inside else ""
            continue
        pending = ""
        text = re.sub(r"^(\$ )?(uv run )?", "", text)
        if text.startswith("launchkit "):
            words = []
            for word in shlex.split(text, comments=True)[1:]:
                if word in ("&&", "||", "|", ";", ">", "2>&1"):
                    break
                words.append(word)
            found.append((n, words))
    return found


def offline(argv: list[str]) -> bool:
    """Needs no network: a dry run, help, profiles, and the local backend without installs."""
    if "--dry-run" in argv or "--help" in argv or argv[0] == "profiles":
        return True
    return "--local" in argv and (argv[0] in ("list", "logs") or "--no-python" in argv)


DOCUMENTED = sorted(
    p.relative_to(ROOT)
    for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").rglob("*.md")]
    if any(offline(argv) for _, argv in command_examples(p))
)


@pytest.mark.slow  # a clone and real launchkit processes
@pytest.mark.parametrize("doc", DOCUMENTED, ids=str)
def test_documented_commands_run_as_written(doc, tmp_path):
    """In a fresh clone, in the document's order; a command that errors fails the test with its line."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = {**os.environ, "BEAKER_CONFIG": str(tmp_path / "no-beaker.yml"), "LAUNCHKIT_RETRY_DELAY": "0.05"}
    env.pop("BEAKER_TOKEN", None)
    failed = []
    for n, argv in command_examples(ROOT / doc):
        if not offline(argv):
            continue
        proc = subprocess.run(
            [sys.executable, "-m", "launchkit", *argv],
            cwd=clone,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        if proc.returncode != 0:
            failed.append(
                f"{doc}:{n}: launchkit {shlex.join(argv)} -> exit {proc.returncode}: {proc.stderr.strip()}"
            )
    assert failed == []


def test_examples_are_found():
    """The collector sees the examples it is meant to run (a guard on the guard)."""
    assert Path("README.md") in DOCUMENTED and Path("examples/local-run/README.md") in DOCUMENTED
    runs = [argv for doc in DOCUMENTED for _, argv in command_examples(ROOT / doc) if offline(argv)]
    assert ["profiles", "ai2/jupiter"] in runs and len(runs) >= 15
    assert any(a[:2] == ["run", "--dry-run"] and "--sweep" in a for a in runs)  # a `\` continuation joined
