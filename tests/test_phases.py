"""Where a run's time went (issue 43 items 1, 2) and the newest waiting reason first (issue 42 item 3):
phases from the platform's timestamps and the runtime's markers, the waiting history, `why`'s lines,
`why --json`/`list --json`'s `phases` and `gpu_hours`; on the fake (realistic timestamps, repeated
waiting events whose reason changes) and on the local backend from a real run."""

from __future__ import annotations

import json
import time

import pytest

from fakebeaker import scheduling as fs
from inproc import run_main
from launchkit.core import phases as ph

WS = "ai2/launchkit"
NS = 1_000_000_000
MIN = 60 * NS
KEYS = ["queued", "starting", "setup", "first_output", "running"]
SLOT = 'excluded by slot limit (workspace "ai2/launchkit" using 64/64 allowed unallocated slots, the job requires at least 8 slots)'
NODES = "3 nodes do not have enough slots available"


# -- the pure parts ---------------------------------------------------------------------------------
def test_setup_seen_reads_the_runtime_markers_up_to_the_first_output():
    recs = [
        (1 * NS, b"[launchkit] cloning ..."),
        (2 * NS, b"[launchkit] env store: reused 3f2a (41 packages, 0.20s); venv linked to it"),
        (3 * NS, b"[launchkit] setup done in 2.31s (clone 0.36s, uv+venv 1.15s, install[uv.lock] 1.12s)"),
        (4 * NS, b"[launchkit] exec python train.py"),
        (9 * NS, b"epoch 0"),
        (10 * NS, b"never read"),
    ]
    seen = ph.setup_seen(recs)
    assert (seen.setup, seen.env_cache, seen.command_at, seen.first_output_at) == (
        2.31,
        "hit",
        3 * NS,
        9 * NS,
    )
    assert seen.steps == "clone 0.36s, uv+venv 1.15s, install[uv.lock] 1.12s" and seen.lines == 5
    assert ph.setup_seen([(1, b"[launchkit] env store: built 3f2a")]).env_cache == "miss"
    assert ph.setup_seen([(i, b"[launchkit] x") for i in range(10)], budget=3).lines == 3  # a budget


def test_phases_from_timestamps():
    seen = ph.SetupSeen(setup=2.0, command_at=100 * NS, first_output_at=340 * NS)
    p = ph.phases(created=0, scheduled=60 * NS, started=90 * NS, ended=400 * NS, now=10**12, seen=seen)
    assert p.model_dump() == {
        "queued": 60.0,
        "starting": 30.0,
        "setup": 2.0,
        "first_output": 240.0,
        "running": 310.0,
    }
    waiting = ph.phases(created=0, scheduled=None, started=None, ended=None, now=5 * NS)
    assert waiting.model_dump() == {
        "queued": 5.0,
        "starting": None,
        "setup": None,
        "first_output": None,
        "running": None,
    }
    assert ph.gpu_hours([(8, 0, 3600 * NS), (8, 0, None), (8, None, None)], now=1800 * NS) == 12.0


def test_the_history_tells_each_change_of_reason_once():
    from launchkit.backends.beaker.scheduling import wait_history

    t0 = 8 * 3600 * NS
    slot_end, nodes_end = t0 + 572 * MIN, t0 + 578 * MIN
    # both reasons in every pass while the slot limit held, then only the nodes (fact 11.1)
    events = [(t0, slot_end, SLOT), (t0, nodes_end, NODES)]
    ws = wait_history(events, gpus=8, until=nodes_end)
    assert [(w.kind, w.words, w.start, w.end) for w in ws] == [
        ("slot_limit", "slot limit 64/64", t0, slot_end),
        ("no_node", "no node with 8 free GPUs", slot_end, nodes_end),
    ]
    assert ph.history(ws) == "slot limit 64/64 (08:00-17:32), then no node with 8 free GPUs (17:32-17:38)"
    still = wait_history(events, gpus=8, until=None)
    assert still[-1].end is None and ph.history(still).endswith("(17:32-now)")


def test_the_newest_reason_decides_not_the_first_keyword_match():
    from launchkit.backends.beaker.scheduling import explain

    newest_first = [NODES, NODES, SLOT, SLOT]  # the slot limit held, then the nodes
    assert explain(newest_first, gpus=8, workspace="w", times=[4, 3, 2, 1]).kind == "no_node"
    assert explain(newest_first, gpus=8, workspace="w").kind == "no_node"
    # made in the same pass: the more specific reason
    assert explain([NODES, SLOT], gpus=8, workspace="w", times=[5, 5]).kind == "slot_limit"


def test_follow_tells_a_change_of_reason_once():
    from beaker import beaker_pb2 as pb2

    from launchkit.backends.beaker.scheduling import WaitTeller

    job = pb2.Job(id="j", workspace_reference="ai2/launchkit")
    job.container_spec.resource_request.gpu_count = 8

    def ev(msg, first, last):
        e = pb2.SummarizedJobEvent(job_id="j", status="queued", latest_message=msg)
        e.earliest_occurrence.FromNanoseconds(first)
        e.latest_occurrence.FromNanoseconds(last)
        return e

    teller = WaitTeller()
    said = [teller.line(job, [ev(SLOT, 1, 10)])]
    said.append(teller.line(job, [ev(SLOT.replace("64/64", "63/64"), 1, 11), ev(SLOT, 1, 10)]))  # same reason
    said.append(teller.line(job, [ev(SLOT, 1, 10), ev(NODES, 1, 20)]))  # the nodes are newest now
    said.append(teller.line(job, [ev(SLOT, 1, 10), ev(NODES, 1, 21)]))
    assert [s and s[:30] for s in said] == [
        "waiting: ai2/launchkit uses 64",
        None,
        "waiting: none of 3 nodes of it",
        None,
    ]


# -- on the fake --------------------------------------------------------------------------------------
def _experiment(st, name: str, gpus: int = 8, **spec):
    return fs.gpu_experiment(st, name, gpus=gpus, **spec)


def _waited_and_ran(st):
    """Created 10 h ago; the workspace's slot limit held it 9h32m (with the nodes busy too), then no node
    had 8 free GPUs for 6 minutes; scheduled, started 41 s later, set up in 2.31 s, first output 4 min
    after, ran 1 h."""
    t0 = (time.time_ns() // MIN - 600) * MIN
    slot_end, sched = t0 + 572 * MIN, t0 + 578 * MIN
    start = sched + 41 * NS
    cmd = start + 3 * NS
    exp = _experiment(st, "waited")
    st.replay(
        exp.tasks[0].latest_job,
        created=t0,
        waits=[(SLOT, t0, slot_end), (NODES, t0, sched)],
        scheduled=sched,
        started=start,
        lines=[
            (start + NS, "[launchkit] env store: reused 3f2a (41 packages, 0.20s); venv linked to it"),
            (cmd, "[launchkit] setup done in 2.31s (clone 0.36s, uv+venv 1.15s, install[uv.lock] 0.80s)"),
            (cmd + 4 * MIN + 1 * NS, "epoch 0 loss=2.1"),
            (cmd + 60 * MIN, "done"),
        ],
        exited=start + 60 * MIN,
    )
    return exp, t0


def test_why_tells_where_a_finished_run_s_time_went(fake_beaker):
    exp, t0 = _waited_and_ran(fake_beaker.state)
    fake_beaker.reset_calls()
    r = run_main("why", exp.id)
    assert r.code == 0, r.stderr
    first, phases, waited = r.stdout.splitlines()
    assert first.startswith(f"{exp.id} succeeded")
    assert phases == (
        "phases: queued 9h38m (slot limit 64/64, then no node with 8 free GPUs) · starting 41s · "
        "setup 2.3s (env cache hit) · first output +4m1s · running 1h · 8 GPU-hours"
    )
    clock = time.strftime("%H:%M", time.gmtime(t0 / NS))
    assert waited.startswith(f"waited 9h38m: slot limit 64/64 ({clock}-")
    assert waited.endswith(
        "then no node with 8 free GPUs ("
        + time.strftime("%H:%M", time.gmtime((t0 + 572 * MIN) / NS))
        + "-"
        + time.strftime("%H:%M", time.gmtime((t0 + 578 * MIN) / NS))
        + ")"
    )
    calls = dict(fake_beaker.calls)
    assert calls.get("ListSummarizedJobEvents") == 1 and calls.get("StreamJobLogs") == 1, calls
    out = json.loads(run_main("why", "--json", exp.id).stdout)
    assert list(out["phases"]) == KEYS and out["phases"]["queued"] == 578 * 60 and out["gpu_hours"] == 8.0
    assert out["phases"]["first_output"] == 241.0 and out["phase_notes"]["env_cache"] == "hit"


def test_list_json_carries_the_phases_it_read_anyway(fake_beaker):
    exp, _ = _waited_and_ran(fake_beaker.state)
    rows = {x["id"]: x for x in json.loads(run_main("list", "--json", "-w", WS).stdout)}
    row = rows[exp.id]
    assert list(row["phases"]) == KEYS
    assert row["phases"]["queued"] == 578 * 60 and row["phases"]["starting"] == 41.0
    assert row["phases"]["setup"] is None and row["gpu_hours"] == 8.0  # markers: `why` reads the log


def test_a_queued_run_is_told_by_its_newest_reason_and_its_history(fake_beaker):
    """Issue 42: the slot limit held it, then the nodes: `why`, `list` and the JSON say the nodes (the
    first keyword match over the newest events said the slot limit)."""
    st = fake_beaker.state
    t0 = (time.time_ns() // MIN - 30) * MIN
    exp = _experiment(st, "changed", gpus=8)
    job = exp.tasks[0].latest_job
    job.pinned = True
    st.wait_passes(job, [(SLOT, t0, t0 + 20 * MIN), (NODES, t0, t0 + 29 * MIN)])
    r = run_main("why", exp.id)
    assert r.code == 0, r.stderr
    first, waiting, position, estimate, *instead = r.stdout.splitlines()  # then what would start now
    assert all(x.startswith("instead: it would start now") for x in instead)
    assert estimate.startswith(("estimate: ", "no estimate: ")), estimate
    assert position.startswith("position: 0 jobs wait ahead of it")
    assert first.startswith(
        f"{exp.id} is queued: none of 3 nodes of its clusters has 8 free GPUs together now"
    )
    assert waiting.startswith("waiting ") and ": slot limit 64/64 (" in waiting
    assert waiting.endswith(
        "), then no node with 8 free GPUs ("
        + time.strftime("%H:%M", time.gmtime((t0 + 20 * MIN) / NS))
        + "-now)"
    )
    rows = {x["id"]: x for x in json.loads(run_main("list", "--json", "-w", WS).stdout)}
    assert rows[exp.id]["waiting"]["kind"] == "no_node"
    assert rows[exp.id]["phases"]["queued"] >= 0 and rows[exp.id]["phases"]["starting"] is None


# -- on the local backend, from a real run ------------------------------------------------------------
@pytest.mark.slow
def test_local_phases_from_a_real_run(repo, tmp_path):
    env = {"LAUNCHKIT_LOCAL_HOME": str(tmp_path / "state")}
    r = run_main(
        "run", "--local", "--follow", "--no-python", "--", "bash", "-c", "sleep 1; echo first; sleep 1; echo done",
        cwd=repo.path, env=env,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    w = run_main("why", "--local", "--latest", cwd=repo.path, env=env)
    assert w.code == 0, w.stderr
    phases = w.stdout.splitlines()[1]
    assert phases.startswith("phases: queued ") and " · setup " in phases and " · first output +" in phases, (
        phases
    )
    out = json.loads(run_main("why", "--local", "--latest", "--json", cwd=repo.path, env=env).stdout)
    p = out["phases"]
    assert list(p) == KEYS and p["starting"] is None  # no separate schedule time here
    assert p["setup"] is not None and 0.5 < p["first_output"] < 60 and p["running"] >= p["first_output"]
    assert out["gpu_hours"] == 0.0  # no GPUs asked for
    [row] = json.loads(run_main("list", "--local", "--json", cwd=repo.path, env=env).stdout)
    assert row["phases"]["queued"] is not None and row["phases"]["setup"] is None  # list reads no log
    s = json.loads(run_main("stats", "--local", "--json", cwd=repo.path, env=env).stdout)
    assert s["runs"] == 1 and s["clusters"]["this machine"]["phases"]["setup"]["n"] == 1


@pytest.mark.slow
def test_local_phases_per_attempt_from_two_real_attempts(repo, tmp_path):
    """--retry-on failure: attempt 1's first output comes 8 s after its setup, attempt 2's at once."""
    from lk_helpers import FAST_ENV

    env = {**FAST_ENV, "LAUNCHKIT_LOCAL_HOME": str(tmp_path / "state")}
    mark = tmp_path / "tried"
    script = f"if [ -e {mark} ]; then echo again; else touch {mark}; sleep 8; echo slow; exit 3; fi"
    r = run_main(
        "run", "--local", "--follow", "--no-python", "--retry-on", "failure", "--retries", "1", "--",
        "bash", "-c", script, cwd=repo.path, env=env,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    w = run_main("why", "--local", "--latest", cwd=repo.path, env=env)
    lines = w.stdout.splitlines()
    assert lines[1].startswith("phases: attempt 2: queued "), lines
    assert lines[2].startswith("  attempt 1: queued ") and lines[3].startswith("  attempt 2: queued "), lines
    out = json.loads(run_main("why", "--local", "--latest", "--json", cwd=repo.path, env=env).stdout)
    detail = out["phases_detail"]
    assert [(d["attempt"], d["replica"]) for d in detail] == [(1, 0), (2, 0)]
    slow, fast = (d["phases"]["first_output"] for d in detail)
    assert slow >= 8 and fast < slow and out["phases"]["first_output"] == fast  # the run's: the newest
    # the newest attempt queued from its predecessor's end (its backoff), not from the run's creation
    assert out["phases"] == detail[1]["phases"] and out["phases"]["queued"] < 8, out["phases"]
    assert lines[1].removeprefix("phases: ") == lines[3].strip(), lines


# -- stats ------------------------------------------------------------------------------------------
def test_percentiles_and_the_summary():
    assert ph.percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50) == 5 and ph.percentile([1, 2, 3, 10], 90) == 10
    fast, slow = ph.Phases(queued=10, running=100), ph.Phases(queued=3600, setup=2.0, running=50)
    s = ph.summary([("a", fast, 1.0), ("a", slow, 2.0), ("b", fast, None), ("a", None, None)])
    assert list(s) == ["a", "b"] and s["a"]["runs"] == 3 and s["a"]["gpu_hours"] == 3.0
    assert (
        s["a"]["phases"]["queued"] == {"n": 2, "p50": 10, "p90": 3600}
        and s["a"]["phases"]["starting"] is None
    )
    assert ph.slowest(s) == ("a", "queued", 3600)  # `running` is not "slow"


def test_stats_names_the_slow_phase_per_cluster(fake_beaker):
    st = fake_beaker.state
    _waited_and_ran(st)
    quick = _experiment(st, "quick")
    st.finish_job(quick)
    r = run_main("stats", "-w", WS, env={"COLUMNS": "100"})
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["CLUSTER", "PHASE", "RUNS", "P50", "P90"]
    assert ["ai2/jupiter", "queued", "2"] == lines[1].split()[:3], r.stdout
    assert "slowest before the command runs: queued on ai2/jupiter (p90 9h38m)" in r.stderr, r.stderr
    out = json.loads(run_main("stats", "--json", "-w", WS).stdout)
    jupiter = out["clusters"]["ai2/jupiter"]
    assert out["runs"] == 2 and jupiter["runs"] == 2 and jupiter["phases"]["queued"]["p90"] == 578 * 60
    assert jupiter["phases"]["setup"] == {"n": 1, "p50": 2.31, "p90": 2.31}


def test_a_queued_run_is_told_its_position_in_line(fake_beaker):
    """Jobs ahead: waiting for the same clusters, at a higher priority or made before it at the same."""
    st = fake_beaker.state
    t0 = time.time_ns() - 60 * MIN

    def queued(name, minutes, *, priority="normal", cluster="ai2/jupiter", gpus=8):
        exp = _experiment(st, name, gpus=gpus, priority=priority, cluster=cluster)
        job = exp.tasks[0].latest_job
        job.created, job.pinned = t0 + minutes * MIN, True
        return exp

    queued("before", 1)  # ahead
    queued("urgent-later", 20, priority="high")  # ahead
    queued("low-before", 2, priority="low")
    queued("elsewhere", 3, cluster="ai2/ceres")
    queued("cpu", 4, gpus=0)
    mine = queued("mine", 10)
    queued("after", 30)
    r = run_main("why", mine.id)
    assert r.code == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("position: "))
    assert line.startswith("position: 2 jobs wait ahead of it for the same kind of node"), line
    assert "no estimate: Beaker has not said why it waits" in r.stdout  # no event: no basis either
    notes = json.loads(run_main("why", "--json", mine.id).stdout)["phase_notes"]
    assert (notes["ahead"], notes["read_all"]) == (2, True) and notes["queue_read"] >= 7


def test_a_run_waiting_for_nodes_is_told_what_would_start_now(fake_beaker):
    """The counterfactual, from find-gpus --gpus's data: another cluster with room, else fewer GPUs."""
    st = fake_beaker.state
    for node in st.find_cluster("ai2/jupiter").nodes:
        node.assigned = node.slots - 4  # 4 free GPUs on each: 8 together nowhere on jupiter
    exp = _experiment(st, "waits-for-nodes")
    job = exp.tasks[0].latest_job
    job.pinned = True
    st.add_event(job, "queued", NODES)
    lines = run_main("why", exp.id).stdout.splitlines()
    instead = next(x for x in lines if x.startswith("instead: "))
    assert (
        instead.startswith("instead: it would start now on ") and "ai2/jupiter" not in instead.split("(")[0]
    ), lines
    for c in st.clusters.values():
        for node in c.nodes:
            node.assigned = max(node.slots - 4, 0)  # 4 free at most anywhere
    lines = run_main("why", exp.id).stdout.splitlines()
    instead = next(x for x in lines if x.startswith("instead: "))
    assert instead.startswith("instead: it would start now with --gpus 4 --replicas 2 on "), instead


def test_list_json_tells_a_running_row_s_phases_from_the_job_it_reads_for_progress(fake_beaker):
    st = fake_beaker.state
    t0 = (time.time_ns() // MIN - 10) * MIN
    exp = _experiment(st, "running")
    st.replay(exp.tasks[0].latest_job, created=t0, scheduled=t0 + 2 * MIN, started=t0 + 3 * MIN,
              lines=[(t0 + 4 * MIN, "step=1")])  # fmt: skip
    row = next(x for x in json.loads(run_main("list", "--json", "-w", WS).stdout) if x["id"] == exp.id)
    assert row["status"] == "running", row
    p = row["phases"]
    assert (p["queued"], p["starting"], p["setup"]) == (120.0, 60.0, None) and p["running"] >= 7 * 60
    assert row["gpu_hours"] is None  # one replica's job read: not the run's


# -- per replica and per attempt (issue 43: where they differ) ------------------------------------------
def _lines(t: int, *, setup: float, cache: str) -> list[tuple[int, str]]:
    said = "reused 3f2a (41 packages, 0.20s)" if cache == "hit" else "built 3f2a (41 packages, 38.00s)"
    return [
        (t + NS, f"[launchkit] env store: {said}"),
        (t + int(setup * NS) + NS, f"[launchkit] setup done in {setup}s (clone 0.36s)"),
        (t + int(setup * NS) + 3 * NS, "epoch 0"),
    ]


def test_why_tells_each_replica_where_one_was_placed_minutes_later(fake_beaker):
    st = fake_beaker.state
    t0 = (time.time_ns() // MIN - 60) * MIN
    exp = _experiment(st, "late", gpus=1, replicas=2)
    jobs = [t.latest_job for t in exp.tasks]
    assert len(jobs) == 2
    for job, placed in zip(jobs, (1, 4), strict=True):  # replica 1 placed 3 minutes after replica 0
        start = t0 + placed * MIN + 30 * NS
        st.replay(job, created=t0, scheduled=t0 + placed * MIN, started=start,
                  lines=_lines(start, setup=2.0, cache="hit"), exited=start + 30 * MIN)  # fmt: skip
    r = run_main("why", exp.id)
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].startswith("phases: queued 1m · starting 30s · setup 2.0s (env cache hit)"), lines
    assert lines[2].startswith("  replica 0: queued 1m · starting 30s · setup 2.0s"), lines
    assert lines[3].startswith("  replica 1: queued 4m · starting 30s · setup 2.0s"), lines
    out = json.loads(run_main("why", "--json", exp.id).stdout)
    assert list(out["phases"]) == KEYS and out["phases"]["queued"] == 60.0  # the run's: replica 0's
    detail = out["phases_detail"]
    assert [(d["attempt"], d["replica"]) for d in detail] == [(1, 0), (1, 1)]
    assert [d["phases"]["queued"] for d in detail] == [60.0, 240.0] and list(detail[0]["phases"]) == KEYS
    rows = json.loads(run_main("list", "--json", "-w", WS).stdout)
    assert all("phases_detail" not in row for row in rows)  # list --json keeps its shape


def test_why_tells_each_attempt_where_a_cache_miss_made_setup_slow(fake_beaker):
    st = fake_beaker.state
    t0 = (time.time_ns() // MIN - 60) * MIN
    exp = _experiment(st, "retried", gpus=1, retries=1)
    first = exp.tasks[0].latest_job
    start = t0 + MIN
    st.replay(first, created=t0, scheduled=t0 + MIN, started=start, exit_code=1,
              lines=_lines(start, setup=40.0, cache="miss"), exited=start + 5 * MIN)  # fmt: skip
    second = exp.tasks[0].latest_job
    assert second is not first
    again = start + 6 * MIN
    st.replay(second, created=start + 5 * MIN, scheduled=again - 10 * NS, started=again,
              lines=_lines(again, setup=2.0, cache="hit"), exited=again + 20 * MIN)  # fmt: skip
    lines = run_main("why", exp.id).stdout.splitlines()
    assert lines[1].startswith("phases: attempt 2: queued 50s · starting 10s · setup 2.0s (env cache hit)"), (
        lines
    )
    assert lines[2].startswith("  attempt 1: queued 1m · starting 0.0s · setup 40s (env cache miss)"), lines
    assert lines[3].startswith("  attempt 2: queued 50s · starting 10s · setup 2.0s (env cache hit)"), lines
    detail = json.loads(run_main("why", "--json", exp.id).stdout)["phases_detail"]
    assert [(d["attempt"], d["phases"]["setup"]) for d in detail] == [(1, 40.0), (2, 2.0)]


def test_jobs_alike_get_no_detail_lines():
    p = ph.Phases(queued=60, starting=30, setup=2.0, first_output=3, running=600)
    same = [ph.PhaseDetail(task="main", attempt=1, replica=r, phases=p, env_cache="hit") for r in (0, 1)]
    assert not ph.differ(same) and not ph.differ(same[:1])
    later = same[1].model_copy(update={"phases": p.model_copy(update={"queued": 121.0})})
    assert ph.differ([same[0], later])  # 61 s apart: material
    assert not ph.differ(
        [same[0], same[1].model_copy(update={"phases": p.model_copy(update={"running": 5})})]
    )
    assert ph.differ([same[0], same[1].model_copy(update={"env_cache": "miss"})])
    assert ph.detail_label(later, [same[0], later]) == "replica 1"
