"""lk_wrap_command (runtime/launchers.sh): the argv each launcher gets, with stub tools on PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from lk_helpers import policy_env
from mn_helpers import RUNTIME, node_dir, run_node

STUB = """#!/usr/bin/env python3
import json, os, sys
print(json.dumps({"argv": [os.path.basename(sys.argv[0])] + sys.argv[1:],
                  "cpu": os.environ.get("ACCELERATE_USE_CPU"), "ray": os.environ.get("RAY_ADDRESS")}))
"""


@pytest.fixture
def stubs(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("torchrun", "accelerate"):
        (bin_dir / tool).write_text(STUB)
        (bin_dir / tool).chmod(0o755)
    return bin_dir


def wrap(stubs, launcher, argv, **beaker):
    env = {
        "LAUNCHKIT_LAUNCHER": launcher,
        "LAUNCHKIT_RDZV_PORT": "29123",
        "LAUNCHKIT_RDZV_ID": "abc",
        **{f"BEAKER_{k.upper()}": str(v) for k, v in beaker.items()},
    }
    r = run_node(argv, env, path_prepend=[stubs])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_torchrun_single_node_uses_all_gpus(stubs):
    out, _log = wrap(stubs, "torchrun", ["python", "train.py", "--lr", "1e-4"], assigned_gpu_count=8)
    assert out["argv"] == ["torchrun", "--nproc-per-node=8", "--standalone", "train.py", "--lr", "1e-4"]


def test_torchrun_multi_node_static_rendezvous_at_the_leader(stubs):
    out, _ = wrap(
        stubs,
        "torchrun",
        ["python", "train.py"],
        assigned_gpu_count=8,
        replica_count=2,
        replica_rank=1,
        leader_replica_hostname="127.0.0.1",
    )
    assert out["argv"] == [
        "torchrun",
        "--nproc-per-node=8",
        "--nnodes=2",
        "--node-rank=1",
        "--rdzv-backend=static",
        "--rdzv-endpoint=127.0.0.1:29123",
        "--rdzv-id=abc",
        "--rdzv-conf=read_timeout=420",
        "train.py",
    ]


def test_torchrun_resolves_the_leader_name(stubs):
    out, _ = wrap(
        stubs,
        "torchrun",
        ["python", "train.py"],
        assigned_gpu_count=1,
        replica_count=2,
        replica_rank=0,
        leader_replica_hostname="localhost",
    )
    assert "--rdzv-endpoint=127.0.0.1:29123" in out["argv"]


@pytest.mark.parametrize(
    "argv,tail",
    [
        (["python", "-m", "pkg.train", "x"], ["-m", "pkg.train", "x"]),
        (["python3", "train.py"], ["train.py"]),
        (["train.py", "a b"], ["train.py", "a b"]),
        (["bash", "run.sh"], ["--no-python", "bash", "run.sh"]),
        (["python", "-u", "train.py"], ["--no-python", "python", "-u", "train.py"]),
    ],
)
def test_torchrun_program_forms(stubs, argv, tail):
    out, log = wrap(stubs, "torchrun", argv)
    assert out["argv"] == ["torchrun", "--nproc-per-node=1", "--standalone", *tail]
    assert "no GPUs assigned, one CPU process per replica" in log


def test_accelerate_multi_node(stubs):
    out, _ = wrap(
        stubs,
        "accelerate",
        ["python", "train.py"],
        assigned_gpu_count=8,
        replica_count=2,
        replica_rank=1,
        leader_replica_hostname="127.0.0.1",
    )
    assert out["argv"] == [
        "accelerate",
        "launch",
        "--num_machines",
        "2",
        "--machine_rank",
        "1",
        "--num_processes",
        "16",
        "--main_process_ip",
        "127.0.0.1",
        "--main_process_port",
        "29123",
        "--dynamo_backend",
        "no",
        "--multi_gpu",
        "train.py",
    ]
    assert out["cpu"] is None


def test_accelerate_launch_in_the_command_gets_only_the_topology(stubs):
    """open-instruct's `accelerate launch --use_deepspeed ... script.py`: no second launch, its flags
    kept (mixed precision included), --num_processes per replica (mason) times the replicas."""
    given = [
        "accelerate", "launch", "--mixed_precision", "bf16", "--num_processes", "8", "--use_deepspeed",
        "--deepspeed_config_file", "configs/ds/stage3.conf", "--machine_rank", "5",
        "open_instruct/finetune.py", "--num_processes", "3", "--lr", "1e-5",
    ]  # fmt: skip
    out, err = wrap(
        stubs, "accelerate", given, assigned_gpu_count=8, replica_count=2, replica_rank=1,
        leader_replica_hostname="127.0.0.1",
    )  # fmt: skip
    assert out["argv"] == [
        "accelerate", "launch", "--num_machines", "2", "--machine_rank", "1", "--num_processes", "16",
        "--main_process_ip", "127.0.0.1", "--main_process_port", "29123",
        "--mixed_precision", "bf16", "--use_deepspeed", "--deepspeed_config_file", "configs/ds/stage3.conf",
        "open_instruct/finetune.py", "--num_processes", "3", "--lr", "1e-5",
    ]  # fmt: skip
    assert out["argv"].count("launch") == 1 and "--num_processes 16" in err
    out, _ = wrap(stubs, "accelerate", ["accelerate", "launch", "-m", "pkg"], assigned_gpu_count=4)
    assert out["argv"] == [
        "accelerate", "launch", "--num_machines", "1", "--machine_rank", "0", "--num_processes", "4",
        "--main_process_ip", "127.0.0.1", "--main_process_port", "29123", "-m", "pkg",
    ]  # fmt: skip


def test_accelerate_on_cpu_replicas(stubs):
    out, _ = wrap(
        stubs,
        "accelerate",
        ["python", "-m", "pkg"],
        replica_count=2,
        replica_rank=0,
        leader_replica_hostname="127.0.0.1",
    )
    assert out["argv"][out["argv"].index("--num_processes") + 1] == "2"
    assert out["argv"][-3:] == ["--multi_gpu", "-m", "pkg"] and out["cpu"] == "true"


def test_no_launcher_runs_the_command_as_is(stubs):
    r = run_node(["torchrun", "x"], {}, path_prepend=[stubs])
    assert json.loads(r.stdout)["argv"] == ["torchrun", "x"]


def test_multi_node_without_leader_is_a_clear_error(stubs):
    r = run_node(
        ["python", "train.py"],
        {"LAUNCHKIT_LAUNCHER": "accelerate", "BEAKER_REPLICA_COUNT": "2"},
        path_prepend=[stubs],
    )
    assert r.returncode == 109 and "needs BEAKER_LEADER_REPLICA_HOSTNAME" in r.stderr


def test_torchrun_replicas_without_leader_run_on_their_own_as_gantry(stubs):
    """gantry 3.7.0's --torchrun --replicas N --no-leader-selection (or --no-host-networking)."""
    out, _ = wrap(
        stubs, "torchrun", ["python", "train.py"], assigned_gpu_count=8, replica_count=2, replica_rank=1
    )
    assert out["argv"] == ["torchrun", "--nproc-per-node=8", "--standalone", "train.py"]


def test_missing_tool_is_named(tmp_path):
    r = run_node(["python", "train.py"], {"LAUNCHKIT_LAUNCHER": "ray", "PATH": "/usr/bin:/bin"})
    assert r.returncode == 109 and "--ray needs 'ray'" in r.stderr


@pytest.mark.parametrize(
    "env,msg",
    [
        ({"LAUNCHKIT_LAUNCHER": "mpirun"}, "unknown LAUNCHKIT_LAUNCHER='mpirun'"),
        ({"LAUNCHKIT_LAUNCHER": "torchrun", "BEAKER_ASSIGNED_GPU_COUNT": "eight"}, "must be a whole number"),
    ],
)
def test_bad_runtime_env(stubs, env, msg):
    r = run_node(["python", "train.py"], env, path_prepend=[stubs])
    assert r.returncode == 100 and msg in r.stderr


@pytest.fixture
def bare_bin(tmp_path):
    """A PATH with bash and the few tools the runtime's bash needs, and a Python 3.6 `python`."""
    bin_dir = tmp_path / "bare"
    bin_dir.mkdir()
    for name in ("bash", "mktemp", "mkdir", "cat", "env"):
        real = shutil.which(name)
        assert real, name
        (bin_dir / name).symlink_to(real)
    (bin_dir / "python").write_text("#!/bin/sh\necho 'Python 3.6.9'\n")
    (bin_dir / "python").chmod(0o755)
    return bin_dir


@pytest.mark.parametrize(
    "launcher,tool_there,code,msg",
    [
        (
            "torchrun",
            True,
            109,
            "--torchrun needs Python 3.8+ on PATH (python or python3) to start 'torchrun'",
        ),
        (
            "ray",
            False,
            109,
            "--ray needs 'ray', which is not installed (add it to the project's dependencies)",
        ),
        ("mpirun", False, 100, "unknown LAUNCHKIT_LAUNCHER='mpirun'"),
    ],
)
def test_no_python_image_refuses_a_launcher(bare_bin, stubs, launcher, tool_there, code, msg):
    """--no-python on an image whose only `python` is Python 3.6: the launchers need the Python runtime."""
    if tool_there:
        (bare_bin / launcher).symlink_to(stubs / launcher)
    env = {"LAUNCHKIT_NO_PYTHON": "1", "LAUNCHKIT_LAUNCHER": launcher, "PATH": str(bare_bin)}
    r = run_node(["python", "train.py"], env)
    assert r.returncode == code and msg in r.stderr, r.stderr


def test_no_python_image_without_launcher_runs_the_command_in_bash(bare_bin):
    env = {"LAUNCHKIT_NO_PYTHON": "1", "PATH": str(bare_bin)}
    r = run_node(["bash", "-c", 'echo "ran $0 $1"; exit 5', "x", "y"], env)
    assert r.returncode == 5 and r.stdout == "ran x y\n", r.stderr


def test_no_python_image_refuses_the_watchdog(bare_bin):
    """--no-python on an image without Python 3.8+: the watchdog needs the Python runtime."""
    env = {"LAUNCHKIT_NO_PYTHON": "1", **policy_env(inactive_timeout=60), "PATH": str(bare_bin)}
    r = run_node(["true"], env)
    assert r.returncode == 109, r.stderr
    assert (
        "--stall-timeout, --inactive-timeout, --require-resume, Slack and event posts from the job need Python 3.8+ on PATH"
        in r.stderr
    )


def test_no_python_image_refuses_a_webhook_in_the_job(bare_bin):
    """--slack-webhook-secret: the job's runtime posts, so it needs Python (docs/notifications.md)."""
    # (the parts without entrypoint.sh's start, which moves LAUNCHKIT_SLACK_WEBHOOK to LK_SLACK_WEBHOOK)
    env = {
        "LAUNCHKIT_NO_PYTHON": "1",
        "LK_SLACK_WEBHOOK": "http://127.0.0.1:9/x",
        "PATH": str(bare_bin),
    }
    r = run_node(["true"], env)
    assert r.returncode == 109, r.stderr
    assert (
        "Slack and event posts from the job need Python 3.8+ on PATH" in r.stderr
        and "127.0.0.1" not in r.stderr
    )


def test_the_watchdog_runs_the_interpreter_a_shim_names(bare_bin, tmp_path):
    """A `python` that is a shim (as pyenv's): the runtime asks it once for its version and executable,
    then runs that executable, not the shim again."""
    calls = tmp_path / "shim-calls"
    (bare_bin / "python").write_text(f'#!/bin/sh\necho x >> "{calls}"\nexec "{sys.executable}" "$@"\n')
    env = {"LAUNCHKIT_NO_PYTHON": "1", **policy_env(inactive_timeout=60), "PATH": str(bare_bin)}
    r = run_node(["bash", "-c", "echo watched"], env)
    assert r.returncode == 0 and r.stdout == "watched\n", r.stderr
    assert calls.read_text().count("x") == 1


def _probing(bare_bin, tmp_path, name, tag):
    """`name` in bare_bin: a shim that notes `tag` and whether it was asked for its version (the probe)
    or runs the runtime, then runs this Python."""
    calls = tmp_path / "calls"
    (bare_bin / name).write_text(
        f'#!/bin/sh\ncase "$*" in *version_info*) echo "{tag} probe" >> "{calls}";; *) echo "{tag} run" >> "{calls}";; esac\n'
        f'exec "{sys.executable}" "$@"\n'
    )
    (bare_bin / name).chmod(0o755)
    return calls


def run_between(argv, env, between=""):
    """The runtime's parts as the entrypoint runs them: `between` (what the steps before lk_exec do: a
    hook, the install step), then lk_exec."""
    parts = [(RUNTIME / p).read_text() for p in ("lib.sh", "nccl.sh", "launchers.sh")]
    main = f'\nset -euo pipefail\n{between}\nlk_cluster_setup\nlk_exec "$@"\n'
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BEAKER_", "LAUNCHKIT_", "NCCL_"))}
    return subprocess.run(
        ["bash", "-c", "\n".join(parts) + main, "launchkit-entrypoint", *argv],
        env={**base, **env, "LK_NODE_DIR": node_dir()},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("ran", [True, False])
def test_the_jobs_own_python_that_ran_the_runtime_is_not_asked_again(bare_bin, tmp_path, ran):
    """A job with a venv: its Python ran the runtime's install step (LK_PY_RAN, where boot.py refused
    anything older than 3.8), so lk_exec starts the runtime with it without a probe; a `python` on PATH
    that is another one is asked, as before."""
    calls = _probing(bare_bin, tmp_path, "python", "py")
    venv_python = bare_bin / "python" if ran else tmp_path / "elsewhere" / "python"
    env = {**policy_env(inactive_timeout=60), "PATH": str(bare_bin)}
    r = run_between(["bash", "-c", "echo watched"], env, f'LK_PY_RAN="{venv_python}"')
    assert r.returncode == 0 and r.stdout == "watched\n", r.stderr
    assert calls.read_text().splitlines() == (["py run"] if ran else ["py probe"])
