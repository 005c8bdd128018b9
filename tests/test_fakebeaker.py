"""The fake Beaker server, exercised with the real beaker-py client (in-process and in subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from beaker import BeakerExperimentSpec, BeakerSortOrder
from beaker.exceptions import (
    BeakerClusterNotFound,
    BeakerExperimentConflict,
    BeakerImageNotFound,
    BeakerJobNotFound,
    BeakerSecretNotFound,
    BeakerWorkloadNotFound,
    BeakerWorkspaceNotFound,
)

pytestmark = pytest.mark.timeout(120)


def spec(**kw) -> BeakerExperimentSpec:
    return BeakerExperimentSpec.new(docker_image="python:3.11", command=["echo", "hi"], **kw)


def test_client_connects_and_resolves_current_user(fake_beaker):
    beaker = fake_beaker.client()
    assert beaker.user.get().name == "alice"
    assert beaker.org_name == "ai2"
    ws = beaker.workspace.get()
    assert ws.name == "ai2/launchkit" and ws.budget_id
    bob = fake_beaker.client("bob")
    assert bob.user_name == "bob"


def test_create_then_get_experiment(fake_beaker):
    beaker = fake_beaker.client()
    wl = beaker.experiment.create(spec=spec(), name="hello")
    assert wl.experiment.name == "hello"
    assert [t.name for t in wl.experiment.tasks] == ["main"]
    assert beaker.workload.get("alice/hello").experiment.id == wl.experiment.id
    job = beaker.workload.get_latest_job(wl)
    assert job is not None and not job.status.HasField("started")
    assert fake_beaker.calls["CreateExperiment"] == 1
    with pytest.raises(BeakerExperimentConflict):
        beaker.experiment.create(spec=spec(), name="hello")


def test_unknown_names_are_not_found(fake_beaker):
    beaker = fake_beaker.client()
    with pytest.raises(BeakerWorkloadNotFound):
        beaker.workload.get("alice/nothing")
    with pytest.raises(BeakerClusterNotFound):
        beaker.cluster.get("ai2/nothing")
    with pytest.raises(BeakerWorkspaceNotFound):
        beaker.workspace.get("ai2/nothing")
    with pytest.raises(BeakerImageNotFound):
        beaker.image.get("alice/nothing")
    with pytest.raises(BeakerSecretNotFound):
        beaker.secret.get("NOPE")
    with pytest.raises(BeakerJobNotFound):
        beaker.job.get("01JOB0000000000000000000000")


def test_subprocess_reaches_fake_through_env(fake_beaker):
    code = textwrap.dedent("""
        from beaker import Beaker
        with Beaker.from_env(check_for_upgrades=False) as b:
            print(b.user.get().name, b.workspace.get().name)
    """)
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, **fake_beaker.env},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["alice", "ai2/launchkit"]


def test_clusters_sorted_by_free_gpus(fake_beaker):
    beaker = fake_beaker.client()
    clusters = list(beaker.cluster.list(sort_field="free_gpus", sort_order=BeakerSortOrder.descending,
                                        include_cluster_occupancy=True))
    free = [c.cluster_occupancy.slot_counts.available for c in clusters]
    assert free == sorted(free, reverse=True) and free[0] > 0
    names = {c.name for c in clusters}
    assert "jupiter-cirrascale-2" in names
    assert json.dumps(dict(fake_beaker.calls))
