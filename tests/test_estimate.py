"""A queued job's start estimate with its basis, or no estimate and why (issue 43 item 2): the pure
part (core/estimate.py) and `why` on the fake, whose running jobs carry task timeouts on the cluster's
nodes (whether real Beaker lists a job's timeout is not public: both ways)."""

from __future__ import annotations

import json
import time

from fakebeaker import scheduling as fs
from fakebeaker.plugin import both_ways
from inproc import run_main
from launchkit.core.estimate import Holder, NodeNow, start_estimate

WS = "ai2/launchkit"
NS = 1_000_000_000
HOUR = 3600 * NS
NOW = 1_800_000_000 * NS
NODES = "4 nodes do not have enough slots available"


def _busy(name: str, gpus: int, hours: float | None, **kw) -> Holder:
    ends = None if hours is None else NOW + int(hours * HOUR)
    return Holder(name, gpus, ends, "its --task-timeout 4h" if hours is not None else "no task timeout", **kw)


def _two_nodes(**kw) -> list[NodeNow]:
    return [
        NodeNow("n1", 8, (_busy("a", 8, 3),)),
        NodeNow("n2", 8, (_busy("b", 4, 1), _busy("c", 4, 5, **kw))),
    ]


# -- the pure part ----------------------------------------------------------------------------------
def test_the_first_room_that_fits_with_the_job_whose_timeout_frees_it():
    got = start_estimate(gpus=8, replicas=1, host_networking=False, nodes=_two_nodes(), ahead=[], now=NOW)
    assert got.reason is None and got.estimate is not None
    assert got.estimate.at == NOW + 3 * HOUR  # n1 when `a` ends (n2 frees only half at +1h)
    assert got.estimate.basis == "n1 frees its GPUs at the latest when job a reaches its --task-timeout 4h"
    assert got.estimate.sooner is None
    four = start_estimate(gpus=4, replicas=1, host_networking=False, nodes=_two_nodes(), ahead=[], now=NOW)
    assert four.estimate is not None and four.estimate.at == NOW + 1 * HOUR and "job b" in four.estimate.basis


def test_jobs_ahead_take_the_first_freeing_so_position_k_waits_for_a_later_one():
    one = start_estimate(gpus=8, replicas=1, host_networking=False, nodes=_two_nodes(), ahead=[8], now=NOW)
    assert one.estimate is not None and one.estimate.at == NOW + 5 * HOUR  # `a`'s node went to the one ahead
    assert "job c" in one.estimate.basis and "after the 1 job ahead of it" in one.estimate.basis
    two = start_estimate(gpus=8, replicas=1, host_networking=False, nodes=_two_nodes(), ahead=[8, 8], now=NOW)
    assert two.estimate is None and "ahead of it take the room first" in (two.reason or "")


def test_replicas_on_nodes_of_their_own_wait_for_both_nodes():
    got = start_estimate(gpus=8, replicas=2, host_networking=True, nodes=_two_nodes(), ahead=[], now=NOW)
    assert got.estimate is not None and got.estimate.at == NOW + 5 * HOUR


def test_no_estimate_when_the_room_depends_on_an_end_nobody_lists():
    nodes = [
        NodeNow("n1", 8, (_busy("forever", 8, None),)),
        NodeNow("n2", 8, (_busy("x", 2, 1),), unlisted=6),
    ]
    got = start_estimate(gpus=8, replicas=1, host_networking=False, nodes=nodes, ahead=[], now=NOW)
    assert got.estimate is None
    assert got.reason == (
        "1 job holding its nodes' GPUs has no known end (forever: no task timeout); "
        "6 GPUs of its nodes are held by jobs Beaker does not list"
    )
    cordoned = start_estimate(
        gpus=8, replicas=1, host_networking=False, nodes=[NodeNow("n1", 8, cordoned=True)], ahead=[], now=NOW
    )
    assert cordoned.reason == "the nodes that could take it are cordoned (no known return)"


def test_lower_priority_preemptible_jobs_may_make_it_sooner():
    got = start_estimate(
        gpus=8, replicas=1, host_networking=False, nodes=_two_nodes(preemptible=True), ahead=[], now=NOW
    )
    assert got.estimate is not None and got.estimate.sooner == (
        "it may start sooner: 1 lower-priority preemptible job hold GPUs there, which Beaker may preempt for it"
    )


# -- on the fake --------------------------------------------------------------------------------------
def _queued(st, name: str, *, gpus: int = 8, created: int | None = None):
    exp = fs.gpu_experiment(st, name, gpus=gpus, created=created)
    fs.hold(st, exp, NODES)
    return exp


def _jupiter_busy(st, now: int) -> dict[str, int]:
    """jupiter's 4 nodes of 8 GPUs, each held by one job with a task timeout: job name -> its end."""
    ends = {}
    for i, (node, ran, timeout) in enumerate(
        zip(st.find_cluster("ai2/jupiter").nodes, (1, 2, 3, 1), (4, 3, 8, 6), strict=True)
    ):
        node.assigned = 0
        name = f"train{i}"
        fs.occupy(st, node.id, 8, started=now - ran * HOUR, timeout=timeout * HOUR, name=name)
        ends[name] = now - ran * HOUR + timeout * HOUR
    return ends


@both_ways("list_job_timeouts")
def test_why_estimates_the_start_from_the_running_jobs_timeouts(fake_beaker):
    st = fake_beaker.state
    now = time.time_ns()
    ends = _jupiter_busy(st, now)
    mine = _queued(st, "mine")
    r = run_main("why", mine.id)
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    out = json.loads(run_main("why", "--json", mine.id).stdout)["phase_notes"]
    if not st.options.list_job_timeouts:  # nothing bounds them: jupiter has no max task timeout
        [said] = [x for x in lines if x.startswith("no estimate: ")]
        assert "4 jobs holding its nodes' GPUs have no known end" in said, said
        assert "no task timeout Beaker lists, and ai2/jupiter has no maximum" in said
        assert out["estimate"] is None and out["no_estimate_reason"] == said.removeprefix("no estimate: ")
        return
    first = min(ends, key=ends.__getitem__)  # train1: started 2h ago, 3h timeout
    assert out["no_estimate_reason"] is None and out["estimate"]["at"] == ends[first]
    [said] = [x for x in lines if x.startswith("estimate: ")]
    assert said.startswith(f"estimate: it starts by ~{out['estimate']['at_utc']} at the latest (")
    assert f"job {first}-main reaches its --task-timeout 3h" in said and "an upper bound" in said
    later = _queued(st, "later")  # made after it, same priority: one job ahead takes train1's node
    out = json.loads(run_main("why", "--json", later.id).stdout)["phase_notes"]
    assert out["ahead"] == 1 and out["estimate"]["at"] == sorted(ends.values())[1]
    assert "after the 1 job ahead of it" in out["estimate"]["basis"]


def test_the_cluster_s_max_task_timeout_bounds_a_job_without_its_own(fake_beaker):
    st = fake_beaker.state
    now = time.time_ns()
    jupiter = st.find_cluster("ai2/jupiter")
    jupiter.max_task_timeout = 10 * HOUR
    for node in jupiter.nodes:
        node.assigned = 0
        fs.occupy(st, node.id, 8, started=now - HOUR, name=f"open-{node.hostname}")
    out = json.loads(run_main("why", "--json", _queued(st, "mine").id).stdout)["phase_notes"]
    assert out["estimate"]["at"] == now + 9 * HOUR
    assert "reaches ai2/jupiter's max task timeout 10h" in out["estimate"]["basis"]


def test_no_estimate_for_gpus_held_by_jobs_beaker_does_not_list_or_a_slot_limit(fake_beaker):
    st = fake_beaker.state
    for node in st.find_cluster("ai2/jupiter").nodes:
        node.assigned = 8  # busy, with no job listed on them (another org's, say)
    mine = _queued(st, "mine")
    out = json.loads(run_main("why", "--json", mine.id).stdout)["phase_notes"]
    assert out["estimate"] is None
    assert out["no_estimate_reason"] == "32 GPUs of its nodes are held by jobs Beaker does not list"
    held = _queued(st, "held", gpus=4)
    fs.hold(
        st,
        held,
        'excluded by slot limit (workspace "ai2/launchkit" using 8/8 allowed unallocated slots, the job requires at least 4 slots)',
    )
    lines = run_main("why", held.id).stdout.splitlines()
    assert (
        "no estimate: the workspace's slot limit holds it: slots free when the workspace's other jobs end"
        in "\n".join(lines)
    )


def test_the_estimate_costs_one_listing_of_each_cluster_s_jobs(fake_beaker):
    """Beside what `why` of a job waiting for nodes read before (its clusters and their nodes, the queue):
    one ListJobs of the jobs on its cluster."""
    st = fake_beaker.state
    _jupiter_busy(st, time.time_ns())
    mine = _queued(st, "mine")
    fake_beaker.reset_calls()
    assert run_main("why", mine.id).code == 0
    assert fake_beaker.calls["ListJobs"] == 3, dict(fake_beaker.calls)  # its jobs, the queue, the cluster's


def test_the_submit_warning_says_the_wait_it_implies(repo, fake_beaker):
    st = fake_beaker.state
    ends = _jupiter_busy(st, time.time_ns())
    args = (
        "run",
        "--dry-run",
        "--gpus",
        "8",
        "--cluster",
        "ai2/jupiter",
        "--workspace",
        WS,
        "--",
        "python",
        "t.py",
    )
    fake_beaker.reset_calls()
    r = run_main(*args, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert fake_beaker.calls["ListJobs"] == 2, dict(
        fake_beaker.calls
    )  # it will queue: the cluster's, the queue
    [warning] = [x for x in r.stderr.splitlines() if x.startswith("warning: no node of ai2/jupiter")]
    first = min(ends, key=ends.__getitem__)
    assert "the job will queue until one frees up, by ~" in warning, warning
    assert "at the latest (" in warning and f"job {first}-main reaches its --task-timeout 3h" in warning
    for job in [j for j in st.jobs.values() if j.exited is None]:
        st.finish_job(job)
    for node in st.find_cluster("ai2/jupiter").nodes:  # GPUs no listed job accounts for: no basis, no wait
        node.assigned = 8
    r = run_main(*args, cwd=repo.path)
    [warning] = [x for x in r.stderr.splitlines() if x.startswith("warning: no node of ai2/jupiter")]
    assert "until one frees up (`launchkit find-gpus --gpus 8`" in warning, warning


def test_replicas_not_placed_yet_each_need_a_freeing(fake_beaker):
    """Two replicas of 8 GPUs (host networking: a node each): the second freeing on jupiter."""
    st = fake_beaker.state
    ends = _jupiter_busy(st, time.time_ns())
    pair = fs.gpu_experiment(st, "pair", replicas=2, hostNetworking=True)
    fs.hold(st, pair, NODES)
    out = json.loads(run_main("why", "--json", pair.id).stdout)["phase_notes"]
    assert out["estimate"]["at"] == sorted(ends.values())[1], out
    assert "job train0-main reaches its --task-timeout 4h" in out["estimate"]["basis"]


def test_a_listing_beaker_refuses_leaves_no_estimate_and_the_rest_of_why(fake_beaker, monkeypatch):
    """Fail open: the jobs on its cluster not listed (refused, say): `why` says so and the rest stands."""
    from beaker import _job
    from beaker import exceptions as bx

    listing = _job.JobClient.list

    def refused(self, **kw):
        if kw.get("scheduled_on_cluster") is not None:
            raise bx.BeakerPermissionsError("not allowed")
        return listing(self, **kw)

    monkeypatch.setattr(_job.JobClient, "list", refused)
    st = fake_beaker.state
    _jupiter_busy(st, time.time_ns())
    mine = _queued(st, "mine")
    r = run_main("why", mine.id)
    assert r.code == 0, r.stderr
    assert "no estimate: Beaker did not list the jobs on its clusters (BeakerPermissionsError)" in r.stdout
    assert f"{mine.id} is queued: " in r.stdout and "position: 0 jobs wait ahead of it" in r.stdout
