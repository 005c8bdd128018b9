"""Issue 33: why a queued job waits (why, list, follow), a request no node could take refused before
anything is made, `find-gpus --gpus N`, synchronized start scaled to the replica count, and the fake's
scheduling model (slot limits, allocations, job events, cordons, node sizes, impossible-to-schedule)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from fakebeaker import scheduling as fs
from fakebeaker.plugin import both_ways
from inproc import run_main
from timescale import scaled

WS = "ai2/launchkit"


def _backend():
    from launchkit.backends.beaker import BeakerBackend

    return BeakerBackend(timeout=30, workspace=WS)


def _gpu_experiment(st, name: str, *, gpus: int = 8, cluster: str = "ai2/jupiter", replicas: int = 1):
    return fs.gpu_experiment(st, name, gpus=gpus, cluster=cluster, replicas=replicas, preemptible=True)


def _at_slot_limit(st):
    """ai2/launchkit may hold 8 unallocated slots; `busy` holds them; `held` waits for them."""
    st.workspaces[st.find_workspace(WS).id].slot_limit = 8
    busy = _gpu_experiment(st, "busy")
    st.start_job(busy)
    return busy, _gpu_experiment(st, "held")


# -- 5: the fake's scheduling model ------------------------------------------------------------------
def test_fake_holds_a_job_at_the_workspace_slot_limit_and_tells_it_over_grpc(fake_beaker):
    st = fake_beaker.state
    _, held = _at_slot_limit(st)
    job = held.tasks[0].latest_job
    assert job.pinned and job.scheduled is None
    fs.allocate(st, "ai2/jupiter", 32, budget="ai2/oe-default")
    b = _backend()
    try:
        from launchkit.backends.beaker import scheduling as sc

        events = sc.job_events(b.conn, job.id)
        assert (
            'excluded by slot limit (workspace "ai2/launchkit" using 8/8 allowed unallocated slots'
            in events[0]
        )
        ws = b.beaker.workspace.get(WS)
        assert (ws.slot_limit_non_preemptible, ws.assigned_slots_non_preemptible) == (8, 8)
        jupiter = st.find_cluster("ai2/jupiter").id
        assert sc.allocations(b.conn, workspace_id=ws.id) == {jupiter: ("ai2/jupiter", 32)}  # the budget's
        assert sc.effective_slot_limit(b.conn, workspace_id=ws.id, cluster_id=jupiter) == 32
        assert sc.effective_slot_limit(b.conn, workspace_id=ws.id, cluster_id="nope") is None
    finally:
        b.close()


@both_ways("impossible_after", (None, 0.05))
def test_fake_a_job_no_node_can_take_waits_then_may_be_canceled_impossible(fake_beaker):
    st = fake_beaker.state
    exp = _gpu_experiment(st, "wide", gpus=16)  # jupiter's nodes have 8 GPUs
    job = exp.tasks[0].latest_job
    assert any("nodes do not have enough slots available" in e.message for e in job.events)
    if st.options.impossible_after is None:
        assert job.canceled is None and job.pinned
        return
    assert st.wait_for(lambda: job.canceled is not None)
    b = _backend()
    try:
        got = b.beaker.job.get(job.id)
        assert got.status.canceled_code == 7 and "16 GPUs" in got.status.failed_scheduling_message
        assert "never scheduled" in b.get(exp.id).end.line
    finally:
        b.close()


def test_fake_cordoned_nodes_hold_a_job_that_only_they_could_take(fake_beaker):
    st = fake_beaker.state
    for n in st.find_cluster("ai2/holmes").nodes:
        fs.cordon(st, n.id)
    job = _gpu_experiment(st, "cordoned", cluster="ai2/holmes").tasks[0].latest_job
    assert job.pinned and any("cordoned" in e.message for e in job.events)


# -- 1: why a queued job waits -------------------------------------------------------------------------
SLOT_LINE = "ai2/launchkit uses 8/8 unallocated slots (it needs 8)"
SLOT_FIX = "wait, lower --gpus, or launch in another workspace (--workspace)"


def test_why_says_the_workspace_slot_limit_holds_it_with_the_fix(fake_beaker):
    _, held = _at_slot_limit(fake_beaker.state)
    r = run_main("why", held.id)
    assert r.code == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"{held.id} is queued: {SLOT_LINE}; {SLOT_FIX}"
    r = run_main("why", held.id, "--json")
    assert json.loads(r.stdout)["waiting"] == {"kind": "slot_limit", "line": SLOT_LINE, "fix": SLOT_FIX}


def test_list_shows_why_queued_runs_wait(fake_beaker):
    _, held = _at_slot_limit(fake_beaker.state)
    r = run_main("list", "-w", WS, env={"COLUMNS": "200"})  # room for whole reasons
    assert r.code == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if held.id in line)
    assert "ai2/launchkit uses 8/8 unallocated slots" in row
    rows = json.loads(run_main("list", "-w", WS, "--json").stdout)
    by_id = {x["id"]: x for x in rows}
    assert by_id[held.id]["waiting"]["kind"] == "slot_limit"
    assert [x["waiting"] for x in rows if x["id"] != held.id] == [None]  # the running one


def test_list_reads_one_job_events_for_rows_held_by_the_same_full_workspace(fake_beaker):
    from launchkit.backends.beaker import BeakerBackend

    st = fake_beaker.state
    _, held = _at_slot_limit(st)
    also = _gpu_experiment(st, "also", gpus=4)
    b = BeakerBackend(timeout=30, workspace=WS)
    try:
        fake_beaker.reset_calls()
        rows = {r.id: r for r in b.list_runs(limit=20)}
    finally:
        b.close()
    assert rows[held.id].waiting.line == SLOT_LINE
    assert rows[also.id].waiting.line == "ai2/launchkit uses 8/8 unallocated slots (it needs 4)"
    assert fake_beaker.calls["ListJobEvents"] == 1, dict(fake_beaker.calls)


def test_why_names_no_node_with_enough_free_gpus_and_a_budget_without_allocation(fake_beaker):
    st = fake_beaker.state
    wide = _gpu_experiment(st, "wide", gpus=16)
    out = run_main("why", wide.id).stdout
    assert "is queued: none of 4 nodes of its clusters has 16 free GPUs together now" in out
    assert "launchkit find-gpus --gpus 16" in out
    fs.allocate(st, "ai2/saturn", 16, budget="ai2/oe-default")
    poor = _gpu_experiment(st, "poor", gpus=4)
    st.start_job(poor)  # undo: hold it explicitly as Beaker would for a budget without allocation
    fs.hold(
        st,
        _gpu_experiment(st, "nobudget", gpus=4),
        'budget "ai2/oe-default" has no allocation on "ai2/jupiter"',
    )
    nob = st.find_experiment("alice/nobudget")
    out = run_main("why", nob.id).stdout
    assert "its budget may not use this cluster" in out and "ai2/saturn" in out  # its clusters, from Beaker


def test_follow_says_why_it_waits_then_streams_once_it_starts(fake_beaker, tmp_path):
    st = fake_beaker.state
    busy, held = _at_slot_limit(st)
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchkit", "follow", held.id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    said = threading.Event()
    err: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if "waiting:" in line:
                said.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert said.wait(scaled(60)), "".join(err)
        st.finish_job(busy)
        st.finish_job(held)
        proc.wait(timeout=60)
        reader.join(scaled(10))
    finally:
        proc.kill()
    text = "".join(err)
    assert f"waiting: {SLOT_LINE}; {SLOT_FIX}" in text
    assert text.count("waiting:") == 1  # said once, not every poll


# -- 2: refused before anything is made ----------------------------------------------------------------
def _run(repo, *args: str):
    return run_main("run", "--workspace", WS, "--yes", *args, "--", "python", "train.py", cwd=repo.path)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ("--gpus", "16", "--cluster", "ai2/jupiter"),
            [
                "--gpus 16: no node of ai2/jupiter has 16 GPUs; the largest fit is 8 GPUs per replica; "
                "nothing was created",
                "(no cluster would take it whole; split it: --gpus 8 --replicas 2 with --torchrun)",
            ],
        ),
        (  # no --cluster: the job may land on any cluster, and none has a node of 9 GPUs
            ("--gpus", "9"),
            [
                "--gpus 9: no node of any cluster that takes batch jobs has 9 GPUs; the largest fit is 8 "
                "GPUs per replica; nothing was created",
                "(no cluster would take it whole; ask for at most --gpus 8)",
            ],
        ),
        (
            ("--gpus", "4", "--gpu-type", "b300", "--cluster", "ai2/saturn"),
            [
                "no matching cluster has GPU type b300 (they have NVIDIA A100 80GB, NVIDIA L40S)",
                "ai2/holmes would take it: pass it as --cluster",
            ],
        ),
        (
            ("--gpus", "8", "--replicas", "3", "--torchrun", "--cluster", "ai2/ceres"),
            [
                "--replicas 3: ai2/ceres can hold at most 2 replicas of 8 GPUs with host networking",
                "the largest fit is --replicas 2",
                "ai2/jupiter, ai2/saturn would take it",
            ],
        ),
    ],
)
def test_a_request_no_node_could_ever_take_is_refused_and_nothing_is_made(repo, fake_beaker, args, words):
    r = _run(repo, *args)
    assert r.code == 3, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) <= 3
    assert not fake_beaker.state.experiments_of(author="alice")
    assert not any(k.startswith(("CreateExperiment", "POST")) for k in fake_beaker.calls), fake_beaker.calls
    assert not fake_beaker.state.datasets  # not even the runtime dataset


def test_gpu_type_the_chosen_cluster_lacks_names_the_clusters_that_have_it():
    from launchkit.core.fit import Ask, ClusterSize, NodeSize, never_fits

    saturn = ClusterSize("ai2/saturn", (NodeSize("s1", "NVIDIA A100 80GB", 8),))
    holmes = ClusterSize("ai2/holmes", (NodeSize("h1", "NVIDIA B300", 8, cordoned=True),))
    problem, fix = never_fits(Ask(gpus=4, gpu_types=("b300",)), [saturn], [holmes])
    assert problem == "--gpu-type b300: no node of ai2/saturn has that GPU type (they have NVIDIA A100 80GB)"
    assert fix.startswith("ai2/holmes would take it")


def test_a_cluster_whose_nodes_are_unknown_is_never_refused_on_a_guess():
    from launchkit.core.fit import Ask, ClusterSize, NodeSize, never_fits

    scaled_to_zero = ClusterSize("ai2/cloud", (), known=False)
    small = ClusterSize("ai2/small", (NodeSize("n1", "NVIDIA H100", 8),))
    assert never_fits(Ask(gpus=16), [scaled_to_zero], []) is None
    assert never_fits(Ask(gpus=16), [small, scaled_to_zero], []) is None
    problem, fix = never_fits(Ask(gpus=16), [small], [scaled_to_zero])
    assert "largest fit is 8 GPUs" in problem and "ai2/cloud" not in fix


def test_a_workspace_at_its_slot_limit_is_a_warning_at_submit(repo, fake_beaker):
    st = fake_beaker.state
    _at_slot_limit(st)
    r = _run(repo, "--gpus", "8", "--cluster", "ai2/jupiter", "--name", "more")
    assert r.code == 0, r.stderr
    assert "workspace ai2/launchkit uses 8/8 unallocated slots: this job (8 more) will wait" in r.stderr
    assert st.find_experiment("alice/more")


# -- 3: find-gpus --gpus N -----------------------------------------------------------------------------
def test_find_gpus_gpus_ranks_clusters_by_what_starts_soonest(fake_beaker):
    st = fake_beaker.state
    st.workspaces[st.find_workspace(WS).id].slot_limit = 64
    fs.allocate(st, "ai2/jupiter", 32, budget="ai2/oe-default")
    r = run_main("find-gpus", "--gpus", "8", "-w", WS, "--json")
    assert r.code == 0, r.stderr
    rows = {x["cluster"]: x for x in json.loads(r.stdout)}
    order = [x["cluster"] for x in json.loads(r.stdout)]
    # jupiter: one node with 8 free (of 4); holmes: a free node is cordoned, the other has 6 free
    assert rows["ai2/jupiter"]["start"] == "now" and rows["ai2/jupiter"]["replicas_now"] == 1
    assert [n["node"] for n in rows["ai2/jupiter"]["nodes"]] == ["jupiter-003.example"]
    assert rows["ai2/jupiter"]["slots"] == "0/32" and rows["ai2/jupiter"]["budget"] == "allocated"
    assert rows["ai2/saturn"]["start"] == "now" and rows["ai2/saturn"]["budget"] == "unallocated"
    assert rows["ai2/holmes"]["start"] == "when cordoned nodes return"
    assert rows["ai2/ceres"]["start"] == "when nodes free up"
    assert order.index("ai2/ceres") > order.index("ai2/jupiter")
    assert "ai2/phobos" not in rows  # CPU only: never (shown with --all)
    every = json.loads(run_main("find-gpus", "--gpus", "8", "-w", WS, "--json", "--all").stdout)
    assert every[-1]["cluster"] == "ai2/phobos" and every[-1]["start"] == "never"
    table = run_main("find-gpus", "--gpus", "8", "-w", WS, env={"COLUMNS": "200"}).stdout
    assert table.splitlines()[0].split()[:3] == ["CLUSTER", "START", "REPLICAS_NOW"]


def test_find_gpus_at_the_workspace_slot_limit_starts_nowhere_now(fake_beaker):
    st = fake_beaker.state
    _at_slot_limit(st)
    rows = json.loads(run_main("find-gpus", "--gpus", "8", "-w", WS, "--json").stdout)
    assert rows and all(x["start"] in ("after the workspace's slot limit", "never") for x in rows)


def test_find_gpus_default_view_keeps_its_columns(fake_beaker):
    r = run_main("find-gpus", env={"COLUMNS": "200"})  # (narrower: the long ones in a table of their own)
    assert r.stdout.splitlines()[0].split() == [
        "CLUSTER",
        "FREE_GPUS",
        "USED_SLOTS",
        "TOTAL_SLOTS",
        "CORDONED",
        "GPU_TYPES",
        "TAGS",
    ]


# -- 4: large multi-node launches ------------------------------------------------------------------------
def test_synchronized_start_default_grows_with_the_replica_count():
    from launchkit.core.multinode import sync_start_default

    assert sync_start_default(2) == 300
    assert sync_start_default(8) == 720
    assert sync_start_default(64) == 90 * 60  # OLMo-core's multi-node value is the cap
    assert sync_start_default(1000) == 90 * 60


def test_run_says_which_synchronized_start_it_chose_and_writes_it(repo):
    import yaml

    args = ("run", "--dry-run", "--torchrun", "--replicas", "16", "--gpus", "8", "--", "python", "train.py")
    r = run_main(*args, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert (
        "synchronized start: up to 24m for all 16 replicas (--synchronized-start-timeout to change)"
        in r.stderr
    )
    assert yaml.safe_load(r.stdout)["tasks"][0]["synchronizedStartTimeout"] == 24 * 60 * 10**9
    given = run_main(
        *args[:-3], "--synchronized-start-timeout", "2h", "--", "python", "train.py", cwd=repo.path
    )
    assert "synchronized start" not in given.stderr  # the user's own: nothing to say
    assert yaml.safe_load(given.stdout)["tasks"][0]["synchronizedStartTimeout"] == 2 * 3600 * 10**9
