"""gantry 3.7.0's Python API by import path (issue 35): one script written against `gantry.api` runs
with gantry itself and, with only its imports changed, with `launchkit.gantry`, against the same fake
Beaker; each must do the same: a dry run creates no experiment, `launch()` returns beaker-py's workload,
`follow_workload` returns the finished job with its exit code, callbacks get gantry's events, a failed
job raises gantry's ExperimentFailedError."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gantry_corpus import make_repo

SCRIPT = Path(__file__).parent / "data" / "gantry_api" / "script.py"
GANTRY_PYTHON = Path(os.environ.get("FAKEBEAKER_GANTRY_PYTHON") or "/tmp/gantry-venv/bin/python")
HAVE_GANTRY = GANTRY_PYTHON.is_file()


def _script(tool: str, tmp: Path) -> Path:
    """The script for `tool`: gantry's as written, launchkit's with `gantry.` imports changed only."""
    text = SCRIPT.read_text()
    if tool == "launchkit":
        text = text.replace("from gantry.", "from launchkit.gantry.")
    path = tmp / f"script_{tool}.py"
    path.write_text(text)
    return path


def _run(tool: str, script: Path, repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    python = str(GANTRY_PYTHON) if tool == "gantry" else sys.executable
    return subprocess.run(
        [python, str(script), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "tool",
    [
        pytest.param(
            "gantry",
            marks=pytest.mark.skipif(
                not HAVE_GANTRY, reason="gantry 3.7.0 not installed (.ci/install-gantry)"
            ),
        ),
        "launchkit",
    ],
)
def test_a_gantry_api_script_means_the_same_with_launchkit(tool, fake_beaker, tmp_path):
    from fakebeaker.state import AutoRun

    repo = make_repo(tmp_path / "repo", {"train.py": "print('train')\n"})
    env = {
        **os.environ,
        **fake_beaker.env,
        "HTTPS_PROXY": fake_beaker.github_proxy,  # github.com (gantry's is_public) answers from the fake
        "GANTRY_CHECK_FOR_UPGRADES": "0",
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    env.pop("GITHUB_TOKEN", None)
    script = _script(tool, tmp_path)
    calls = fake_beaker.calls

    # dry_run(): shows the experiment, creates none
    r = _run(tool, script, repo, env, "dry", f"api-dry-{tool}")
    assert r.returncode == 0, r.stderr
    assert "DRY None" in r.stdout
    assert calls["CreateExperiment"] == 0

    # launch() returns the workload; follow_workload() the finished job, with its exit code
    fake_beaker.state.set_auto(
        AutoRun(start_after=0.05, run_for=0.5, exit_code=0, lines=["step 1", "step 2"])
    )
    r = _run(tool, script, repo, env, "launch", f"api-launch-{tool}")
    assert r.returncode == 0, r.stderr
    assert calls["CreateExperiment"] == 1
    assert f"WORKLOAD True api-launch-{tool}" in r.stdout
    assert "FINISHED True exit 0" in r.stdout
    assert "EVENT start True" in r.stdout and "EVENT log step 2 True" in r.stdout
    exp = fake_beaker.state.find_experiment(f"alice/api-launch-{tool}")
    task = exp.spec["tasks"][0]
    assert exp.spec.get("budget") == "ai2/oe-default" and task["resources"]["gpuCount"] == 1
    env_vars = {e["name"]: e.get("value") for e in task["envVars"]}
    assert env_vars["MODE"] == "launch"

    # a failed job: on_failure, then gantry's ExperimentFailedError (a GantryError)
    fake_beaker.state.set_auto(AutoRun(start_after=0.05, run_for=0.3, exit_code=3, lines=["boom"]))
    r = _run(tool, script, repo, env, "fail", f"api-fail-{tool}")
    assert r.returncode == 0, r.stderr
    assert "EVENT failure 3" in r.stdout
    assert "RAISED ExperimentFailedError True True" in r.stdout, r.stdout


# ---- the names and signatures, against gantry 3.7.0's own


def _gantry_signatures() -> dict[str, str]:
    code = """
import inspect, json
import gantry.api as api, gantry.exceptions as exc, gantry.callbacks as cb
out = {}
for name in api.__all__:
    obj = getattr(api, name)
    out["api." + name] = sorted(inspect.signature(obj).parameters) if callable(obj) else []
for name in dir(api.Recipe):
    if not name.startswith("_") and callable(getattr(api.Recipe, name)):
        out["Recipe." + name] = sorted(inspect.signature(getattr(api.Recipe, name)).parameters)
for name in dir(cb.Callback):
    if name.startswith("on_") or name in ("attach", "detach", "interrupt_workload"):
        out["Callback." + name] = sorted(inspect.signature(getattr(cb.Callback, name)).parameters)
for name in dir(exc):
    obj = getattr(exc, name)
    if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == exc.__name__:
        out["exceptions." + name] = [b.__name__ for b in obj.__mro__]
print(json.dumps(out))
"""
    r = subprocess.run(
        [str(GANTRY_PYTHON), "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    import json

    return json.loads(r.stdout)


@pytest.mark.skipif(not HAVE_GANTRY, reason="gantry 3.7.0 not installed (.ci/install-gantry)")
def test_every_public_name_and_parameter_of_gantry_api_is_offered():
    import launchkit.gantry.api as api
    import launchkit.gantry.callbacks as cb
    import launchkit.gantry.exceptions as exc

    mods = {"api": api, "exceptions": exc}
    for key, want in _gantry_signatures().items():
        owner, name = key.split(".", 1)
        if owner == "Recipe":
            got = sorted(inspect.signature(getattr(api.Recipe, name)).parameters)
        elif owner == "Callback":
            got = sorted(inspect.signature(getattr(cb.Callback, name)).parameters)
        elif owner == "exceptions":
            got = [b.__name__ for b in getattr(exc, name).__mro__]
        else:
            obj = getattr(mods[owner], name)
            got = sorted(inspect.signature(obj).parameters) if callable(obj) else []
        if key == "api.follow_workload":
            got.remove("clock")  # launchkit's: the clock, for tests
        assert got == want or set(want) <= set(got), (key, got, want)


# ---- gantry's exceptions for launchkit's refusals


def test_a_dirty_tree_an_unpushed_commit_and_a_bad_option_raise_gantrys_classes(repo, monkeypatch, capsys):
    from launchkit.gantry.api import GitRepoState, Recipe
    from launchkit.gantry.exceptions import (
        ConfigurationError,
        DirtyRepoError,
        GantryError,
        GitError,
        UnpushedChangesError,
    )

    monkeypatch.chdir(repo.path)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo.path, capture_output=True, text=True, timeout=60
    )
    state = GitRepoState.from_env()
    assert (state.ref, state.branch, state.is_dirty) == (head.stdout.strip(), "main", False)
    (repo.path / "train.py").write_text("print('edited')\n")
    with pytest.raises(DirtyRepoError) as dirty:
        Recipe(args=["python", "train.py"]).dry_run()
    # gantry's API words it for Python callers: the keyword, not the flag
    assert str(dirty.value) == "You have uncommitted changes! Use 'allow_dirty' to force."
    assert isinstance(dirty.value, GitError)
    repo.commit({}, "edited", push=False)
    with pytest.raises(UnpushedChangesError) as unpushed:
        Recipe(args=["python", "train.py"]).dry_run()
    assert "git push" in str(unpushed.value)
    subprocess.run(["git", "push", "-q", "origin", "HEAD"], cwd=repo.path, check=True, timeout=60)
    with pytest.raises(ConfigurationError) as bad:
        Recipe(args=["python", "train.py"], priority="whenever", allow_dirty=True).dry_run()
    assert isinstance(bad.value, GantryError) and "whenever" in str(bad.value)
    assert "'priority'" in str(bad.value) and "--priority" not in str(bad.value), bad.value
    with pytest.raises(ConfigurationError):
        Recipe(args="python train.py").dry_run()  # type: ignore[arg-type]
    # save_spec: the spec the dry run prints (without credentials: offline), written to the file
    capsys.readouterr()
    Recipe(args=["python", "train.py"], allow_dirty=True, save_spec=repo.path / "spec.yaml").dry_run()
    saved, printed = capsys.readouterr().out.split("\n", 1)
    assert saved == f"Experiment spec saved to {repo.path / 'spec.yaml'}"  # gantry's line, on stdout
    assert "tasks:" in printed and (repo.path / "spec.yaml").read_text() == printed


# ---- a real client no one here wrote: OLMo-core's Beaker launcher

OLMO_DRIVER = Path(__file__).parent / "data" / "gantry_api" / "olmo_core_launch.py"
OLMO_VENV = Path(os.environ.get("LAUNCHKIT_TEST_OLMO_CORE_VENV") or "/tmp/olmo-core-venv")
OLMO_SITE = next(iter(sorted(OLMO_VENV.glob("lib/python3*/site-packages/olmo_core"))), None)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(OLMO_SITE is None, reason="ai2-olmo-core not installed (.ci/install-olmo-core)")
@pytest.mark.skipif(not HAVE_GANTRY, reason="gantry 3.7.0 not installed (.ci/install-gantry)")
def test_olmo_cores_launcher_makes_the_job_gantry_makes(fake_beaker, tmp_path):
    """The published ai2-olmo-core's `BeakerLaunchConfig.dry_run()` and `.launch(follow=True)`, its
    `gantry.` imports answered by launchkit.gantry, then by gantry 3.7.0 itself: the dry run creates no
    experiment, the launch follows the job to its end and returns the workload, and the two jobs mean
    the same (tests/gantry_corpus.py's comparison, field by field)."""
    import gantry_corpus as gc
    from fakebeaker.state import AutoRun

    assert OLMO_SITE is not None
    files = {
        "train.py": "print('train')\n",
        "pyproject.toml": "[project]\nname = 'proj'\nversion = '0.1.0'\n",
    }
    repo = make_repo(tmp_path / "repo", files)
    env = {
        **os.environ,
        **fake_beaker.env,
        "HTTPS_PROXY": fake_beaker.github_proxy,
        "GANTRY_CHECK_FOR_UPGRADES": "0",
        "NO_COLOR": "1",
    }
    env.pop("GITHUB_TOKEN", None)
    fake_beaker.state.set_auto(AutoRun(start_after=0.05, run_for=0.5, exit_code=0, lines=["step 1"]))
    specs = {}
    for tool, python in (("launchkit", sys.executable), ("gantry", str(GANTRY_PYTHON))):
        created = fake_beaker.calls["CreateExperiment"]
        for mode in ("dry", "launch"):
            r = subprocess.run(
                [python, str(OLMO_DRIVER), str(OLMO_SITE.parent), tool, mode, f"olmo-{mode}-{tool}"],
                cwd=repo,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert r.returncode == 0, (tool, mode, r.stderr[-2000:])
            assert f"GANTRY FROM {'launchkit.gantry' if tool == 'launchkit' else 'gantry'}.api" in r.stdout
            if mode == "dry":
                assert "DRY DONE" in r.stdout and fake_beaker.calls["CreateExperiment"] == created
        assert f"WORKLOAD True olmo-launch-{tool}" in r.stdout and "step 1" in r.stdout
        assert fake_beaker.calls["CreateExperiment"] == created + 1
        specs[tool] = fake_beaker.state.find_experiment(f"alice/olmo-launch-{tool}").spec
    maps = gc.state_maps(fake_beaker.state)
    gantrys = gc.meaning(specs["gantry"], "gantry", workspace="ai2/launchkit", **maps)
    ours = gc.meaning(specs["launchkit"], "launchkit", workspace="ai2/launchkit", **maps)
    differ = gc.differences(gantrys, ours)
    # the comparison leaves launchkit's NCCL_DEBUG out (a cluster fact it may add); here it is OLMo-core's
    task_env = {e["name"]: e.get("value") for e in specs["launchkit"]["tasks"][0]["envVars"]}
    assert differ.pop("env.NCCL_DEBUG", None) in (None, ("INFO", None)) and task_env["NCCL_DEBUG"] == "INFO"
    assert differ == {}
    assert ours["env"]["MODE"] == "launch" and ours["command"][-3:] == ["train.py", "--steps", "2"]


@pytest.mark.parametrize(
    "tool",
    [
        pytest.param(
            "gantry",
            marks=pytest.mark.skipif(
                not HAVE_GANTRY, reason="gantry 3.7.0 not installed (.ci/install-gantry)"
            ),
        ),
        "launchkit",
    ],
)
def test_write_metrics_and_update_workload_description_inside_a_job(tool, fake_beaker, tmp_path):
    text = (Path(__file__).parent / "data" / "gantry_api" / "in_job.py").read_text()
    if tool == "launchkit":
        text = text.replace("from gantry.", "from launchkit.gantry.")
    script = tmp_path / "in_job.py"
    script.write_text(text)
    exp = fake_beaker.state.add_experiment(
        "ai2/launchkit", f"in-job-{tool}", author="alice", description="train"
    )
    results = tmp_path / "results"
    env = {
        **os.environ,
        **fake_beaker.env,
        "BEAKER_WORKLOAD_ID": exp.id,
        "RESULTS_DIR": str(results),
        "GANTRY_CHECK_FOR_UPGRADES": "0",
    }
    python = str(GANTRY_PYTHON) if tool == "gantry" else sys.executable
    r = subprocess.run(
        [python, str(script)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((results / "metrics.json").read_text()) == {"loss": 0.25, "step": 3}
    assert r.stdout.splitlines() == ["DESC train [step 3]", "DESC train [step 4]", "DESC first: train"]
    assert fake_beaker.state.find_experiment(f"alice/in-job-{tool}").description == "first: train"


@pytest.mark.slow
def test_follow_workload_masks_the_values_of_the_jobs_secrets(fake_beaker, tmp_path, monkeypatch, capfd):
    """launchkit shows no secret's value in logs (as `launchkit follow`); gantry printed them."""
    from beaker import Beaker

    from fakebeaker.scenarios import BASIC_SECRETS
    from fakebeaker.state import AutoRun
    from launchkit.gantry.api import Recipe, follow_workload

    value = BASIC_SECRETS["HF_TOKEN"]
    monkeypatch.chdir(make_repo(tmp_path / "repo", {"train.py": "print(1)\n"}))
    fake_beaker.state.set_auto(AutoRun(start_after=0.05, run_for=0.3, lines=[f"token is {value}", "done"]))
    recipe = Recipe(["python", "train.py"], workspace="ai2/launchkit", env_secrets=[("HF", "HF_TOKEN")])
    with Beaker.from_env(check_for_upgrades=False) as beaker:
        job = follow_workload(beaker, recipe.launch(client=beaker))
    out = capfd.readouterr().out
    assert job.status.exit_code == 0
    assert "token is ***\ndone\n" in out and value not in out


def test_the_gantry_api_imports_nothing_of_the_cli():
    """Like launchkit.api, launchkit.gantry sits on the launch path, not on the CLI (docs/architecture.md)."""
    import ast

    from conftest import ROOT

    for path in (ROOT / "src" / "launchkit" / "gantry").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                )
                assert not any(n.startswith("launchkit.cli") for n in names), (path.name, names)


@pytest.mark.timeout(300)
def test_the_gantry_api_script_in_this_process(fake_beaker, tmp_path, monkeypatch, capsys):
    """The script of the first test, run here (the fast tier): dry run, launch and follow, a failure."""
    import runpy

    from fakebeaker.state import AutoRun

    monkeypatch.chdir(make_repo(tmp_path / "repo", {"train.py": "print('train')\n"}))
    for name, value in {**fake_beaker.env, "HTTPS_PROXY": fake_beaker.github_proxy}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    script = str(_script("launchkit", tmp_path))

    def run(*argv: str) -> str:
        monkeypatch.setattr(sys, "argv", [script, *argv])
        runpy.run_path(script, run_name="__main__")
        return capsys.readouterr().out

    assert "DRY None" in run("dry", "here-dry") and fake_beaker.calls["CreateExperiment"] == 0
    fake_beaker.state.set_auto(
        AutoRun(start_after=0.05, run_for=0.2, exit_code=0, lines=["step 1", "step 2"])
    )
    out = run("launch", "here-launch")
    assert "WORKLOAD True here-launch" in out and "FINISHED True exit 0" in out, out
    assert "EVENT start True" in out and "EVENT log step 2 True" in out
    fake_beaker.state.set_auto(AutoRun(start_after=0.05, run_for=0.2, exit_code=3, lines=["boom"]))
    out = run("fail", "here-fail")
    assert "EVENT failure 3" in out and "RAISED ExperimentFailedError True True" in out, out
