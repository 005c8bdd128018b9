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
