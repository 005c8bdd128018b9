"""The install step's progress lines (runtime/node/environment/progress.py), bash's loop before issue 45."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import pytest

from launchkit.runtime.node.environment import progress
from lk_helpers import entrypoint_path, left_running


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds + 0.25  # each wake-up a little late: the schedule does not drift


def test_lines_come_on_schedule_with_the_logs_last_line(tmp_path):
    log = tmp_path / "03_install.log"
    log.write_text("$ uv sync --frozen\nResolved 3 packages\rPrepared 2 packages\n")
    clock, out = Clock(), io.StringIO()
    progress.tick("install", str(log), 10, out, clock, clock.sleep, lambda: clock.now < 135)
    assert out.getvalue().splitlines() == [
        "[launchkit] install: 10s so far (Resolved 3 packagesPrepared 2 packages)",
        "[launchkit] install: 20s so far (Resolved 3 packagesPrepared 2 packages)",
        "[launchkit] install: 30s so far (Resolved 3 packagesPrepared 2 packages)",
    ]


def test_the_last_line_as_bash_showed_it(tmp_path):
    log = tmp_path / "log"
    assert progress.last_line(str(log)) == ""  # not there (yet)
    log.write_text("")
    assert progress.last_line(str(log)) == ""
    log.write_text("x\n$ uv pip install torch\n")
    assert progress.last_line(str(log)) == "running uv pip install torch"
    log.write_text("done\nDownloading torch " + "#" * 300)  # an unfinished line, cut
    assert progress.last_line(str(log)) == ("Downloading torch " + "#" * 300)[:120]
    log.write_bytes(b"\xff\xfe caf\xc3\xa9\n")
    assert progress.last_line(str(log)).endswith("caf\u00e9")


def test_no_lines_when_turned_off_or_stderr_is_gone(tmp_path):
    assert progress.every_seconds({}) == 10
    assert progress.every_seconds({"LAUNCHKIT_PROGRESS_SECONDS": "3"}) == 3
    for off in ("0", "-1", "1.5", "soon"):
        assert progress.every_seconds({"LAUNCHKIT_PROGRESS_SECONDS": off}) == 0
    out = io.StringIO()
    out.close()
    clock = Clock()
    progress.tick("install", str(tmp_path / "log"), 1, out, clock, clock.sleep)  # returns: nobody reads


def test_it_runs_as_a_runtime_subcommand(tmp_path, monkeypatch, capsys):
    from launchkit.runtime.node import __main__ as node_main

    monkeypatch.setenv("LAUNCHKIT_PROGRESS_SECONDS", "0")
    assert node_main.main(["progress", "install", str(tmp_path / "log")]) == 0
    assert node_main.main(["progress", "install"]) == 100
    assert node_main.main(["progress", "install", "log", "bash"]) == 100
    assert "usage: progress LABEL LOG [PARENT]" in capsys.readouterr().err


def test_the_ticker_looks_for_its_parent_between_lines(tmp_path):
    """Not only at each line: a ticker whose bash is gone ends within PARENT_POLL seconds."""
    clock, out = Clock(), io.StringIO()
    progress.tick("install", str(tmp_path / "log"), 3600, out, clock, clock.sleep, lambda: clock.now < 101)
    assert out.getvalue() == "" and clock.now < 102


@pytest.mark.parametrize("bash_lives", ["0", "1"])
def test_a_ticker_ends_with_its_bash_even_unkilled(tmp_path, bash_lives):
    """The flaky test_custom_install_failure_fails_too (issue 45): bash's kill can be lost (it lands
    between the fork and the ticker's exec, where bash's TERM trap still holds), and a ticker whose bash
    had already exited took the new parent (1, a subreaper) for its own: it ticked on, holding the job's
    stderr open, and whoever read it (a test's subprocess.run, a supervisor's pump) waited. Now the
    ticker is told bash's pid and ends when bash is gone, before or after it started. Here bash starts
    it and exits (at once, or a second later) without killing it: its stderr must reach EOF."""
    node = Path(entrypoint_path()).parent
    script = (
        "me=$BASHPID\n"
        f'PYTHONPATH={node} "$1" -s {node}/launchkit_node/boot.py progress install "$2" "$me" </dev/null >/dev/null &\n'
        f"sleep {bash_lives}\n"
    )
    env = {**os.environ, "LAUNCHKIT_PROGRESS_SECONDS": "3600", "LK_TEST_TICKER": str(tmp_path)}  # no line due
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"
    try:
        r = subprocess.run(
            ["bash", "-c", script, "bash", python, str(tmp_path / "log")],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        left = left_running("LK_TEST_TICKER", str(tmp_path))
        raise AssertionError(f"the ticker outlived its bash:\n{left}") from None
    assert r.returncode == 0 and r.stderr == "", r.stderr
