"""The spec past `build_spec` is typed (issue 36 item 2): `core/specview.py` is the one place that
knows its JSON keys, and each field a backend reads or edits is tested here against a spec build_spec
really makes, so renaming a field in the layer (or reading one it does not give) fails this fast tier.

1. No string-key walk of the spec outside the layer: the spec's keys (every field of beaker-py's spec
   types, camelCased as its JSON has them) are not subscripts, `.get()` keys or dict keys in src/,
   except where the same word keys another dict (EXEMPT, each with what it keys), and nothing outside
   the layer reaches into a view's JSON (`.raw`).
2. Each accessor reads the field build_spec wrote, and each edit is what beaker-py parses back.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from launchkit.core.beaker_types import spec_types
from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.core.spec import build_spec
from launchkit.core.specview import EnvVar, Mount, SpecView, beaker_spec

SRC = Path(__file__).resolve().parents[1] / "src" / "launchkit"
LAYER = "core/specview.py"
NOT_THE_SPEC = ("runtime/node/",)  # the node's `spec` is a pyproject dependency spec


def spec_keys() -> set[str]:
    """Every JSON key of a Beaker spec: the fields of beaker-py's spec types, as to_json() spells them."""
    t = spec_types()
    keys = {"env_vars"}  # the snake_case spelling TaskView also reads
    for obj in vars(t).values():
        if isinstance(obj, type) and issubclass(obj, t._BeakerSpecBase) and dataclasses.is_dataclass(obj):
            keys |= {
                re.sub(r"_([a-z])", lambda m: m.group(1).upper(), f.name) for f in dataclasses.fields(obj)
            }
    return keys


# Keys only a spec has: nowhere in src/ outside the layer, except (module, key) -> what it keys there.
SPEC_ONLY = {
    "tasks",
    "datasets",
    "envVars",
    "env_vars",
    "constraints",
    "resources",
    "retry",
    "context",
    "result",
}
# Every spec key, in the modules that handle a spec (backends/, launch.py, sweeps.py, core/spec.py,
# core/session.py), except (module, key) -> what it keys there.
EXEMPT = {
    ("core/parse.py", "datasets"): "the request's field (build_request)",
    ("core/mason.py", "datasets"): "the request's field (mason's translation)",
    ("gantry/launch.py", "datasets"): "gantry's keyword argument",
    ("gantry/launch.py", "env_vars"): "gantry's keyword argument",
    ("core/spec.py", "datasets"): "beaker-py's BeakerTaskSpec keyword, while build_spec builds the spec",
    ("backends/beaker/backend.py", "cluster"): "a find-gpus row",
    ("backends/beaker/scheduling.py", "cluster"): "a find-gpus --gpus row",
    ("backends/beaker/scheduling.py", "budget"): "a find-gpus --gpus row, a waiting reason's kind",
    ("backends/beaker/scheduling.py", "priority"): "a waiting reason's kind (WaitReason.kind)",
    ("backends/beaker/launches.py", "name"): "a launch record (launches.jsonl)",
    ("backends/local/backend.py", "name"): "a local run's record, a find-gpus row",
    ("backends/local/backend.py", "cluster"): "RunInfo.cluster (model_copy, Backend.phases)",
    ("backends/local/backend.py", "replicas"): "a local run's record",
    ("backends/local/outcome.py", "replicas"): "a local run's record",
    ("backends/local/record.py", "name"): "a local run's record",
    ("backends/local/record.py", "replicas"): "a local run's record",
    ("backends/local/supervisor.py", "memory"): "a local run's record",
    ("launch.py", "name"): "Submission.name (model_copy)",
    ("core/plan.py", "tasks"): "the plan's JSON key (run --json): how many tasks",
}
HANDLE_A_SPEC = ("backends/", "launch.py", "sweeps.py", "core/spec.py", "core/session.py")


def _keys_used(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, key) of each string constant used as a subscript, a `.get/.setdefault/.pop` key or a
    dict literal's key."""
    out = []
    for node in ast.walk(tree):
        keys: list[ast.expr | None] = []
        if isinstance(node, ast.Subscript):
            keys = [node.slice]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            if node.func.attr in ("get", "setdefault", "pop"):
                keys = [node.args[0]]
        elif isinstance(node, ast.Dict):
            keys = list(node.keys)
        out += [(k.lineno, k.value) for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return out


def walks(src: Path = SRC) -> tuple[list[str], set[tuple[str, str]]]:
    """The string-key walks of the spec outside the layer, and the exemptions that were used."""
    every = spec_keys()
    found, used = [], set()
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel == LAYER or rel.startswith(NOT_THE_SPEC):
            continue
        tree = ast.parse(path.read_text())
        keys = every if rel.startswith(HANDLE_A_SPEC) else SPEC_ONLY
        for line, key in _keys_used(tree):
            if key not in keys:
                continue
            if (rel, key) in EXEMPT:
                used.add((rel, key))
            else:
                found.append(f"{rel}:{line}: {key!r}")
        found += [
            f"{rel}:{n.lineno}: .raw"
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr == "raw"
        ]
    return found, used


def test_no_string_key_walks_of_the_spec_outside_its_layer():
    found, used = walks()
    assert not found, (
        "read or edit the spec through core/specview.py (SpecView, TaskView, Mount):\n" + "\n".join(found)
    )
    assert used == set(EXEMPT), f"exemptions no longer needed: {sorted(set(EXEMPT) - used)}"


def test_the_guard_sees_a_walk(tmp_path):
    """The guard is not blind: a backend that walks the spec by key, or reaches into a view's JSON."""
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "new.py").write_text(
        "def f(spec, view):\n"
        "    for t in spec.get('tasks', []):\n"
        "        t['datasets'] = None\n"
        "    return spec['budget'], {**spec, 'groups': []}, view.raw\n"
    )
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "other.py").write_text("def g(x):\n    return x['name'], x['envVars']\n")
    found, _ = walks(tmp_path)
    assert sorted(found) == [
        "backends/new.py:2: 'tasks'",
        "backends/new.py:3: 'datasets'",
        "backends/new.py:4: 'budget'",
        "backends/new.py:4: 'groups'",
        "backends/new.py:4: .raw",
        "core/other.py:2: 'envVars'",  # `name` keys many things outside the spec's modules
    ]


# -- each field a backend reads or edits, against what build_spec makes ------------------------------
GIT = GitState(remote_url="https://github.com/o/r.git", commit="a" * 40, branch="main")


@pytest.fixture(scope="module")
def rich() -> SpecView:
    """A spec with every field the backends use set to something other than its default."""
    request = build_request(
        {
            "gpus": 2,
            "cpus": 3.5,
            "memory": "10GiB",
            "shared_memory": "2GiB",
            "replicas": 2,
            "torchrun": True,
            "retries": 2,
            "task_timeout": "90m",
            "priority": "high",
            "preemptible": True,
            "cluster": ["ai2/jupiter"],
            "budget": "ai2/b",
            "group": ["g1"],
            "description": "about it",
            "beaker_image": "alice/img",
            "dataset": ["ai2/d:sub/dir:/data"],
            "weka": ["oe-training-default:/weka/oe"],
            "mount": ["/h:/mnt/h"],
            "dataset_secret": ["KEYFILE:/keys/k"],
            "env": ["A=1"],
            "env_secret": ["B=SECRET_B"],
        },
        ["python", "train.py", "--lr", "1"],
        environ={},
    )
    return SpecView(build_spec(request, GIT).to_json())


def test_experiment_fields(rich):
    assert rich.budget == "ai2/b" and rich.groups == ["g1"] and rich.task_retries == 2
    assert rich.description.startswith("about it")
    assert rich.jobs == 2 and [t.name for t in rich.tasks] == ["main"]


def test_task_fields(rich):
    [task] = rich.tasks
    assert task.replicas == 2 and task.propagate_failure and task.host_networking
    assert (task.gpus, task.cpus, task.memory, task.shared_memory) == (2, 3.5, "10GiB", "2GiB")
    assert task.timeout_ns == 90 * 60 * 10**9
    assert task.priority == "high" and task.preemptible and task.preemptible_given is True
    assert task.min_runtime_ns is None and task.auto_resume is None  # Beaker's defaults: not in the spec
    protected = build_request({"min_runtime": "2h", "no_auto_resume": True}, ["x"], environ={})
    [ptask] = SpecView(build_spec(protected, GIT).to_json()).tasks
    assert ptask.min_runtime_ns == 2 * 3600 * 10**9 and ptask.auto_resume is False
    assert ptask.preemptible_given is None
    assert task.clusters == ["ai2/jupiter"] and task.hostnames == []
    on_a_node = build_spec(build_request({"hostname": ["node-1"]}, ["x"], environ={}), GIT)
    assert SpecView(on_a_node.to_json()).tasks[0].hostnames == ["node-1"]
    assert task.beaker_image == "alice/img" and task.docker_image is None
    assert task.command and task.arguments[-4:] == ["python", "train.py", "--lr", "1"]
    assert task.env_value("A") == "1" and task.env_named("B") == EnvVar("B", secret="SECRET_B")


def test_mounts(rich):
    by_path = {m.mount_path: m for m in rich.tasks[0].mounts}
    assert (by_path["/data"].beaker, by_path["/data"].sub_path) == ("ai2/d", "sub/dir")
    assert by_path["/weka/oe"].weka == "oe-training-default"
    assert by_path["/mnt/h"].host_path == "/h"
    assert by_path["/keys/k"].secret == "KEYFILE" and "KEYFILE" in rich.secrets()
    assert "SECRET_B" in rich.secrets()
    assert by_path["/data"].sources() == ["ai2/d"]


def test_edits_are_what_beaker_py_parses_back(rich):
    """Every edit a backend makes, on a copy, then parsed by beaker-py as submit() sends it."""
    spec = rich.copy()
    spec.budget, spec.groups, spec.description = "ai2/other", ["01GROUP"], "new"
    task = spec.tasks[0]
    task.beaker_image = "01IMAGEID"
    task.clusters = ["ai2/titan"]
    task.set_env(EnvVar("A", "2"))
    task.add_env(EnvVar("T", secret="TOKEN"))
    task.remove_env("B")
    data = next(m for m in task.mounts if m.mount_path == "/data")
    data.beaker = "01DATASETID"
    task.mounts = [m for m in task.mounts if m.weka is None]
    parsed = beaker_spec(spec)
    assert (parsed.budget, parsed.groups, parsed.description) == ("ai2/other", ["01GROUP"], "new")
    [t] = parsed.tasks
    assert t.image.beaker == "01IMAGEID" and t.constraints.cluster == ["ai2/titan"]
    env = {e.name: (e.value, e.secret) for e in t.env_vars}
    assert env["A"] == ("2", None) and env["T"] == (None, "TOKEN") and "B" not in env
    assert {m.mount_path: m.source.beaker for m in t.datasets}["/data"] == "01DATASETID"
    assert "/weka/oe" not in {m.mount_path for m in t.datasets}
    assert rich.budget == "ai2/b" and rich.tasks[0].beaker_image == "alice/img"  # the original is left
    task.mounts = []
    assert task.mounts == [] and beaker_spec(spec).tasks[0].datasets is None


def test_a_view_reads_back_what_it_wrote(rich):
    import json

    again = SpecView.read(json.dumps(rich.to_json()))
    assert again == rich and again is not rich and repr(again) == "SpecView(1 task(s))"
    split = rich.with_tasks([rich.tasks[0], rich.tasks[0]])
    assert split.jobs == 4 and split.budget == rich.budget
    assert Mount({"mountPath": "/x"}).beaker is None


# -- each backend's use of the spec, in process ---------------------------------------------------------
@pytest.fixture
def plain() -> SpecView:
    """A spec a session can take: one replica, whole datasets, every kind of mount."""
    request = build_request(
        {
            "gpus": 1,
            "cpus": 2.5,
            "memory": "4GiB",
            "task_timeout": "90m",
            "priority": "high",
            "budget": "ai2/b",
            "cluster": ["ai2/jupiter"],
            "beaker_image": "alice/img",
            "dataset": ["ai2/d:/data"],
            "weka": ["oe-training-default:/weka/oe"],
            "mount": ["/h:/mnt/h"],
            "dataset_secret": ["KEYFILE:/keys/k"],
            "upload": [f"{Path(__file__).parent}:/up"],
            "env": ["A=1"],
            "env_secret": ["B=SECRET_B"],
        },
        ["python", "train.py"],
        environ={},
    )
    return SpecView(build_spec(request, GIT).to_json())


def test_session_argv_reads_the_spec(plain, rich):
    from launchkit.core.session import session_argv
    from launchkit.errors import UsageError

    argv = session_argv(plain, workspace="ai2/w", name="s", ports=[], detach=False, bare=False, command=["x"])
    line = " ".join(argv)
    for part in (
        "--budget ai2/b",
        "--priority high",
        "--gpus 1",
        "--cpus 2.5",
        "--memory 4GiB",
        "--cluster ai2/jupiter",
        "--image beaker://alice/img",
        "--env A=1",
        "--secret-env B=SECRET_B",
        "--mount beaker://ai2/d=/data",
        "--mount src=weka,ref=oe-training-default,dst=/weka/oe",
        "--mount src=hostpath,ref=/h,dst=/mnt/h",
        "--mount src=secret,ref=KEYFILE,dst=/keys/k",
        "--timeout 5400s",
    ):
        assert part in line, part
    with pytest.raises(UsageError, match="one container on one node"):
        session_argv(rich, workspace=None, name=None, ports=[], detach=False, bare=False, command=[])
    one = rich.with_tasks([rich.tasks[0]]).copy()
    one.tasks[0].raw["replicas"] = 1  # the test's own edit of the JSON
    with pytest.raises(UsageError, match="sessions cannot mount part of a dataset"):
        session_argv(one, workspace=None, name=None, ports=[], detach=False, bare=False, command=[])


def test_local_backend_reads_and_edits_the_spec(plain, rich, tmp_path, monkeypatch):
    from launchkit.backends.local.backend import check_gpus
    from launchkit.backends.local.runtime_files import use_runtime
    from launchkit.backends.local.supervisor import replica_env, what_runs
    from launchkit.backends.local.uploads import link_uploads
    from launchkit.errors import UsageError
    from launchkit.runtime import ENV_ENTRYPOINT_DIR, RUNTIME_MOUNT

    spec = plain.copy()
    assert RUNTIME_MOUNT in {m.mount_path for m in spec.tasks[0].mounts}
    directory = use_runtime(tmp_path / "state", spec)
    assert directory is not None and spec.tasks[0].env_value(ENV_ENTRYPOINT_DIR) == str(directory)
    assert RUNTIME_MOUNT not in {m.mount_path for m in spec.tasks[0].mounts}

    [upload] = [m for m in spec.tasks[0].mounts if m.mount_path == "/up"]
    target = tmp_path / "linked"
    upload.raw["mountPath"] = str(target)  # the test's own edit: a path this machine can take
    used = link_uploads(tmp_path / "state", spec, {str(upload.beaker): str(Path(__file__).parent)})
    assert used == [[str(target), str(Path(__file__).parent)]] and target.is_symlink()
    assert str(target) not in {m.mount_path for m in spec.tasks[0].mounts}

    assert check_gpus(SpecView({"tasks": [{}]}).tasks[0]) is None
    with pytest.raises(UsageError, match="--gpus 2: this machine has"):
        check_gpus(rich.tasks[0])  # no machine running the tests has GPUs

    task, count, argv, propagate, retries = what_runs(rich)
    assert (count, propagate, retries) == (2, True, 2) and argv == [*task.command, *task.arguments]
    assert argv[-4:] == ["python", "train.py", "--lr", "1"]
    rdir = tmp_path / "runs" / "local-1"
    monkeypatch.setenv("SECRET_B", "from-the-shell")
    env = replica_env({}, task, {}, str(rdir), 1, count, 4, attempt=1)
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["BEAKER_TASK_ID"] == "local-1-main"
    assert env["A"] == "1" and env["B"] == "from-the-shell"


def test_a_run_without_its_record_is_recovered_from_its_spec(rich, tmp_path):
    import json

    from launchkit.backends.local.store import recovered

    (tmp_path / "spec.json").write_text(json.dumps(rich.to_json()))
    rec = recovered(tmp_path)
    assert rec is not None and rec["replicas"] == 2 and rec["name"] == rich.description


def test_beaker_backend_points_mounts_at_its_datasets(plain, monkeypatch):
    from launchkit.backends import beaker_remembered
    from launchkit.backends.beaker import upload
    from launchkit.backends.beaker.runtime_dataset import make_runtime, mount_runtime
    from launchkit.backends.beaker.scheduling import _ask
    from launchkit.backends.protocol import Submission
    from launchkit.runtime import RUNTIME_MOUNT, runtime_dataset_name

    made = []

    class Datasets:
        def find(self, workspace, names):
            return None

        def name(self, workspace):
            return "lk-runtime-ws"

        def make(self, workspace, budget, names):
            made.append(budget)
            return "01RUNTIMEID"

    def runtime(spec):
        return next(m.beaker for m in spec.tasks[0].mounts if m.mount_path == RUNTIME_MOUNT)

    spec = plain.copy()
    assert mount_runtime(Datasets(), "ws", spec) == "lk-runtime-ws" and runtime(spec) == "lk-runtime-ws"
    make_runtime(Datasets(), "ws", spec)
    assert runtime(spec) == "01RUNTIMEID" and made == ["ai2/b"]

    [placeholder] = [m.beaker for m in spec.tasks[0].mounts if m.mount_path == "/up"]
    monkeypatch.setattr(
        upload, "upload_all", lambda conn, app, ws, uploads, budget: {placeholder: "01UPLOADID"}
    )
    upload.mount_uploads(None, None, "ws", spec, {str(placeholder): "/here"})  # type: ignore[arg-type]
    assert {m.mount_path: m.beaker for m in spec.tasks[0].mounts}["/up"] == "01UPLOADID"

    monkeypatch.setattr(beaker_remembered, "remembered_runtime_id", lambda ws: "01REMEMBERED")
    offline = beaker_remembered.offline_spec(Submission(name="n", spec=plain))
    assert runtime(offline.spec) == "01REMEMBERED" and runtime(plain) == runtime_dataset_name()

    ask = _ask(plain.tasks[0], ["h100"])
    assert (ask.gpus, ask.replicas, ask.host_networking) == (1, 1, False)


def test_sweep_experiments_split_the_spec_by_task():
    from launchkit.backends.protocol import Submission
    from launchkit.core.spec import split_experiments

    request = build_request({"sweep": ["lr=1,2"]}, ["python", "x", "{lr}"], environ={})
    spec = SpecView(build_spec(request, GIT).to_json())
    parts = split_experiments(Submission(name="s", spec=spec))
    assert [n for n, _ in parts] == [f"s-{t.name}" for t in spec.tasks] and len(parts) == 2
    assert [p.tasks[0].arguments for _, p in parts] == [t.arguments for t in spec.tasks]
    assert all(p.budget == spec.budget and len(p.tasks) == 1 for _, p in parts)
