"""Beaker commands that are not about processes, through the CLI in this process (tests/inproc.py)
against the fake Beaker server: the fast tier. (test_beaker_cli.py runs the CLI as a subprocess.)"""

from __future__ import annotations

import json
import time

from inproc import run_main

WS = "ai2/launchkit"


def test_open_prints_urls_without_a_tty(fake_beaker):
    exp = fake_beaker.state.add_experiment(WS, "opened", author="alice")
    bob = fake_beaker.state.add_experiment(WS, "bobs", author="bob")
    r = run_main("open", exp.id)
    assert r.code == 0 and r.stdout.strip().endswith(f"/ex/{exp.id}"), r.stderr
    r = run_main("open", "--latest")
    assert r.code == 0 and r.stdout.strip().endswith(f"/ex/{exp.id}"), r.stderr  # never bob's newer one
    assert bob.id not in r.stdout
    r = run_main("open", WS)
    assert r.code == 0 and r.stdout.strip().endswith(f"/ws/{WS}"), r.stderr
    r = run_main("open", "jupiter-cirrascale-2")
    assert r.code == 0 and r.stdout.strip().endswith("/orgs/ai2/clusters/jupiter"), r.stderr
    r = run_main("open", "no-such-thing")
    assert r.code == 4 and "no-such-thing" in r.stderr


def test_stop_only_my_jobs_confirm_and_dry_run(fake_beaker):
    st = fake_beaker.state
    mine = st.add_experiment(WS, "to-stop", author="alice")
    st.start_job(mine)
    theirs = st.add_experiment(WS, "bobs-job", author="bob")
    st.start_job(theirs)
    r = run_main("stop", theirs.id, "--yes")
    assert r.code == 3 and "bob" in r.stderr
    r = run_main("stop", "--latest")  # no TTY and no --yes: fails at once
    assert r.code == 2 and "--yes" in r.stderr
    r = run_main("stop", "--latest", "--dry-run")
    assert r.code == 0 and f"would stop {mine.id}" in r.stdout
    assert mine.tasks[0].latest_job.canceled is None
    r = run_main("stop", "--latest", "--yes")
    assert r.code == 0, r.stderr
    assert mine.tasks[0].latest_job.canceled is not None and theirs.tasks[0].latest_job.canceled is None


def test_list_filters_and_json(fake_beaker):
    st = fake_beaker.state
    now = time.time_ns()
    for i in range(6):
        st.add_experiment(
            WS,
            f"lk-{i}",
            author="alice" if i % 2 else "bob",
            description="[launchkit] run",
            created=now - (6 - i) * 3600 * 10**9,
        )
    st.add_experiment(WS, "by-hand", author="alice", description="made elsewhere")
    st.start_job(st.find_experiment("alice/lk-5"))

    def names(*args):
        r = run_main("list", "--json", *args)
        assert r.code == 0, r.stderr
        return [row["name"] for row in json.loads(r.stdout)]

    assert names() == [f"lk-{i}" for i in reversed(range(6))]
    assert names("--limit", "2") == ["lk-5", "lk-4"]
    assert names("--me") == ["lk-5", "lk-3", "lk-1"]
    assert names("--author", "bob") == ["lk-4", "lk-2", "lk-0"]
    assert names("--text", "lk-3") == ["lk-3"]
    assert names("--max-age", "150m") == ["lk-5", "lk-4"]
    assert names("--status", "running") == ["lk-5"]
    assert "by-hand" in names("--all")
    r = run_main("list")
    assert r.code == 0 and "AUTHOR" in r.stdout.splitlines()[0] and "bob" in r.stdout


def test_find_gpus(fake_beaker):
    r = run_main("find-gpus", "--json")
    assert r.code == 0, r.stderr
    rows = {row["cluster"]: row for row in json.loads(r.stdout)}
    assert "ai2/interactive" not in rows  # takes no batch jobs
    assert "ai2/ceres" not in rows  # full
    assert len(rows["ai2/saturn"]["gpu_types"]) == 2  # mixed cluster: every type
    r = run_main("find-gpus", "--all", "--json")
    assert "ai2/ceres" in {row["cluster"] for row in json.loads(r.stdout)}
    r = run_main("find-gpus", "--gpu-type", "a100", "--all")
    assert r.code == 0 and "saturn" in r.stdout and "jupiter" not in r.stdout
    assert "A100 80GB, " in r.stdout and "NVIDIA" not in r.stdout  # joined, without the vendor (issue 45)
    r = run_main("find-gpus", "--local", "--gpu-type", "h100")
    assert r.code == 2 and "only for Beaker" in r.stderr


def test_find_gpus_names_a_gpu_type_no_cluster_has(fake_beaker):
    """`find-gpus -g TYPE` for a type no node has: refused naming it, with the types there are (it said
    "no GPUs here"); a known type with nothing free says so."""
    r = run_main("find-gpus", "-g", "gb200")
    assert r.code == 2, (r.code, r.stderr)
    assert "--gpu-type 'gb200': no cluster has that GPU type" in r.stderr, r.stderr
    assert "NVIDIA H100" in r.stderr and "NVIDIA B300" in r.stderr and "Traceback" not in r.stderr
    for name in ("ai2/saturn", "ai2/triton"):  # every L40S node busy (the others stay as they are)
        for node in fake_beaker.state.find_cluster(name).nodes:
            node.assigned = node.slots
    r = run_main("find-gpus", "-g", "l40s")
    assert (r.code, r.stdout) == (0, ""), r.stderr
    assert "no cluster has free GPUs of type l40s now (--all lists every cluster)" in r.stderr
