"""The entrypoint's cluster setup (runtime/nccl.sh), run with faked nodes: the user command prints the
environment it sees. The setup program comes from the real profile data (resolve_profiles)."""

from __future__ import annotations

import json
import sys

import pytest

from launchkit.core.parse import build_request
from launchkit.core.profiles import resolve_profiles
from mn_helpers import run_node

SHOW_ENV = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


def program_env(user_profiles=None, **given) -> dict[str, str]:
    sel = resolve_profiles(build_request(given, ["x"]), user_profiles)
    return dict(sel.spec_env())


def node(env: dict[str, str], **kw):
    r = run_node(SHOW_ENV, env, **kw)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


MULTI_GPU = {
    "BEAKER_REPLICA_COUNT": "2",
    "BEAKER_REPLICA_RANK": "0",
    "BEAKER_ASSIGNED_GPU_COUNT": "8",
    "BEAKER_LEADER_REPLICA_HOSTNAME": "leader",
}


@pytest.fixture
def tcpxo(tmp_path):
    """A fake /var/lib/tcpxo/lib64 with a stub nccl-env-profile.sh (which uses unset variables)."""
    lib = tmp_path / "tcpxo" / "lib64"
    lib.mkdir(parents=True)
    (lib / "nccl-env-profile.sh").write_text(
        'export NCCL_PROTO=Simple\nexport NCCL_FASTRAK_IFNAME="eth1${UNSET_SUFFIX}"\n'
        'export STUB_SAW_LD_LIBRARY_PATH="$LD_LIBRARY_PATH"\n'
    )
    return lib


@pytest.mark.parametrize("host", ["jupiter-cs-aus-101.reviz.ai2.in", "holmes-b300-07"])
def test_ib_by_hostname_on_a_mixed_job(host):
    env = program_env(cluster=["ai2/jupiter", "ai2/holmes", "ai2/new-gcp"], replicas=2)
    seen, log = node(
        {
            **env,
            **MULTI_GPU,
            "BEAKER_NODE_HOSTNAME": host,
            "LAUNCHKIT_TCPXO_DIR": "/nonexistent",
        }
    )
    assert seen["NCCL_SOCKET_IFNAME"] == "ib" and seen["NCCL_IB_HCA"] == "^=mlx5_bond_0"
    assert seen["LAUNCHKIT_NODE_PROFILE"] == "ai2-weka"
    assert "NCCL_LIB_DIR" not in seen and "HF_HOME" not in seen  # mixed job: no spec parts
    assert f"cluster profile: ai2-weka (host {host.split('-')[0]}*" in log
    assert "export NCCL_SOCKET_IFNAME=ib" in log


def test_ib_by_devices_without_a_known_hostname(tmp_path):
    sysfs = tmp_path / "infiniband"
    (sysfs / "mlx5_0").mkdir(parents=True)
    env = program_env(replicas=2)  # no cluster constraint: the node decides
    seen, log = node(
        {
            **env,
            **MULTI_GPU,
            "BEAKER_NODE_HOSTNAME": "gpu-node-7",
            "LAUNCHKIT_IB_SYSFS": str(sysfs),
            "LAUNCHKIT_TCPXO_DIR": str(tmp_path / "none"),
        }
    )
    assert seen["NCCL_SOCKET_IFNAME"] == "ib"
    assert "path /sys/class/infiniband" in log


def test_empty_infiniband_dir_does_not_count(tmp_path):
    (tmp_path / "infiniband").mkdir()
    env = program_env(replicas=2)
    seen, log = node(
        {
            **env,
            **MULTI_GPU,
            "BEAKER_NODE_HOSTNAME": "cpu-1",
            "LAUNCHKIT_IB_SYSFS": str(tmp_path / "infiniband"),
            "LAUNCHKIT_TCPXO_DIR": str(tmp_path / "x"),
        }
    )
    assert "NCCL_SOCKET_IFNAME" not in seen
    assert "no match for this node (host cpu-1) among: ai2-weka gcp-tcpxo" in log


@pytest.mark.parametrize("given", [{"interconnect": "tcpxo"}, {"cluster": ["ai2/new-gcp-a3"]}])
def test_tcpxo_tree_on_a_gcp_node(tcpxo, given):
    """By the interconnect:tcpxo tag, or on a cluster no profile names: the node's TCPXO directory decides."""
    env = program_env(**given, replicas=2)
    seen, log = node(
        {
            **env,
            **MULTI_GPU,
            "BEAKER_NODE_HOSTNAME": "gcp-a3-12",
            "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
            "LAUNCHKIT_TCPXO_DIR": str(tcpxo),
        }
    )
    assert seen["NCCL_LIB_DIR"] == str(tcpxo)
    assert seen["LD_LIBRARY_PATH"] == f"{tcpxo}:/usr/local/cuda/lib64"
    assert seen["STUB_SAW_LD_LIBRARY_PATH"] == f"{tcpxo}:/usr/local/cuda/lib64"  # prepended before sourcing
    assert seen["NCCL_FASTRAK_IFNAME"] == "eth1"  # sourced, despite `set -u` in the entrypoint
    assert seen["NCCL_PROTO"] == "Simple,LL128"  # LL128 overrides come after the host profile
    assert seen["NCCL_TUNER_CONFIG_PATH"] == f"{tcpxo}/a3plus_tuner_config_ll128.textproto"
    assert (
        seen["NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE"]
        == f"{tcpxo}/a3plus_guest_config_ll128.textproto"
    )
    assert "NCCL_SOCKET_IFNAME" not in seen
    assert f"sourced {tcpxo}/nccl-env-profile.sh" in log
    assert seen["LAUNCHKIT_NODE_PROFILE"] == "gcp-tcpxo"


def test_tcpxo_without_ld_library_path_adds_no_empty_entry(tcpxo):
    env = program_env(interconnect="tcpxo", replicas=2)
    seen, _ = node({**env, **MULTI_GPU, "LAUNCHKIT_TCPXO_DIR": str(tcpxo)})
    assert seen["LD_LIBRARY_PATH"] == str(tcpxo)


def test_skip_nccl_setup_is_logged(tcpxo):
    env = program_env(cluster=["ai2/jupiter"], replicas=2, skip_nccl_setup=True, preset=["ai2-oe"])
    seen, log = node(
        {**env, **MULTI_GPU, "LAUNCHKIT_SKIP_NCCL_SETUP": "1", "BEAKER_NODE_HOSTNAME": "jupiter-1"}
    )
    # only the NCCL part is skipped: the rest of the job's env (a preset's HF cache here) stays
    assert "NCCL_SOCKET_IFNAME" not in seen and seen["HF_HOME"].startswith("/weka/")
    assert "multi-node NCCL setup skipped (--skip-nccl-setup)" in log


@pytest.mark.parametrize("gpus,count,why", [("0", "2", "no GPUs assigned"), ("8", "1", "single replica")])
def test_multi_node_parts_need_gpus_and_replicas(gpus, count, why):
    env = program_env(cluster=["ai2/titan"], replicas=2)
    seen, log = node(
        {
            **env,
            "BEAKER_NODE_HOSTNAME": "titan-cs-1",
            "BEAKER_ASSIGNED_GPU_COUNT": gpus,
            "BEAKER_REPLICA_COUNT": count,
        }
    )
    assert "NCCL_SOCKET_IFNAME" not in seen
    assert f"multi-node NCCL setup not needed ({why})" in log


def test_single_replica_spec_carries_no_runtime_program():
    env = program_env(cluster=["ai2/jupiter"])
    assert "LAUNCHKIT_PROFILE_SETUP" not in env and env["LAUNCHKIT_PROFILE_APPLIED"] == "ai2-weka"
    _seen, log = node(env)
    assert "cluster profile: ai2-weka (env and mounts applied at launch; no in-container steps)" in log


def test_no_profile_says_so():
    env = program_env(cluster=["ai2/jupiter"], replicas=2, no_profile=True)
    assert env == {}
    _, log = node({**MULTI_GPU})
    assert "cluster profile: none" in log


def test_user_profile_steps_run_in_order(tmp_path):
    script = tmp_path / "site-env.sh"
    script.write_text("export SITE_READY=1\nexport SITE_PATH_SEEN=$MYLIBS\n")
    user = {
        "mysite": {
            "clusters": ["acme/*"],
            "env": {"DATA": "/data"},
            "setup": [
                {"prepend": {"MYLIBS": "/opt/site/lib"}},
                {"source": str(script)},
                {"export": {"AFTER": "yes"}},
            ],
            "multi_node_setup": [{"export": {"NCCL_SOCKET_IFNAME": "eth9"}}],
        }
    }
    env = program_env(user, cluster=["acme/big"], replicas=2)
    assert env["DATA"] == "/data"
    seen, log = node({**env, **MULTI_GPU, "MYLIBS": "/usr/lib"})
    assert seen["MYLIBS"] == "/opt/site/lib:/usr/lib" and seen["SITE_PATH_SEEN"] == "/opt/site/lib:/usr/lib"
    assert seen["SITE_READY"] == "1" and seen["AFTER"] == "yes" and seen["NCCL_SOCKET_IFNAME"] == "eth9"
    assert "cluster profile: mysite (selected at launch" in log


def test_forced_profile_with_missing_host_script_fails_loudly(tmp_path):
    env = program_env(profile="gcp-tcpxo", replicas=2)
    r = run_node(SHOW_ENV, {**env, **MULTI_GPU, "LAUNCHKIT_TCPXO_DIR": str(tmp_path / "missing")})
    assert r.returncode == 108
    assert "nccl-env-profile.sh not found on this node" in r.stderr and "--skip-nccl-setup" in r.stderr


def test_failing_host_script_stops_the_job(tcpxo):
    (tcpxo / "nccl-env-profile.sh").write_text("return 3\n")
    env = program_env(interconnect="tcpxo", replicas=2)
    r = run_node(SHOW_ENV, {**env, **MULTI_GPU, "LAUNCHKIT_TCPXO_DIR": str(tcpxo)})
    assert r.returncode == 108 and "failed (exit 3)" in r.stderr
