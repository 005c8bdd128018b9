"""The fake behaves as the fact sheet says real Beaker does (beaker-real-behaviour.md, last section).
One test per behaviour (numbers as in the sheet); unknown behaviour is a switch tested both ways."""

from __future__ import annotations

import re
import time

import grpc
import pytest
from beaker import BeakerExperimentSpec, BeakerWorkloadStatus
from beaker import beaker_pb2 as pb2
from beaker.exceptions import (
    BeakerClusterNotFound,
    BeakerError,
    BeakerExperimentConflict,
    BeakerImageNotFound,
    BeakerPermissionsError,
    BeakerWorkspaceNotFound,
)

from fakebeaker.plugin import both_ways
from timescale import scaled

WS = "ai2/launchkit"


def spec(**kw) -> BeakerExperimentSpec:
    kw.setdefault("cluster", "ai2/jupiter")
    return BeakerExperimentSpec.new(
        docker_image="python:3.11", command=["true"], budget="ai2/oe-default", **kw
    )


def raw_create(fake, body: dict, name: str | None = None):
    """POST the spec JSON as beaker-py does; returns the requests.Response."""
    beaker = fake.client()
    ws = fake.state.find_workspace(WS).id
    return beaker.experiment.http_request(
        f"workspaces/{ws}/experiments", method="POST", data=body, query={"name": name} if name else None
    )


def test_1_canonical_cluster_names_are_short_aliases_long(fake_beaker):
    beaker = fake_beaker.client()
    c = beaker.cluster.get("ai2/jupiter")
    assert (c.name, c.organization_name, list(c.aliases)) == ("jupiter", "ai2", ["jupiter-cirrascale-2"])
    names = {c.name for c in beaker.cluster.list()}
    assert "holmes" in names and not any("augusta" in n for n in names)
    holmes = beaker.cluster.get("ai2/holmes")
    assert {"storage:weka", "interconnect:ib"} <= set(holmes.tags)
    # a spec may name the cluster by alias (inferred-medium, fact 1.11)
    wl = beaker.experiment.create(spec=spec(cluster="ai2/jupiter-cirrascale-2"), name="by-alias")
    assert beaker.experiment.get_spec(wl).tasks[0].constraints.cluster == ["ai2/jupiter-cirrascale-2"]


def test_2_ids_are_ulids(fake_beaker):
    beaker = fake_beaker.client()
    wl = beaker.experiment.create(spec=spec(), name="ulid")
    job = beaker.workload.get_latest_job(wl)
    for i in (
        wl.experiment.id,
        wl.experiment.tasks[0].id,
        job.id,
        beaker.workspace.get().id,
        beaker.user.get().id,
    ):
        assert re.fullmatch(r"[0-9A-Z]{26}", i), i


def test_3_id_fields_take_ids_only(fake_beaker):
    beaker = fake_beaker.client()
    with pytest.raises(BeakerClusterNotFound):
        beaker.cluster.get("jupiter")  # no "/": beaker-py sends it as an ID
    with pytest.raises(BeakerImageNotFound):
        beaker.image.get("base")
    stub = beaker.service
    with pytest.raises(grpc.RpcError) as err:
        stub.GetWorkspace(pb2.GetWorkspaceRequest(workspace_id=WS), metadata=beaker.job._rpc_call_metadata)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert beaker.workspace.get(WS).name == WS  # via ResolveWorkspaceName


def test_3_lenient_ids_switch(make_fake_beaker):
    fake = make_fake_beaker(options={"strict_ids": False})
    assert fake.client().cluster.get("jupiter").name == "jupiter"


@both_ways("resolve_cluster_aliases")
def test_4_resolve_cluster_name_by_alias_is_a_switch(fake_beaker):
    beaker = fake_beaker.client()
    assert beaker.cluster.get("ai2/jupiter").name == "jupiter"
    if fake_beaker.state.options.resolve_cluster_aliases:
        assert beaker.cluster.get("ai2/jupiter-cirrascale-2").name == "jupiter"
    else:
        with pytest.raises(BeakerClusterNotFound):
            beaker.cluster.get("ai2/jupiter-cirrascale-2")


def test_6_business_rules_are_permission_denied(fake_beaker):
    beaker = fake_beaker.client()
    wl = beaker.experiment.create(spec=spec(), name="prio")
    job = fake_beaker.state.start_job(wl.experiment.id)
    with pytest.raises(BeakerPermissionsError, match="cannot increase priority for running job"):
        _update_priority(beaker, job.id)


def _update_priority(beaker, job_id):
    from beaker._service_client import coerce_rpc_error

    try:
        beaker.service.UpdateJobSourcePriority(
            pb2.UpdateJobSourcePriorityRequest(job_id=job_id, priority=pb2.JOB_PRIORITY_URGENT),
            metadata=beaker.job._rpc_call_metadata,
        )
    except grpc.RpcError as e:
        raise coerce_rpc_error(e, {}) from None


def test_7_create_time_400_the_client_cannot_check(fake_beaker):
    beaker = fake_beaker.client()
    s = spec()
    s.tasks[0].context.priority = "urgent"
    with pytest.raises(BeakerError, match=r"code=400.*maximum priority"):
        beaker.experiment.create(spec=s, name="too-urgent")
    assert fake_beaker.calls["CreateExperiment"] == 1 and not fake_beaker.state.experiments


@both_ways("name_conflict", ("409", "400"))
def test_8_name_conflicts_and_the_retryable_409(fake_beaker):
    beaker = fake_beaker.client()
    beaker.experiment.create(spec=spec(), name="taken")
    with pytest.raises(BeakerExperimentConflict):
        beaker.experiment.create(spec=spec(), name="taken")
    fake_beaker.faults.retryable_conflicts(1)
    fake_beaker.reset_calls()
    beaker.experiment.create(spec=spec(), name="after-a-db-conflict")  # retried by beaker-py 2.8
    assert fake_beaker.calls["CreateExperiment"] == 2
    assert len(fake_beaker.state.experiments) == 2


def test_9_create_latency_grows_with_replicas(make_fake_beaker):
    fake = make_fake_beaker(options={"create_latency_per_job": 0.05})
    beaker = fake.client()
    s = spec()
    s.tasks[0].replicas = 9
    t0 = time.monotonic()
    wl = beaker.experiment.create(spec=s, name="nine")
    assert time.monotonic() - t0 >= 0.4 and len(wl.experiment.tasks) == 9


def test_10_secret_names_case(fake_beaker):
    beaker = fake_beaker.client()
    ws = beaker.workspace.get()
    assert (
        beaker.secret.read(pb2.Secret(name="hf_token"), workspace=ws) == "hf_fake_secret_value_0001"
    )  # HTTP: any case
    from beaker.exceptions import BeakerSecretNotFound

    with pytest.raises(BeakerSecretNotFound):
        beaker.secret.get("hf_token", workspace=ws)  # gRPC: exact
    s = spec()
    s.tasks[0].env_vars = [{"name": "HF", "secret": "hf_token"}]
    s = BeakerExperimentSpec.from_json(s.to_json())
    beaker.experiment.create(spec=s, name="secret-any-case")  # spec resolution: any case (inferred)


def test_10_10_read_only_members_list_but_cannot_create_or_touch_secret_values(fake_beaker):
    ws = fake_beaker.state.find_workspace(WS)
    ws.readers.add(fake_beaker.user("alice").id)
    beaker = fake_beaker.client()
    pws = beaker.workspace.get(WS)
    assert "HF_TOKEN" in {s.name for s in beaker.secret.list(workspace=pws)}  # listing works
    assert beaker.dataset.list(workspace=pws) is not None
    for write in (
        lambda: beaker.experiment.create(spec=spec(), name="ro", workspace=pws),
        lambda: beaker.dataset.create("ro-data", workspace=pws, commit=False),
        lambda: beaker.secret.read(pb2.Secret(name="HF_TOKEN"), workspace=pws),
        lambda: beaker.secret.write("NEW", "v", workspace=pws),
    ):
        with pytest.raises(BeakerPermissionsError):
            write()
    assert not fake_beaker.state.experiments and not fake_beaker.state.datasets


@pytest.mark.slow
@pytest.mark.timeout(60)  # a follow stream that does not end fails here
@both_ways("tie_timestamps")
def test_11_streams_end_early_get_cut_and_may_share_timestamps(fake_beaker):
    st = fake_beaker.state
    beaker = fake_beaker.client()
    exp = st.add_experiment(WS, "streamy", author="alice")
    job = st.start_job(exp)
    st.append_logs(job, [f"l{i}" for i in range(9)])
    stamps = [job.logs.line(i)[0] for i in range(9)]
    assert (len(set(stamps)) == 3) == st.options.tie_timestamps
    msgs = [m.message for m in beaker.job.logs(beaker.job.get(job.id), tail_lines=0)]
    assert len(msgs) == 9  # tail_lines=0 means all
    fake_beaker.faults.unavailable_streams(after_lines=2)
    call = beaker.service.StreamJobLogs(
        pb2.StreamJobLogsRequest(job_id=job.id, follow=True), metadata=beaker.job._rpc_call_metadata
    )
    with pytest.raises(grpc.RpcError) as err:
        list(call)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    # a follow stream ends cleanly while the job still runs (a stream that hangs fails on the timeout marker)
    call = beaker.service.StreamJobLogs(
        pb2.StreamJobLogsRequest(job_id=job.id, follow=True), metadata=beaker.job._rpc_call_metadata
    )
    assert len(list(call)) == 9 and st.find_job(job.id).finalized is None


def test_12_list_jobs_ignores_ascending(fake_beaker):
    beaker = fake_beaker.client()
    exp = fake_beaker.state.add_experiment(WS, "twice", author="alice")
    first = exp.tasks[0].latest_job
    second = fake_beaker.state.preempt_job(first)
    from beaker import BeakerSortOrder

    jobs = list(
        beaker.job.list(task=exp.tasks[0], sort_order=BeakerSortOrder.ascending, sort_field="created")
    )
    assert [j.id for j in jobs] == [second.id, first.id]


def test_14_preemption_fields(fake_beaker):
    st = fake_beaker.state
    beaker = fake_beaker.client()
    exp = st.add_experiment(WS, "preempted", author="alice")
    old = exp.tasks[0].latest_job
    new = st.preempt_job(old)
    o = beaker.job.get(old.id).status
    assert o.canceled_code == pb2.CANCELATION_CODE_SYSTEM_PREEMPTION and o.canceled_for
    assert o.message == "Job canceled while starting"
    assert new.created == old.canceled
    assert beaker.workload.get_latest_job(beaker.workload.get(exp.id)).id == new.id


@both_ways("replica_task_names", ("same", "distinct"))
def test_15_replicas_are_tasks(fake_beaker):
    beaker = fake_beaker.client()
    s = spec()
    s.tasks[0].replicas = 3
    wl = beaker.experiment.create(spec=s, name="replicas")
    tasks = wl.experiment.tasks
    assert [t.system_details.replica_group_details.rank for t in tasks] == [0, 1, 2]
    names = {t.name for t in tasks}
    assert len(names) == (3 if fake_beaker.state.options.replica_task_names == "distinct" else 1)


def test_16_17_failed_without_exit_code_and_no_result_dataset_before_assignment(fake_beaker):
    st = fake_beaker.state
    beaker = fake_beaker.client()
    exp = st.add_experiment(WS, "pull-failed", author="alice")
    job = beaker.job.get(exp.tasks[0].latest_job.id)
    assert not job.assignment_details.HasField("result_dataset_id")
    st.schedule_job(exp)
    st.fail_job(exp, "failed to pull image")
    job = beaker.job.get(job.id)
    assert job.status.status == pb2.STATUS_FAILED and not job.status.HasField("exit_code")
    assert job.assignment_details.result_dataset_id
    exp2 = st.add_experiment(WS, "uploading", author="alice")
    st.finish_job(exp2, 0, finalize=False)
    assert beaker.workload.get(exp2.id).status == BeakerWorkloadStatus.uploading_results


@both_ways("job_creation_delay", (0.0, 0.4))
def test_18_no_job_for_a_moment_after_create(fake_beaker):
    beaker = fake_beaker.client()
    wl = beaker.experiment.create(spec=spec(), name="late-job")
    delayed = fake_beaker.state.options.job_creation_delay > 0
    assert (beaker.workload.get_latest_job(wl) is None) == delayed
    assert fake_beaker.state.wait_for(lambda: beaker.workload.get_latest_job(wl) is not None, 5)


def test_19_queued_forever_with_slot_limit_events(fake_beaker):
    st = fake_beaker.state
    beaker = fake_beaker.client()
    exp = st.add_experiment(WS, "stuck", author="alice")
    st.queue_forever(exp, impossible_after=0.2)
    events = [
        e.latest_message for e in beaker.job.list_summarized_events(pb2.Job(id=exp.tasks[0].latest_job.id))
    ]
    assert any("excluded by slot limit" in m for m in events)
    assert any("do not have enough slots available" in m for m in events)
    assert st.wait_for(lambda: exp.tasks[0].latest_job.canceled is not None, 5)
    assert exp.tasks[0].latest_job.canceled_code == pb2.CANCELATION_CODE_IMPOSSIBLE_TO_SCHEDULE


@pytest.mark.filterwarnings("ignore:The 'preemptible' field:DeprecationWarning")  # sent on purpose
def test_20_batchless_clusters_and_old_plus_new_preemption_fields_are_400(fake_beaker):
    with pytest.raises(BeakerError, match="does not accept batch jobs"):
        fake_beaker.client().experiment.create(spec=spec(cluster="ai2/interactive"), name="session-only")
    body = spec().to_json()
    body["tasks"][0]["context"] = {"preemptible": True, "autoResume": True}
    r = _raw(fake_beaker, body)
    assert r.status_code == 400 and "cannot be combined" in r.json()["message"]


def _raw(fake, body):
    import requests

    ws = fake.state.find_workspace(WS).id
    return requests.post(
        f"{fake.agent_address}/api/v3/workspaces/{ws}/experiments",
        json=body,
        headers={"Authorization": "Bearer token-alice"},
        verify=str(fake.tls.ca_file),
        timeout=scaled(60),  # a hang guard: a busy machine answers in seconds, not milliseconds
    )


def test_21_job_env(fake_beaker):
    st = fake_beaker.state
    exp = st.add_experiment(WS, "env", author="alice", replicas=2)
    st.start_job(exp.tasks[1].latest_job)
    env = st.job_env(exp.tasks[1].latest_job)
    assert env["BEAKER_JOB_KIND"] == "batch" and env["BEAKER_REPLICA_RANK"] == "1"
    assert env["BEAKER_REPLICA_COUNT"] == "2" and env["BEAKER_NODE_HOSTNAME"]


def test_22_sessions_are_environment_workloads(fake_beaker):
    from beaker import BeakerWorkloadType

    st = fake_beaker.state
    beaker = fake_beaker.client()
    sess = st.add_session(WS, "my-session", author="alice", cluster="ai2/interactive")
    wl = beaker.workload.get(sess.id)
    assert wl.HasField("environment") and not wl.HasField("experiment")
    listed = list(beaker.workload.list(workload_type=BeakerWorkloadType.environment))
    assert [w.environment.id for w in listed] == [sess.id]
    with pytest.raises((BeakerError, ValueError)):  # beaker-py refuses it client-side
        beaker.experiment.get_spec(wl)
    stub, md = beaker.service, beaker.job._rpc_call_metadata
    with pytest.raises(grpc.RpcError):  # and so does the server
        stub.GetExperimentYamlSpec(pb2.GetExperimentYamlSpecRequest(experiment_id=sess.id), metadata=md)


def test_23_unimplemented_and_a_bounded_unavailable(fake_beaker):
    beaker = fake_beaker.client()
    with pytest.raises(NotImplementedError):
        list(beaker.queue.list())
    fake_beaker.faults.unavailable(2, "GetUser")
    assert beaker.user.get().name == "alice"  # retried, then served


def test_dataset_api_round_trip(fake_beaker, tmp_path):
    beaker = fake_beaker.client()
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("hello")
    (tmp_path / "d" / "empty.py").write_text("")
    ds = beaker.dataset.create("my-data", tmp_path / "d", strip_paths=True)
    assert ds.HasField("committed")
    files = {f.path: f.size for f in beaker.dataset.list_files(ds)}
    assert files == {"a.txt": 5}  # beaker-py skips zero-byte files inside directories (fact 7.2)
    assert b"".join(beaker.dataset.stream_file(ds, "a.txt")) == b"hello"
    with pytest.raises(Exception, match="my-data"):
        beaker.dataset.create("my-data", tmp_path / "d")
    assert [d.name for d in beaker.dataset.list(name_or_description="my-data", results=False)] == ["my-data"]


def test_workspace_not_found_by_name_in_id_field(fake_beaker):
    with pytest.raises(BeakerWorkspaceNotFound):
        fake_beaker.client().workspace.get("ai2/nope")
