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
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from beaker import BeakerExperimentSpec, BeakerSortOrder, BeakerWorkloadStatus, BeakerWorkloadType

from fakebeaker import FakeBeaker, State, scenarios
from fakebeaker.remote import RemoteFake
from timescale import scaled

pytestmark = pytest.mark.timeout(540)
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
        reader.join(scaled(60))
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


@pytest.mark.slow
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


@pytest.mark.slow
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
            c = b.cluster.get("ai2/mixed", include_cluster_occupancy=True)
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


def _gantry_invocations(ids: dict[str, str], tmp: Path) -> list[tuple[str, list[str], str]]:
    """(label, argv, text the output must contain) for every gantry 3.7.0 command."""
    run = ["run", "--yes", "--budget", "ai2/oe-default"]
    cmd = ["--", "python", "train.py"]
    since = ids["since"]
    return [
        ("find-gpus", ["find-gpus"], "ai2/"),
        ("find-gpus --all", ["find-gpus", "--all"], "ai2/bench-00"),
        ("find-gpus -g h100", ["find-gpus", "-g", "h100"], "ai2/jupiter"),
        ("find-gpus -g a100 --all", ["find-gpus", "-g", "a100", "--all"], "ai2/saturn"),
        ("list", ["list"], "bench-"),
        ("list --limit 50", ["list", "--limit", "50"], "bench-011"),
        ("list --me", ["list", "--me"], "bench-"),
        ("list --author bob", ["list", "--author", "bob"], "bench-"),
        ("list -s running", ["list", "-s", "running", "--all"], "to-stop"),
        ("list -s succeeded -s failed", ["list", "-s", "succeeded", "-s", "failed"], "bench-"),
        ("list -t bench-001", ["list", "-t", "bench-001"], "bench-001"),
        ("list --max-age 7", ["list", "--max-age", "7"], "bench-"),
        ("list --max-age 2d", ["list", "--max-age", "2d"], "bench-"),
        ("list --all", ["list", "--all", "--limit", "40"], "other-"),
        ("list -w", ["list", "-w", "ai2/launchkit"], "bench-"),
        ("list -g", ["list", "-g", "sweep"], "bench-001"),
        ("follow", ["follow", "alice/follow-200k"], "line 001999"),
        ("follow -t", ["follow", "-t", "alice/follow-200k"], "line 001999"),
        ("follow --latest", ["follow", "--latest"], "hello from the fake job"),
        (
            "follow --latest --author bob",
            ["follow", "--latest", "--author", "bob"],
            "hello from the fake job",
        ),
        ("logs", ["logs", "alice/follow-200k"], "line 001999"),
        ("logs --tail", ["logs", "alice/follow-200k", "--tail", "3"], "line 001999"),
        ("logs --head", ["logs", "alice/follow-200k", "--head", "5"], "line 000004"),
        ("logs -o", ["logs", "alice/follow-200k", "-o", str(tmp / "out.log")], ""),
        ("logs --since", ["logs", "alice/follow-200k", "--since", since], "line 001999"),
        ("logs --replica", ["logs", "alice/multi", "--replica", "1"], "replica 1"),
        ("logs --task", ["logs", "alice/multi", "--task", "main"], "replica 0"),
        ("logs --run", ["logs", "alice/preempted", "--run", "1"], "first run"),
        ("logs --all -o dir", ["logs", "alice/multi", "--all", "-o", str(tmp / "logs") + "/"], ""),
        ("logs -f", ["logs", "-f", "alice/follow-200k"], "line 001999"),
        ("stop --dry-run", ["stop", "alice/to-stop", "--dry-run"], ""),
        ("stop", ["stop", "alice/to-stop", "--yes"], ""),
        ("stop --latest", ["stop", "--latest", "--yes"], ""),
        ("stop -w --latest --dry-run", ["stop", "-w", "ai2/launchkit", "--latest", "--dry-run"], ""),
        ("open", ["open", "alice/follow-200k"], ""),
        ("config set-gh-token", ["config", "set-gh-token", "ghp_fake_token"], ""),
        ("completion bash", ["completion", "bash"], "complete"),
        ("completion zsh", ["completion", "zsh"], "compdef"),
        ("completion fish", ["completion", "fish"], "complete"),
        ("run", [*run, "--name", "g-run", "--cluster", "ai2/jupiter", "--gpus", "1", *cmd], "alice/g-run"),
        ("run --dry-run", [*run, "--dry-run", "--cluster", "ai2/jupiter", *cmd], ""),
        ("run --save-spec", [*run, "--dry-run", "--save-spec", str(tmp / "spec.yaml"), *cmd], ""),
        ("run --show-logs", [*run, "--name", "g-logs", "--show-logs", "--timeout", "60", *cmd], "hello from"),
        ("run alias", [*run, "--name", "g-alias", "--cluster", "ai2/jupiter-cirrascale-2", *cmd], "g-alias"),
        (
            "run glob + gpu",
            [*run, "--name", "g-glob", "--cluster", "ai2/*", "--gpu-type", "h100", *cmd],
            "g-glob",
        ),
        ("run --tag", [*run, "--name", "g-tag", "--tag", "storage:weka", *cmd], "g-tag"),
        ("run --interconnect", [*run, "--name", "g-ib", "--interconnect", "ib", *cmd], "g-ib"),
        (
            "run replicas",
            [
                *run,
                "--name",
                "g-mn",
                "--replicas",
                "2",
                "--gpus",
                "1",
                "--leader-selection",
                "--host-networking",
                "--propagate-failure",
                "--cluster",
                "ai2/jupiter",
                *cmd,
            ],
            "g-mn",
        ),
        (
            "run env + secrets + group",
            [
                *run,
                "--name",
                "g-env",
                "--env",
                "A=B",
                "--env-secret",
                "HF=HF_TOKEN",
                "--group",
                "sweep",
                *cmd,
            ],
            "g-env",
        ),
        ("run --upload", [*run, "--name", "g-up", "--upload", "data:/data", *cmd], "g-up"),
        (
            "run images",
            [*run, "--name", "g-img", "--beaker-image", "alice/base", "--priority", "high", *cmd],
            "g-img",
        ),
        ("run preemption", [*run, "--name", "g-pre", "--min-runtime", "1h", "--retries", "2", *cmd], "g-pre"),
        (
            "run --weka",
            [*run, "--name", "g-weka", "--weka", "oe-data:/data", "--cluster", "ai2/jupiter", *cmd],
            "g-weka",
        ),
    ]


@pytest.mark.slow
@pytest.mark.skipif(
    not Path(GANTRY).is_file(),
    reason="gantry 3.7.0 not installed (.ci/install-gantry; tests/fakebeaker/README.md)",
)
@pytest.mark.timeout(600)
def test_real_gantry_runs_every_command_against_the_fake(tmp_path):
    """Unmodified gantry 3.7.0 (in its own venv) runs all its commands against the strict fake,
    `run` included: the dataset API, github.com through the fake's proxy (gantry's is_public check)."""
    import datetime as dt

    from fakebeaker import AutoRun

    state = scenarios.demo(State(), clusters=6, workloads=12, other_workloads=3, log_lines=2000)
    st = state
    multi = st.add_experiment("ai2/launchkit", "multi", author="alice", replicas=2)
    for t in multi.tasks:
        st.start_job(t.latest_job)
        st.append_logs(t.latest_job, [f"replica {t.replica_rank}"])
        st.finish_job(t.latest_job, 0)
    pre = st.add_experiment("ai2/launchkit", "preempted", author="alice")
    st.start_job(pre)
    st.append_logs(pre, ["first run"])
    nxt = st.preempt_job(pre)
    st.start_job(nxt)
    st.append_logs(nxt, ["second run"])
    st.finish_job(nxt, 0)
    st.start_job(st.add_experiment("ai2/launchkit", "to-stop", author="alice"))
    grp = st.add_group("ai2/launchkit", "sweep", author="alice")
    grp.experiment_ids.append(st.find_experiment("alice/bench-001").id)
    follow = st.find_experiment("alice/follow-200k").tasks[0].latest_job
    since = dt.datetime.fromtimestamp(follow.logs.line(0)[0] / 1e9, dt.UTC).isoformat()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text("print(1)\n")
    (repo / "data").mkdir()
    (repo / "data" / "x.txt").write_text("x\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "init"],
        ["remote", "add", "origin", "https://github.com/alice/proj.git"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=30)
    with FakeBeaker(state, directory=tmp_path / "fb") as fake:
        fake.state.set_auto(AutoRun(start_after=0.05, run_for=0.3))
        home = tmp_path / "home"
        home.mkdir()
        env = {
            **os.environ,
            **fake.env,
            "HTTPS_PROXY": fake.github_proxy,  # github.com answers from the fake
            "HOME": str(home),
            "GANTRY_CHECK_FOR_UPGRADES": "0",
            "COLUMNS": "250",
            "NO_COLOR": "1",
            "BROWSER": "true",  # `gantry open` launches a browser
        }
        env.pop("GITHUB_TOKEN", None)
        failures, passed = [], 0
        out = tmp_path / "out"
        out.mkdir()
        invocations = _gantry_invocations({"since": since}, out)

        def finish_soon(author: str) -> None:
            """A new running experiment of `author` (their latest) that logs a line and ends once gantry
            streams its logs (not on a timer: gantry's start-up time varies with the machine's load)."""
            exp = fake.state.add_experiment("ai2/launchkit", f"latest-{author}", author=author)
            exp.tasks[0].latest_job.pinned = True  # not AutoRun's: it must outlive gantry's start-up
            fake.state.start_job(exp)
            streams = fake.calls["StreamJobLogs"]

            def finish() -> None:
                fake.state.wait_for(lambda: fake.calls["StreamJobLogs"] > streams, 55)
                fake.state.append_logs(exp, ["hello from the fake job"])
                fake.state.finish_job(exp, 0)

            threading.Thread(target=finish, daemon=True).start()

        before = {"follow --latest": "alice", "follow --latest --author bob": "bob"}
        timings = []
        for label, argv, expect in invocations:
            if label in before:
                finish_soon(before[label])
            t0 = time.monotonic()
            try:
                r = subprocess.run(
                    [GANTRY, *argv],
                    env=env,
                    cwd=repo,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                    input="y\n" if label == "config set-gh-token" else "",  # "overwrite?"
                )
                ok = r.returncode == 0 and expect in r.stdout + r.stderr
                detail = f"exit {r.returncode}: {(r.stderr or r.stdout).strip().splitlines()[-3:]}"
            except subprocess.TimeoutExpired:
                ok, detail = False, "timed out"
            timings.append((time.monotonic() - t0, label))
            if ok:
                passed += 1
            else:
                failures.append(f"{label}: {detail}")
        print(f"gantry 3.7.0 against the fake: {passed} of {len(invocations)} invocations pass")
        print("slowest:", ", ".join(f"{label} {t:.1f}s" for t, label in sorted(timings)[-6:]))
        assert not failures, "\n".join(failures)
        ds_names = [d.name for d in fake.state.datasets.values()]
        assert any(n.startswith("gantry-v3.7.0-") for n in ds_names)  # the entrypoint dataset
        exp = fake.state.find_experiment("alice/g-alias")
        assert exp.spec["tasks"][0]["constraints"]["cluster"] == ["ai2/jupiter"]  # canonical name
