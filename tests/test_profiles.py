"""Profile resolution (core/profiles.py) and multi-node spec wiring (core/multinode.py)."""

from __future__ import annotations

import pytest

from launchkit.core.multinode import derive_port, replica_fields, task_additions
from launchkit.core.parse import build_request
from launchkit.core.profiles import BUILTIN_PROFILES, load_profiles, resolve_profiles
from launchkit.errors import UsageError


def req(**given):
    return build_request(given, ["python", "train.py"])


def sel(user=None, **given):
    return resolve_profiles(req(**given), user)


@pytest.mark.parametrize(
    "cluster",
    [
        "ai2/jupiter",
        "jupiter",
        "ai2/jupiter-cirrascale-2",
        "ai2/jup*",
        "AI2/Titan",
        "ai2/saturn",
        "ai2/holmes",
        "ai2/prometheus",
    ],
)
def test_weka_clusters_by_name_alias_or_glob(cluster):
    s = sel(cluster=[cluster])
    assert s.applied == "ai2-weka"
    assert s.env == {} and not s.weka and not s.mounts  # cluster facts only: team parts are a preset
    s = sel(cluster=[cluster], preset=["ai2-oe"])
    assert s.preset.env["HF_HUB_CACHE"] == "/weka/oe-adapt-default/allennlp/.cache/hub"
    assert [(w.bucket, w.mount_path) for w in s.preset.weka] == [
        ("oe-adapt-default", "/weka/oe-adapt-default"),
        ("oe-training-default", "/weka/oe-training-default"),
    ]


def test_tcpxo_is_keyed_by_tag_and_node_not_by_augusta():
    """ai2/augusta was decommissioned (March 2026): TCPXO follows the interconnect:tcpxo tag, and the
    node's /var/lib/tcpxo/lib64 on clusters no profile names."""
    s = sel(interconnect="tcpxo", replicas=4)
    assert s.applied == "gcp-tcpxo" and s.env == {} and not s.mounts  # the Augusta filestore is gone
    assert "match path /var/lib/tcpxo/lib64" in s.setup_program
    assert "multi source /var/lib/tcpxo/lib64/nccl-env-profile.sh" in s.setup_program
    assert "ai2-augusta" not in BUILTIN_PROFILES and not any(
        "augusta" in pat for p in BUILTIN_PROFILES.values() for pat in p.clusters + p.hostnames
    )
    gcp = sel(cluster=["ai2/new-gcp-a3"], replicas=2)  # a cluster no profile names: the node decides
    assert gcp.applied is None and gcp.candidates == ["gcp-tcpxo"]
    assert "profile gcp-tcpxo\nmatch path /var/lib/tcpxo/lib64" in gcp.setup_program


def test_holmes_is_weka_and_infiniband_and_detected_by_host():
    s = sel(cluster=["ai2/holmes"], replicas=2)
    assert s.applied == "ai2-weka" and "match host holmes*" in s.setup_program
    assert "multi export NCCL_SOCKET_IFNAME=ib" in s.setup_program


@pytest.mark.parametrize(
    "given,applied",
    [
        ({"tag": ["storage:weka"]}, "ai2-weka"),
        ({"interconnect": "ib"}, "ai2-weka"),
        ({"interconnect": "tcpxo"}, "gcp-tcpxo"),
        ({"tag": ["interconnect:tcpxo"]}, "gcp-tcpxo"),
        ({"hostname": ["jupiter-cs-aus-101.reviz.ai2.in"]}, "ai2-weka"),
        (
            {"cluster": ["ai2/jupiter", "ai2/new-gcp"], "interconnect": "ib"},
            "ai2-weka",
        ),  # tags narrow the targets
    ],
)
def test_tags_and_hostnames(given, applied):
    assert sel(**given).applied == applied


def test_mixed_families_carry_only_guarded_runtime_parts():
    s = sel(cluster=["ai2/jupiter", "ai2/new-gcp"], replicas=2)
    assert s.applied is None and s.env == {} and not s.mounts and not s.weka
    assert s.candidates == ["ai2-weka", "gcp-tcpxo"]
    assert "profile ai2-weka\nmatch host jupiter*" in s.setup_program
    assert "match always" not in s.setup_program
    s = sel(cluster=["ai2/jupiter", "ai2/new-gcp"], replicas=2, preset=["ai2-oe"])
    assert not s.preset.env and not s.preset.weka  # the job may land off Weka
    assert "preset ai2-oe: ai2-weka parts not applied (profile ai2-weka not applied)" in s.skipped


def test_unknown_cluster_next_to_a_weka_one_is_mixed():
    s = sel(cluster=["ai2/jupiter", "other/cpu"], replicas=2)
    assert s.applied is None and s.candidates == ["ai2-weka", "gcp-tcpxo"]
    assert "cluster other/cpu -> generic" in s.reasons


def test_unconstrained_job_detects_at_runtime():
    s = sel(replicas=2)
    assert s.applied is None and s.candidates == ["ai2-weka", "gcp-tcpxo"]
    assert "match path /sys/class/infiniband" in s.setup_program
    assert "match path /var/lib/tcpxo/lib64" in s.setup_program


def test_single_replica_drops_multi_node_steps():
    s = sel(interconnect="tcpxo")
    assert s.setup_program == "" and s.applied == "gcp-tcpxo"
    assert "gcp-tcpxo: multi-node setup not needed (1 replica)" in s.skipped


def test_profile_flag_forces_and_no_profile_disables():
    s = sel(profile="gcp-tcpxo", replicas=2)
    assert s.applied == "gcp-tcpxo" and s.forced and "match always" in s.setup_program
    assert sel(cluster=["ai2/jupiter"], no_profile=True).spec_env() == []
    with pytest.raises(UsageError, match="unknown profile 'nope'"):
        sel(profile="nope")


def test_user_profile_defines_and_overrides():
    user = {
        "ai2-weka": {"env": {"HF_HOME": "/weka/mine/hf"}},
        "gcp-tcpxo": {"disabled": True},
        "lab": {"clusters": ["lab/*"], "mounts": ["/scratch:/scratch"], "tags": ["site:lab"]},
    }
    profiles = load_profiles(user)
    assert "gcp-tcpxo" not in profiles
    assert profiles["ai2-weka"].env == {"HF_HOME": "/weka/mine/hf"}
    assert profiles["ai2-weka"].weka == BUILTIN_PROFILES["ai2-weka"].weka  # untouched fields stay
    s = sel(user, cluster=["lab/a100"])
    assert s.applied == "lab" and s.mounts[0].host_path == "/scratch"
    assert sel(user, interconnect="tcpxo").applied is None


@pytest.mark.parametrize(
    "table,msg",
    [
        ({"env": {"LD_LIBRARY_PATH": "/x:$LD_LIBRARY_PATH"}}, "not shell-expanded"),
        ({"mounts": ["relative"]}, "SOURCE:/absolute/path"),
        ({"setup": [{"export": {"A": "1"}, "source": "/x"}]}, "exactly one of"),
        ({"setup": [{"export": {"A": "1\n2"}}]}, "single line"),
        ({"colour": "blue"}, "colour"),
        ({"hostnames": ["a b"]}, "without spaces"),
    ],
)
def test_bad_user_profiles_are_usage_errors(table, msg):
    with pytest.raises(UsageError, match=msg) as e:
        load_profiles({"site": table})
    assert "[tool.launchkit.profiles.site]" in str(e.value)


def test_replica_defaults_and_overrides():
    off = {"leader_selection": False, "host_networking": False}
    assert replica_fields(req()) == off
    assert replica_fields(req(replicas=2)) == off  # gantry 3.7.0: replicas alone turn nothing on
    wired = {
        "leader_selection": True,
        "host_networking": True,
        "propagate_failure": True,
        "propagate_preemption": True,
        "synchronized_start_timeout": 300_000_000_000,
    }
    assert replica_fields(req(replicas=2, gpus=8, torchrun=True)) == wired
    assert replica_fields(req(replicas=2, ray=True)) == wired  # launchkit's launchers: the same wiring
    f = replica_fields(
        req(replicas=2, torchrun=True, synchronized_start_timeout="1h", propagate_preemption=False)
    )
    assert f["host_networking"] is True and f["propagate_preemption"] is False
    assert f["synchronized_start_timeout"] == 3600 * 10**9
    assert replica_fields(req(host_networking=True)) == {"leader_selection": False, "host_networking": True}
    # --replicas with --leader-selection: host networking follows; no propagation without a launcher
    assert replica_fields(req(replicas=2, leader_selection=True)) == {
        "leader_selection": True,
        "host_networking": True,
    }
    # --torchrun --no-host-networking / --no-leader-selection: everything off, as gantry
    for given in ({"host_networking": False}, {"leader_selection": False}):
        assert replica_fields(req(replicas=2, gpus=8, torchrun=True, **given)) == off
    # --no-propagate-failure keeps preemption propagation off too (gantry's rule)
    f = replica_fields(req(replicas=2, torchrun=True, propagate_failure=False))
    assert f["propagate_failure"] is False and "propagate_preemption" not in f


def test_ray_and_accelerate_across_replicas_need_leader_selection():
    with pytest.raises(UsageError, match="--ray with --replicas 2 and no leader selection"):
        req(replicas=2, ray=True, host_networking=False)
    req(replicas=2, gpus=8, torchrun=True, leader_selection=False)  # gantry's: accepted


def test_launcher_env_port_and_resume():
    from launchkit.core.gitstate import GitState
    from launchkit.core.spec import build_spec, run_id

    r = req(replicas=2, torchrun=True, resumable=True, skip_nccl_setup=True)
    git = GitState(remote_url="https://github.com/a/b", commit="0" * 40)
    rid = run_id(r, git)
    names = [e.name for e in build_spec(r, git).tasks[0].env_vars]
    assert len(names) == len(set(names))
    env = {e.name: e.value for e in build_spec(r, git).tasks[0].env_vars}
    # the rendezvous id is the run id: set by the entrypoint (lk_task_env), not spelled out per task
    assert env["LAUNCHKIT_LAUNCHER"] == "torchrun" and "LAUNCHKIT_RDZV_ID" not in env
    assert env["LAUNCHKIT_RUN_ID"] == rid
    assert env["LAUNCHKIT_RDZV_PORT"] == str(derive_port(rid))
    # the W&B id is set inside the job, from the experiment id (fresh per launch): not in the spec
    assert "WANDB_RUN_ID" not in env and env["WANDB_RESUME"] == "allow" and env["LAUNCHKIT_RESUMABLE"] == "1"
    assert env["LAUNCHKIT_SKIP_NCCL_SETUP"] == "1"
    assert dict(task_additions(req(ray=True), rid).env)["LAUNCHKIT_RDZV_PORT"]  # single node too (Ray head)


def test_derive_port_is_stable_and_in_range():
    ports = {derive_port(f"{i:016x}") for i in range(500)}
    assert all(29000 <= p < 30000 for p in ports) and len(ports) > 300
    assert derive_port("abc") == derive_port("abc")


def test_user_env_and_mounts_win_over_the_profile():
    r = build_request(
        {
            "cluster": ["ai2/jupiter"],
            "preset": ["ai2-oe"],
            "env": ["HF_HOME=/mine"],
            "weka": ["other:/weka/oe-adapt-default"],
        },
        ["x"],
    )
    extra = task_additions(r, "r")
    assert "HF_HOME" not in dict(extra.env)
    assert [w.mount_path for w in extra.weka] == ["/weka/oe-training-default"]


def test_beaker_submit_keeps_profile_mounts():
    """Profile mounts survive the Beaker backend's from_json (beaker-py 2.8.1 leaves sources as dicts)."""
    from launchkit.backends.beaker.submit import _parsed
    from launchkit.core.gitstate import GitState
    from launchkit.core.spec import build_spec
    from launchkit.core.specview import SpecView

    lab = {"lab": {"clusters": ["lab/*"], "mounts": ["/mnt/filestore_1:/filestore"]}}
    spec = SpecView(
        build_spec(
            req(cluster=["lab/a"]), GitState(remote_url="https://x/y", commit="0" * 40), user_profiles=lab
        ).to_json()
    )
    assert _parsed(spec).to_json()["tasks"][0]["datasets"][1:] == [  # after the runtime's
        {"source": {"hostPath": "/mnt/filestore_1"}, "mountPath": "/filestore"}
    ]


def test_ai2_oe_preset_shares_a_uv_cache_on_weka_and_the_users_choice_wins():
    oe = ["ai2-oe"]
    s = sel(cluster=["ai2/jupiter"], preset=oe)
    assert s.preset.env["UV_CACHE_DIR"] == "/weka/oe-adapt-default/allennlp/.cache/uv"
    assert s.preset.env["UV_LINK_MODE"] == "copy"  # the venv is on another file system than Weka
    assert "UV_CACHE_DIR" not in sel(cluster=["ai2/jupiter"]).preset.env  # not asked for: no cache
    assert "UV_CACHE_DIR" not in sel(interconnect="tcpxo", preset=oe).preset.env
    assert "UV_CACHE_DIR" not in sel(cluster=["ai2/jupiter", "ai2/new-gcp"], preset=oe).preset.env
    env = dict(task_additions(req(cluster=["ai2/jupiter"], preset=oe), "r").env)
    assert env["UV_CACHE_DIR"] == "/weka/oe-adapt-default/allennlp/.cache/uv"
    for given in ({"uv_cache_dir": "/mine"}, {"env": ["UV_CACHE_DIR=/mine"]}):
        env = dict(task_additions(req(cluster=["ai2/jupiter"], preset=oe, **given), "r").env)
        assert "UV_CACHE_DIR" not in env and "UV_LINK_MODE" not in env  # uv picks the mode for theirs


def test_uv_cache_dir_flag_wins_in_the_spec():
    from launchkit.core.gitstate import GitState
    from launchkit.core.spec import build_spec

    git = GitState(remote_url="https://x/y", commit="0" * 40)
    for given, expected in (
        ({}, "/weka/oe-adapt-default/allennlp/.cache/uv"),
        ({"uv_cache_dir": "/weka/mine/uv"}, "/weka/mine/uv"),
    ):
        spec = build_spec(req(cluster=["ai2/jupiter"], preset=["ai2-oe"], **given), git).to_json()
        env = {e["name"]: e.get("value") for e in spec["tasks"][0]["envVars"]}
        assert env["UV_CACHE_DIR"] == expected


# ---------------------------------------------------------------------------------------------- presets
VLLM = {
    "RAY_CGRAPH_get_timeout": "300",
    "VLLM_DISABLE_COMPILE_CACHE": "1",
    "NCCL_DEBUG": "ERROR",
    "VLLM_LOGGING_LEVEL": "WARNING",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",
}


def _spec_env(r, user_profiles=None) -> dict[str, str]:
    from launchkit.core.gitstate import GitState
    from launchkit.core.spec import build_spec

    git = GitState(remote_url="https://github.com/a/b", commit="0" * 40)
    return {e.name: e.value for e in build_spec(r, git, user_profiles=user_profiles).tasks[0].env_vars}


def test_preset_vllm_sets_masons_env_and_the_users_env_wins():
    env = _spec_env(req(preset=["vllm"], ray=True))
    assert {k: env[k] for k in VLLM} == VLLM
    assert not set(VLLM) & set(_spec_env(req(ray=True)))  # off unless asked
    env = _spec_env(
        build_request({"preset": ["vllm"], "env": ["NCCL_DEBUG=INFO"]}, ["python", "x.py"], environ={})
    )
    assert env["NCCL_DEBUG"] == "INFO"


def test_a_profile_turns_a_preset_on():
    user = {"lab": {"clusters": ["lab/*"], "presets": ["vllm"]}}
    sel = resolve_profiles(req(cluster=["lab/a100"]), user)
    assert sel.applied == "lab" and sel.presets == ["vllm"] and "presets: vllm" in sel.reasons
    assert _spec_env(req(cluster=["lab/a100"]), user)["VLLM_LOGGING_LEVEL"] == "WARNING"
    with pytest.raises(UsageError, match="profile lab: preset 'nope': unknown preset"):
        resolve_profiles(req(cluster=["lab/a100"]), {"lab": {"clusters": ["lab/*"], "presets": ["nope"]}})


def test_unknown_preset_is_a_usage_error():
    with pytest.raises(UsageError, match="--preset 'vlm': unknown preset") as e:
        _spec_env(req(preset=["vlm"]))
    assert "vllm" in (e.value.hint or "")
