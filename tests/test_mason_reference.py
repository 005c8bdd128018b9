"""The reference data recorded from open-instruct's real mason.py (tests/data/mason/) is self-consistent,
and `mason_meaning` reads every spec. With $OPEN_INSTRUCT_DIR, re-recording three lines gives the same."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

import mason_reference as mr

LINES = mr.load_lines()
RESULTS = mr.load_results()
META = json.loads((mr.DATA / "recording.json").read_text())


def test_every_line_has_a_source_and_an_argv():
    assert len(LINES) >= 24
    ids = [ln.id for ln in LINES]
    assert len(ids) == len(set(ids))
    for ln in LINES:
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]{2,39}", ln.id), ln.id
        assert ln.path and not ln.path.startswith("/") and ln.line > 0, ln.id
        assert "mason.py" in ln.raw and "\n" not in ln.raw, ln.id
        assert ln.argv and "--cluster" in ln.argv, ln.id
        assert ln.features == mr.line_features(ln), ln.id


def test_argv_follows_from_raw_text_and_substitutions():
    for ln in LINES:
        argv = mr.derive_argv(ln.raw, ln.variables, ln.replacements, ln.positional)
        assert argv == ln.argv, ln.id


def test_derive_argv_refuses_unset_variables_and_missing_replacements():
    raw = 'python mason.py --cluster ai2/jupiter --image "$IMG" -- echo \\$HOME \\&\\& ls'
    assert mr.derive_argv(raw, {"IMG": "a/b c"}) == [
        "--cluster",
        "ai2/jupiter",
        "--image",
        "a/b c",
        "--",
        "echo",
        "$HOME",
        "&&",
        "ls",
    ]
    with pytest.raises(ValueError, match="IMG"):
        mr.derive_argv(raw)
    with pytest.raises(ValueError, match="does not occur"):
        mr.derive_argv(raw, {"IMG": "x"}, {"$(date)": "1"})


def test_corpus_is_diverse():
    feats = {f for ln in LINES for f in ln.features}
    for needed in (
        "single-node",
        "multi-node",
        "flag:--pure_docker_mode",
        "flag:--non_resumable",
        "flag:--no_auto_dataset_cache",
        "flag:--beaker_datasets",
        "flag:--env",
        "flag:--secret",
        "flag:--timeout",
        "flag:--mount_docker_socket",
        "flag:--no-host-networking",
        "flag:--artifact_ttl",
        "commands:4",
        "clusters:no-weka",
        "clusters:3",
        "resumable",
        "launcher:accelerate",
        "launcher:ray",
        "launcher:torchrun",
        "launch-env",
        "prompt-answer:y",
        "prompt-answer:n",
    ):
        assert needed in feats, needed
    clusters = {c for ln in LINES for vals in mr._flag_values(ln.argv, "--cluster") for c in vals}
    assert len(clusters) >= 5


def test_every_line_has_a_result_and_accepted_lines_a_spec():
    assert set(RESULTS) == {ln.id for ln in LINES}
    assert {p.stem for p in mr.SPECS.glob("*.yaml")} == {i for i, r in RESULTS.items() if r["accepted"]}
    for ln in LINES:
        r = RESULTS[ln.id]
        if r["accepted"]:
            assert r["exit_code"] == 0 and r["workspace"], ln.id
            ws = (mr._flag_values(ln.argv, "--workspace") or [[mr.DEFAULT_WORKSPACE]])[-1][0]
            assert r["workspace"] == ws, ln.id
        else:
            assert r["exit_code"] != 0 and r["error"] and r["output_tail"] is not None, ln.id
        # mason's external-user path prints one command per `--`-separated command (or fails the same way)
        _, commands = mr.split_argv(ln.argv)
        ext = r["external"]
        assert ext["exit_code"] != 0 or len(ext["commands"]) == len(commands), ln.id
        if r["prompted"]:
            assert ln.stdin is not None, ln.id
    assert META["open_instruct_commit"] and re.fullmatch(r"[0-9a-f]{40}", META["open_instruct_commit"])
    assert META["lines"] == len(LINES) and META["accepted"] == sum(r["accepted"] for r in RESULTS.values())


def test_recorded_data_holds_no_secret_values_or_machine_paths():
    texts = [p.read_text() for p in mr.SPECS.glob("*.yaml")] + [mr.RESULTS_FILE.read_text()]
    for t in texts:
        assert "value-of-" not in t  # the fake's secret values (build_fake_state)
        assert "mason-record-" not in t and "/work/" not in t and "/tmp/oi" not in t  # scratch, checkout


def _expected_clusters(ln: mr.MasonLine) -> list[str]:
    return mr._flag_values(ln.argv, "--cluster")[-1]


def _flag(ln: mr.MasonLine, flag: str, default: str | None) -> str | None:
    vals = mr._flag_values(ln.argv, flag)
    return vals[-1][0] if vals and vals[-1] else default


def test_meaning_of_every_spec_agrees_with_its_argv():
    """Read every recorded spec with `mason_meaning` and check it against mason's documented defaults
    applied to the line's argv (independent of the extractor's own parsing)."""
    checked = 0
    for ln in LINES:
        if not RESULTS[ln.id]["accepted"]:
            continue
        m = mr.mason_meaning(mr.load_spec(ln.id))
        head, commands = mr.split_argv(ln.argv)
        assert m["workspace"] == RESULTS[ln.id]["workspace"]
        assert m["budget"] == _flag(ln, "--budget", None)
        assert m["retries"] == int(_flag(ln, "--max_retries", "0") or 0)
        assert len(m["tasks"]) == len(commands), ln.id
        nodes = int(_flag(ln, "--num_nodes", "1") or 1)
        clusters = _expected_clusters(ln)
        weka = all(c in mr.WEKA_CLUSTERS for c in clusters)
        pure = "--pure_docker_mode" in head
        for i, t in enumerate(m["tasks"]):
            assert t["name"] == f"{_flag(ln, '--task_name', 'beaker_mason')}__{i}"
            assert t["image"] == _flag(ln, "--image", mr.MASON_DEFAULT_IMAGE)
            assert t["gpus"] == int(_flag(ln, "--gpus", "0") or 0)
            assert t["shared_memory"] == "10.24gb" and t["result_path"] == "/output"
            assert t["clusters"] == clusters and t["entrypoint"] == ["/bin/bash", "-c"]
            assert t["replicas"] == nodes
            multi = nodes > 1
            assert t["leader_selection"] == t["propagate_failure"] == t["propagate_preemption"] == multi
            assert t["host_networking"] == ("--no-host-networking" not in head)
            assert t["priority"] == _flag(ln, "--priority", "normal")
            assert t["preemptible"] == ("--preemptible" in head)
            assert (t["setup"] == f"cd {mr.LAUNCH_DIR}") == (not pure), ln.id
            assert ("PATH" in t["env"]) == (not pure)
            assert ("HF_HOME" in t["env"]) == weka and ("NCCL_SOCKET_IFNAME" in t["env"]) == (weka and multi)
            assert set(t["mounts"]) >= (
                {"/weka/oe-adapt-default", "/weka/oe-training-default"} if weka else set()
            )
            assert ("WANDB_RUN_ID" in t["env"]) == ("resumable" in ln.features)
            if weka:
                assert t["env"]["CHECKPOINT_OUTPUT_DIR"].endswith(
                    "/deletable_checkpoint_states/" + mr.WANDB_ID
                )
            assert t["secrets"]["HF_TOKEN"] == f"{mr.WHOAMI}_HF_TOKEN"
            assert t["secrets"]["OPENAI_API_KEY"].endswith("OPENAI_API_KEY")
            for name, secret in (
                v.split("=", 1) for vals in mr._flag_values(ln.argv, "--secret") for v in vals
            ):
                assert t["secrets"][name] == secret or name in t["env_duplicates"], (ln.id, name)
            for name, value in (v.split("=", 1) for vals in mr._flag_values(ln.argv, "--env") for v in vals):
                assert t["env"][name] == value, (ln.id, name)
            timeout = _flag(ln, "--timeout", None)
            assert (t["timeout_seconds"] is None) == (timeout is None)
            if any(s in commands[i] for s in mr.OPEN_INSTRUCT_COMMANDS):
                assert t["args"]["--hf_entity"] and t["args"]["--wandb_entity"], ln.id
            checked += 1
    assert checked >= 30


def test_meaning_normalises_and_splits():
    spec = {
        "description": "d",
        "budget": "ai2/b",
        "retry": {"allowedTaskRetries": 2},
        "tasks": [
            {
                "name": "t__0",
                "image": {"beaker": "u/img"},
                "command": ["/bin/bash", "-c"],
                "arguments": [
                    "cd /here && WANDB_PROJECT=p WANDB_ENTITY=e python open_instruct/grpo_fast.py --x '{\"a\": 1}'"
                    " --checkpoint_state_dir /weka/oe-adapt-default/allennlp/deletable_checkpoint_states/jdoe/"
                    "1795614868_447534 --output_dir /a --output_dir /weka/b/"
                ],
                "envVars": [
                    {"name": "WANDB_RUN_ID", "value": "ab12cd34"},
                    {
                        "name": "CHECKPOINT_OUTPUT_DIR",
                        "value": "/weka/oe-adapt-default/allennlp/deletable_checkpoint_states/ab12cd34",
                    },
                    {"name": "OPENAI_API_KEY", "secret": "me_OPENAI_API_KEY"},
                    {"name": "OPENAI_API_KEY", "secret": "OPENAI_API_KEY"},
                ],
                "datasets": [
                    {"source": {"hostPath": "/var/run/docker.sock"}, "mountPath": "/var/run/docker.sock"},
                    {"source": {"beaker": "01ABC"}, "mountPath": "/model"},
                ],
                "replicas": 2,
                "leaderSelection": True,
                "timeout": 5400 * 10**9,
                "context": {"priority": "high", "preemptible": True},
            }
        ],
    }
    m = mr.mason_meaning(spec, workspace="ai2/w")
    t = m["tasks"][0]
    assert (m["workspace"], m["budget"], m["retries"]) == ("ai2/w", "ai2/b", 2)
    assert t["env"] == {
        "WANDB_RUN_ID": mr.WANDB_ID,
        "CHECKPOINT_OUTPUT_DIR": f"/weka/oe-adapt-default/allennlp/deletable_checkpoint_states/{mr.WANDB_ID}",
    }
    assert t["secrets"] == {"OPENAI_API_KEY": "OPENAI_API_KEY"} and t["env_duplicates"] == ["OPENAI_API_KEY"]
    assert t["mounts"] == {"/model": "dataset:01ABC", "/var/run/docker.sock": "host:/var/run/docker.sock"}
    assert t["setup"] == "cd /here" and t["inline_env"] == {"WANDB_PROJECT": "p", "WANDB_ENTITY": "e"}
    assert t["command"].startswith("python open_instruct/grpo_fast.py --x '{")
    assert t["args"]["--checkpoint_state_dir"].endswith(f"/jdoe/{mr.CKPT_STAMP}")
    assert t["args"]["--output_dir"] == "/weka/b/"
    assert (t["replicas"], t["leader_selection"], t["propagate_failure"]) == (2, True, False)
    assert (t["timeout_seconds"], t["priority"], t["preemptible"], t["gpus"]) == (5400.0, "high", True, 0)


def test_fake_state_knows_everything_the_corpus_names():
    s = mr.build_fake_state(LINES)
    needs = mr.corpus_needs(LINES)
    for c in needs["clusters"]:
        assert s.cluster_by_reference(c) is not None, c
    for w in needs["workspaces"]:
        ws = s.find_workspace(w)
        assert ws.secret(f"{mr.WHOAMI}_HF_TOKEN", exact=True) is not None
        for name in needs["secrets"]:
            assert ws.secret(name, exact=True) is not None, (w, name)
    for b in needs["budgets"]:
        s.find_budget(b)
    for i in needs["images"]:
        s.find_image(i)
    for d in needs["datasets"]:
        s.find_dataset(d)
    assert s.find_user(mr.WHOAMI).token == f"token-{mr.WHOAMI}"


RERECORD = ("rs-tulu-4tasks", "tools-parser-secrets", "olmo3-32b-rl-oldname-n")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_rerecording_three_lines_gives_the_same_meaning(tmp_path):
    oi = os.environ.get("OPEN_INSTRUCT_DIR")
    if not oi or not (Path(oi) / "mason.py").is_file():
        pytest.skip("set OPEN_INSTRUCT_DIR to an open-instruct checkout to re-record mason.py lines")
    spec = importlib.util.spec_from_file_location("mason_record", mr.DATA / "record.py")
    assert spec is not None and spec.loader is not None
    record = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(record)

    python = os.environ.get("MASON_PYTHON", sys.executable)
    new = {r["id"]: r for r in record.record(Path(oi), tmp_path, python=python, only=list(RERECORD))}
    for line_id in RERECORD:
        old, got = RESULTS[line_id], new[line_id]
        for key in ("exit_code", "accepted", "prompted"):
            assert got[key] == old[key], (line_id, key)
        norm = lambda x: json.loads(mr.normalise_volatile(json.dumps(x), None))
        assert norm(got["cache_commands"]) == norm(old["cache_commands"]), line_id
        assert norm(got["external"]) == norm(old["external"]), line_id
        if old["accepted"]:
            assert mr.mason_meaning(mr.load_spec(line_id, tmp_path / "specs")) == mr.mason_meaning(
                mr.load_spec(line_id)
            ), line_id
        else:
            assert got["error"] == old["error"], line_id
