"""The plan, said first (issue 43 item 3): one `plan:` line on stderr for every run and dry run,
`run --json`'s one object, refusals as JSON objects, and `api.Request.plan()` the same plan."""

from __future__ import annotations

import json

import pytest

from inproc import run_main
from launchkit import api
from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.core.plan import make_plan
from launchkit.core.spec import build_spec
from launchkit.core.specview import SpecView

WS = "ai2/launchkit"
CMD = ("--", "python", "train.py")
GIT = GitState(remote_url="https://github.com/o/r.git", commit="a" * 40, branch="main")


def _plan(here: bool = False, **options):
    spec = SpecView(build_spec(build_request(options, ["python", "x.py"], environ={}), GIT).to_json())
    return make_plan(spec, backend="local" if here else "beaker", here=here)


def _plan_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("plan: ")]


def test_the_line_names_what_the_launch_asks_for():
    p = _plan(
        gpus=8, replicas=2, torchrun=True, cluster=["ai2/jupiter"], priority="high", min_runtime="2h",
        task_timeout="1d",
    )  # fmt: skip
    assert p.line() == (
        "plan: ai2/jupiter · 8 GPUs x 2 replicas · priority high · preemptible after 2h (--min-runtime), "
        "a preemption starts it again · task timeout 1d"
    )
    assert p.to_json()["min_runtime"] == 7200 and p.to_json()["task_timeout"] == 86400
    plain = _plan().line()
    assert plain == (
        "plan: any cluster · no GPU x 1 replica · default priority · preemptible any time (no --min-runtime), "
        "a preemption starts it again · no task timeout"
    )
    assert "a preemption ends it (--no-auto-resume)" in _plan(no_auto_resume=True).line()
    assert "not preemptible (--not-preemptible" in _plan(preemptible=False).line()
    assert "preemptible any time, a preemption" in _plan(preemptible=True).line()
    assert _plan(here=True, gpus=1).line() == (
        "plan: this machine · 1 GPU x 1 replica · not preemptible (runs here) · no task timeout"
    )
    swept = _plan(sweep=["lr=1,2,3"], gpus=1)
    assert swept.tasks == 3 and "3 tasks, each 1 GPU x 1 replica" in swept.line()
    assert swept.to_json()["tasks"] == 3 and swept.to_json()["experiments"] == 1
    # --sweep-experiments: as many experiments (runs) of one task each, said so (was "3 tasks, each")
    spec = SpecView(
        build_spec(
            build_request({"sweep": ["lr=1,2,3"], "gpus": 1}, ["python", "x.py"], environ={}), GIT
        ).to_json()
    )
    apart = make_plan(spec, backend="beaker", here=False, experiments=True)
    assert "3 experiments, each 1 GPU x 1 replica" in apart.line()
    assert apart.to_json()["tasks"] == 1 and apart.to_json()["experiments"] == 3


def test_the_json_says_what_the_line_says_of_preemption():
    """`preemptible` in `run --json`'s plan: whether Beaker may preempt the job (after `min_runtime`
    when one is given), as the line says it; never `false` for a job the line calls preemptible."""
    plain = _plan().to_json()
    assert "preemptible any time" in plain["line"]
    assert plain["preemptible"] is True and plain["min_runtime"] is None
    protected = _plan(min_runtime="2h").to_json()
    assert "preemptible after 2h" in protected["line"]
    assert protected["preemptible"] is True and protected["min_runtime"] == 7200
    assert _plan(preemptible=True).to_json()["preemptible"] is True
    never = _plan(preemptible=False).to_json()
    assert "not preemptible" in never["line"] and never["preemptible"] is False
    here = _plan(here=True).to_json()
    assert "not preemptible (runs here)" in here["line"] and here["preemptible"] is None


def test_start_now_is_said_only_when_known():
    p = _plan(gpus=8, cluster=["ai2/jupiter"])
    assert "now" not in p.line() and p.to_json()["start_now"] is None
    known = make_plan(
        SpecView(p_spec := _spec(gpus=8)), backend="beaker", here=False, start_now=("ai2/ceres",)
    )
    assert known.line().endswith(" · could start now on ai2/ceres") and p_spec
    none = make_plan(SpecView(_spec(gpus=8)), backend="beaker", here=False, start_now=())
    assert none.line().endswith(" · no allowed cluster has room for it now")


def _spec(**options):
    return build_spec(build_request(options, ["python", "x.py"], environ={}), GIT).to_json()


def test_every_dry_run_and_run_says_the_plan_first(repo, fake_beaker):
    r = run_main(
        "run", "--dry-run", "--gpus", "1", "--cluster", "ai2/jupiter", "--workspace", WS, *CMD, cwd=repo.path
    )
    assert r.code == 0, r.stderr
    [line] = _plan_lines(r.stderr)
    assert line.startswith("plan: ai2/jupiter · 1 GPU x 1 replica · ")
    r = run_main("run", "--dry-run", "--offline", *CMD, cwd=repo.path)
    assert r.code == 0 and len(_plan_lines(r.stderr)) == 1, r.stderr
    before = len(fake_beaker.state.experiments)
    r = run_main("run", "--gpus", "1", "--cluster", "ai2/jupiter", "--workspace", WS, *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    [line] = _plan_lines(r.stderr)
    err = r.stderr.splitlines()
    launched = next(i for i, x in enumerate(err) if x.startswith("launched "))
    assert err.index(line) < launched  # said before the run exists
    assert len(fake_beaker.state.experiments) == before + 1
    assert r.stdout.strip() == r.stdout.split()[0]  # the id alone, for scripts


def test_run_json_is_one_object(repo, fake_beaker):
    r = run_main(
        "run", "--json", "--gpus", "1", "--cluster", "ai2/jupiter", "--workspace", WS, *CMD, cwd=repo.path
    )
    assert r.code == 0, r.stderr
    out = json.loads(r.stdout)
    assert list(out) == ["plan", "id", "url"]
    assert out["plan"]["clusters"] == ["ai2/jupiter"] and out["plan"]["gpus"] == 1
    assert out["url"].endswith(out["id"]) and fake_beaker.state.find_experiment(out["id"]) is not None
    assert _plan_lines(r.stderr) == [out["plan"]["line"]]
    dry = run_main("run", "--json", "--dry-run", "--workspace", WS, *CMD, cwd=repo.path)
    assert dry.code == 0, dry.stderr
    out = json.loads(dry.stdout)
    assert list(out) == ["plan", "spec"] and out["spec"]["tasks"][0]["name"] == "main"


def test_refusals_in_json_mode_are_json_objects(repo, fake_beaker):
    r = run_main(
        "run", "--json", "--gpus", "99", "--cluster", "ai2/jupiter", "--workspace", WS, *CMD, cwd=repo.path
    )
    assert r.code == 3, r.stderr
    err = json.loads(r.stdout)["error"]
    assert err["kind"] == "precondition" and err["exit_code"] == 3
    assert "--gpus 99" in err["message"] and err["fix"]
    assert r.stderr.count("error: ") == 1  # the line for people stays
    r = run_main("run", "--json", "--memory", "10GX", *CMD, cwd=repo.path)
    assert r.code == 2 and json.loads(r.stdout)["error"]["kind"] == "usage"
    r = run_main("run", "--json", "--no-such-flag", *CMD, cwd=repo.path)  # click's own parse error
    assert r.code == 2 and json.loads(r.stdout)["error"]["kind"] == "usage"
    r = run_main("run", "--json", "--follow", *CMD, cwd=repo.path)
    assert r.code == 2 and "--follow" in json.loads(r.stdout)["error"]["message"]
    r = run_main("why", "--json", "01NOSUCHRUN0000000000000000")
    assert json.loads(r.stdout)["error"]["kind"] == "not_found"
    r = run_main("run", "--memory", "10GX", *CMD, cwd=repo.path)  # without --json: stdout stays empty
    assert r.code == 2 and r.stdout == ""


def test_the_api_returns_the_same_plan(repo, fake_beaker, monkeypatch):
    monkeypatch.chdir(repo.path)
    req = api.request(["python", "train.py"], gpus=1, cluster=["ai2/jupiter"], workspace=WS)
    p = req.plan()
    r = run_main(
        "run", "--dry-run", "--gpus", "1", "--cluster", "ai2/jupiter", "--workspace", WS, *CMD, cwd=repo.path
    )
    assert _plan_lines(r.stderr) == [p.line()]
    with pytest.raises(Exception, match="json_output"):
        api.request(["x"], json_output=True)


def test_beaker_says_where_it_could_start_now_from_the_same_calls(repo, fake_beaker):
    """The cluster list check_fit reads anyway carries each node's free GPUs: the plan says where every
    replica could start now, and a submit warns when no cluster of the job has room (it will queue)."""
    args = ("run", "--dry-run", "--gpus", "1", "--cluster", "ai2/jupiter", "--workspace", WS, *CMD)
    r = run_main(*args, cwd=repo.path)
    assert r.code == 0, r.stderr
    [line] = _plan_lines(r.stderr)
    assert line.endswith(" · could start now on ai2/jupiter") and "warning" not in r.stderr
    for node in fake_beaker.state.find_cluster("ai2/jupiter").nodes:
        node.assigned = node.slots  # every GPU busy
    r = run_main(*args, cwd=repo.path)
    [line] = _plan_lines(r.stderr)
    assert line.endswith(" · no allowed cluster has room for it now"), r.stderr
    assert "warning: no node of ai2/jupiter has 1 free GPUs now: the job will queue" in r.stderr
    r = run_main("run", "--dry-run", "--gpus", "1", "--workspace", WS, *CMD, cwd=repo.path)
    [line] = _plan_lines(r.stderr)
    assert "now" not in line  # any cluster: not known without listing every cluster's nodes


def _stderr_at_create(fake_beaker, monkeypatch) -> list[str]:
    """What the CLI had written to stderr (in process) each time the fake received a CreateDataset."""
    import sys

    seen: list[str] = []
    record = fake_beaker._record_call

    def recorded(name: str) -> None:
        if name == "CreateDataset":
            sys.stderr.flush()
            seen.append(sys.stderr.buffer.getvalue().decode())  # run_main's stream, at that moment
        record(name)

    monkeypatch.setattr(fake_beaker, "_record_call", recorded)
    return seen


@pytest.mark.parametrize(
    "extra",
    [(), ("--json",), ("--sweep", "lr=1,2", "--sweep-experiments"), ("--save-spec", "SPEC")],
    ids=["run", "json", "sweep-experiments", "save-spec"],
)
def test_the_plan_line_is_said_before_the_runtime_dataset_is_created(
    repo, fake_beaker, monkeypatch, tmp_path, extra
):
    """A workspace's first launch creates the runtime dataset: after the `plan:` line, in every path."""
    extra = tuple(str(tmp_path / "spec.yaml") if x == "SPEC" else x for x in extra)
    from launchkit.runtime import runtime_dataset_name

    assert not [d for d in fake_beaker.state.datasets.values() if d.name.startswith(runtime_dataset_name())]
    seen = _stderr_at_create(fake_beaker, monkeypatch)
    r = run_main(
        "run", "--gpus", "1", "--cluster", "ai2/jupiter", "--workspace", WS, *extra, *CMD, cwd=repo.path
    )
    assert r.code == 0, r.stderr
    assert len(seen) == 1, r.stderr  # the runtime dataset, once (sweeps: for every experiment)
    [line] = _plan_lines(r.stderr)
    assert _plan_lines(seen[0]) == [line]  # said before it was created
    if "--json" in extra:
        assert next(iter(json.loads(r.stdout))) == "plan"
    if "--save-spec" in extra:  # the spec saved is the one sent: the dataset by id
        made = next(
            d for d in fake_beaker.state.datasets.values() if d.name.startswith(runtime_dataset_name())
        )
        assert f"beaker: {made.id}" in (tmp_path / "spec.yaml").read_text()
