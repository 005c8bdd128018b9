"""One stream of a run's events (issue 44 item 4): `Run.events()` in the Python API and `launchkit
follow --json` give the same typed events; `api.wait` for sweeps. Real processes on the local backend,
and the fake Beaker."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import run_cli
from inproc import run_main
from launchkit import api, events
from launchkit.backends.protocol import Cause, EndReason, RunInfo, RunStatus
from lk_helpers import FAST_ENV, launched_id, wait_finished

PY = sys.executable
NOTE = (
    "attempt 2 restarted at step 0; attempt 1 had reached step 12,639: it is not resuming from its checkpoint"
)
STARTS_OVER = """
import os, sys
if os.environ["LAUNCHKIT_ATTEMPT"] == "1":
    print("[step=12639/20000] loss=0.9", flush=True)
    sys.exit(1)
print("[step=0/20000] loss=3.2", flush=True)
print("[step=1/20000] loss=3.1", flush=True)
"""


def test_the_runtimes_lines_and_a_runs_end_are_told_in_the_slack_vocabulary():
    kind, line, fix = events.own_line(f"[launchkit] {NOTE}") or ("", "", None)
    assert (kind, line) == ("not_resuming", NOTE) and fix is not None and "checkpoint" in fix
    assert events.own_line("[launchkit] warning: no output for 5m (--inactive-soft-timeout)") == (
        "inactive_soft", "no output for 5m (--inactive-soft-timeout)", None,
    )  # fmt: skip
    assert events.own_line("[launchkit] stopped: no progress for 1s (...)") is None  # the end, from the state
    assert events.own_line("[launchkit] setup done in 3s") is None

    def run(status: RunStatus, end: EndReason | None) -> RunInfo:
        return RunInfo(
            id="R", name="n", backend="local", status=status, created="2026-01-01T00:00:00Z", end=end
        )

    stop = EndReason(
        kind=Cause.timeout,
        line="stopped by launchkit: no progress for 1s (--stall-timeout)",
        by="launchkit",
    )
    assert events.end_kind(run(RunStatus.failed, stop)) == "stalled"
    assert (
        events.end_kind(
            run(RunStatus.failed, EndReason(kind=Cause.exit_code, line="failed with exit code 1"))
        )
        == "failed"
    )
    assert events.end_kind(run(RunStatus.succeeded, None)) == "succeeded"
    assert (
        events.end_kind(run(RunStatus.canceled, EndReason(kind=Cause.canceled, line="was canceled")))
        == "canceled"
    )


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict[str, str]:
    e = {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "lkstate")}
    for k, v in e.items():
        monkeypatch.setenv(k, v)  # the API reads the same state as the CLI
    return e


@pytest.mark.slow
def test_local_follow_json_prints_the_events_run_events_yields(repo, env):
    r = run_cli("run", "--local", "--no-python", "--retry-on", "failure", "--retries", "2", "--",
                PY, "-c", STARTS_OVER, cwd=repo.path, env=env, timeout=120)  # fmt: skip
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    live = run_cli("follow", run_id, "--json", env=env, timeout=180)  # from its start, as it runs
    assert live.code == 0, live.stderr
    printed = [events.Event.model_validate_json(line) for line in live.stdout.splitlines()]
    kinds = [e.kind for e in printed]
    assert kinds[0] == "started" and kinds[-1] == "succeeded", kinds
    assert {"progress", "attempt", "not_resuming"} <= set(kinds), kinds
    told = next(e for e in printed if e.kind == "not_resuming")
    assert told.line == NOTE and told.attempt == 2 and told.fix
    assert next(e for e in printed if e.kind == "attempt").line == "attempt 2 of 3; last: exit code 1"
    assert next(e for e in printed if e.kind == "progress").progress == "step=12639/20000"

    yielded = list(api.get_run(run_id, local=True).events())  # the finished run, read again
    # the same events; where the state's (attempt) falls among the output's depends on when it was polled
    assert sorted(e.same() for e in yielded) == sorted(e.same() for e in printed)
    assert yielded[-1].kind == "succeeded"


WAITS = "import pathlib, sys, time\nwhile not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.05)\n"


@pytest.mark.slow
def test_wait_returns_at_the_first_failure_or_when_all_completed(repo, env, tmp_path, monkeypatch):
    monkeypatch.chdir(repo.path)
    go = tmp_path / "go"
    slow = api.request([PY, "-c", WAITS, str(go)], local=True, no_python=True).launch()
    fails = api.request([PY, "-c", "import sys; sys.exit(3)"], local=True, no_python=True).launch()
    done, pending = api.wait([slow, fails], return_when=api.FIRST_FAILURE, poll=0.1)
    assert [r.id for r in done] == [fails.id] and [r.id for r in pending] == [slow.id]
    assert fails.info.status == RunStatus.failed and fails.info.exit_code == 3
    done, pending = api.wait([slow], timeout=0.3, poll=0.1)  # not finished in time: handed back
    assert (done, [r.id for r in pending]) == ([], [slow.id])
    go.touch()
    done, pending = api.wait([slow, fails], return_when=api.ALL_COMPLETED, poll=0.1)
    assert {r.id for r in done} == {slow.id, fails.id} and pending == []
    assert wait_finished(slow.id, env)["status"] == "succeeded"


def test_wait_refuses_an_unknown_return_when():
    with pytest.raises(Exception, match="return_when='FIRST_COMPLETED': not a choice"):
        api.wait([], return_when="FIRST_COMPLETED")


@pytest.mark.slow
def test_beaker_follow_json_and_run_events_agree(repo, fake_beaker, monkeypatch):
    s = fake_beaker.state
    r = run_cli("run", "--workspace", "ai2/launchkit", "--yes", "--name", "ev", "--retry-on", "failure",
                "--retries", "1", "--", "python", "train.py", cwd=repo.path, timeout=90)  # fmt: skip
    assert r.code == 0, r.stderr
    exp = next(e for e in s.experiments.values() if e.name == "ev")
    s.start_job(exp)
    s.append_logs(exp.tasks[0].latest_job, ["[launchkit] setup done in 1s", "[step=12639/20000] loss=0.9"])
    s.finish_job(exp, 1)
    nxt = exp.tasks[0].latest_job
    s.start_job(nxt)
    s.append_logs(nxt, ["[step=0/20000] loss=3.2"])
    s.finish_job(nxt, 0)
    out = run_main("follow", exp.id, "--json")
    assert out.code == 0, out.stderr
    printed = [json.loads(line) for line in out.stdout.splitlines()]
    assert printed[0]["kind"] == "started" and printed[-1]["kind"] == "succeeded", printed
    assert any(e["kind"] == "progress" for e in printed)
    yielded = list(api.get_run(exp.id).events())
    assert sorted(e.same() for e in yielded) == sorted(events.Event.model_validate(e).same() for e in printed)
