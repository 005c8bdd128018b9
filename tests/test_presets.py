"""Cluster facts by default, team conventions only when asked (issue 19 item 2): core/presets.py.

In-process dry runs (offline: the tests have no Beaker credentials) of `launchkit run`."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from inproc import run_main
from launchkit.core.multinode import added_line
from launchkit.core.parse import build_request
from launchkit.core.presets import PRESETS, WELL_KNOWN_SECRETS, Preset, PresetPart, decode_secrets
from launchkit.core.profiles import resolve_profiles
from launchkit.runtime import runtime_files

HF_HOME = "/weka/oe-adapt-default/allennlp/.cache/huggingface"


def _dry(repo, *args: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    r = run_main("run", "--dry-run", *args, "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0, r.stderr
    task = yaml.safe_load(r.stdout)["tasks"][0]
    env = {e["name"]: e.get("value", e.get("secret")) for e in task["envVars"]}
    mounts = {
        d["mountPath"]: d["source"] for d in task.get("datasets") or [] if d["mountPath"] != "/launchkit"
    }
    return env, mounts, [ln for ln in r.stderr.splitlines() if "launchkit added" in ln]


def test_weka_cluster_by_default_gets_no_team_parts(repo):
    env, mounts, added = _dry(repo, "-c", "ai2/saturn")
    assert "HF_HOME" not in env and "UV_CACHE_DIR" not in env
    assert not any("weka" in src for src in mounts.values())
    assert "LAUNCHKIT_PRESET_SECRETS" not in env  # no secret is added to the job
    assert env["LAUNCHKIT_PROFILE_APPLIED"] == "ai2-weka"
    assert added == []  # nothing added: no line


def test_preset_ai2_oe_brings_back_the_team_parts_and_says_so(repo):
    env, mounts, added = _dry(repo, "-c", "ai2/saturn", "--preset", "ai2-oe")
    assert env["HF_HOME"] == HF_HOME and env["UV_LINK_MODE"] == "copy"
    assert mounts["/weka/oe-adapt-default"] == {"weka": "oe-adapt-default"}
    assert mounts["/weka/oe-training-default"] == {"weka": "oe-training-default"}
    # `NAME` stands for NAME=NAME (core/presets.py: encode_secrets)
    assert env["LAUNCHKIT_PRESET_SECRETS"] == ",".join(WELL_KNOWN_SECRETS)
    asked = dict(decode_secrets(env["LAUNCHKIT_PRESET_SECRETS"].split(",")))
    assert list(asked) == list(WELL_KNOWN_SECRETS) and asked["BEAKER_TOKEN"] == "BEAKER_TOKEN"
    assert len(added) == 1
    line = added[0]
    assert line.startswith("launchkit added: preset ai2-oe: HF_HOME=" + HF_HOME)
    assert "weka oe-adapt-default:/weka/oe-adapt-default" in line and "HF_TOKEN" in line
    assert "profile" not in line  # single node: the profile adds nothing


def test_multi_node_on_jupiter_gets_the_nccl_setup_without_a_preset(repo):
    env, mounts, added = _dry(repo, "-c", "ai2/jupiter", "--replicas", "2", "--gpus", "8", "--torchrun")
    # a built-in's setup travels once, in the runtime's files: the task names the profile
    assert env["LAUNCHKIT_PROFILES"] == "ai2-weka" and "LAUNCHKIT_PROFILE_SETUP" not in env
    stored = runtime_files()["profiles.txt"].decode()
    assert "multi export NCCL_SOCKET_IFNAME=ib\nmulti export NCCL_IB_HCA=^=mlx5_bond_0" in stored
    assert "HF_HOME" not in env and not mounts and "LAUNCHKIT_PRESET_SECRETS" not in env
    assert added == [
        "launchkit added: profile ai2-weka (NCCL InfiniBand setup for multi-node); synchronized start: up"
        " to 5m for all 2 replicas (--synchronized-start-timeout to change)"
    ]


def test_presets_from_config_apply_and_the_users_own_values_win(repo):
    repo.commit({"pyproject.toml": "[tool.launchkit]\npresets = ['ai2-oe']\n"})
    env, mounts, added = _dry(
        repo, "-c", "ai2/jupiter", "--env", "HF_HOME=/mine", "--weka", "mine:/weka/oe-adapt-default"
    )
    assert env["HF_HOME"] == "/mine" and env["HF_HUB_CACHE"].endswith("/hub")
    assert mounts["/weka/oe-adapt-default"] == {"weka": "mine"}
    assert len(added) == 1 and "HF_HOME" not in added[0] and "oe-adapt-default:" not in added[0]
    assert "HF_HUB_CACHE=" in added[0] and "weka oe-training-default:/weka/oe-training-default" in added[0]


def test_off_weka_ai2_oe_adds_only_its_secrets():
    r = build_request({"cluster": ["other/cpu"], "preset": ["ai2-oe"]}, ["x"], environ={})
    sel = resolve_profiles(r)
    assert sel.applied is None and sel.preset.env == {} and not sel.preset.weka
    assert set(sel.preset.secrets) == set(WELL_KNOWN_SECRETS)
    assert "preset ai2-oe: ai2-weka parts not applied (profile ai2-weka not applied)" in sel.skipped
    line = added_line(r)
    assert line is not None and line.startswith("launchkit added: preset ai2-oe: secrets HF_TOKEN, ")


def test_a_user_env_secret_wins_over_a_preset_secret():
    r = build_request(
        {"cluster": ["ai2/jupiter"], "preset": ["ai2-oe"], "env_secret": ["HF_TOKEN=mine"]}, ["x"], environ={}
    )
    from launchkit.core.multinode import task_additions

    assert "HF_TOKEN" not in task_additions(r, "r").secrets
    assert "WANDB_API_KEY" in task_additions(r, "r").secrets


def test_by_profile_parts_apply_only_with_that_profile(monkeypatch):
    p = Preset(
        name="lab",
        env={"A": "1"},
        secrets={"TOK": "lab_token"},
        by_profile={"gcp-tcpxo": PresetPart(env={"A": "2", "B": "3"}, mounts=["/data:/data"])},  # type: ignore[list-item]
    )
    assert p.part_for(None) == PresetPart(env={"A": "1"}, secrets={"TOK": "lab_token"})
    on = p.part_for("gcp-tcpxo")
    assert on.env == {"A": "2", "B": "3"} and [m.mount_path for m in on.mounts] == ["/data"]
    monkeypatch.setitem(PRESETS, "lab", p)  # as `launchkit mason` adds its preset
    r = build_request({"interconnect": "tcpxo", "preset": ["lab"]}, ["x"], environ={})
    assert resolve_profiles(r).preset.env == {"A": "2", "B": "3"}


def test_preset_part_validation():
    with pytest.raises(ValueError, match="not shell-expanded"):
        PresetPart(env={"X": "$HOME/x"})
    with pytest.raises(ValueError, match="ENV_NAME = SECRET_NAME"):
        PresetPart(secrets={"X": "bad name"})


def test_profiles_command_shows_the_same_line(repo):
    r = run_main("profiles", "ai2/saturn", "--preset", "ai2-oe", cwd=repo.path)
    assert r.code == 0, r.stderr
    added = [ln for ln in r.stdout.splitlines() if ln.startswith("launchkit added:")]
    req = build_request({"cluster": ["ai2/saturn"], "preset": ["ai2-oe"]}, ["true"], environ={})
    assert added == [added_line(req)]
    r = run_main("profiles", "ai2/saturn", cwd=repo.path)
    assert "launchkit added: nothing" in r.stdout
