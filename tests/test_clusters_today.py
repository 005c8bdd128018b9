"""Today's AI2 clusters (issue 9, item 5) against the fake Beaker: holmes (B300, InfiniBand, Weka) is
found by GPU type; augusta is gone."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import run_cli

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')


def test_find_gpus_knows_b300(fake_beaker):
    r = run_cli("find-gpus", "--all", "--json", "--gpu-type", "b300", timeout=60)
    assert r.code == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["cluster"] for row in rows] == ["ai2/holmes"]
    assert rows[0]["gpu_types"] == ["NVIDIA B300"]
    assert {"interconnect:ib", "storage:weka"} <= set(rows[0]["tags"])


def test_b300_job_lands_on_holmes_and_augusta_is_unknown(repo, fake_beaker):
    r = run_cli(
        "run", "--dry-run", "--workspace", "ai2/launchkit", "--gpu-type", "b300", "--interconnect", "ib",
        "--", "python", "train.py", cwd=repo.path, timeout=60,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    task = yaml.safe_load(r.stdout)["tasks"][0]
    assert task["constraints"]["cluster"] == ["ai2/holmes"]
    env = {e["name"]: e.get("value") for e in task["envVars"]}
    assert env["LAUNCHKIT_PROFILE_APPLIED"] == "ai2-weka"  # --interconnect ib: the Weka/IB family
    r = run_cli(
        "run", "--dry-run", "--workspace", "ai2/launchkit", "--cluster", "ai2/augusta", "--", "python",
        "train.py", cwd=repo.path, timeout=60,
    )  # fmt: skip
    assert r.code == 4 and "ai2/augusta" in r.stderr and not r.stdout, r.stderr
