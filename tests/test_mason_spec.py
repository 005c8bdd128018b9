"""`launchkit mason` against open-instruct's real mason.py (issue 20): for every recorded line
(tests/data/mason/), the same argv submitted to the fake Beaker gives the same meaning as mason's
spec (tests/mason_reference.py), except the documented differences (DIFFERENCES, docs/from-mason.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import mason_reference as mr
from inproc import run_main
from launchkit.core.units import parse_size

LINES = {ln.id: ln for ln in mr.load_lines()}
RESULTS = mr.load_results()
ACCEPTED = sorted(i for i, r in RESULTS.items() if r["accepted"])
REFUSED = sorted(i for i, r in RESULTS.items() if not r["accepted"])

# Each remaining difference, and its reason (the same table is in docs/from-mason.md).
DIFFERENCES = {
    "setup": "mason runs `cd <launching dir> &&` first (non-pure mode); launchkit runs in a clone of the "
    "pushed commit",
    "PATH": "mason copies the launching shell's PATH (non-pure mode); launchkit's job has its own environment",
    "inline_env": "WANDB_ENTITY/PROJECT/TAGS of the launching shell: task env vars in launchkit (mason puts "
    "them inline, where they reach only the first command of an `&&` chain)",
    "ib_env": "NCCL_SOCKET_IFNAME/NCCL_IB_HCA on multi-node Weka jobs: set by launchkit's ai2-weka profile "
    "inside the job, on InfiniBand nodes only",
    "uv_cache": "UV_CACHE_DIR/UV_LINK_MODE: launchkit builds the repository's uv environment, with the shared "
    "uv cache on Weka",
    "aliases": "old cluster names (ai2/jupiter-cirrascale-2): the same cluster to launchkit, so Weka "
    "settings apply; mason decides by exact name",
    "duplicate_secret": "a --secret NAME also among the well-known secrets: mason sends NAME twice, launchkit "
    "once (the user's)",
    "budget": "without --budget launchkit writes the workspace's budget into the spec (mason omits it)",
}


def _image_names(fake: Any) -> dict[str, str]:
    """Image id -> the name the line gave (launchkit resolves names to ids at submit)."""
    names = mr.corpus_needs(list(LINES.values()))["images"]
    return {fake.state.find_image(n).id: n for n in names}


def launchkit_meaning(spec: dict[str, Any], workspace: str, images: dict[str, str]) -> dict[str, Any]:
    """A `launchkit mason` spec (wire JSON) in mason's terms, read by `mason_meaning`: launchkit's
    entrypoint with LAUNCHKIT_EXEC_METHOD=bash runs the words as `bash -c "$*"` (mason's
    `/bin/bash -c`), its own LAUNCHKIT_*/RESULTS_DIR contract env is dropped, the description marker
    stripped, an absent retry is Beaker's 0, image ids named again."""
    spec = copy.deepcopy(spec)
    spec["description"] = (spec.get("description") or "").replace("[launchkit]", "").strip()
    spec.setdefault("retry", {"allowedTaskRetries": 0})
    for task in spec["tasks"]:
        env = task.get("envVars") or []
        assert {"name": "LAUNCHKIT_EXEC_METHOD", "value": "bash"} in env
        task["envVars"] = [
            e for e in env if not e["name"].startswith("LAUNCHKIT_") and e["name"] != "RESULTS_DIR"
        ]
        assert task["command"][:2] == ["bash", "-c"] and task["command"][-1] == "launchkit-entrypoint"
        task["command"] = ["/bin/bash", "-c"]
        task["arguments"] = [" ".join(task["arguments"])]
        image = task.get("image") or {}
        if image.get("beaker") in images:
            image["beaker"] = images[image["beaker"]]
    return mr.mason_meaning(spec, workspace=workspace)


CANONICAL = {f"ai2/{alias}": c for c, aliases in mr._ALIASES.items() for alias in aliases}
WEKA_DIR = "/weka/oe-adapt-default/allennlp"


def _values(line: mr.MasonLine, flag: str) -> dict[str, str]:
    return dict(v.split("=", 1) for vals in mr._flag_values(line.argv, flag) for v in vals)


def _as_weka(t: dict[str, Any], command: list[str]) -> None:
    """What mason does on a Weka cluster (given by an old alias name, which mason does not know)."""
    t["env"].update(
        HF_HOME=f"{WEKA_DIR}/.cache/huggingface",
        HF_DATASETS_CACHE=f"{WEKA_DIR}/.cache/huggingface",
        HF_HUB_CACHE=f"{WEKA_DIR}/.cache/hub",
        CHECKPOINT_OUTPUT_DIR=f"{WEKA_DIR}/deletable_checkpoint_states/{mr.WANDB_ID}",
    )
    t["mounts"].update({f"/weka/{b}": f"weka:{b}" for b in ("oe-adapt-default", "oe-training-default")})
    if any(s in command for s in mr.OPEN_INSTRUCT_COMMANDS) and "/weka/" not in str(
        t["args"].get("--output_dir")
    ):
        t["args"]["--output_dir"] = f"{WEKA_DIR}/deletable_checkpoint/{mr.WHOAMI}/"
        t["command"] += f" --output_dir {WEKA_DIR}/deletable_checkpoint/{mr.WHOAMI}/"


def expected(line: mr.MasonLine, doc: dict[str, Any]) -> dict[str, Any]:
    """mason's meaning with the documented differences applied."""
    m = mr.mason_meaning(doc)
    if m["budget"] is None:  # "budget"
        m["budget"] = mr.DEFAULT_BUDGET
    user_env, user_secrets = _values(line, "--env"), _values(line, "--secret")
    _, commands = mr.split_argv(line.argv)
    for t, command in zip(m["tasks"], commands, strict=True):
        if any(c in CANONICAL for c in t["clusters"]):  # "aliases"
            t["clusters"] = [CANONICAL.get(c, c) for c in t["clusters"]]
            if all(c in mr.WEKA_CLUSTERS for c in t["clusters"]):
                _as_weka(t, command)
        t["setup"] = None  # "setup"
        t["env"].pop("PATH", None)  # "PATH"
        t["env"].update(t["inline_env"])  # "inline_env"
        t["inline_env"] = {}
        if t["replicas"] > 1:
            for name in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"):  # "ib_env"
                if name not in user_env:
                    t["env"].pop(name, None)
        if "HF_HOME" in t["env"]:  # "uv_cache"
            t["env"]["UV_CACHE_DIR"] = "/weka/oe-adapt-default/allennlp/.cache/uv"
            t["env"]["UV_LINK_MODE"] = "copy"
        for name in t["env_duplicates"]:  # "duplicate_secret"
            if name in user_secrets:
                t["secrets"][name] = user_secrets[name]
        t["env_duplicates"] = []
        t["shared_memory"] = parse_size(t["shared_memory"])
    return m


def _normalise(m: dict[str, Any]) -> dict[str, Any]:
    for t in m["tasks"]:
        t["shared_memory"] = parse_size(t["shared_memory"]) if t["shared_memory"] else None
        t["script"] = None  # compared as setup + inline_env + command
        t["clusters"] = sorted(t["clusters"])  # launchkit resolves (and sorts) them at submit
        if t["synchronized_start_timeout"] is not None:
            t["synchronized_start_timeout"] = int(t["synchronized_start_timeout"])
    return m


@pytest.fixture
def mason_fake(make_fake_beaker):
    state = mr.build_fake_state(list(LINES.values()))
    return make_fake_beaker(state, user=mr.WHOAMI, default_workspace=mr.DEFAULT_WORKSPACE)


def _launch(line: mr.MasonLine, repo: Any, monkeypatch: Any, *extra: str) -> Any:
    for k in ("WANDB_ENTITY", "WANDB_PROJECT", "WANDB_TAGS", "RUN_NAME"):
        monkeypatch.delenv(k, raising=False)
    for k, v in line.launch_env.items():
        monkeypatch.setenv(k, v)
    return run_main("mason", *extra, *line.argv, cwd=repo.path)


@pytest.mark.slow
@pytest.mark.parametrize("line_id", ACCEPTED)
def test_same_meaning_as_mason(line_id, mason_fake, repo, monkeypatch):
    line = LINES[line_id]
    r = _launch(line, repo, monkeypatch)
    assert r.code == 0, r.stderr
    exp_id = r.stdout.strip().splitlines()[-1]
    experiment = next(e for e in mason_fake.state.experiments.values() if e.id == exp_id)
    images = _image_names(mason_fake)
    workspace = RESULTS[line_id]["workspace"]
    got = _normalise(launchkit_meaning(experiment.spec, workspace, images))
    want = _normalise(expected(line, mr.load_spec(line_id)))
    for i, (g, w) in enumerate(zip(got["tasks"], want["tasks"], strict=True)):
        for key in w:
            assert g[key] == w[key], (i, key)
    assert got == want


# --------------------------------------------------------------------------- refused and external lines


@pytest.mark.slow
@pytest.mark.parametrize("line_id", REFUSED)
def test_lines_mason_refuses(line_id, mason_fake, repo, monkeypatch):
    """mason refuses an option it no longer has (launchkit too, naming it), and a multi-node job outside
    its InfiniBand clusters answered `n` at its prompt (launchkit warns and launches: "aliases")."""
    line = LINES[line_id]
    r = _launch(line, repo, monkeypatch)
    head, _ = mr.split_argv(line.argv)
    unknown = next((w for w in head if w.startswith("--") and w in ("--gs_model_name", "--resumable")), None)
    if unknown:
        assert r.code == 2 and f"'{unknown}' is not a mason option" in r.stderr
        assert not mason_fake.state.experiments
    else:
        assert RESULTS[line_id]["prompted"] and line.stdin.strip() == "n"
        assert r.code == 0 and "mason wants InfiniBand clusters" in r.stderr


def test_without_credentials_it_prints_what_mason_prints_for_external_users(tmp_path, monkeypatch):
    for k in ("BEAKER_TOKEN", "BEAKER_CONFIG", "WANDB_ENTITY", "WANDB_PROJECT", "WANDB_TAGS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    checked = 0
    for line in LINES.values():
        ext = RESULTS[line.id]["external"]
        r = run_main("mason", *line.argv, cwd=tmp_path)
        if ext["exit_code"] != 0:
            assert r.code == 2, line.id
            continue
        assert r.code == 0, (line.id, r.stderr)
        assert "nothing launched" in r.stderr
        want = [mr.split_command(c)["command"] for c in ext["commands"]]  # "setup", "inline_env"
        assert r.stdout.splitlines() == want, line.id
        checked += 1
    assert checked >= 30


# --------------------------------------------------------------------------- issue 20's "done when"

DONE_WHEN = ("--cluster", "ai2/jupiter", "--budget", "ai2/oe-adapt", "--gpus", "8")
DONE_CMD = ("--", "python", "open_instruct/finetune.py", "--output_dir", "/output/x")


def test_done_when_offline_dry_run(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("BEAKER_TOKEN", raising=False)
    monkeypatch.delenv("BEAKER_CONFIG", raising=False)
    import yaml

    r = run_main("mason", *DONE_WHEN, "--dry-run", *DONE_CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    task = yaml.safe_load(r.stdout)["tasks"][0]
    env = {e["name"]: e.get("value") for e in task["envVars"]}
    assert task["result"]["path"] == "/output" and env["RESULTS_DIR"] == "/output"
    assert env["CHECKPOINT_OUTPUT_DIR"].startswith(f"{WEKA_DIR}/deletable_checkpoint_states/")
    assert "offline: assuming Beaker user" in r.stderr and "offline spec (no Beaker credentials)" in r.stderr
    assert f"--output_dir {WEKA_DIR}/deletable_checkpoint/" in task["arguments"][0]


@pytest.mark.parametrize("extra", [(), ("--allow-dirty",)])
def test_a_dirty_tree_launches_the_last_pushed_commit_naming_what_is_left_out(
    repo, tmp_path, monkeypatch, extra
):
    """mason runs the working tree; launchkit launches the pushed commit and says what is left out
    (issue 31). `--allow-dirty` (run's option) is accepted beside mason's."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("BEAKER_TOKEN", raising=False)
    import yaml

    head = repo.commit({"open_instruct/finetune.py": "print(1)\n"})
    (repo.path / "open_instruct/finetune.py").write_text("print(2)\n")
    (repo.path / "train.py").write_text("changed\n")
    r = run_main("mason", *extra, *DONE_WHEN, "--dry-run", *DONE_CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    env = {e["name"]: e.get("value") for e in yaml.safe_load(r.stdout)["tasks"][0]["envVars"]}
    assert env["LAUNCHKIT_GIT_COMMIT"] == head
    (line,) = [x for x in r.stderr.splitlines() if "uncommitted changes" in x]
    assert "open_instruct/finetune.py, train.py are not in the job" in line and head[:12] in line


@pytest.mark.slow
def test_done_when_submits_to_the_fake(make_fake_beaker, repo):
    fake = make_fake_beaker(user="alice")
    fake.state.add_budget("ai2/oe-adapt")
    fake.state.add_user("ai2")
    fake.state.add_image(mr.MASON_DEFAULT_IMAGE)
    r = run_main("mason", *DONE_WHEN, *DONE_CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    (experiment,) = fake.state.experiments.values()
    task = experiment.spec["tasks"][0]
    env = {e["name"]: e for e in task["envVars"]}
    assert task["result"]["path"] == "/output"
    assert env["CHECKPOINT_OUTPUT_DIR"]["value"].startswith(f"{WEKA_DIR}/deletable_checkpoint_states/")
    assert f"--output_dir {WEKA_DIR}/deletable_checkpoint/alice/" in task["arguments"][0]
    assert env["WANDB_API_KEY"]["secret"] == "alice_WANDB_API_KEY"  # <user>_NAME first
    assert "mason would `cd " in r.stderr and "dataset cache skipped" in r.stderr


@pytest.mark.slow
def test_dataset_cache_runs_locally_first_and_stops_the_launch_when_it_fails(make_fake_beaker, repo):
    fake = make_fake_beaker(user="alice")
    fake.state.add_budget("ai2/oe-adapt")
    fake.state.add_user("ai2")
    fake.state.add_image(mr.MASON_DEFAULT_IMAGE)
    script = "import sys, pathlib\npathlib.Path('argv.txt').write_text(' '.join(sys.argv[1:]))\n"
    repo.commit({"open_instruct/finetune.py": script, ".gitignore": "argv.txt\n"})
    args = (*DONE_WHEN, "--", "python", "open_instruct/finetune.py", "--with_tracking", "--lr", "1")
    r = run_main("mason", *args, cwd=repo.path)
    assert r.code == 0, r.stderr
    ran = (repo.path / "argv.txt").read_text()
    assert ran == "--lr 1 --hf_entity allenai --wandb_entity ai2-llm --cache_dataset_only"
    assert len(fake.state.experiments) == 1
    (repo.path / "argv.txt").unlink()
    assert run_main("mason", "--no_auto_dataset_cache", *args, cwd=repo.path).code == 0
    assert not (repo.path / "argv.txt").exists()
    repo.commit({"open_instruct/finetune.py": "raise SystemExit(7)\n"})
    r = run_main("mason", *args, cwd=repo.path)
    assert r.code == 3 and "the dataset cache command exited with 7" in r.stderr
    assert len(fake.state.experiments) == 2


def test_a_secret_reference_in_env_reaches_the_spec_as_text_with_a_warning(repo, tmp_path, monkeypatch):
    """`mason --env SERPER_API_KEY=secret:team_SERPER_API_KEY` (open-instruct): was refused as a secret
    value; mason writes the text, and so does launchkit, saying --secret is what gives the value."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("BEAKER_TOKEN", raising=False)
    monkeypatch.delenv("BEAKER_CONFIG", raising=False)
    import yaml

    ref = ("--env", "SERPER_API_KEY=secret:team_SERPER_API_KEY")
    r = run_main("mason", *DONE_WHEN, *ref, "--dry-run", *DONE_CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    env = {e["name"]: e.get("value") for e in yaml.safe_load(r.stdout)["tasks"][0]["envVars"]}
    assert env["SERPER_API_KEY"] == "secret:team_SERPER_API_KEY"
    assert "warning: --env SERPER_API_KEY=secret:team_SERPER_API_KEY: passed as the text" in r.stderr
    assert "for that pass --secret SERPER_API_KEY=team_SERPER_API_KEY" in r.stderr
