"""A running run's last progress without reading its logs (issue 34, item 4): `list`'s PROGRESS column,
`list --json`'s `progress`, `why`'s "last progress: ..." line; matched with the run's own patterns by
the watchdog's one matcher (runtime/node/launch/watchdog.py: `progress_in`)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import run_cli
from inproc import run_main
from lk_helpers import AGO, FAST_ENV, launched_id, policy_env

WS = "ai2/launchkit"
NS = 1_000_000_000


def test_the_backends_read_progress_with_the_watchdogs_matcher():
    from launchkit.backends.progress import last_progress
    from launchkit.runtime.node.launch import watchdog
    from launchkit.runtime.node.policy import Policy

    lines = [b"[step=3/100] loss=2.0", b"Epoch 0:  40%|####| 4/10 [00:02<00:03, 1.8it/s]\r5/10 [00:03", b"x"]
    got = last_progress([(i * NS, line) for i, line in enumerate(lines, 1)], ())
    assert got is not None and got.text == "5/10 [0" and got.at == dt.datetime.fromtimestamp(2, dt.UTC)
    s = watchdog.settings(Policy(stall_timeout=60))
    assert s is not None
    w = watchdog.Watch(s, 0.0, 0.0)
    w.saw(1, b"\n".join(lines) + b"\n", 1.0, 1.0)
    assert w.progress_text == got.text  # the same match, from the same function
    own = last_progress(
        [(NS, b"[step=3/100]"), (2 * NS, b"it=7 of 9\x1b")], ["it=\\d+ of \\d+\x1b?", "never"]
    )
    assert own is not None and own.text == "it=7 of 9"  # the run's own patterns; no control character
    assert last_progress([(NS, b"NCCL WARN")], ()) is None
    assert last_progress([(NS, b"step 3")], ["(unclosed"]) is None  # the job refused it itself


def _running(st, name: str, lines: list[str], env: dict[str, str] | None = None, *, at: int):
    exp = st.add_experiment(WS, name, author="alice", description="[launchkit] run", env=env)
    job = st.start_job(exp)
    st.append_logs(job, lines, timestamps=[at + i for i in range(len(lines))])
    return exp


def test_beaker_list_and_why_show_the_last_progress(fake_beaker):
    st = fake_beaker.state
    at = (int(dt.datetime.now(dt.UTC).timestamp()) - 300) * NS  # five minutes ago
    own = _running(
        st, "own-patterns", ["[step=3/100] loss=2", "it=7 [bold]done[/bold]", "NCCL WARN"],
        policy_env(progress_patterns=[r"it=\d+ \[bold\]\w+"]), at=at,
    )  # fmt: skip
    olmo = _running(st, "olmo", ["[step=1200/5000,epoch=1] loss=2.1", "NCCL WARN x"], at=at)
    quiet = _running(st, "quiet", ["hello"], at=at)
    r = run_main("list", "--json")
    assert r.code == 0, r.stderr
    shown = {x["id"]: x["progress"] for x in json.loads(r.stdout)}
    assert shown[own.id]["text"] == "it=7 [bold]done", shown  # its own pattern, not the default
    assert shown[olmo.id]["text"] == "step=1200/5000", shown
    assert dt.datetime.fromisoformat(shown[olmo.id]["at"]).timestamp() == pytest.approx(at / NS)
    assert shown[quiet.id] is None

    r = run_main("list", env={"COLUMNS": "200"})
    lines = r.stdout.splitlines()
    assert "PROGRESS" in lines[0].split(), r.stdout
    assert re.search(rf"it=7 \[bold\]done \({AGO}\)", next(x for x in lines if own.id in x)), r.stdout
    r = run_main("list", env={"COLUMNS": "80"})
    assert r.code == 0 and max(map(len, r.stdout.splitlines())) <= 80, r.stdout

    r = run_main("why", olmo.id)
    assert r.code == 0, r.stderr
    when = dt.datetime.fromtimestamp(at / NS, dt.UTC).strftime("%H:%M")
    assert (
        r.stdout.splitlines()[0]
        == f"{olmo.id} is running; last progress: step=1200/5000 at {when} UTC (5m ago)"
    )
    r = run_main("why", quiet.id)
    assert r.stdout.splitlines()[0] == f"{quiet.id} is running; no progress line at the end of its log", (
        r.stdout
    )
    r = run_main("why", "--json", own.id)
    assert json.loads(r.stdout)["progress"]["text"] == "it=7 [bold]done", r.stdout


def test_beaker_list_reads_progress_of_the_newest_running_rows_only(fake_beaker):
    """Two calls per running row (its newest job, its log's tail), for the newest PROGRESS_ROWS rows."""
    from launchkit.backends.beaker.backend import PROGRESS_ROWS

    st = fake_beaker.state
    at = (int(dt.datetime.now(dt.UTC).timestamp()) - 60) * NS
    exps = [_running(st, f"r{i}", [f"step {i}"], at=at) for i in range(PROGRESS_ROWS + 2)]
    r = run_main("list", "--json")
    assert r.code == 0, r.stderr
    shown = {x["id"]: x["progress"] for x in json.loads(r.stdout)}
    assert [shown[e.id] is not None for e in exps] == [False] * 2 + [True] * PROGRESS_ROWS, shown
    assert shown[exps[-1].id]["text"] == f"step {len(exps) - 1}"
    fake_beaker.reset_calls()
    run_main("list")
    assert fake_beaker.calls.get("StreamJobLogs") == PROGRESS_ROWS, fake_beaker.calls


@pytest.mark.slow  # real processes: a local run under its supervisor
def test_local_list_and_why_show_the_last_progress(repo, marker):
    code = "\n".join(
        [
            "import time",
            "print('[step=3/100] loss=2.0', flush=True)",
            "print('it=7 of 9', flush=True)",
            "print('NCCL WARN', flush=True)",
            "print('ready', flush=True)",
            f"time.sleep(600)  # {marker}",
        ]
    )
    ids = []
    for extra in ((), ("--stall-timeout", "1h", "--progress-pattern", r"it=\d+")):
        r = run_cli("run", "--local", "--no-python", *extra, "--", sys.executable, "-c", code, cwd=repo.path,
                    env=FAST_ENV)  # fmt: skip
        assert r.code == 0, r.stderr
        ids.append(launched_id(r.stderr))
    default, own = ids
    for run_id in ids:  # its lines are in its log once `follow` shows them
        with subprocess.Popen(
            [sys.executable, "-m", "launchkit", "follow", run_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **FAST_ENV},
        ) as follow:
            assert follow.stdout is not None
            for line in follow.stdout:
                if line.strip() == b"ready":
                    break
            follow.kill()
    try:
        r = run_cli("why", default, env=FAST_ENV, timeout=60)
        assert re.fullmatch(
            rf"{default} is running; last progress: step=3/100 at \d\d:\d\d UTC \({AGO}\)",
            r.stdout.splitlines()[0],
        ), r.stdout
        r = run_cli("why", own, env=FAST_ENV, timeout=60)
        assert "last progress: it=7 at " in r.stdout, r.stdout
        r = run_cli("list", "--local", "--json", env=FAST_ENV, timeout=60)
        shown = {x["id"]: x["progress"] for x in json.loads(r.stdout)}
        assert shown[default]["text"] == "step=3/100" and shown[own]["text"] == "it=7", shown
        r = run_cli("list", "--local", env={**FAST_ENV, "COLUMNS": "200"}, timeout=60)
        assert "PROGRESS" in r.stdout.splitlines()[0] and "it=7 (" in r.stdout, r.stdout
        r = run_cli("list", "--local", env={**FAST_ENV, "COLUMNS": "80"}, timeout=60)
        assert max(map(len, r.stdout.splitlines())) <= 80, r.stdout
    finally:
        for run_id in ids:
            run_cli("stop", run_id, "--yes", env=FAST_ENV, timeout=60)


def test_the_progress_column_is_cut_first_and_left_out_when_it_cannot_fit(capsys, monkeypatch):
    from launchkit.cli.table import print_table

    header = ["ID", "STATUS", "PROGRESS", "REASON"]
    reason = "failed with exit code 7, see logs"
    rows = [["01JABCDEFGHIJ", "running", "step=1200/5000 (4m ago)", ""], ["01JZ", "failed", "", reason]]
    monkeypatch.setenv("COLUMNS", "70")
    print_table(header, rows, status_column="STATUS", optional="PROGRESS")
    out = capsys.readouterr().out.splitlines()
    assert out[2].endswith(reason) and "step=1200/…" in out[1], out  # PROGRESS cut, REASON whole
    assert max(map(len, out)) <= 70, out
    monkeypatch.setenv("COLUMNS", "60")  # no room for it even cut: the other columns keep theirs
    print_table(header, rows, status_column="STATUS", optional="PROGRESS")
    out = capsys.readouterr().out.splitlines()
    assert "PROGRESS" not in out[0] and out[2].endswith(reason) and max(map(len, out)) <= 60, out


def _follower(backend, run, limits):
    """`run --follow`'s watchdog over a real backend, looked at with a clock the test moves."""
    import io

    from launchkit.application import Application
    from launchkit.cli.following import _Sink, _Watchdog

    now = [100.0]
    sink = _Sink(io.BytesIO(), True, lambda: now[0])
    return _Watchdog(Application(stderr=io.StringIO(), color=False), backend, run, sink, limits), now


def test_beaker_a_follow_limit_stop_is_told_as_launchkits(fake_beaker):
    """`run --follow --start-timeout` stops a run that never starts: why and list tell launchkit's stop
    with the limit (CancelWorkloads carries no reason: the description does), a user's stop stays theirs."""
    from launchkit.backends.beaker.backend import BeakerBackend
    from launchkit.cli.following import Limits

    st = fake_beaker.state
    never = st.add_experiment(WS, "never-starts", author="alice", description="[launchkit] run")
    theirs = st.add_experiment(WS, "stopped-by-alice", author="alice", description="[launchkit] run")
    backend = BeakerBackend()
    dog, now = _follower(backend, backend.get(never.id), Limits(start=5))
    assert not dog.check()
    now[0] += 5
    assert dog.check()
    assert run_main("stop", theirs.id, "--yes").code == 0
    st.finalize_job(st._job(never))
    st.finalize_job(st._job(theirs))
    line = f"{never.id} stopped by launchkit following it: it did not start within --start-timeout 5s"
    assert run_main("why", never.id).stdout.startswith(line + "; raise that limit"), run_main("why", never.id)
    assert "canceled" in run_main("why", theirs.id).stdout
    rows = {x["id"]: x["end"] for x in json.loads(run_main("list", "--json").stdout)}
    assert rows[never.id]["kind"] == "timeout" and rows[never.id]["by"] == "launchkit", rows
    assert rows[theirs.id]["kind"] == "canceled", rows
    r = run_main("list", env={"COLUMNS": "200"})
    assert "stopped by launchkit following it: it did not" in next(
        x for x in r.stdout.splitlines() if never.id in x
    )


def test_beaker_an_inactive_timeout_stop_is_told_as_launchkits(fake_beaker, tmp_path):
    """The real runtime ends a silent command (--inactive-timeout, nobody following); its log and exit
    code as Beaker keeps them are told by why, list and follow as launchkit's stop, with the timeout."""
    (tmp_path / "job.py").write_text("import time\nprint('hi', flush=True)\ntime.sleep(600)\n")
    env = {"PATH": "/usr/bin:/bin", **policy_env(inactive_timeout=1)}
    cmd = [sys.executable, "-m", "launchkit.runtime.node", "launch", "--cwd", str(tmp_path), "--t0", "0"]
    ran = subprocess.run(
        [*cmd, "--", sys.executable, "job.py"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        timeout=120,
    )  # fmt: skip
    assert ran.returncode == 124, ran.stdout
    st = fake_beaker.state
    silent = st.add_experiment(WS, "silent", author="alice", description="[launchkit] run")
    st.start_job(silent)
    st.append_logs(silent, ran.stdout.decode().splitlines())
    st.finish_job(silent, 124)
    quiet = f"{silent.id} stopped by launchkit: no output for 1s (--inactive-timeout)"
    assert run_main("why", silent.id).stdout.startswith(quiet)
    r = run_main("list", env={"COLUMNS": "200"})
    assert quiet.split(" ", 1)[1] in next(x for x in r.stdout.splitlines() if silent.id in x), r.stdout
    r = run_cli("follow", silent.id, timeout=60)
    assert r.code == 124 and quiet in r.stderr and "canceled" not in r.stderr, r.stderr
