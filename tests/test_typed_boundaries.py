"""Typed boundaries (issue 24 item 3): the backend registry and capabilities, the typed spec view, config
read once per invocation, click errors recognised by type. Fast: no subprocess, no service."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

from launchkit.application import Application
from launchkit.backends import registry
from launchkit.backends.registry import Capability
from launchkit.core.specview import EnvVar, SpecView, TaskView
from launchkit.errors import UsageError

SRC = Path(__file__).resolve().parents[1] / "src" / "launchkit"

# String literals outside backends/ that equal a backend's name but name something else (kept short).
NOT_BACKEND_NAMES = {
    ("core/run_options.py", "local"): "the --local option's name",
    ("core/parse.py", "local"): "the --local option's value in `given`",
    ("core/spec.py", "local"): "LaunchRequest.local, left out of the run id",
    ("api.py", "local"): "the `local=` argument named in its UsageError",
    ("cli/session_body.py", "local"): "the --local option's value in `given`",
    ("cli/session_body.py", "beaker"): "the `beaker` CLI program a session hands over to",
    ("core/session.py", "beaker"): "the `beaker` program a session runs",
    ("core/specview.py", "beaker"): "the spec's `source.beaker`/`image.beaker` keys",
    ("core/beaker_types.py", "beaker"): "beaker-py's package name",
}


def test_no_module_outside_backends_names_a_backend():
    names = set(registry.names())
    found = set()
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("backends/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.add((rel, node.value))
    assert found <= set(NOT_BACKEND_NAMES), sorted(found - set(NOT_BACKEND_NAMES))


def test_registry_answers_what_the_cli_asks():
    default = registry.default_name()
    here = registry.here_name()
    assert default != here and {default, here} <= set(registry.names())
    assert Capability.this_machine in registry.info(here).capabilities
    assert registry.for_run_id("local-20260101-abc").name == here  # the local backend's run ids
    assert registry.for_run_id("01JABCDEF").name == default
    assert registry.resolve_name(None, False) is None
    assert registry.resolve_name(None, True) == here
    assert registry.resolve_name(here.upper(), True) == here  # --local --backend <the same>: fine
    with pytest.raises(UsageError, match=f"--local cannot be combined with --backend '{default}'"):
        registry.resolve_name(default, True)
    with pytest.raises(UsageError, match="--backend 'nope': unknown backend") as e:
        registry.resolve_name("nope", False)
    assert " or ".join(registry.names()) in (e.value.hint or "")
    assert registry.with_capability(Capability.secrets).name == default
    assert registry.titles(Capability.all_replicas) == "Beaker"


INTERFACES = {  # capability -> the methods its optional interface (backends/protocol.py) promises
    Capability.service: ("ask_ahead", "drop_ahead"),
    Capability.placement: ("placement",),
    Capability.secrets: ("set_secret", "secret_names"),
    Capability.sessions: ("session_spec", "session_placement", "close"),
    Capability.pages: ("url_for", "latest"),
    Capability.accounts: ("user_name",),
    Capability.pruning: ("prunable", "size", "remove"),
}


@pytest.mark.parametrize("entry", registry.BACKENDS, ids=lambda b: b.name)
def test_each_backend_class_is_what_its_row_says(entry):
    import importlib

    module, _, cls_name = entry.target.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    assert cls.name == entry.name and cls.capabilities == entry.capabilities
    for capability, methods in INTERFACES.items():
        if capability in entry.capabilities:
            assert all(callable(getattr(cls, m, None)) for m in methods), (capability, methods)


def test_optional_interface_refused_without_its_capability():
    from launchkit.backends import secret_store

    class Plain:
        name = "plain"
        capabilities = frozenset({Capability.uploads})

    with pytest.raises(UsageError, match="`secret` is not available for plain runs"):
        secret_store(Plain())  # type: ignore[arg-type]


def test_parser_takes_backend_names_from_the_cli():
    from launchkit.cli.backend_choice import registered
    from launchkit.core.parse import build_request

    choice = registered()
    assert build_request({"backend": "LOCAL"}, ["x"], environ={}, backends=choice).backend == "local"
    request = build_request({"local": True}, ["x"], environ={}, backends=choice)
    assert request.local and request.backend is None
    with pytest.raises(UsageError, match="--backend 'gpu-cloud': unknown value"):
        build_request({"backend": "gpu-cloud"}, ["x"], environ={}, backends=choice)
    with pytest.raises(UsageError, match="--local cannot be combined with --backend 'beaker'"):
        build_request({"local": True, "backend": "beaker"}, ["x"], environ={}, backends=choice)
    env = {"LAUNCHKIT_BACKEND": "gpu-cloud"}
    with pytest.raises(UsageError, match="LAUNCHKIT_BACKEND 'gpu-cloud'"):
        from launchkit.config import load_config

        build_request({}, ["x"], config=load_config(environ=env), environ=env, backends=choice)


# -- the typed spec view ------------------------------------------------------------------------------

SPEC = {
    "description": "d [launchkit]",
    "tasks": [
        {
            "name": "a",
            "envVars": [
                {"name": "LAUNCHKIT_RUN_ID", "value": "r1"},
                {"name": "LAUNCHKIT_CONSTRAINT_GPU_TYPES", "value": "h100, b300"},
                {"name": "HF_TOKEN", "secret": "alice_HF_TOKEN"},
                {"name": "EMPTY", "value": ""},
            ],
            "datasets": [{"mountPath": "/s", "source": {"secret": "KEYFILE"}}],
            "constraints": {"cluster": ["ai2/jup*"]},
            "replicas": 3,
        },
        {"name": "b", "envVars": [{"name": "LAUNCHKIT_CONSTRAINT_GPU_TYPES", "value": "b300,a100"}]},
    ],
}


def test_spec_view_reads_by_field():
    view = SpecView(copy.deepcopy(SPEC))
    assert view.env_value("LAUNCHKIT_RUN_ID") == "r1"
    assert view.env_value("HF_TOKEN") is None and view.env_value("EMPTY") is None  # a secret; empty
    assert view.has_env("HF_TOKEN") and not view.has_env("EMPTY") and not view.has_env("NOPE")
    assert view.env_list("LAUNCHKIT_CONSTRAINT_GPU_TYPES") == ["h100", "b300", "a100"]
    assert view.secrets() == ["alice_HF_TOKEN", "KEYFILE"]
    assert view.tasks[0].clusters == ["ai2/jup*"] and view.tasks[1].clusters == []
    assert view.jobs == 4
    assert "alice_HF_TOKEN" in repr(view.tasks[0].env[2]) and repr(EnvVar("X", "v")) == "EnvVar('X', 'v')"


def test_spec_view_edits_write_through_and_copies_leave_the_original():
    raw = copy.deepcopy(SPEC)
    view = SpecView(raw)
    view.tasks[1].add_env(EnvVar("GITHUB_TOKEN", secret="GITHUB_TOKEN"))
    view.tasks[1].clusters = ["ai2/holmes"]
    assert raw["tasks"][1]["envVars"][-1] == {"name": "GITHUB_TOKEN", "secret": "GITHUB_TOKEN"}
    assert raw["tasks"][1]["constraints"] == {"cluster": ["ai2/holmes"]}
    before = copy.deepcopy(raw)
    out = view.with_task_env(EnvVar("LAUNCHKIT_RUN_ID", "r2")).to_json()
    assert raw == before  # a copy
    assert [t["envVars"][-1] for t in out["tasks"]] == [{"name": "LAUNCHKIT_RUN_ID", "value": "r2"}] * 2
    assert [e["name"] for e in out["tasks"][0]["envVars"]].count("LAUNCHKIT_RUN_ID") == 1
    assert list(out) == list(raw) and list(out["tasks"][0]) == list(raw["tasks"][0])  # key order kept


def test_task_view_reads_the_snake_case_spelling_too():
    task = TaskView({"name": "t", "env_vars": [{"name": "A", "value": "1"}]})
    assert task.env == [EnvVar("A", "1")]
    task.add_env(EnvVar("B", "2"))
    assert task.raw["env_vars"][-1] == {"name": "B", "value": "2"} and "envVars" not in task.raw


def test_beaker_spec_repairs_mount_sources_and_round_trips():
    from launchkit.core.specview import beaker_spec

    spec = {
        "version": "v2",
        "tasks": [
            {
                "name": "t",
                "image": {"beaker": "img"},
                "command": ["x"],
                "result": {"path": "/results"},
                "context": {"preemptible": True},
                "datasets": [{"mountPath": "/h", "source": {"hostPath": "/data"}}],
            }
        ],
    }
    parsed = beaker_spec(SpecView(spec))
    assert parsed.tasks[0].datasets[0].source.host_path == "/data"
    assert beaker_spec(SpecView(parsed.to_json())).to_json() == parsed.to_json()


# -- config once, errors by type ----------------------------------------------------------------------


def test_config_is_read_once_per_invocation(repo, monkeypatch):
    import launchkit.config as config_module  # the Application imports load_config on first use
    from inproc import run_main

    calls = []
    real = config_module.load_config

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(config_module, "load_config", counting)
    (repo.path / "pyproject.toml").write_text('[tool.launchkit]\nworkspace = "ai2/x"\n')
    r = run_main(
        "run", "--dry-run", "--offline", "-c", "ai2/holmes", "--", "python", "train.py", cwd=repo.path
    )
    assert r.code == 0, r.stderr
    assert len(calls) == 1


def test_application_config_is_cached(tmp_path, monkeypatch):
    import launchkit.config as config_module

    calls = []
    monkeypatch.setattr(config_module, "load_config", lambda: calls.append(1) or object())
    app = Application()
    assert app.config is app.config and calls == [1]


def test_click_errors_recognised_by_type(repo):
    from inproc import run_main

    r = run_main(cwd=repo.path)  # no command: the help, on stdout
    assert r.code == 0 and "Usage:" in r.stdout and "Commands" in r.stdout
    r = run_main("run", "python", "train.py", "--lr", "3e-4", cwd=repo.path)
    assert r.code == 2
    assert "--lr is not a `run` option: put the command after `--`" in r.stderr


def test_offline_dry_run_says_which_profile_it_assumed(repo):
    from inproc import run_main

    def assumed(*args: str) -> list[str]:
        r = run_main("run", "--dry-run", "--offline", *args, "--", "python", "train.py", cwd=repo.path)
        assert r.code == 0, r.stderr
        return [ln for ln in r.stderr.splitlines() if ln.startswith("profile assumed: ")]

    assert assumed("--gpu-type", "b300") == [
        "profile assumed: none (from --gpu-type b300; at submit it follows the clusters these resolve to)"
    ]
    assert assumed("--cluster", "ai2/holmes") == [
        "profile assumed: ai2-weka (from --cluster ai2/holmes; at submit it follows the clusters these "
        "resolve to)"
    ]
    assert assumed("--cluster", "ai2/holmes", "--no-profile") == [
        "profile assumed: none (--no-profile: no cluster profile)"
    ]
    (line,) = assumed()
    assert line.startswith("profile assumed: none (no cluster constraint: the node decides at runtime")


def test_profile_selection_goes_by_the_placed_clusters():
    from launchkit.core.parse import build_request
    from launchkit.core.profiles import resolve_profiles, wants_placement

    by_type = build_request({"gpu_type": ["b300"]}, ["x"], environ={})
    assert wants_placement(by_type) and resolve_profiles(by_type).applied is None
    placed = by_type.model_copy(update={"placed_clusters": ["ai2/holmes"]})
    assert resolve_profiles(placed).applied == "ai2-weka"
    assert resolve_profiles(placed).reasons == ["cluster ai2/holmes -> ai2-weka"]
    spread = by_type.model_copy(update={"placed_clusters": ["ai2/holmes", "other/gcp-a3"]})
    assert resolve_profiles(spread).applied is None  # may land on another family: no spec parts
    for given in ({"profile": "generic"}, {"no_profile": True}):
        assert not wants_placement(build_request({"gpu_type": ["b300"], **given}, ["x"], environ={}))
    assert not wants_placement(build_request({"hostname": ["jupiter-1"]}, ["x"], environ={}))
    assert not wants_placement(build_request({}, ["x"], environ={}))


def test_placed_clusters_are_not_part_of_the_job_id():
    from launchkit.core.gitstate import GitState
    from launchkit.core.parse import build_request
    from launchkit.core.spec import run_id

    git = GitState(remote_url="https://h/o/r.git", commit="a" * 40)
    request = build_request({"gpu_type": ["b300"]}, ["x"], environ={})
    placed = request.model_copy(update={"placed_clusters": ["ai2/holmes"]})
    assert run_id(request, git) == run_id(placed, git)
    local = build_request({"local": True}, ["x"], environ={})
    assert run_id(local, git) == run_id(build_request({}, ["x"], environ={}), git)
