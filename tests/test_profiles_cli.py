"""CLI: `launchkit profiles`, bad launcher combinations, and user profiles from pyproject.toml."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from inproc import run_main


def one_line_usage_error(r, *needles):
    assert r.code == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stderr
    for n in needles:
        assert n in lines[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,needles",
    [
        (["--torchrun", "--accelerate"], ["--torchrun and --accelerate cannot be combined"]),
        (["--ray", "--replicas", "2", "--no-leader-selection"], ["workers cannot find the head"]),
        (["--profile", "ai2-weka", "--no-profile"], ["cannot be combined"]),
        (["--profile", "nope"], ["unknown profile 'nope'", "ai2-weka"]),
    ],
)
def test_bad_combinations(repo, args, needles):
    r = run_main("run", "--dry-run", *args, "--", "python", "train.py", cwd=repo.path)
    one_line_usage_error(r, *needles)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["--torchrun", "--accelerate", "--ray"])
def test_launchers_work_with_either_exec_method(repo, launcher):
    r = run_main(
        "run", "--dry-run", launcher, "--exec-method", "bash", "--", "python", "train.py", cwd=repo.path
    )
    assert r.code == 0, r.stderr


def test_profiles_explains_the_choice():
    r = run_main("profiles", "ai2/jupiter", "--replicas", "2")
    assert r.code == 0, r.stderr
    assert "profile: ai2-weka" in r.stdout and "because cluster ai2/jupiter -> ai2-weka" in r.stdout
    assert "oe-adapt-default" not in r.stdout  # team buckets: --preset ai2-oe
    assert "multi-node GPU setup: export NCCL_IB_HCA=^=mlx5_bond_0" in r.stdout
    assert "launchkit added: profile ai2-weka (NCCL InfiniBand setup for multi-node)" in r.stdout
    mixed = run_main("profiles", "ai2/jupiter", "ai2/new-gcp", "--replicas", "2", "--preset", "ai2-oe")
    assert "decided on each node among ai2-weka, gcp-tcpxo" in mixed.stdout
    assert "left out: preset ai2-oe: ai2-weka parts not applied" in mixed.stdout


@pytest.mark.slow
def test_profiles_list_and_user_profiles_from_pyproject(repo):
    repo.commit(
        {
            "pyproject.toml": '[project]\nname = "x"\nversion = "0"\n\n'
            '[tool.launchkit.profiles.lab]\nclusters = ["lab/*"]\nenv = {SCRATCH = "/scratch"}\n'
            'mounts = ["/mnt/scratch:/scratch"]\n'
            "[tool.launchkit.profiles.gcp-tcpxo]\ndisabled = true\n"
        }
    )
    r = run_main("profiles", "--list", cwd=repo.path)
    assert "lab (from pyproject.toml)" in r.stdout and "gcp-tcpxo" not in r.stdout
    r = run_main("run", "--dry-run", "--cluster", "lab/gpu", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0, r.stderr
    task = yaml.safe_load(r.stdout)["tasks"][0]
    env = {e["name"]: e.get("value") for e in task["envVars"]}
    assert env["SCRATCH"] == "/scratch" and env["LAUNCHKIT_PROFILE_APPLIED"] == "lab"
    mounts = [m for m in task["datasets"] if m["mountPath"] != "/launchkit"]  # not launchkit's runtime
    assert mounts == [{"source": {"hostPath": "/mnt/scratch"}, "mountPath": "/scratch"}]


def test_bad_user_profile_is_one_line(repo):
    repo.commit(
        {"pyproject.toml": '[tool.launchkit.profiles.lab]\nenv = {LD_LIBRARY_PATH = "/x:$LD_LIBRARY_PATH"}\n'}
    )
    one_line_usage_error(
        run_main("profiles", cwd=repo.path), "[tool.launchkit.profiles.lab]", "not shell-expanded"
    )


@pytest.mark.slow
def test_multi_node_dry_run_defaults(repo):
    r = run_main(
        "run",
        "--dry-run",
        "--replicas",
        "2",
        "--gpus",
        "8",
        "--torchrun",
        "--no-host-networking",
        "--",
        "python",
        "train.py",
        cwd=repo.path,
    )
    task = yaml.safe_load(r.stdout)["tasks"][0]
    # gantry 3.7.0: without host networking there is no leader; each replica runs its own torchrun
    assert task["replicas"] == 2 and not task.get("leaderSelection") and not task.get("hostNetworking")
    assert not task.get("propagateFailure") and not task.get("propagatePreemption")
    assert "synchronizedStartTimeout" not in task


def test_profiles_cmd_keeps_cli_import_light():
    code = (
        "import sys, launchkit.cli.app; heavy = [m for m in ('pydantic', 'yaml', 'beaker', 'git') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == "[]"


def readme_commands():
    import re
    import shlex
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "examples"
    for readme in (root / "torchrun-ddp" / "README.md", root / "ray" / "README.md"):
        text = readme.read_text().replace("\\\n", " ")
        for line in re.findall(r"^launchkit run .*$", text, flags=re.M):
            yield pytest.param(shlex.split(line)[1:], id=f"{readme.parent.name}: {line[14:60]}")


@pytest.mark.slow
@pytest.mark.parametrize("argv", list(readme_commands()))
def test_example_commands_dry_run(repo, argv):
    cut = argv.index("--")
    r = run_main(*argv[:cut], "--dry-run", *argv[cut:], cwd=repo.path)
    assert r.code == 0, r.stderr
    task = yaml.safe_load(r.stdout)["tasks"][0]
    env = {e["name"]: e.get("value") for e in task["envVars"]}
    assert env["LAUNCHKIT_LAUNCHER"] in ("torchrun", "ray")
    if "--replicas" in argv:
        assert task["replicas"] == 2 and task["leaderSelection"] is True
    if "ai2/jupiter" in argv:
        # the built-in's NCCL setup is in the runtime's files (profiles.txt), named by the task
        assert env["LAUNCHKIT_PROFILE_APPLIED"] == "ai2-weka" and env["LAUNCHKIT_PROFILES"] == "ai2-weka"


def test_profiles_shows_presets(repo):
    r = run_main("profiles", "ai2/jupiter", "--preset", "vllm", cwd=repo.path)
    assert r.code == 0, r.stderr
    assert "preset vllm:" in r.stdout and "  RAY_CGRAPH_get_timeout=300" in r.stdout
    r = run_main("profiles", "--list", cwd=repo.path)
    assert "preset vllm:" in r.stdout and "with profile ai2-weka: weka oe-adapt-default:" in r.stdout
    r = run_main("run", "--dry-run", "--preset", "nope", "--", "python", "t.py", cwd=repo.path)
    one_line_usage_error(r, "--preset 'nope': unknown preset")
