"""Profiles follow the clusters Beaker resolved (issue 24 item 3): `--gpu-type b300` lands on ai2/holmes and
gets its profile, as `--cluster ai2/holmes` does; the offline dry run says which profile it assumed.
In-process dry runs against the fake Beaker."""

from __future__ import annotations

import pytest
import yaml

from inproc import run_main

WS = "ai2/launchkit"


def _dry(repo, *args: str):
    r = run_main("run", "--dry-run", "--workspace", WS, *args, "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0, r.stderr
    task = yaml.safe_load(r.stdout)["tasks"][0]
    return task, r.stderr


def _profile(task) -> str | None:
    return next((e["value"] for e in task["envVars"] if e["name"] == "LAUNCHKIT_PROFILE_APPLIED"), None)


def test_gpu_type_and_cluster_name_get_the_same_profile(repo, fake_beaker):
    by_type, err_type = _dry(repo, "--gpu-type", "b300")
    by_name, _ = _dry(repo, "--cluster", "ai2/holmes")
    assert by_type["constraints"]["cluster"] == by_name["constraints"]["cluster"] == ["ai2/holmes"]
    assert _profile(by_type) == _profile(by_name) == "ai2-weka"
    assert "profile assumed" not in err_type  # asked Beaker: nothing assumed


def test_placement_costs_no_extra_round_trips(repo, fake_beaker):
    """prepare() reuses the clusters `placement` resolved: each listing is asked once."""
    fake_beaker.reset_calls()
    _dry(repo, "--gpu-type", "b300")
    calls = dict(fake_beaker.calls)
    batch = [c for c in fake_beaker.state.clusters.values() if c.max_task_timeout != 0]
    assert calls["ListClusters"] == 1 and calls["ListNodes"] == len(batch), calls  # once per cluster


@pytest.mark.slow  # a real `launchkit session` process handing over to a stand-in `beaker` CLI
def test_session_profile_follows_the_resolved_clusters(repo, fake_beaker, tmp_path):
    import itertools
    import json
    import os
    import sys

    from conftest import run_cli

    bin_dir, record = tmp_path / "bin", tmp_path / "argv.json"
    bin_dir.mkdir()
    stub = bin_dir / "beaker"
    stub.write_text(
        f"#!{sys.executable}\nimport json, sys\nopen({str(record)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
    )
    stub.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    # a session carries a profile's spec parts only (no entrypoint runs): give ai2-weka one to see
    (repo.path / "pyproject.toml").write_text('[tool.launchkit.profiles.ai2-weka]\nenv = {ON_WEKA = "1"}\n')
    r = run_cli("session", "--workspace", WS, "--gpu-type", "b300", cwd=repo.path, env=env, timeout=120)
    assert r.code == 0, r.stderr
    argv = json.loads(record.read_text())
    pairs = list(itertools.pairwise(argv))
    assert [v for f, v in pairs if f == "--cluster"] == ["ai2/holmes"]
    assert ("--env", "ON_WEKA=1") in pairs
