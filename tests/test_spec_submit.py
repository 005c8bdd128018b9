"""The spec you see is the spec you submit (issue 9, item 3): `--dry-run` resolves read-only against
Beaker and prints what `run` sends; `--save-spec` writes what was submitted; offline specs say what
is left to submit. Against the fake Beaker, through real CLI subprocesses."""

from __future__ import annotations

import json

import pytest
import yaml
from beaker.types import BeakerExperimentSpec

from conftest import run_cli

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

WS = "ai2/launchkit"
# Filters that used to reach the spec only as env vars: GPU type, a tag, the interconnect, Weka.
FILTERED = (
    "--workspace",
    WS,
    "--gpu-type",
    "h100",
    "--interconnect",
    "ib",
    "--weka",
    "oe-training-default:/w",
)
COMMAND = ("--", "python", "train.py")


def _env(spec: dict) -> dict[str, dict]:
    return {e["name"]: e for e in spec["tasks"][0]["envVars"]}


def _experiment(fake, name: str):
    found = [e for e in fake.state.experiments.values() if e.name == name]
    assert len(found) == 1, [e.name for e in fake.state.experiments.values()]
    return found[0]


def _token(spec: dict) -> str:
    (token,) = {
        e["value"] for t in spec["tasks"] for e in t["envVars"] if e["name"] == "LAUNCHKIT_LAUNCH_TOKEN"
    }
    return token


def _without_token(spec: dict) -> dict:
    tasks = [
        {**t, "envVars": [e for e in t["envVars"] if e["name"] != "LAUNCHKIT_LAUNCH_TOKEN"]}
        for t in spec["tasks"]
    ]
    return {**spec, "tasks": tasks}


def test_dry_run_prints_the_resolved_spec_that_run_submits(repo, fake_beaker, tmp_path):
    saved = tmp_path / "spec.yaml"
    secrets_before = {n: s.value for n, s in fake_beaker.state.find_workspace(WS).secrets.items()}
    # the name is an input of the run id; the preset asks for the well-known secrets the workspace has
    args = ("--name", "by-launchkit", "--preset", "ai2-oe", *FILTERED, *COMMAND)
    first = run_cli("run", "--dry-run", *args, cwd=repo.path, timeout=90)
    assert first.code == 0, first.stderr
    # read-only: nothing created, not even the runtime dataset, which is named by what submit creates
    assert not fake_beaker.state.experiments and not fake_beaker.state.datasets
    assert {n: s.value for n, s in fake_beaker.state.find_workspace(WS).secrets.items()} == secrets_before
    assert "decided at submit: runtime dataset id (launchkit-runtime-" in first.stderr, first.stderr
    real = run_cli("run", *args, cwd=repo.path, timeout=90)  # makes the runtime dataset
    assert real.code == 0, real.stderr

    dry = run_cli("run", "--dry-run", "--save-spec", str(saved), *args, cwd=repo.path, timeout=90)
    assert dry.code == 0, dry.stderr
    assert "decided at submit" not in dry.stderr  # complete: the runtime dataset by id
    assert saved.read_text() == dry.stdout
    spec = yaml.safe_load(dry.stdout)
    task = spec["tasks"][0]
    # the filters became a cluster constraint of canonical names (H100 + InfiniBand + Weka)
    assert task["constraints"]["cluster"] == ["ai2/ceres", "ai2/jupiter"]
    assert spec["budget"] == "ai2/oe-default"  # the workspace's, written out
    assert "[launchkit]" in spec["description"]  # visible to `launchkit list`
    env = _env(spec)
    assert env["WANDB_API_KEY"]["secret"] == "alice_WANDB_API_KEY" and env["HF_TOKEN"]["secret"] == "HF_TOKEN"
    assert "offline spec" not in dry.stderr

    # The saved spec, submitted with beaker-py itself, makes the same job `launchkit run` makes.
    with fake_beaker.client() as beaker:
        beaker.experiment.create(
            spec=BeakerExperimentSpec.from_file(saved), name="from-file", workspace=beaker.workspace.get(WS)
        )
    # the dry run showed what run sent, but for the launch token: a nonce each launch draws anew
    assert _without_token(_experiment(fake_beaker, "from-file").spec) == _without_token(
        _experiment(fake_beaker, "by-launchkit").spec
    )
    assert _without_token(spec) == _without_token(_experiment(fake_beaker, "by-launchkit").spec)
    assert _token(spec) != _token(_experiment(fake_beaker, "by-launchkit").spec)

    listed = run_cli("list", "--json", timeout=60)
    assert listed.code == 0, listed.stderr
    assert {"from-file", "by-launchkit"} <= {r["name"] for r in json.loads(listed.stdout)}


def test_save_spec_on_a_real_run_is_what_was_submitted(repo, fake_beaker, tmp_path):
    saved = tmp_path / "submitted.yaml"
    r = run_cli(
        "run", "--name", "saved", "--cluster", "jupiter-cirrascale-2", "--cluster", "ai2/ce*", "--save-spec",
        str(saved), *FILTERED[:2],
        *COMMAND, cwd=repo.path, timeout=90,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    submitted = _experiment(fake_beaker, "saved").spec
    assert yaml.safe_load(saved.read_text()) == submitted
    # alias and glob -> canonical names
    assert submitted["tasks"][0]["constraints"]["cluster"] == ["ai2/ceres", "ai2/jupiter"]
    assert "[launchkit]" in submitted["description"] and submitted["budget"] == "ai2/oe-default"


def test_offline_dry_run_says_in_one_line_what_is_decided_at_submit(repo, fake_beaker):
    r = run_cli(
        "run", "--dry-run", "--offline", "--preset", "ai2-oe", *FILTERED, *COMMAND, cwd=repo.path, timeout=60
    )
    assert r.code == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if "decided at submit" in line]
    assert len(notes) == 1, r.stderr
    note = notes[0]
    assert note.startswith("offline spec (--offline): decided at submit: cluster constraint (")
    for part in (
        "--gpu-type h100",
        "tag interconnect:ib",
        "tag storage:weka",
        "budget",
        "which preset secrets",
    ):
        assert part in note, note
    spec = yaml.safe_load(r.stdout)
    assert "[launchkit]" in spec["description"]  # the marker needs no Beaker
    assert not fake_beaker.state.experiments


def test_dry_run_without_credentials_is_offline_and_says_so(repo):
    r = run_cli("run", "--dry-run", "--gpu-type", "h100", *COMMAND, cwd=repo.path, timeout=60)
    assert r.code == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("offline spec")]
    assert len(notes) == 1 and "(no Beaker credentials): decided at submit: cluster constraint" in notes[0]
    assert "--gpu-type h100" in notes[0]


def test_offline_needs_dry_run(repo):
    r = run_cli("run", "--offline", *COMMAND, cwd=repo.path, timeout=60)
    assert r.code == 2 and "--offline" in r.stderr and "--dry-run" in r.stderr, r.stderr
