"""`launchkit skill` (issue 43 item 4): a skill file for coding agents made from launchkit's own help;
every dry-run and help line in it runs, and names only what this version has."""

from __future__ import annotations

import json
import re
import shlex

from inproc import run_main
from launchkit.cli.app import REGISTRY
from launchkit.errors import KINDS

WS = "ai2/launchkit"


def _skill() -> str:
    r = run_main("skill")
    assert r.code == 0, r.stderr
    return r.stdout


def _lines(text: str) -> list[str]:
    """The command lines of its bash blocks, without their comments."""
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [line.split(" # ")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def test_every_dry_run_and_help_line_in_the_skill_runs(repo, fake_beaker):
    lines = _lines(_skill())
    assert len(lines) >= 10 and all(line.startswith("launchkit ") for line in lines), lines
    assert sum("--dry-run" in line for line in lines) >= 4 and sum("--help" in line for line in lines) >= 6
    for line in lines:
        assert "--dry-run" in line or "--help" in line, line  # only what creates nothing
        argv = shlex.split(line)[1:]
        r = run_main(*argv, cwd=repo.path, env={"LAUNCHKIT_WORKSPACE": WS})
        assert r.code == 0, (line, r.stderr)
        if "--dry-run" in line:
            assert any(x.startswith("plan: ") for x in r.stderr.splitlines()), (line, r.stderr)
        if "--json" in line:
            assert list(json.loads(r.stdout)) == ["plan", "spec"], line


def test_the_skill_names_what_this_version_has():
    text = _skill()
    assert text.startswith("---\nname: launchkit\ndescription: ")  # what agent tools read first
    for entry in REGISTRY:
        assert (f"`launchkit {entry.name}`" in text) is (not entry.hidden), entry.name
    for kind in KINDS:
        assert f"`{kind}`" in text
    for key in ("queued", "starting", "setup", "first_output", "running", "start_now", "task_timeout"):
        assert f"`{key}`" in text
    assert "Example: `plan: ai2/jupiter · 8 GPUs x 2 replicas · priority high" in text


def test_install_writes_it_where_agent_tools_look(tmp_path):
    r = run_main("skill", "--install", str(tmp_path / "skills"))
    assert r.code == 0, r.stderr
    written = tmp_path / "skills" / "launchkit" / "SKILL.md"
    assert written.read_text() == _skill() and str(written) in r.stderr
    (tmp_path / "file").write_text("x")
    r = run_main("skill", "--install", str(tmp_path / "file"))
    assert r.code == 2 and "not a directory" in r.stderr
