"""launchkit.api in process: the request `run` builds, its spec offline (the CLI's dry-run bytes), a
launch on the local backend and on the fake Beaker, and the run handle (follow, why, logs, stop)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import launchkit
from inproc import run_main
from launchkit import api
from launchkit.backends import RunStatus
from launchkit.errors import UsageError

WS = "ai2/launchkit"


@pytest.mark.parametrize(
    ("options", "flags"),
    [
        ({}, []),
        (
            {"gpus": 2, "cluster": "ai2/jupiter", "env": ["A=1", "B=2"], "name": "exp", "preset": "vllm"},
            ["--gpus", "2", "--cluster", "ai2/jupiter", "--env", "A=1", "--env", "B=2", "--name", "exp"]
            + ["--preset", "vllm"],
        ),
        ({"sweep": ["lr=1,2"], "replicas": 2}, ["--sweep", "lr=1,2", "--replicas", "2"]),
    ],
)
def test_spec_is_the_bytes_run_dry_run_prints(repo, options, flags):
    command = ["python", "train.py", "--lr", "{lr}"] if "sweep" in options else ["python", "train.py"]
    cli = run_main("run", "--dry-run", "--offline", *flags, "--", *command, cwd=repo.path)
    assert cli.code == 0, cli.stderr
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(repo.path)
        spec = api.request(command, **options).spec()
    assert spec == cli.stdout
    assert "tasks:" in spec


def test_the_package_exports_the_api_lazily():
    """`import launchkit` loads neither the API nor pydantic (`launchkit --help` stays light); the API
    and the launch path it shares with `run` import nothing of the CLI."""
    assert launchkit.api is api
    probe = (
        "import sys, launchkit; light = sorted(m for m in sys.modules if m in ('pydantic', 'launchkit.api'));"
        "import launchkit.api; cli = sorted(m for m in sys.modules if m.startswith('launchkit.cli'));"
        "print(light, cli)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["[]", "[]"]


def test_wrong_names_and_method_options_are_refused():
    with pytest.raises(UsageError, match="gpu: not an option"):
        api.request(["true"], gpu=1)
    with pytest.raises(UsageError, match="dry_run: not a request option") as refused:
        api.request(["true"], dry_run=True)
    assert refused.value.hint == "use the request's spec()"
    with pytest.raises(UsageError, match="--gpus"):
        api.request(["true"], gpus="many")


def _count(monkeypatch) -> dict[str, int]:
    """Calls of the spec build of the launch path and of every resolution of the profiles."""
    import launchkit.core.profiles as profiles
    import launchkit.launch as lp

    counts = {"build_spec": 0, "_select_profiles": 0}
    for module, name in ((lp, "build_spec"), (profiles, "_select_profiles")):
        real = getattr(module, name)

        def call(*args, _real=real, _name=name, **kwargs):
            counts[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, call)
    return counts


@pytest.mark.parametrize("cluster", ["ai2/jupiter", "jup*"])
def test_one_spec_build_per_launch(repo, fake_beaker, monkeypatch, cluster):
    """The launch path builds the spec once; the profiles are resolved once, and once more only for the
    clusters the backend placed the job on (launchkit/launch.py). `jup*` resolves to ai2/jupiter,
    whose profile the name already selected: no second build."""
    counts = _count(monkeypatch)
    monkeypatch.chdir(repo.path)
    before = len(fake_beaker.state.experiments)
    launch = api.request(["python", "train.py"], workspace=WS, cluster=cluster).resolve()
    assert counts == {"build_spec": 1, "_select_profiles": 2}
    assert launch.selection.applied == "ai2-weka"  # the notes and the spec name the same profile
    assert launch.notes == []  # not a dry run: nothing to say beside the spec
    assert len(fake_beaker.state.experiments) == before  # planned: nothing submitted
    counts.update(build_spec=0, _select_profiles=0)
    api.request(["python", "train.py"], workspace=WS, cluster=cluster).spec()  # offline: its notes too
    assert counts == {"build_spec": 1, "_select_profiles": 1}


def test_the_cli_run_takes_the_same_path(repo, monkeypatch):
    """`launchkit run` plans through launchkit.launch as the API does: one build, one resolution."""
    counts = _count(monkeypatch)
    r = run_main(
        "run", "--dry-run", "--offline", "--cluster", "ai2/jupiter", "--", "python", "a.py", cwd=repo.path
    )
    assert r.code == 0, r.stderr
    assert counts == {"build_spec": 1, "_select_profiles": 1}
    assert "profile assumed: ai2-weka" in r.stderr


def test_local_launch_follow_why_logs_and_list(repo, monkeypatch):
    monkeypatch.chdir(repo.path)
    req = api.request(["bash", "-c", "echo one; echo two; exit 3"], local=True, no_python=True)
    run = req.launch()
    follow = run.follow()
    lines = list(follow)
    assert [line for line in lines if line.strip() in ("one", "two")] == ["one\n", "two\n"]
    assert follow.exit_code == 3
    assert "exit code 3" in run.why()
    assert "one\ntwo\n" in run.logs()
    assert run.info.status is RunStatus.failed
    assert run.id in [r.id for r in api.runs(local=True)]
    assert api.get_run(run.id).info.exit_code == 3


def test_beaker_launch_and_stop(repo, fake_beaker, monkeypatch):
    monkeypatch.chdir(repo.path)
    run = api.request(["python", "train.py"], workspace=WS, name="api-run", cluster="jup*").launch()
    [exp] = [e for e in fake_beaker.state.experiments.values() if e.name == "api-run"]
    assert run.id == exp.id
    assert exp.spec["tasks"][0]["constraints"]["cluster"] == ["ai2/jupiter"]
    assert run.stop().status is RunStatus.canceled
    assert "cancel" in run.why()
