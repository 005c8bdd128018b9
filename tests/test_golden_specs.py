"""Golden Beaker specs for profile and multi-node jobs. The bootstrap, the runtime dataset's name and the version are
normalized. Regenerate after an intended change with LAUNCHKIT_UPDATE_GOLDEN=1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.core.spec import build_spec, spec_to_yaml

GOLDEN = Path(__file__).parent / "golden" / "profiles"
UPDATE = bool(os.environ.get("LAUNCHKIT_UPDATE_GOLDEN"))  # read before the env isolation fixture runs
GIT = GitState(
    remote_url="https://github.com/example/repo.git",
    commit="0123456789abcdef0123456789abcdef01234567",
    branch="main",
)
USER_PROFILES = {
    "acme": {
        "description": "ACME's cluster",
        "clusters": ["acme/*"],
        "env": {"DATA_DIR": "/data"},
        "mounts": ["/mnt/data:/data"],
        "hostnames": ["acme-*"],
        "setup": [{"prepend": {"LD_LIBRARY_PATH": "/opt/acme/lib"}}],
        "multi_node_setup": [{"source": "/opt/acme/nccl.sh"}, {"export": {"NCCL_SOCKET_IFNAME": "eth0"}}],
    }
}

CASES = {
    "single_gpu": ({"gpus": 1}, ["python", "train.py"]),
    "torchrun_ib_8x2": (
        {"cluster": ["ai2/jupiter"], "gpus": 8, "replicas": 2, "torchrun": True},
        ["python", "train.py", "--epochs", "3"],
    ),
    "torchrun_tcpxo_8x2": (
        {"interconnect": "tcpxo", "gpus": 8, "replicas": 2, "torchrun": True},
        ["python", "train.py", "--epochs", "3"],
    ),
    "accelerate_ib_resumable": (
        {"cluster": ["ai2/titan"], "gpus": 8, "replicas": 2, "accelerate": True, "resumable": True},
        ["python", "sft.py"],
    ),
    "ray_unconstrained": ({"gpus": 8, "replicas": 2, "ray": True}, ["python", "grpo.py"]),
    "mixed_clusters": (
        {"cluster": ["ai2/jupiter", "ai2/new-gcp"], "gpus": 8, "replicas": 2, "torchrun": True},
        ["python", "train.py"],
    ),
    "user_profile": (
        {"cluster": ["acme/a100"], "gpus": 4, "replicas": 2, "torchrun": True},
        ["python", "train.py"],
    ),
}


def render(given, command) -> str:
    spec = build_spec(build_request(given, command), GIT, user_profiles=USER_PROFILES).to_json()
    for task in spec["tasks"]:
        task["command"][2] = "<bootstrap>"
        for d in task.get("datasets") or []:
            if d["mountPath"] == "/launchkit":
                d["source"]["beaker"] = "<runtime dataset>"
        for e in task.get("envVars", []):
            if e["name"] == "LAUNCHKIT_VERSION":
                e["value"] = "<version>"

    class _Spec:
        def to_json(self):
            return spec

    return spec_to_yaml(_Spec())


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name):
    text = render(*CASES[name])
    path = GOLDEN / f"{name}.yaml"
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"missing golden {path.name}: run with LAUNCHKIT_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{name} changed; if intended, rerun with LAUNCHKIT_UPDATE_GOLDEN=1"
    assert yaml.safe_load(text)["tasks"][0]["command"][:2] == ["bash", "-c"]


def test_no_literal_shell_variables_in_env_values():
    for given, command in CASES.values():
        spec = yaml.safe_load(render(given, command))
        for e in spec["tasks"][0].get("envVars", []):
            assert "$" not in e.get("value", ""), e
