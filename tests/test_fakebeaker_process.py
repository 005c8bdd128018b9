"""The fake as a separate process (`python -m fakebeaker`), driven through its admin API, and the
beaker-py calls gantry 3.7.0 makes (reference sections 2 and 5) - plus real gantry when installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from beaker import BeakerExperimentSpec, BeakerSortOrder, BeakerWorkloadStatus, BeakerWorkloadType

from fakebeaker import FakeBeaker, State, scenarios
from fakebeaker.remote import RemoteFake

pytestmark = pytest.mark.timeout(180)
TESTS = Path(__file__).resolve().parent


class FakeProcess:
    def __init__(self, *args: str, cwd: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(TESTS)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fakebeaker", "--exit-on-eof", *args],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        if not line or not line[0]:
            self.close()
            raise AssertionError(f"fakebeaker did not start: {self.proc.stderr.read()}")
        self.info = json.loads(line[0])
        self.remote = RemoteFake(self.info["admin_url"], self.info["ca_file"])

    def close(self) -> int:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            return self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise


def run_py(code: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_fake_as_a_process_with_admin_api(tmp_path):
    fp = FakeProcess("--scenario", "basic", "--dir", str(tmp_path / "fb"), cwd=tmp_path)
    try:
        env = fp.info["env"]
        assert Path(env["BEAKER_CONFIG"]).is_file() and env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"].endswith(
            "ca.pem"
        )
        exp_id = fp.remote.state.add_experiment("ai2/launchkit", "remote", author="alice")
        fp.remote.state.start_job(exp_id)
        fp.remote.state.append_logs(exp_id, ["one", "two"])
        fp.remote.state.finish_job(exp_id, 5)
        fp.remote.reset_calls()
        r = run_py(
            """
            from beaker import Beaker
            with Beaker.from_env(check_for_upgrades=False) as b:
                wl = b.workload.get("alice/remote")
                job = b.workload.get_latest_job(wl)
                print([l.message.decode() for l in b.job.logs(job, follow=True)], b.job.get(job.id).status.exit_code)
        """,
            env,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "['one', 'two'] 5"
        calls = fp.remote.calls
        assert calls["StreamJobLogs"] == 1 and calls["GetWorkload"] == 1
        fp.remote.faults.unavailable(1, method="GetUser")
        r = run_py(
            """
            from beaker import Beaker
            Beaker.BACKOFF_FACTOR = 0.01
            print(Beaker.from_env(check_for_upgrades=False).user.get().name)
        """,
            env,
        )
        assert r.stdout.strip() == "alice" and fp.remote.calls["GetUser"] == 2
    finally:
        assert fp.close() == 0


def test_fake_process_from_a_scenario_file(tmp_path):
    (tmp_path / "s.yaml").write_text(
        textwrap.dedent("""
        users: [{name: carol, token: tok-carol}]
        budgets: [ai2/b1]
        workspaces: [{name: ai2/ws1, budget: ai2/b1, author: carol, secrets: {HF_TOKEN: hidden}}]
        clusters:
          - name: ai2/mixed
            aliases: [mix]
            tags: [interconnect:ib]
            nodes: [{gpu_type: NVIDIA_H100, gpus: 8, assigned: 2, count: 2}, {gpu_type: NVIDIA_L40S, gpus: 4}]
        experiments:
          - {workspace: ai2/ws1, name: done, author: carol, status: failed, exit_code: 3, logs: [x, y], created_ago: 60}
        default_workspace: ai2/ws1
    """)
    )
    fp = FakeProcess("--state", str(tmp_path / "s.yaml"), cwd=tmp_path)
    try:
        r = run_py(
            """
            from beaker import Beaker
            b = Beaker.from_env(check_for_upgrades=False)
            c = b.cluster.get("ai2/mix", include_cluster_occupancy=True)
            wl = b.workload.get("carol/done")
            job = b.workload.get_latest_job(wl)
            print(b.user_name, b.workspace.get().name, c.cluster_occupancy.slot_counts.available,
                  len(list(b.node.list(cluster=c))), job.status.exit_code, wl.status)
        """,
            fp.info["env"],
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == [
            "carol",
            "ai2/ws1",
            "16",
            "3",
            "3",
            str(BeakerWorkloadStatus.failed.value),
        ]
    finally:
        assert fp.close() == 0


def test_gantry_beaker_py_calls_work(fake_beaker):
    """The calls listed in the gantry reference (sections 2 and 5), made the way gantry makes them."""
    s = fake_beaker.state
    beaker = fake_beaker.client()
    # run: user/org, workspace, image, groups, secrets, clusters + nodes, create + get
    assert beaker.user_name == "alice" and beaker.org_name == "ai2"
    ws = beaker.workspace.get()
    assert beaker.image.get("alice/base").id
    assert not list(beaker.group.list(workspace=ws, name_or_description="sweep"))
    group = beaker.group.create("sweep", workspace=ws)
    assert [g.id for g in beaker.group.list(workspace=ws)] == [group.id]
    assert beaker.secret.get("HF_TOKEN", workspace=ws).name == "HF_TOKEN"
    beaker.secret.write("GANTRY_TOKEN_abc", "v", workspace=ws)
    batch = [
        c
        for c in beaker.cluster.list()
        if not (c.HasField("max_task_timeout") and c.max_task_timeout.ToMilliseconds() == 0)
    ]
    assert "interactive" not in {c.name for c in batch}
    gpu = {
        c.name: next(iter(beaker.node.list(cluster=c, limit=1))).node_resources.gpu_type
        for c in batch
        if c.node_count
    }
    assert gpu
    spec = BeakerExperimentSpec.new(
        beaker_image="alice/base",
        cluster=["ai2/jupiter-cirrascale-2"],
        command=["python"],
        env_vars=[{"name": "GANTRY_VERSION", "value": "3.7.0"}],
        budget="ai2/oe-default",
    )
    spec.groups = [group.id]
    wl = beaker.experiment.create(spec=spec, name="gantry-like", workspace=ws)
    # follow: latest job, events before start, get, logs, results dataset, cancel
    job = beaker.workload.get_latest_job(wl)
    s.start_job(job.id)
    s.append_logs(job.id, ["hi"])
    s.finish_job(job.id, 0)
    events = list(
        beaker.job.list_summarized_events(
            job, sort_order=BeakerSortOrder.ascending, sort_field="latest_occurrence"
        )
    )
    assert events[0].status == "queued"
    job = beaker.job.get(job.id)
    assert job.status.HasField("started") and job.status.HasField("finalized")
    assert [log.message for log in beaker.job.logs(job, follow=True)] == [b"hi"]
    assert beaker.dataset.get(job.assignment_details.result_dataset_id).id
    assert beaker.workload.cancel(wl)
    # list: server-side filters, spec per workload, author per row
    rows = list(
        beaker.workload.list(
            workspace=ws,
            author=beaker.user.get("alice"),
            created_after=datetime.now(tz=UTC) - timedelta(days=7),
            workload_type=BeakerWorkloadType.experiment,
            statuses=None,
            name_or_description=None,
            sort_order=BeakerSortOrder.descending,
            sort_field="created",
            limit=None,
        )
    )
    assert [r.experiment.name for r in rows] == ["gantry-like"]
    assert any(e.name == "GANTRY_VERSION" for e in beaker.experiment.get_spec(rows[0]).tasks[0].env_vars)
    assert beaker.user.get(rows[0].experiment.author_id).name == "alice"
    # logs --run: all jobs of a task; follow/stop --latest
    task = rows[0].experiment.tasks[0]
    assert len(list(beaker.job.list(task=task, sort_field="created"))) == 1
    running = s.add_experiment("ai2/launchkit", "still-running", author="bob")
    s.start_job(running)
    latest = list(
        beaker.workload.list(
            workspace=ws,
            finalized=False,
            workload_type=BeakerWorkloadType.experiment,
            sort_order=BeakerSortOrder.descending,
            sort_field="created",
            limit=1,
        )
    )
    assert latest[0].experiment.name == "still-running"
    # find-gpus
    clusters = list(
        beaker.cluster.list(
            sort_field="free_gpus", sort_order=BeakerSortOrder.descending, include_cluster_occupancy=True
        )
    )
    assert (
        clusters[0].cluster_occupancy.slot_counts.available
        >= clusters[-1].cluster_occupancy.slot_counts.available
    )
    assert beaker.cluster.url(clusters[0]).endswith(f"/orgs/ai2/clusters/{clusters[0].name}")
    # list --group, open
    assert [m.experiment_id for m in beaker.group.list_task_metrics(group)] == [wl.experiment.id]
    assert beaker.group.get(group.id).name == "sweep"


GANTRY = os.environ.get("FAKEBEAKER_GANTRY") or shutil.which("gantry") or "/tmp/gantry-venv/bin/gantry"


@pytest.mark.skipif(
    not Path(GANTRY).is_file(), reason="gantry 3.7.0 not installed (see tests/fakebeaker/README.md)"
)
def test_real_gantry_against_the_fake(tmp_path):
    state = scenarios.demo(State(), clusters=6, workloads=12, other_workloads=3, log_lines=2000)
    with FakeBeaker(state, directory=tmp_path / "fb") as fake:
        env = {**os.environ, **fake.env, "GANTRY_CHECK_FOR_UPGRADES": "0", "COLUMNS": "250", "NO_COLOR": "1"}

        def gantry(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(
                [GANTRY, *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                cwd=tmp_path,
                check=False,
            )

        r = gantry("find-gpus", "--all")
        assert r.returncode == 0, r.stderr
        assert "ai2/bench-00" in r.stdout and "ai2/jupiter-cirrascale-2" in r.stdout
        r = gantry("list", "--limit", "50")
        assert r.returncode == 0, r.stderr
        assert r.stdout.count("bench-0") == 12 and "other-" not in r.stdout
        r = gantry("follow", "alice/follow-200k")
        assert r.returncode == 0, r.stderr
        assert "line 001999" in r.stdout and "completed successfully" in r.stdout
        r = gantry("logs", "alice/follow-200k", "--tail", "3", "-o", str(tmp_path / "out.log"))
        assert r.returncode == 0, r.stderr
        assert (tmp_path / "out.log").read_text().splitlines()[-1].startswith("line 001999")
        fake.faults.cut_streams(after_lines=700, count=None)  # beaker-py waits 2 s per cut
        r = gantry("logs", "alice/follow-200k", "-o", str(tmp_path / "all.log"))
        assert r.returncode == 0, r.stderr
        assert len((tmp_path / "all.log").read_text().splitlines()) == 2000
