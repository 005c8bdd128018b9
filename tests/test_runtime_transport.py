"""The runtime travels once, not per task (issue 24 item 2): spec sizes, the bootstrap, the runtime
dataset made once and reused (fake Beaker), the same files for local runs."""

from __future__ import annotations

import hashlib
import re
import subprocess

import pytest

from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.core.spec import build_spec, spec_to_yaml
from launchkit.core.specview import SpecView
from launchkit.runtime import (
    ENTRYPOINT_NAME,
    ENV_ENTRYPOINT_DIR,
    RUNTIME_MOUNT,
    bootstrap,
    materialise,
    runtime_dataset_name,
    runtime_files,
)

GIT = GitState(remote_url="https://github.com/example-org/example-repo.git", commit="a" * 40, branch="main")
WS = "ai2/launchkit"
ONE_TASK_MAX = 16 * 1024
PER_TASK_MAX = 2 * 1024


def _yaml(*sweep: str) -> str:
    given = {"sweep": list(sweep)} if sweep else {}
    request = build_request(
        given, ["python", "train.py", "--lr", "{lr}"] if sweep else ["python", "x"], environ={}
    )
    return spec_to_yaml(build_spec(request, GIT))


def test_one_task_spec_is_small():
    text = _yaml()
    assert len(text.encode()) <= ONE_TASK_MAX, len(text.encode())
    assert f"beaker: {runtime_dataset_name()}" in text and f"mountPath: {RUNTIME_MOUNT}" in text


def test_each_further_task_adds_at_most_2kb():
    values = ",".join(f"{i}e-5" for i in range(1, 101))
    one, hundred = len(_yaml("lr=1e-5").encode()), len(_yaml(f"lr={values}").encode())
    assert (hundred - one) / 99 <= PER_TASK_MAX, (one, hundred)
    assert one <= ONE_TASK_MAX


def test_the_runtime_is_not_in_the_spec():
    text = _yaml()
    entry = runtime_files()["entrypoint.sh"].decode()
    longest = max(entry.splitlines(), key=len).strip()
    assert len(longest) > 60 and longest not in text  # only the bootstrap travels


def _boot(directory, *argv: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", ENV_ENTRYPOINT_DIR: str(directory), **(extra_env or {})}
    return subprocess.run(
        ["bash", "-c", bootstrap(), ENTRYPOINT_NAME, *argv],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


def test_bootstrap_runs_the_materialised_entrypoint(tmp_path):
    directory = materialise(tmp_path / "rt")
    assert materialise(tmp_path / "rt") == directory  # written once, then reused
    assert {str(p.relative_to(directory)) for p in directory.rglob("*.*")} == set(runtime_files())
    r = _boot(directory, "python", "x")
    # the entrypoint ran: its input check (step 1) misses the git inputs -> 100, naming them
    assert r.returncode == 100, r.stderr
    assert "LAUNCHKIT_GIT_REMOTE" in r.stderr and "no runtime at" not in r.stderr


def test_bootstrap_refuses_a_missing_or_different_runtime(tmp_path):
    r = _boot(tmp_path / "nothing", "python", "x")
    assert r.returncode == 100 and f"no runtime at {tmp_path}/nothing/entrypoint.sh" in r.stderr
    assert runtime_dataset_name() in r.stderr
    other = tmp_path / "other"
    other.mkdir()
    (other / "entrypoint.sh").write_text("echo should-not-run\n")
    r = _boot(other, "python", "x")
    assert r.returncode == 100 and "or not this spec's" in r.stderr
    assert "should-not-run" not in r.stdout


def test_local_backend_gets_the_files_instead_of_the_mount(tmp_path):
    from launchkit.backends.local.runtime_files import use_runtime

    spec = build_spec(build_request({}, ["python", "x"], environ={}), GIT).to_json()
    directory = use_runtime(tmp_path, SpecView(spec))
    task = spec["tasks"][0]
    assert directory is not None and not task.get("datasets")
    assert {"name": ENV_ENTRYPOINT_DIR, "value": str(directory)} in task["envVars"]
    for name, data in runtime_files().items():
        assert (directory / name).read_bytes() == data


# --------------------------------------------------------------------------- the runtime dataset on Beaker
@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _prepare(name: str = "rt", *, submit: bool = True):
    """The spec prepare() makes (`submit=False`: what a dry run prints), or submit() sends."""
    from launchkit.application import Application
    from launchkit.backends import Submission
    from launchkit.backends.beaker import BeakerBackend

    spec = build_spec(build_request({}, ["python", "x"], environ={}), GIT).to_json()
    spec["tasks"][0]["image"] = {"docker": "python:3.11"}
    b = BeakerBackend(Application(verbosity=-1), timeout=30, workspace=WS)
    try:
        prepared = b.prepare(Submission(name=name, spec=SpecView(spec), workspace=WS))
        return (b._upload(prepared, b._prepared_ws(prepared)) if submit else prepared.spec).to_json()
    finally:
        b.close()


def _dataset_calls(fake) -> dict[str, int]:
    return {k: n for k, n in fake.calls.items() if "Dataset" in k}


# every call that changes something on Beaker (gRPC methods and the fake's HTTP route names)
WRITES = re.compile(r"^(Create|Update|Delete|Put|Commit|Upload|StartUpload|Cancel|Add|Remove|Set)")


def _writes(fake) -> dict[str, int]:
    return {k: n for k, n in fake.calls.items() if WRITES.match(k)}


def test_runtime_dataset_made_once_verified_and_reused(fake_beaker, isolated_cache):
    first = _prepare()
    made = [d for d in fake_beaker.state.datasets.values() if d.name.startswith(runtime_dataset_name())]
    assert len(made) == 1 and made[0].committed is not None
    ds = made[0]
    ws = fake_beaker.state.find_workspace(WS)
    assert ds.name == f"{runtime_dataset_name()}-{ws.id}"
    assert {p: hashlib.sha256(b).digest() for p, b in ds.files.items()} == {
        p: hashlib.sha256(b).digest() for p, b in runtime_files().items()
    }
    mount = first["tasks"][0]["datasets"][0]
    assert mount == {"source": {"beaker": ds.id}, "mountPath": RUNTIME_MOUNT, "mode": "readonly"}

    fake_beaker.reset_calls()
    second = _prepare()
    assert second["tasks"][0]["datasets"][0] == mount  # the same id: reused
    assert _dataset_calls(fake_beaker) == {"GetDataset": 1}, dict(fake_beaker.calls)  # one lookup


def test_first_submit_looks_the_runtime_dataset_up_once(fake_beaker, isolated_cache):
    _prepare()
    # prepare() found none by name; submit() made it without asking again (GetDataset: the commit's 2)
    assert fake_beaker.calls["ResolveDatasetName"] == 1 and fake_beaker.calls["GetDataset"] == 2


def test_prepare_only_reads_and_names_the_dataset_submit_creates(fake_beaker, isolated_cache):
    """A dry run writes nothing to Beaker (issue 31): it mounts the runtime dataset by the name submit
    creates it under; the workspace the user may only read is no obstacle."""
    ws = fake_beaker.state.find_workspace(WS)
    ws.readers.add(fake_beaker.user("alice").id)
    spec = _prepare(submit=False)
    assert _writes(fake_beaker) == {}, dict(fake_beaker.calls)
    name = f"{runtime_dataset_name()}-{ws.id}"
    assert spec["tasks"][0]["datasets"][0]["source"] == {"beaker": name}
    assert not [d for d in fake_beaker.state.datasets.values() if d.name == name]
    from launchkit.core.spec import runtime_note

    assert runtime_note(SpecView(spec)) == [
        f"runtime dataset id ({name}; created once per launchkit version)"
    ]


def test_runtime_dataset_found_by_name_without_the_local_cache(fake_beaker, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "one"))
    first = _prepare()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "two"))  # another machine
    fake_beaker.reset_calls()
    assert _prepare()["tasks"][0]["datasets"] == first["tasks"][0]["datasets"]
    assert fake_beaker.calls["CreateDataset"] == 0 and fake_beaker.calls["UploadDatasetFile"] == 0
    assert _prepare(submit=False)["tasks"][0]["datasets"] == first["tasks"][0]["datasets"]  # by id


def test_a_deleted_runtime_dataset_is_made_again(fake_beaker, isolated_cache):
    first = _prepare()["tasks"][0]["datasets"][0]["source"]["beaker"]
    del fake_beaker.state.datasets[first]
    again = _prepare()["tasks"][0]["datasets"][0]["source"]["beaker"]
    assert again != first and again in fake_beaker.state.datasets


@pytest.mark.slow
def test_dry_run_writes_nothing_even_in_a_read_only_workspace(repo, fake_beaker, isolated_cache):
    """With credentials, `run --dry-run` resolves read-only (issue 31): zero write calls, and it works
    for a member who may only read the workspace, while `run` itself is refused there."""
    from conftest import run_cli

    ws = fake_beaker.state.find_workspace(WS)
    ws.readers.add(fake_beaker.user("alice").id)
    args = ("--workspace", WS, "--docker-image", "python:3.11", "--", "python", "train.py")
    fake_beaker.reset_calls()
    r = run_cli("run", "--dry-run", *args, cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    assert _writes(fake_beaker) == {}, dict(fake_beaker.calls)
    assert fake_beaker.calls["ResolveDatasetName"] == 1  # looked up, read-only
    name = f"{runtime_dataset_name()}-{ws.id}"
    assert f"beaker: {name}\n" in r.stdout
    assert f"decided at submit: runtime dataset id ({name}" in r.stderr, r.stderr
    assert not fake_beaker.state.datasets
    refused = run_cli("run", "--yes", "--no-preflight", *args, cwd=repo.path, timeout=90)
    assert refused.code != 0 and "read-only" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


# --------------------------------------------------------------------------- many tasks: summaries
def _info(status: str, counts: dict[str, int], exit_code: int | None = None):
    import datetime as dt

    from launchkit.backends import RunInfo, RunStatus

    return RunInfo(
        id="01EXP",
        name="sweep",
        backend="beaker",
        status=RunStatus(status),
        exit_code=exit_code,
        created=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        tasks=sum(counts.values()),
        task_statuses=counts,
    )


class _Runs:
    """A backend whose get() returns the given states in turn; follow() must not be called."""

    name = "beaker"

    def __init__(self, *states):
        self.states, self.gets = list(states), 0

    def get(self, run_id):
        self.gets += 1
        return self.states.pop(0)

    def follow(self, *a, **kw):  # pragma: no cover - the point is that it is not called
        raise AssertionError("a many-task run is summarised, not streamed task by task")


def test_task_summary_orders_states():
    from launchkit.cli.following import task_summary

    line = task_summary({"succeeded": 8, "queued": 980, "running": 12})
    assert line == "1000 tasks: 12 running, 980 queued, 8 succeeded"


def test_follow_summarises_a_many_task_run_until_it_ends(capsys):
    from launchkit.application import Application
    from launchkit.cli.following import follow_summary

    first = _info("queued", {"queued": 1000})
    backend = _Runs(
        _info("running", {"running": 12, "queued": 980, "succeeded": 8}),
        _info("running", {"running": 12, "queued": 980, "succeeded": 8}),  # unchanged: not repeated
        _info("failed", {"succeeded": 999, "failed": 1}, exit_code=3),
    )
    sleeps: list[float] = []
    code = follow_summary(Application(), backend, first, poll=5.0, sleep=sleeps.append)  # type: ignore[arg-type]
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("1000 tasks: ")]
    assert lines == [
        "1000 tasks: 1000 queued",
        "1000 tasks: 12 running, 980 queued, 8 succeeded",
        "1000 tasks: 999 succeeded, 1 failed",
    ]
    assert "--task NAME" in err  # how to see one task's lines
    assert code == 3 and sleeps == [5.0, 5.0, 5.0] and backend.gets == 3


def test_follow_run_summarises_only_many_tasks_without_a_choice():
    from launchkit.cli.following import summarised

    many = _info("running", {"running": 9})
    assert summarised(many, None, False, None)
    assert not summarised(many, None, False, "main__lr_1")  # --task: that task's lines
    assert not summarised(many, 0, False, None) and not summarised(many, None, True, None)
    assert not summarised(_info("running", {"running": 8}), None, False, None)


def test_beaker_task_statuses_and_bounded_jobs(fake_beaker, isolated_cache):
    """A 300-task experiment: its states from the workload alone, jobs read for a few tasks only."""
    from launchkit.application import Application
    from launchkit.backends.beaker import BeakerBackend
    from launchkit.backends.protocol import RunStatus

    spec = {
        "version": "v2",
        "description": "sweep [launchkit]",
        "tasks": [
            {"name": f"t{i}", "image": {"docker": "python:3.11"}, "context": {}, "command": ["true"]}
            for i in range(300)
        ],
    }
    exp = fake_beaker.state.create_experiment(WS, spec, name="many", author="alice")
    for t in exp.tasks[:5]:
        fake_beaker.state.finish_job(t.latest_job, 0)
    fake_beaker.state.finish_job(exp.tasks[7].latest_job, 2)
    b = BeakerBackend(Application(verbosity=-1), timeout=30, workspace=WS)
    fake_beaker.reset_calls()
    run = b.get(exp.id)
    b.close()
    assert run.task_statuses == {"succeeded": 5, "failed": 1, "queued": 294}
    assert fake_beaker.calls["ListJobs"] <= 2, dict(fake_beaker.calls)  # the failed task and the first
    # still going (294 tasks queued): the run's exit code comes with its end (core/runs.py)
    assert run.status == RunStatus.queued and run.exit_code is None and run.end is None


@pytest.mark.slow  # a 1,000-task launch through the CLI against the fake (~15-30 s)
def test_a_1000_task_sweep_is_one_experiment_in_bounded_calls(repo, make_fake_beaker, tmp_path):
    from conftest import run_cli

    fake = make_fake_beaker(options={"create_latency_per_job": 0.0})
    values = ",".join(f"{i}e-6" for i in range(1, 1001))
    args = (
        "--workspace",
        WS,
        "--name",
        "big",
        "--sweep",
        f"lr={values}",
        "--",
        "python",
        "t.py",
        "--lr",
        "{lr}",
    )
    r = run_cli("run", "--yes", *args, cwd=repo.path, timeout=300)
    assert r.code == 0, r.stderr[-2000:]
    exps = [e for e in fake.state.experiments.values() if e.name == "big"]
    assert len(exps) == 1 and len(exps[0].tasks) == 1000
    # nothing per task: the runtime dataset made once (one upload per file), 17 other calls
    from launchkit.runtime import runtime_files

    assert fake.calls["UploadDatasetFile"] == len(runtime_files()), dict(fake.calls)
    assert fake.total_calls - fake.calls["UploadDatasetFile"] <= 17, dict(fake.calls)
    runtime = {m["source"]["beaker"] for t in exps[0].spec["tasks"] for m in t["datasets"]}
    assert len(runtime) == 1 and runtime <= set(fake.state.datasets)
    for t in exps[0].tasks:
        fake.state.finish_job(t.latest_job, 0)
    fake.reset_calls()
    listed = run_cli("list", "--workspace", WS, timeout=60, env={"COLUMNS": "200"})
    assert "1000 tasks: 1000 succeeded" in listed.stdout, listed.stdout
    followed = run_cli("follow", exps[0].id, timeout=120)
    assert followed.code == 0 and "1000 tasks: 1000 succeeded" in followed.stderr, followed.stderr
    assert len(followed.stdout.splitlines()) == 0  # no line per task


def test_the_fake_refuses_a_spec_mounting_a_missing_dataset(fake_beaker):
    """Real Beaker resolves `source.beaker` (a name or an id) at create: a missing one is refused, so a
    runtime mount that was never made cannot pass unnoticed in the tests."""
    from fakebeaker.state import Invalid

    task = {"name": "main", "image": {"docker": "python:3.11"}, "context": {}, "command": ["true"]}
    spec = {"version": "v2", "description": "d", "tasks": [task]}
    task["datasets"] = [{"source": {"beaker": runtime_dataset_name()}, "mountPath": RUNTIME_MOUNT}]
    with pytest.raises(Invalid, match="not found"):
        fake_beaker.state.create_experiment(WS, spec, name="missing", author="alice")
    ds = fake_beaker.state.create_dataset(WS, runtime_dataset_name(), author="alice")
    for ref in (ds.id, f"alice/{ds.name}", ds.name):
        task["datasets"][0]["source"]["beaker"] = ref
        fake_beaker.state.create_experiment(WS, spec, name=f"ok-{len(ref)}", author="alice")


# --------------------------------------------------------------------------- the offline dry run
def _without_launch_token(yaml_text: str) -> str:
    """The spec's YAML without the launch token (a nonce each prepared launch draws anew)."""
    lines = yaml_text.splitlines(keepends=True)
    out, skip = [], 0
    for line in lines:
        if skip:
            skip -= 1
            continue
        if line.strip() == "- name: LAUNCHKIT_LAUNCH_TOKEN":
            skip = 1
            continue
        out.append(line)
    return "".join(out)


@pytest.mark.slow
@pytest.mark.parametrize("workspace", [("--workspace", WS), ()])  # given, or the Beaker config's default
def test_offline_dry_run_mounts_the_runtime_dataset_an_earlier_launch_made(
    repo, fake_beaker, isolated_cache, workspace
):
    from conftest import run_cli

    args = (*workspace, "--budget", "ai2/oe-default", "--docker-image", "python:3.11", "--", "python", "x.py")
    before = run_cli("run", "--dry-run", "--offline", *args, cwd=repo.path, timeout=60)
    assert before.code == 0, before.stderr
    assert f"beaker: {runtime_dataset_name()}\n" in before.stdout  # nothing remembered: the name...
    assert f"runtime dataset id ({runtime_dataset_name()}" in before.stderr  # ...and the note says so

    online = run_cli("run", "--dry-run", *args, cwd=repo.path, timeout=90)  # makes nothing
    assert online.code == 0 and not fake_beaker.state.datasets, online.stderr
    launched = run_cli("run", "--yes", "--no-preflight", *args, cwd=repo.path, timeout=90)  # makes it
    assert launched.code == 0, launched.stderr
    (ds,) = [d for d in fake_beaker.state.datasets.values() if d.name.startswith(runtime_dataset_name())]
    online = run_cli("run", "--dry-run", *args, cwd=repo.path, timeout=90)
    assert f"beaker: {ds.id}\n" in online.stdout

    fake_beaker.reset_calls()
    after = run_cli("run", "--dry-run", "--offline", *args, cwd=repo.path, timeout=60)
    assert after.code == 0, after.stderr
    assert _without_launch_token(after.stdout) == _without_launch_token(online.stdout)  # byte for byte
    assert "offline spec (--offline): complete" in after.stderr, after.stderr
    assert fake_beaker.total_calls == 0  # offline: from this machine's memory, nothing asked


def test_remembered_runtime_id_per_address_and_workspace(tmp_path):
    from launchkit.backends import beaker_remembered as memory

    config = tmp_path / "config.yml"
    config.write_text("user_token: t\nagent_address: https://b.example\ndefault_workspace: ai2/dflt\n")
    env = {"HOME": str(tmp_path), "BEAKER_CONFIG": str(config)}
    cache = tmp_path / "cache"
    ds = f"{runtime_dataset_name()}-01WS"
    memory.save(
        cache / memory.CACHE_FILE,
        {
            memory.workspace_key("https://b.example", "ai2/dflt"): "01WS",
            memory.workspace_key("https://b.example", "ai2/other"): "01OTHER",
            memory.dataset_key("https://b.example", ds): "01DS",
            memory.dataset_key("https://beaker.org", ds): "01ELSEWHERE",
        },
    )
    assert memory.remembered_runtime_id(None, environ=env, cache=cache) == "01DS"  # the config's default
    assert memory.remembered_runtime_id("ai2/dflt", environ=env, cache=cache) == "01DS"
    assert memory.remembered_runtime_id("ai2/other", environ=env, cache=cache) is None  # no dataset known
    assert memory.remembered_runtime_id("ai2/nope", environ=env, cache=cache) is None
    other_beaker = {**env, "BEAKER_ADDR": "https://beaker.org"}  # the same names at another address
    assert memory.remembered_runtime_id("ai2/dflt", environ=other_beaker, cache=cache) is None
    assert memory.remembered_runtime_id(None, environ={"HOME": str(tmp_path)}, cache=cache) is None


def test_decided_at_submit_names_the_runtime_dataset_only_while_its_id_is_unknown():
    from launchkit.core.spec import decided_at_submit

    request = build_request({"docker_image": "python:3.11", "budget": "ai2/b"}, ["python", "x"], environ={})
    local = GitState(remote_url="/tmp/repo.git", commit="a" * 40)
    spec = build_spec(request, local).to_json()
    assert decided_at_submit(request, local, SpecView(spec)) == [
        f"runtime dataset id ({runtime_dataset_name()}; created once per launchkit version)"
    ]
    spec["tasks"][0]["datasets"][0]["source"]["beaker"] = "01KXREMEMBEREDDATASETID000"  # remembered
    assert decided_at_submit(request, local, SpecView(spec)) == []  # complete: byte for byte what run submits
    default_image = build_request({"budget": "ai2/b"}, ["python", "x"], environ={})
    assert "Beaker image id of beaker-py/gantry" in decided_at_submit(default_image, local, SpecView(spec))
