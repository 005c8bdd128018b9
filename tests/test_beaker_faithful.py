"""launchkit against the strict fake (issue 9 item 2): each test failed on the code before it.

Behaviour the fact sheet calls unknown is switched both ways (`both_ways`)."""

from __future__ import annotations

import io
import json

import pytest

from conftest import run_cli
from fakebeaker.plugin import both_ways
from fakebeaker.state import AutoRun
from timescale import scaled

WS = "ai2/launchkit"


def _run(repo, *args: str, timeout: float = 90):
    return run_cli(
        "run", "--workspace", WS, *args, "--", "python", "train.py", cwd=repo.path, timeout=timeout
    )


def _backend():
    from launchkit.backends.beaker import BeakerBackend

    return BeakerBackend(timeout=30)


# -- --cluster ------------------------------------------------------------------------------------
@both_ways("resolve_cluster_aliases")
def test_cluster_by_name_alias_bare_or_glob_becomes_the_canonical_name(fake_beaker):
    from launchkit.backends.beaker import resolve as rs

    b = _backend()
    try:
        for pattern in (
            "ai2/jupiter",
            "ai2/jupiter-cirrascale-2",
            "jupiter",
            "jupiter-cirrascale-2",
            "ai2/jup*",
        ):
            assert rs.resolve_clusters(b.conn, [pattern], [], []) == ["ai2/jupiter"], pattern
        assert "ai2/interactive" not in rs.resolve_clusters(b.conn, ["ai2/*"], [], [])  # sessions only
    finally:
        b.close()


@pytest.mark.slow
def test_run_with_an_alias_writes_the_canonical_name(repo, fake_beaker):
    r = _run(repo, "--name", "by-alias", "--cluster", "ai2/jupiter-cirrascale-2")
    assert r.code == 0, r.stderr
    exp = fake_beaker.state.find_experiment("alice/by-alias")
    assert exp.spec["tasks"][0]["constraints"]["cluster"] == ["ai2/jupiter"]


# -- creates the server refuses -------------------------------------------------------------------
@pytest.mark.slow
def test_a_create_the_server_rejects_is_final(repo, fake_beaker):
    r = _run(repo, "--name", "urgent", "--priority", "urgent", "--cluster", "ai2/jupiter")
    assert r.code in (2, 3), r.stderr
    assert "maximum priority" in r.stderr and "Traceback" not in r.stderr  # the server's own message
    assert "try again later" not in r.stderr
    # final: one round trip, never retried
    assert fake_beaker.calls["CreateExperiment"] == 1 and not fake_beaker.state.experiments_of(author="alice")


@pytest.mark.slow
def test_transient_create_failures_still_retry_to_exactly_one_experiment(repo, fake_beaker):
    fake_beaker.faults.fail_create_after_record(1, mode="503")
    fake_beaker.faults.retryable_conflicts(1)
    r = _run(repo, "--name", "once", "--cluster", "ai2/jupiter")
    assert r.code == 0, r.stderr
    assert [e.name for e in fake_beaker.state.experiments_of(author="alice")] == ["once"]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_128_replicas_get_a_create_timeout_that_grows(repo, fake_beaker):
    """The fake needs 0.25 s per job: 128 replicas answer after ~32 s, past the 30 s HTTP timeout."""
    r = _run(repo, "--name", "wide", "--replicas", "128", "--cluster", "ai2/jupiter", timeout=200)
    assert r.code == 0, r.stderr
    exps = fake_beaker.state.experiments_of(author="alice")
    assert [e.name for e in exps] == ["wide"] and len(exps[0].tasks) == 128
    assert fake_beaker.calls["CreateExperiment"] == 1


# -- bad token, odd answers ------------------------------------------------------------------------
@pytest.mark.slow
@both_ways("auth_error", ("unauthenticated", "permission_denied"))
def test_a_bad_token_is_one_line_with_the_fix_and_no_retry(fake_beaker):
    env = {**fake_beaker.env, "BEAKER_TOKEN": "expired"}
    fake_beaker.reset_calls()
    r = run_cli("list", env=env, timeout=60)
    assert r.code == 3, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "token" in r.stderr and "beaker.org/user" in r.stderr
    assert fake_beaker.total_calls <= 2  # no retries


def test_a_bad_token_on_the_http_create_is_the_same_line(fake_beaker):
    """beaker-py raises plain BeakerError("[code=401] ...") for the HTTP create (fact sheet 3.1)."""
    from beaker.exceptions import BeakerError

    from launchkit.backends.beaker.client import Connection

    conn = Connection(30)
    try:
        err = conn.translate(BeakerError("[code=401] invalid authentication token"))
        assert err.exit_code == 3 and "token" in str(err)
    finally:
        conn.close()


@pytest.mark.slow
def test_unimplemented_and_any_grpc_error_end_in_one_line(fake_beaker):
    # the fake answers UNIMPLEMENTED for what it lacks; make ListWorkloads one of those
    from fakebeaker.servicer import Impl

    saved = Impl.ListWorkloads
    try:
        del Impl.ListWorkloads
        r = run_cli("list", timeout=60)
    finally:
        Impl.ListWorkloads = saved
    assert r.code == 5 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "does not support" in r.stderr


# -- statuses --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_stop_reports_stopping_and_follow_canceled(fake_beaker):
    st = fake_beaker.state
    st.options.stopping_seconds = 60.0  # finalized below, by hand
    exp = st.add_experiment(WS, "to-stop", author="alice", description="[launchkit]")
    job = st.start_job(exp)
    r = run_cli("stop", exp.id, "--yes", timeout=60)
    assert r.code == 0 and f"{exp.id} stopping" in r.stderr, r.stderr
    r = run_cli("list", "--json", "-s", "stopping", timeout=60)
    assert [x["status"] for x in json.loads(r.stdout)] == ["stopping"], r.stderr
    st._timer(2.0, lambda: st.finalize_job(job))
    r = run_cli("follow", exp.id, timeout=60)
    assert "was canceled" in r.stderr, r.stderr


@pytest.mark.slow
def test_list_statuses_match_what_is_shown_and_exit_is_filled(fake_beaker):
    st = fake_beaker.state
    made = {}
    for name, how in (("ok", 0), ("bad", 7), ("pre", "preempt"), ("stopped", "cancel"), ("up", "upload")):
        exp = st.add_experiment(WS, name, author="alice", description="[launchkit]")
        st.start_job(exp)
        if how == "preempt":
            st.cancel_job(exp, code=1, message="preempted")
        elif how == "cancel":
            st.cancel_job(exp)
        elif how == "upload":
            st.finish_job(exp, 0, finalize=False)
        else:
            st.finish_job(exp, how)
        made[name] = exp
    fake_beaker.reset_calls()
    r = run_cli("list", "--json", "--limit", "50", timeout=60)
    rows = {x["name"]: x for x in json.loads(r.stdout)}
    assert rows["ok"]["exit_code"] == 0 and rows["bad"]["exit_code"] == 7, rows
    assert rows["pre"]["status"] == "preempted" and rows["stopped"]["status"] == "canceled"
    assert rows["up"]["status"] == "uploading"
    assert fake_beaker.calls["ListJobs"] <= 2  # not one per row
    for word, want in (
        ("preempted", {"pre"}),
        ("canceled", {"stopped"}),
        ("failed", {"bad"}),
        ("uploading_results", {"up"}),
        ("succeeded", {"ok"}),
    ):
        r = run_cli("list", "--json", "-s", word, timeout=60)
        assert r.code == 0, r.stderr
        assert {x["name"] for x in json.loads(r.stdout)} == want, word


@pytest.mark.slow
def test_max_age_bare_number_is_days(fake_beaker):
    st = fake_beaker.state
    st.add_experiment(
        WS, "three-days", author="alice", description="[launchkit]", created=st.clock() - 3 * 86400 * 10**9
    )
    r = run_cli("list", "--json", "--max-age", "7", timeout=60)
    assert "three-days" in {x["name"] for x in json.loads(r.stdout)}, r.stderr
    r = run_cli("list", "--json", "--max-age", "2", timeout=60)
    assert "three-days" not in {x["name"] for x in json.loads(r.stdout)}


# -- logs exactly once ----------------------------------------------------------------------------
def test_a_clean_stream_end_then_finalize_still_delivers_every_line(fake_beaker):
    """The follow stream ends after 501 lines; the job is finalized before the client asks again."""
    from launchkit.backends.beaker.logs import stream_job

    st = fake_beaker.state
    exp = st.add_experiment(WS, "ends-early", author="alice")
    job = st.start_job(exp)
    st.append_logs(job, [f"line {i}" for i in range(1001)])
    fake_beaker.faults.end_streams(after_lines=501)
    out: list[bytes] = []

    def finalized() -> bool:
        st.finish_job(job, 0)
        return True

    b = _backend()
    try:
        stream_job(b.conn, job.id, out.append, follow=True, is_finalized=finalized)
    finally:
        b.close()
    assert out == [b"line %d\n" % i for i in range(1001)]


@pytest.mark.slow
@both_ways("tie_timestamps")
def test_follow_delivers_every_line_exactly_once_with_early_ends(fake_beaker):
    st = fake_beaker.state
    st.options.follow_stream_lifetime = 0.3
    exp = st.add_experiment(WS, "chatty-live", author="alice")
    job = st.start_job(exp)
    b = _backend()
    out = io.BytesIO()
    import threading

    result: dict = {}
    th = threading.Thread(target=lambda: result.update(code=b.follow(b.get(exp.id), out)), daemon=True)
    th.start()
    n = 0
    for _ in range(10):  # each batch delivered, then the stream ended by its lifetime and resumed
        streams = fake_beaker.calls["StreamJobLogs"]
        st.append_logs(job, [f"l{n + i}" for i in range(31)])
        n += 31
        last = b"%d\n" % (n - 1)
        assert st.wait_for(
            lambda last=last, streams=streams: (
                out.getvalue().endswith(last) and fake_beaker.calls["StreamJobLogs"] > streams
            ),
            60,
        )
    fake_beaker.faults.end_streams(after_lines=5, count=2)
    st.append_logs(job, [f"l{n + i}" for i in range(31)])
    n += 31
    st.finish_job(job, 0)
    th.join(scaled(60))
    b.close()
    assert result.get("code") == 0
    assert out.getvalue() == b"".join(b"l%d\n" % i for i in range(n))


@pytest.mark.slow
@both_ways("replica_task_names", ("same", "distinct"))
def test_replica_logs_whatever_the_replica_task_names(fake_beaker, tmp_path):
    st = fake_beaker.state
    exp = st.add_experiment(WS, "replicated", author="alice", replicas=2)
    for t in exp.tasks:
        st.start_job(t.latest_job)
        st.append_logs(t.latest_job, [f"from {t.replica_rank}"])
        st.finish_job(t.latest_job, 0)
    r = run_cli("logs", exp.id, "--replica", "1", timeout=60)
    assert r.code == 0 and r.stdout == "from 1\n", r.stderr
    r = run_cli("logs", exp.id, timeout=60)
    assert sorted(r.stdout.splitlines()) == ["[0] from 0", "[1] from 1"], r.stderr


@pytest.mark.slow
@both_ways("job_creation_delay", (0.0, 0.4))
def test_run_follow_waits_for_the_first_job(repo, fake_beaker):
    fake_beaker.state.set_auto(AutoRun(start_after=0.1, run_for=0.2, lines=["hi"]))
    r = _run(repo, "--name", "waits", "--cluster", "ai2/jupiter", "--follow")
    assert r.code == 0 and "hi" in r.stdout, r.stderr


# -- follow: first line after one round trip ---------------------------------------------------------
def test_follow_a_running_job_needs_two_round_trips_before_the_stream(fake_beaker):
    """get() = workload (org resolved alongside) + latest jobs; follow() then streams at once and
    the final status needs no further call."""
    st = fake_beaker.state
    exp = st.add_experiment(WS, "running", author="alice")
    job = st.start_job(exp)
    st.append_logs(job, ["first"])
    b = _backend()
    b.conn.user_names([exp.author_id])  # the author's name is cached on disk after a first call
    fake_beaker.reset_calls()
    out = io.BytesIO()
    import threading

    th = threading.Thread(target=lambda: b.follow(b.get(exp.id), out), daemon=True)
    th.start()
    assert st.wait_for(lambda: out.getvalue().startswith(b"first\n"))  # (a hang guard: 60 s, scaled)
    before = dict(fake_beaker.calls)
    assert before.get("GetWorkload") == 1 and before.get("ListJobs") == 1, before
    assert "ListSummarizedJobEvents" not in before and before.get("StreamJobLogs") == 1, before
    st.finish_job(job, 0)
    th.join(scaled(30))
    calls = fake_beaker.total_calls
    assert b.get(exp.id).status.value == "succeeded" and fake_beaker.total_calls == calls
    b.close()
