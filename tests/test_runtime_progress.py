"""The install step's progress lines (runtime/node/environment/progress.py), bash's loop before issue 45."""

from __future__ import annotations

import io

from launchkit.runtime.node.environment import progress


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
    clock, out, alive = Clock(), io.StringIO(), iter([True, True, True, False])
    progress.tick("install", str(log), 10, out, clock, clock.sleep, lambda: next(alive))
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
    assert "usage: progress LABEL LOG" in capsys.readouterr().err
