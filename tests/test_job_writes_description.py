"""A run stays the user's whatever its job writes (issue 40 item 5; fact sheet 11.8).

OLMo-core's BeakerCallback replaces the whole experiment description while it trains; open-instruct's
rewrites it from the first one it read. launchkit tells its runs by their spec (every task carries
LAUNCHKIT_VERSION: backends/beaker/identity.py) and keeps its own stop reason on this machine
(backends/beaker/launches.py), so `list`, `why`, `follow` and `stop` tell the same story after the job
rewrote its description. The writers are the fake's (tests/fakebeaker/jobwrites.py): the codebases'
own texts, sent over the wire as the job sends them. Where Beaker's listing may leave the tasks' specs
out (unknown), the fake's `list_task_specs` switch runs both ways."""

from __future__ import annotations

import io
import json

import pytest

from fakebeaker.jobwrites import OLMoCoreCallback, OpenInstructCallback
from fakebeaker.plugin import both_ways
from inproc import run_main

WS = "ai2/launchkit"
URL = "https://wandb.ai/ai2-llm/olmo/runs/abc123"
LAUNCHKIT_ENV = {"LAUNCHKIT_VERSION": "0.1.0", "LAUNCHKIT_RUN_ID": "run123"}  # (what core/spec.py sets)


def _job_of(fake, exp):
    """A running job of `exp`, and what runs in it: its environment and a client of its user."""
    job = fake.state.start_job(exp)
    return job, fake.state.job_env(job), fake.client()


def _backend():
    from launchkit.backends.beaker import BeakerBackend

    return BeakerBackend(timeout=30)


def _listed(*args: str) -> dict[str, dict]:
    r = run_main("list", "--json", "--limit", "50", *args)
    assert r.code == 0, r.stderr
    return {x["id"]: x for x in json.loads(r.stdout)}


def test_the_fake_job_writes_its_description_as_olmo_core_and_open_instruct_do(fake_beaker):
    st = fake_beaker.state
    exp = st.add_experiment(WS, "olmo", author="alice", description="train 7B [launchkit]")
    _, env, client = _job_of(fake_beaker, exp)
    fake_beaker.reset_calls()
    olmo = OLMoCoreCallback(client, env, url=URL)
    assert olmo.update(0, 3000) == f"[0%, 0/3,000] {URL}"
    assert st.experiments[exp.id].description == f"[0%, 0/3,000] {URL}"  # the marker is gone
    assert OLMoCoreCallback(client, env, description="7B anneal").update(1234, 3000, form=2) == (
        "[41% complete (step 1,234/3,000)] 7B anneal"
    )
    assert fake_beaker.calls["UpdateWorkload"] == 2

    exp = st.add_experiment(WS, "tulu", author="alice", description="tulu dpo [launchkit]")
    _, env, client = _job_of(fake_beaker, exp)
    oi = OpenInstructCallback(client, env, git_commit="5f3c2a1", git_branch="main", wandb_url=URL)
    assert oi.update() == f"tulu dpo [launchkit] git_commit: 5f3c2a1 git_branch: main {URL}"
    added = st.experiments[exp.id].description + "\nsomething another tool added"
    client.workload.update(client.workload.get(exp.id), description=added)
    assert oi.update(37, 100, elapsed=60.0) == (
        f"tulu dpo [launchkit] git_commit: 5f3c2a1 git_branch: main {URL} [37.0% complete (step 37/100), eta 1m]"
    )  # what was added after the first read is dropped
    assert oi.update(100, 100, elapsed=7300.0).endswith("[100.0% complete (step 100/100), finished in 2h 1m]")


@both_ways("list_task_specs", (True, False))
def test_list_finds_runs_whose_job_replaced_the_description(fake_beaker, repo, monkeypatch):
    """A run launched here, one launched elsewhere (no record of it on this machine) and another
    tool's run: OLMo-core's callback replaced all three descriptions. `list` shows launchkit's two,
    not the other; reading specs only where the listing cannot tell."""
    st = fake_beaker.state
    r = run_main("run", "--workspace", WS, "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0, r.stderr
    (here,) = list(st.experiments.values())
    elsewhere = st.add_experiment(
        WS, "elsewhere", author="alice", description="x [launchkit]", env=LAUNCHKIT_ENV
    )
    other = st.add_experiment(
        WS, "gantry-run", author="alice", description="by gantry", env={"GANTRY_VERSION": "3.7"}
    )
    for exp in (here, elsewhere, other):
        _, env, client = _job_of(fake_beaker, exp)
        OLMoCoreCallback(client, env, url=URL).update(1234, 3000)
        assert "[launchkit]" not in st.experiments[exp.id].description
    fake_beaker.reset_calls()
    rows = _listed()
    assert set(rows) == {here.id, elsewhere.id}, rows
    assert all(row["status"] == "running" for row in rows.values())
    # the tasks' specs in the listing: no extra call; without them, this machine's record names the
    # run launched here and the others' specs are read (at once)
    lookups = 0 if st.options.list_task_specs else 2
    assert fake_beaker.calls["GetExperimentYamlSpec"] == lookups, dict(fake_beaker.calls)
    fake_beaker.reset_calls()  # a spec never changes: what it said is kept, and not asked again
    assert set(_listed()) == {here.id, elsewhere.id}
    assert fake_beaker.calls["GetExperimentYamlSpec"] == 0, dict(fake_beaker.calls)
    assert set(_listed("--all")) == {here.id, elsewhere.id, other.id}
    assert set(_listed("--text", "1,234/3,000")) == {here.id, elsewhere.id}  # the user's search: as written


def test_launchkits_stop_reason_outlives_the_job_rewriting_the_description(
    fake_beaker, monkeypatch, tmp_path
):
    """`run --follow --start-timeout/--timeout` stops a run: the reason is kept on this machine, which
    no job reaches, so `why` and `list` tell it after open-instruct (which keeps its first reading)
    and OLMo-core (which replaces everything) rewrote the description. A user's own stop stays theirs."""
    st = fake_beaker.state
    reason = "it ran longer than --timeout 1h"
    told = f"stopped by launchkit following it: {reason}"
    runs = {}
    for name in ("open-instruct", "olmo-core", "users-stop"):
        exp = st.add_experiment(WS, name, author="alice", description="dpo [launchkit]", env=LAUNCHKIT_ENV)
        runs[name] = (exp, *_job_of(fake_beaker, exp))
    oi = OpenInstructCallback(runs["open-instruct"][3], runs["open-instruct"][2], git_commit="5f3c2a1")
    oi.update(10, 100, elapsed=60.0)  # its first reading, before the stop
    b = _backend()
    try:
        b.stop(b.get(runs["open-instruct"][0].id), reason=reason)
        b.stop(b.get(runs["olmo-core"][0].id), reason=reason)
    finally:
        b.close()
    assert run_main("stop", runs["users-stop"][0].id, "--yes").code == 0
    oi.update(11, 100, elapsed=66.0)  # the job, still stopping, writes again: the line is gone
    OLMoCoreCallback(runs["olmo-core"][3], runs["olmo-core"][2], url=URL).update(11, 100)
    for exp, job, _, _ in runs.values():
        st.finalize_job(job)
        assert "stopped by launchkit" not in st.experiments[exp.id].description
    for name in ("open-instruct", "olmo-core"):
        exp = runs[name][0]
        why = run_main("why", exp.id)
        assert why.stdout.startswith(f"{exp.id} {told}; raise that limit"), why
    rows = _listed()
    for name in ("open-instruct", "olmo-core"):
        assert rows[runs[name][0].id]["end"]["kind"] == "timeout", rows
        assert rows[runs[name][0].id]["end"]["by"] == "launchkit", rows
    assert rows[runs["users-stop"][0].id]["end"]["kind"] == "canceled", rows
    # another machine (no record of the stop): the description's line while no job rewrote it
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "other-machine"))
    fresh = st.add_experiment(WS, "fresh", author="alice", description="dpo [launchkit]", env=LAUNCHKIT_ENV)
    job, _, _ = _job_of(fake_beaker, fresh)
    b = _backend()
    try:
        b.stop(b.get(fresh.id), reason=reason)
    finally:
        b.close()
    st.finalize_job(job)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "a-third-machine"))
    assert told in run_main("why", fresh.id).stdout
    assert (
        "canceled" in run_main("why", runs["olmo-core"][0].id).stdout
    )  # (the job rewrote it: Beaker's word)


def test_why_follow_and_stop_after_the_job_replaced_the_description(fake_beaker):
    """A run whose description OLMo-core replaced is still followed, told and stopped as launchkit's;
    stop still touches only the user's own jobs."""
    st = fake_beaker.state
    mine = st.add_experiment(WS, "mine", author="alice", description="[launchkit]", env=LAUNCHKIT_ENV)
    theirs = st.add_experiment(WS, "theirs", author="bob", description="[launchkit]", env=LAUNCHKIT_ENV)
    failed = st.add_experiment(WS, "failed", author="alice", description="[launchkit]", env=LAUNCHKIT_ENV)
    for exp in (mine, theirs, failed):
        job, env, client = _job_of(fake_beaker, exp)
        st.append_logs(job, ["[step=5/100] loss=2.0"])
        OLMoCoreCallback(client, env, url=URL).update(5, 100)
    st.finish_job(st._job(failed), 3)
    why = run_main("why", failed.id)
    assert why.stdout.startswith(f"{failed.id} failed with exit code 3"), why
    b = _backend()
    try:
        run = b.get(mine.id)
        assert run.launchkit and run.status.value == "running"
        st.finish_job(st._job(mine), 0)
        out = io.BytesIO()
        assert b.follow(b.get(mine.id), out) == 0
        assert b"[step=5/100] loss=2.0" in out.getvalue()
    finally:
        b.close()
    r = run_main("stop", theirs.id, "--yes")
    assert r.code == 3 and "belongs to bob" in r.stderr, r
    assert st.experiments[theirs.id].canceled is None
    again = st.add_experiment(WS, "again", author="alice", description="[launchkit]", env=LAUNCHKIT_ENV)
    _, env, client = _job_of(fake_beaker, again)
    OLMoCoreCallback(client, env).update(1, 10)
    assert run_main("stop", again.id, "--yes").code == 0
    assert st.experiments[again.id].tasks[0].latest_job.canceled is not None


@pytest.mark.parametrize(
    ("listing", "told"),
    [
        ({"description": "x [launchkit]", "env": {}}, True),
        ({"description": "[1%, 1/100] x", "env": {"LAUNCHKIT_VERSION": "1"}}, True),
        ({"description": "[1%, 1/100] x", "env": {"GANTRY_VERSION": "3.7.0"}}, False),
        ({"description": "by hand", "env": {}, "command": ["python"]}, False),
        ({"description": "[1%, 1/100] x", "env": None}, None),  # the listing carried no spec
    ],
)
def test_what_the_listing_tells(listing, told):
    from beaker import beaker_pb2 as pb2

    from launchkit.backends.beaker import identity

    spec = None
    if listing["env"] is not None:
        envs = [pb2.EnvironmentVariable(name=k, literal=v) for k, v in listing["env"].items()]
        spec = pb2.ContainerSpec(environment_variables=envs, command=listing.get("command") or ["bash"])
    task = pb2.Task(id="t", container_spec=spec) if spec else pb2.Task(id="t")
    wl = pb2.Workload(experiment=pb2.Experiment(id="e", description=listing["description"], tasks=[task]))
    assert identity.from_listing(wl) is told
    assert identity.spec_is_launchkits(
        "version: v2\ntasks:\n- name: main\n  envVars:\n  - {name: LAUNCHKIT_VERSION, value: '1'}\n"
    )
    assert not identity.spec_is_launchkits("tasks: [{name: main, envVars: [{name: GANTRY_VERSION}]}]")
    assert not identity.spec_is_launchkits("{unparsable")


def test_list_looks_through_a_bounded_number_of_others_runs_and_says_so(fake_beaker, capsys):
    """In a workspace of other tools' runs, `list` pages through at most LIST_SCAN pages of the listing
    for launchkit's, then says it stopped there (one line), rather than reading the whole workspace."""
    import datetime as dt

    st = fake_beaker.state
    old = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    ours = st.add_experiment(
        WS, "ours", author="alice", env=LAUNCHKIT_ENV, created=int(old.timestamp() * 1e9)
    )
    for i in range(120):
        st.add_experiment(WS, f"gantry-{i}", author="alice", env={"GANTRY_VERSION": "3.7.0"})
    b = _backend()
    b.LIST_SCAN = 2  # pages of 50
    try:
        fake_beaker.reset_calls()
        assert b.list_runs(limit=5) == []
        assert fake_beaker.calls["ListWorkloads"] == 3  # two pages looked through, one to see there is more
        b.LIST_SCAN = 3
        assert [r.id for r in b.list_runs(limit=5)] == [ours.id]  # (121 rows: found on the third page)
    finally:
        b.close()
    err = capsys.readouterr().err
    assert err.count("looked through the newest 100 experiments for launchkit's runs") == 1, err
