"""The fake Beaker server, exercised with the real beaker-py client (in-process and in subprocesses)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from beaker import (
    BeakerExperimentSpec,
    BeakerGpuType,
    BeakerSortOrder,
    BeakerTaskResources,
    BeakerWorkloadStatus,
)
from beaker import beaker_pb2 as pb2
from beaker.exceptions import (
    BeakerClusterNotFound,
    BeakerError,
    BeakerExperimentConflict,
    BeakerImageNotFound,
    BeakerJobNotFound,
    BeakerPermissionsError,
    BeakerSecretNotFound,
    BeakerServerUnavailableError,
    BeakerWorkloadNotFound,
    BeakerWorkspaceNotFound,
)

from fakebeaker.state import NS

pytestmark = pytest.mark.timeout(120)


def spec(**kw) -> BeakerExperimentSpec:
    return BeakerExperimentSpec.new(docker_image="python:3.11", command=["echo", "hi"], **kw)


def test_client_connects_and_resolves_current_user(fake_beaker):
    beaker = fake_beaker.client()
    assert beaker.user.get().name == "alice"
    assert beaker.org_name == "ai2"
    ws = beaker.workspace.get()
    assert ws.name == "ai2/launchkit" and ws.budget_id
    bob = fake_beaker.client("bob")
    assert bob.user_name == "bob"


def test_create_then_get_experiment(fake_beaker):
    beaker = fake_beaker.client()
    wl = beaker.experiment.create(spec=spec(), name="hello")
    assert wl.experiment.name == "hello"
    assert [t.name for t in wl.experiment.tasks] == ["main"]
    assert beaker.workload.get("alice/hello").experiment.id == wl.experiment.id
    job = beaker.workload.get_latest_job(wl)
    assert job is not None and not job.status.HasField("started")
    assert fake_beaker.calls["CreateExperiment"] == 1
    with pytest.raises(BeakerExperimentConflict):
        beaker.experiment.create(spec=spec(), name="hello")


def test_unknown_names_are_not_found(fake_beaker):
    beaker = fake_beaker.client()
    with pytest.raises(BeakerWorkloadNotFound):
        beaker.workload.get("alice/nothing")
    with pytest.raises(BeakerClusterNotFound):
        beaker.cluster.get("ai2/nothing")
    with pytest.raises(BeakerWorkspaceNotFound):
        beaker.workspace.get("ai2/nothing")
    with pytest.raises(BeakerImageNotFound):
        beaker.image.get("alice/nothing")
    with pytest.raises(BeakerSecretNotFound):
        beaker.secret.get("NOPE")
    with pytest.raises(BeakerJobNotFound):
        beaker.job.get("01JOB0000000000000000000000")


def test_subprocess_reaches_fake_through_env(fake_beaker):
    code = textwrap.dedent("""
        from beaker import Beaker
        with Beaker.from_env(check_for_upgrades=False) as b:
            print(b.user.get().name, b.workspace.get().name)
    """)
    r = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **fake_beaker.env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["alice", "ai2/launchkit"]


def test_clusters_sorted_by_free_gpus(fake_beaker):
    beaker = fake_beaker.client()
    clusters = list(
        beaker.cluster.list(
            sort_field="free_gpus", sort_order=BeakerSortOrder.descending, include_cluster_occupancy=True
        )
    )
    free = [c.cluster_occupancy.slot_counts.available for c in clusters]
    assert free == sorted(free, reverse=True) and free[0] > 0
    names = {c.name for c in clusters}
    assert "jupiter" in names and "jupiter-cirrascale-2" not in names  # canonical = short
    assert json.dumps(dict(fake_beaker.calls))


def test_unavailable_is_retried_by_beaker_py_for_reads(fake_beaker):
    beaker = fake_beaker.client()
    exp = fake_beaker.state.add_experiment("ai2/launchkit", "x", author="alice")
    fake_beaker.faults.unavailable(2, method="GetWorkload")
    assert beaker.workload.get(exp.id).experiment.name == "x"
    assert fake_beaker.calls["GetWorkload"] == 3
    wl = beaker.workload.get(exp.id)
    fake_beaker.faults.unavailable(1)  # any method; CancelWorkloads is not retried by beaker-py
    with pytest.raises(BeakerServerUnavailableError):
        beaker.workload.cancel(wl)
    beaker.workload.cancel(wl)
    assert fake_beaker.calls["CancelWorkloads"] == 2


def test_unavailable_on_create_records_nothing(fake_beaker):
    beaker = fake_beaker.client()
    fake_beaker.faults.unavailable(1, method="CreateExperiment")
    with pytest.raises(Exception) as info:
        beaker.experiment.create(spec=spec(), name="once")
    assert "503" in str(info.value) or "UNAVAILABLE" in str(info.value)
    assert not fake_beaker.state.experiments_of(author="alice")
    beaker.experiment.create(spec=spec(), name="once")
    assert [e.name for e in fake_beaker.state.experiments_of(author="alice")] == ["once"]


@pytest.mark.parametrize("mode", ["503", "drop"])
def test_ambiguous_create_failure_records_the_experiment(fake_beaker, mode):
    beaker = fake_beaker.client()
    fake_beaker.faults.fail_create_after_record(mode=mode)
    with pytest.raises(Exception):  # noqa: B017 - HTTPError (503) or ConnectionError (drop)
        beaker.experiment.create(spec=spec(), name="maybe")
    assert beaker.workload.get("alice/maybe").experiment.name == "maybe"
    with pytest.raises(BeakerExperimentConflict):
        beaker.experiment.create(spec=spec(), name="maybe")


def test_latency_per_call(fake_beaker):
    beaker = fake_beaker.client()
    beaker.user.get()
    fake_beaker.faults.latency(0.2, method="GetUser")
    t0 = time.monotonic()
    beaker.user.get()
    assert time.monotonic() - t0 >= 0.2
    assert fake_beaker.faults.delay_for("GetWorkspace") == 0  # only GetUser's calls wait
    fake_beaker.faults.latency(0, method="GetUser")
    fake_beaker.faults.latency(0.1)
    t0 = time.monotonic()
    beaker.workspace.get("ai2/launchkit")  # ResolveWorkspaceName + GetWorkspace
    assert time.monotonic() - t0 >= 0.2


def test_unimplemented_is_unimplemented_and_unparseable_is_400_not_retried(fake_beaker):
    beaker = fake_beaker.client()
    with pytest.raises(NotImplementedError, match="does not implement"):
        list(beaker.queue.list())
    assert fake_beaker.calls["ListQueues"] == 1
    ws_id = beaker.workspace.get().id
    with pytest.raises(BeakerError, match="code=400"):
        beaker.experiment.http_request(f"workspaces/{ws_id}/experiments", method="POST", data="not json")


def test_bad_token_is_unauthenticated_and_http_401(fake_beaker):
    import grpc

    beaker = fake_beaker.client()
    beaker.config.user_token = "nope"
    with pytest.raises(grpc.RpcError) as err:  # beaker-py leaves UNAUTHENTICATED raw (fact sheet 3.1)
        beaker.user.get()
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    ws_id = fake_beaker.state.find_workspace("ai2/launchkit").id
    with pytest.raises(BeakerError, match=r"code=401.*invalid authentication token"):
        beaker.experiment.create(spec=spec(), name="x", workspace=pb2.Workspace(id=ws_id))


def test_bad_token_as_permission_denied_when_switched(make_fake_beaker):
    fake = make_fake_beaker(options={"auth_error": "permission_denied"})
    beaker = fake.client()
    beaker.config.user_token = "nope"
    with pytest.raises(BeakerPermissionsError):
        beaker.user.get()


def test_spec_validation_names_the_bad_value(fake_beaker):
    beaker = fake_beaker.client()
    s = BeakerExperimentSpec.new(docker_image="python:3.11", command=["true"])
    s = s.with_task(s.tasks[0].with_name("second").with_env_var("X", secret="MISSING_SECRET"))
    with pytest.raises(BeakerError, match="MISSING_SECRET"):
        beaker.experiment.create(spec=s, name="bad-secret")
    with pytest.raises(BeakerError, match="alice/nope"):
        beaker.experiment.create(spec=BeakerExperimentSpec.new(beaker_image="alice/nope"), name="bad-image")
    with pytest.raises(BeakerError, match="budget"):
        beaker.experiment.create(
            spec=spec(), name="no-budget", workspace=beaker.workspace.get("ai2/no-budget")
        )
    with pytest.raises(BeakerError, match="ai2/nowhere"):
        beaker.experiment.create(spec=spec(cluster="ai2/nowhere"), name="bad-cluster")
    beaker.experiment.create(spec=spec(cluster="ai2/jupiter", beaker_image=None), name="alias-ok")
    assert not any(e.name.startswith("bad") for e in fake_beaker.state.experiments.values())


def test_secrets_values_only_through_the_value_route(fake_beaker):
    beaker = fake_beaker.client()
    beaker.secret.write("MY_SECRET", "s3cr3t-value")
    sec = beaker.secret.get("MY_SECRET")
    assert "s3cr3t" not in str(sec)
    assert all("s3cr3t" not in str(x) for x in beaker.secret.list())
    assert beaker.secret.read(sec) == "s3cr3t-value"
    beaker.secret.delete(sec)
    with pytest.raises(BeakerSecretNotFound):
        beaker.secret.get("MY_SECRET")
    assert fake_beaker.calls["PutSecretValue"] == 1 and fake_beaker.calls["GetSecretValue"] == 1


def test_list_workloads_filters_sort_and_pages(fake_beaker):
    s = fake_beaker.state
    now = s.clock()
    for i in range(120):
        s.add_experiment(
            "ai2/launchkit",
            f"w{i:03d}",
            author="alice" if i % 2 else "bob",
            description="needle" if i % 10 == 0 else "",
            created=now - (120 - i) * 60 * NS,
        )
    s.finish_job(s.find_experiment("alice/w001"), 1)
    s.start_job(s.find_experiment("alice/w003"))
    beaker = fake_beaker.client()
    fake_beaker.reset_calls()
    everything = list(beaker.workload.list())
    assert [w.experiment.name for w in everything][:3] == ["w119", "w118", "w117"]
    assert len(everything) == 120 and fake_beaker.calls["ListWorkloads"] == 3  # pages of 50
    fake_beaker.reset_calls()
    assert len(list(beaker.workload.list(limit=7))) == 7 and fake_beaker.calls["ListWorkloads"] == 1
    bob = beaker.user.get("bob")
    assert {w.experiment.author_id for w in beaker.workload.list(author=bob)} == {bob.id}
    assert [w.experiment.name for w in beaker.workload.list(statuses=[BeakerWorkloadStatus.failed])] == [
        "w001"
    ]
    assert [w.experiment.name for w in beaker.workload.list(statuses=[BeakerWorkloadStatus.running])] == [
        "w003"
    ]
    assert len(list(beaker.workload.list(name_or_description="NEEDLE"))) == 12
    recent = list(
        beaker.workload.list(created_after=dt.datetime.fromtimestamp((now - 630 * NS) / NS, tz=dt.UTC))
    )
    assert [w.experiment.name for w in recent] == [f"w{i}" for i in range(119, 109, -1)]
    oldest = next(iter(beaker.workload.list(sort_order=BeakerSortOrder.ascending, limit=1)))
    assert oldest.experiment.name == "w000"
    assert len(list(beaker.workload.list(finalized=True))) == 1


def test_nodes_show_every_gpu_type_and_occupancy(fake_beaker):
    beaker = fake_beaker.client()
    saturn = beaker.cluster.get("ai2/saturn", include_cluster_occupancy=True)
    types = {BeakerGpuType(n.node_resources.gpu_type).name for n in beaker.node.list(cluster=saturn)}
    assert types == {"NVIDIA_A100_80GB", "NVIDIA_L40S"}
    sc = saturn.cluster_occupancy.slot_counts
    assert (sc.total, sc.assigned, sc.available) == (32, 16, 16)
    holmes = beaker.cluster.get("ai2/holmes", include_cluster_occupancy=True)
    assert holmes.name == "holmes" and holmes.cluster_occupancy.slot_counts.cordoned == 8
    # B300 (17) is in beaker_pb2.GpuType but not in beaker-py 2.8.1's BeakerGpuType enum
    b300 = {pb2.GpuType.Name(n.node_resources.gpu_type) for n in beaker.node.list(cluster=holmes)}
    assert b300 == {"GPU_TYPE_NVIDIA_B300"}
    interactive = beaker.cluster.get("ai2/interactive")
    assert interactive.HasField("max_task_timeout") and interactive.max_task_timeout.ToMilliseconds() == 0
    assert not beaker.cluster.get("ai2/jupiter").HasField("max_task_timeout")
    assert set(beaker.cluster.get("ai2/jupiter").tags) == {"interconnect:ib", "storage:weka"}


def test_jobs_occupy_node_slots_and_cancel_releases_them(fake_beaker):
    beaker = fake_beaker.client()
    s = BeakerExperimentSpec.new(docker_image="python:3.11", cluster="ai2/saturn", command=["true"])
    s.tasks[0].resources = BeakerTaskResources(gpu_count=4)
    wl = beaker.experiment.create(spec=s, name="gpu-job")
    before = beaker.cluster.get("ai2/saturn", include_cluster_occupancy=True).cluster_occupancy.slot_counts
    fake_beaker.state.start_job(wl.experiment.id)
    during = beaker.cluster.get("ai2/saturn", include_cluster_occupancy=True).cluster_occupancy
    assert during.slot_counts.available == before.available - 4 and during.running_jobs_count == 1
    job = beaker.workload.get_latest_job(wl)
    assert job.assignment_details.node_id and len(job.assignment_details.resource_assignment.gpus) == 4
    beaker.workload.cancel(wl)
    after = beaker.cluster.get("ai2/saturn", include_cluster_occupancy=True).cluster_occupancy.slot_counts
    assert after.available == before.available
    # a running job passes through STOPPING before it is CANCELED
    assert beaker.workload.get(wl.experiment.id).status == BeakerWorkloadStatus.stopping
    assert fake_beaker.state.wait_for(
        lambda: beaker.workload.get(wl.experiment.id).status == BeakerWorkloadStatus.canceled, 5
    )


def test_auto_mode_runs_jobs(fake_beaker):
    from fakebeaker import AutoRun

    fake_beaker.state.set_auto(AutoRun(start_after=0.01, run_for=0.05, exit_code=3, lines=["auto line"]))
    beaker = fake_beaker.client()
    wl = beaker.experiment.create(spec=spec(), name="auto")
    job = beaker.workload.get_latest_job(wl)
    assert [log.message for log in beaker.job.logs(job, follow=True)] == [b"auto line"]
    assert beaker.job.get(job.id).status.exit_code == 3


def test_experiment_spec_round_trips_as_yaml(fake_beaker):
    beaker = fake_beaker.client()
    s = spec().with_task(spec().tasks[0].with_name("two").with_env_var("LAUNCHKIT_VERSION", "0.1.0"))
    wl = beaker.experiment.create(spec=s, name="yaml")
    got = beaker.experiment.get_spec(wl)
    assert [t.name for t in got.tasks] == ["main", "two"]
    assert any(e.name == "LAUNCHKIT_VERSION" for e in got.tasks[1].env_vars)


def test_beaker_from_env_in_the_test_process(fake_beaker):
    from beaker import Beaker

    with Beaker.from_env(check_for_upgrades=False) as beaker:
        assert beaker.user_name == "alice"
        beaker.secret.write("FROM_ENV", "x")  # HTTP goes through REQUESTS_CA_BUNDLE
    assert "FROM_ENV" in fake_beaker.state.find_workspace("ai2/launchkit").secrets


def test_factory_fixture_with_own_state_and_user(make_fake_beaker):
    from beaker import Beaker

    from fakebeaker import State

    state = State()
    state.add_user("dora", "tok-dora", org="acme")
    state.add_workspace("acme/ws", budget="acme/b", author="dora")
    fake = make_fake_beaker(state, user="dora")
    with Beaker.from_env(check_for_upgrades=False) as beaker:
        assert beaker.user_name == "dora" and beaker.workspace.get().name == "acme/ws"
    assert fake.config()["default_org"] == "acme"


def test_calls_with_latency_are_served_concurrently(fake_beaker):
    from concurrent.futures import ThreadPoolExecutor

    beaker = fake_beaker.client()
    clusters = list(beaker.cluster.list())
    fake_beaker.faults.together("ListNodes", len(clusters))  # all in flight at once, or none is counted
    with ThreadPoolExecutor(len(clusters)) as pool:
        nodes = list(pool.map(lambda c: list(beaker.node.list(cluster=c, limit=1)), clusters))
    assert fake_beaker.faults.met["ListNodes"] == len(clusters)
    assert fake_beaker.calls["ListNodes"] == len(clusters) and sum(map(len, nodes)) == len(clusters)


def test_log_bytes_are_passed_through_unchanged(fake_beaker):
    s = fake_beaker.state
    exp = s.add_experiment("ai2/launchkit", "bytes", author="alice")
    raw = [b"\xff\xfe not utf-8", "ünïcode ✓".encode(), b"x" * 300 + b"\twide", b""]
    s.start_job(exp)
    s.append_logs(exp, raw)
    s.finish_job(exp)
    beaker = fake_beaker.client()
    job = beaker.workload.get_latest_job(beaker.workload.get(exp.id))
    assert [log.message for log in beaker.job.logs(job)] == raw


@pytest.mark.timeout(60)  # a shutdown blocked by the stream fails here
def test_abandoned_follow_stream_does_not_block_shutdown(fake_beaker):
    s = fake_beaker.state
    exp = s.add_experiment("ai2/launchkit", "forever", author="alice")
    s.start_job(exp)
    s.append_logs(exp, ["one", "two"])
    beaker = fake_beaker.client()
    job = beaker.workload.get_latest_job(beaker.workload.get(exp.id))
    stream = beaker.job.logs(job, follow=True)
    assert next(iter(stream)).message == b"one"
    stream.close()
    beaker.close()
    fake_beaker.stop()


def test_auto_mode_preempts_first_job_and_runs_the_next(fake_beaker):
    from fakebeaker import AutoRun

    fake_beaker.state.set_auto(
        AutoRun(
            start_after=0.01,
            run_for=0.05,
            lines=["a", "b", "c"],
            line_interval=0.02,
            preempt_first_after=0.03,
        )
    )
    beaker = fake_beaker.client()
    wl = beaker.experiment.create(spec=spec(), name="auto-preempt")
    assert fake_beaker.state.wait_for(
        lambda: beaker.workload.get(wl.experiment.id).status == BeakerWorkloadStatus.succeeded, timeout=120
    )
    jobs = fake_beaker.state.find_experiment(wl.experiment.id).tasks[0].jobs
    assert [j.status_name for j in jobs] == ["CANCELED", "SUCCEEDED"]
    assert jobs[1].retry_ancestor_id == jobs[0].id
    assert [m for _, m in jobs[1].logs.iter_from(0)] == [b"a", b"b", b"c"]
