"""`why --latest` and `why ID` take the same path (issue 40 item 2): a run launchkit stopped while
following it is told with the limit either way, not as a bare `canceled` (Beaker's `latest` answers
from the listing, without the run's jobs)."""

from __future__ import annotations

from inproc import run_main

WS = "ai2/launchkit"


def test_why_latest_tells_what_why_id_tells(fake_beaker):
    from launchkit.backends.beaker.backend import BeakerBackend
    from launchkit.cli.following import Limits
    from test_progress import _follower

    st = fake_beaker.state
    never = st.add_experiment(WS, "never-starts", author="alice", description="[launchkit] run")
    backend = BeakerBackend()
    dog, now = _follower(backend, backend.get(never.id), Limits(start=5))
    now[0] += 5
    assert dog.check()
    st.finalize_job(st._job(never))
    by_id = run_main("why", never.id)
    latest = run_main("why", "--latest")
    assert by_id.code == latest.code == 0, (by_id.stderr, latest.stderr)
    assert "stopped by launchkit following it: it did not start within --start-timeout 5s" in by_id.stdout
    assert latest.stdout == by_id.stdout, (latest.stdout, by_id.stdout)
    as_json = [run_main("why", *ref, "--json").stdout for ref in ([never.id], ["--latest"])]
    assert as_json[0] == as_json[1]


# -- one shell exit code for how a run ended (issue 40 item 2) --------------------------------------
def _run(status: str, code: int | None):
    import datetime as dt

    from launchkit.backends.protocol import RunInfo

    return RunInfo(
        id="R1", name="r", backend="local", status=status, exit_code=code, created=dt.datetime.now(dt.UTC)
    )


def test_one_shell_code_decides_every_edge():
    from launchkit.core.status import RunStatus

    cases = {
        ("succeeded", 0): 0,
        ("succeeded", None): 0,
        ("failed", 7): 7,
        ("failed", None): 1,  # no exit code at all (an image that could not be pulled)
        ("canceled", 0): 1,  # canceled after its command exited 0: not a success
        ("canceled", 143): 143,
        ("lost", None): 1,
    }
    for (status, code), want in cases.items():
        assert RunStatus(status).shell_code(code) == want, (status, code)
    assert RunStatus.failed.is_failure and RunStatus.lost.is_failure and not RunStatus.canceled.is_failure
    assert RunStatus.canceled.is_terminal and not RunStatus.running.is_terminal


def test_follows_event_stream_and_summary_give_the_same_code():
    """`follow --json` (events.py) and the many-task summary (cli/following.py) said 0 for a canceled run
    whose command had exited 0; the backends' follow said 1."""
    from launchkit import events

    assert events.exit_code(_run("canceled", 0)) == 1
    assert events.exit_code(_run("succeeded", None)) == 0
    assert events.exit_code(_run("failed", None)) == 1
