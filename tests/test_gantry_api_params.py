"""gantry 3.7.0's `launch_experiment`, parameter by parameter (issue 42): one script
(tests/data/gantry_api/params.py) calls it with every parameter that shapes the job, in groups, as
gantry's users call it; run with gantry 3.7.0 itself and, imports changed, with launchkit.gantry, against
the same fake Beaker, the two experiments must mean the same field by field (tests/gantry_corpus.py's
comparison), including what the job clones (a hand-built GitRepoState's repository, its commit and
branch), where it runs (gantry's runtime directory), the token it clones with (a custom gh_token_secret
as GITHUB_TOKEN) and what neither reads (a [tool.gantry] table, launchkit's LAUNCHKIT_* defaults)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

import gantry_corpus as gc
from test_gantry_api import HAVE_GANTRY, _run

SCRIPT = Path(__file__).parent / "data" / "gantry_api" / "params.py"
GROUPS = ("workload", "multinode", "python", "conda", "nopython")

pytestmark = pytest.mark.skipif(not HAVE_GANTRY, reason="gantry 3.7.0 not installed (.ci/install-gantry)")


def _clone(spec: dict[str, Any], tool: str) -> dict[str, Any]:
    """What the job clones and sees of it: repository URL, commit, branch, the variables user code reads,
    and the directory the job runs in."""
    env = {e["name"]: e.get("value") for e in spec["tasks"][0].get("envVars") or []}
    if tool == "gantry":
        url, commit, branch = (
            f"https://github.com/{env['GITHUB_REPO']}",
            env["GIT_REF"],
            env.get("GIT_BRANCH"),
        )
        runtime_dir = env.get("GANTRY_RUNTIME_DIR") or "/gantry-runtime"
    else:
        url, commit = env["LAUNCHKIT_GIT_REMOTE"].removesuffix(".git"), env["LAUNCHKIT_GIT_COMMIT"]
        branch = env.get("LAUNCHKIT_GIT_BRANCH")
        runtime_dir = env.get("LAUNCHKIT_RUNTIME_DIR") or "/launchkit-runtime"
    seen = {k: env.get(k) for k in ("GITHUB_REPO", "GIT_REF", "GIT_BRANCH")}
    return {"url": url, "commit": commit, "branch": branch, "runtime_dir": runtime_dir, "seen": seen}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_each_launch_experiment_parameter_makes_the_job_gantry_makes(fake_beaker, tmp_path):
    files = {
        "train.py": "print('train')\n",
        # gantry's API reads no configuration: neither tool may apply these
        "pyproject.toml": "[project]\nname = 'proj'\nversion = '0.1.0'\n"
        "[project.optional-dependencies]\ntrain = []\n\n"
        "[tool.gantry]\nbudget = 'ai2/never'\ngh_token_secret = 'NOT_THIS_ONE'\n",
    }
    repo = gc.make_repo(tmp_path / "repo", files)
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    state = fake_beaker.state
    state.private_repos.add("allenai/OLMo-core")  # so the custom token secret is needed
    state.put_secret("ai2/launchkit", "MY_GH_TOKEN", "ghp_custom")
    state.add_group("ai2/launchkit", "sweeps", author="alice")
    env = {
        **os.environ,
        **fake_beaker.env,
        "HTTPS_PROXY": fake_beaker.github_proxy,
        "GANTRY_CHECK_FOR_UPGRADES": "0",
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "LAUNCHKIT_PRIORITY": "low",  # launchkit's config from the environment: not applied either
    }
    env.pop("GITHUB_TOKEN", None)
    text = SCRIPT.read_text()
    scripts = {"gantry": tmp_path / "params_gantry.py", "launchkit": tmp_path / "params_launchkit.py"}
    scripts["gantry"].write_text(text)
    scripts["launchkit"].write_text(text.replace("from gantry.", "from launchkit.gantry."))
    maps = gc.state_maps(state)
    failures = {}
    for group in GROUPS:
        specs, outs = {}, {}
        for tool in ("gantry", "launchkit"):
            name = f"p-{group}-{tool}"
            r = _run(tool, scripts[tool], repo, env, group, name, sha)
            assert r.returncode == 0 and f"LAUNCHED {name}" in r.stdout, (group, tool, r.stderr[-3000:])
            specs[tool] = state.find_experiment(f"alice/{name}").spec
            outs[tool] = r.stdout + r.stderr
        meanings = {
            tool: gc.meaning(spec, tool, workspace="ai2/launchkit", **maps) for tool, spec in specs.items()
        }
        users = {u.id: u.name for u in state.users.values()}
        groups = {g.id: f"{users[g.author_id]}/{g.name}" for g in state.groups.values()}
        for m in meanings.values():
            m["groups"] = sorted(groups.get(g, g) for g in m.get("groups", []))  # ids or full names
            m.get("runtime", {}).pop("runtime_dir", None)  # compared as the directory itself, below
            for own in gc.GANTRY_OWN:  # gantry's own variables (in launchkit's env): compared below
                m.get("env", {}).pop(own, None)
        differ = gc.differences(meanings["gantry"], meanings["launchkit"])
        clones = {tool: _clone(spec, tool) for tool, spec in specs.items()}
        if clones["gantry"] != clones["launchkit"]:
            differ["clone"] = (clones["gantry"], clones["launchkit"])
        if differ:
            failures[group] = differ
        # Python wording for Python callers: no flag is named
        assert re.findall(r"(?<![\w-])--[a-z][a-z-]*", outs["launchkit"]) == [], (group, outs["launchkit"])
    assert failures == {}, json.dumps(failures, indent=1)


# ---- what gantry prints and raises at the end of a followed launch (in process: the fast tier)


def _inprocess(fake_beaker, tmp_path, monkeypatch):
    monkeypatch.chdir(gc.make_repo(tmp_path / "repo", {"train.py": "print('train')\n"}))
    for name, value in {**fake_beaker.env, "HTTPS_PROXY": fake_beaker.github_proxy}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)


@pytest.mark.timeout(300)
def test_a_followed_launch_ends_with_gantrys_summary(fake_beaker, tmp_path, monkeypatch, capsys):
    from fakebeaker.state import AutoRun
    from launchkit.gantry.api import Recipe

    _inprocess(fake_beaker, tmp_path, monkeypatch)
    fake_beaker.state.set_auto(AutoRun(start_after=0.05, run_for=0.2, exit_code=0, lines=["step 1"]))
    workload = Recipe(["python", "train.py"], name="summary", workspace="ai2/launchkit").launch(
        show_logs=True
    )
    out = capsys.readouterr().out
    exp = workload.experiment
    # gantry's lines after the create and after the end (beaker_utils.display_results)
    assert out.startswith("Experiment: alice/summary → "), out
    assert "\nWorkspace: ai2/launchkit → " in out and "\nBranch: main" in out
    assert f"✓ alice/summary ({exp.id}) completed successfully.\n" in out, out
    assert "\nRuntime: " in out and "step 1\n" in out


@pytest.mark.timeout(300)
def test_a_sibling_canceled_job_is_told_as_gantry_tells_it(fake_beaker, tmp_path, monkeypatch, capsys):
    """Replica 1 fails, replica 0 (the task gantry follows) is canceled for it: gantry's
    ExperimentFailedError says "canceled due to sibling task failure" (get_job_status_str), and the task
    list names each task's status."""
    from fakebeaker.state import AutoRun
    from launchkit.gantry.api import Recipe
    from launchkit.gantry.exceptions import ExperimentFailedError

    def plan(job):
        return (7, 0.3) if job.task.replica_rank == 1 else (0, None)  # rank 0 runs until stopped

    _inprocess(fake_beaker, tmp_path, monkeypatch)
    fake_beaker.state.set_auto(AutoRun(start_after=0.05, lines=["rank {rank}"], plan=plan))
    recipe = Recipe.multi_node_torchrun(
        ["python", "train.py"], gpus_per_node=1, num_nodes=2, name="sibling", workspace="ai2/launchkit"
    )
    with pytest.raises(ExperimentFailedError) as failed:
        recipe.launch(show_logs=True)
    assert str(failed.value).startswith("Job canceled due to sibling task failure, see "), failed.value
    out = capsys.readouterr().out
    assert "\nTasks:\n" in out and "failed with exit code 7 - see " in out, out
    assert "canceled due to sibling task failure - see " in out
