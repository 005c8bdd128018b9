"""gantry 3.7.0's `launch_experiment`, parameter by parameter, as its users call it. The test runs it as is
with gantry and with its `gantry.` imports changed to `launchkit.gantry.` (nothing else differs), then
compares the two experiments the fake Beaker recorded, field by field.

Usage: params.py GROUP NAME SHA  (GROUP: a set of parameters below; SHA: the commit a hand-built
GitRepoState names)"""

import sys

from gantry.api import GitRepoState, launch_experiment

group, name, sha = sys.argv[1], sys.argv[2], sys.argv[3]
common = {"name": name, "workspace": "ai2/launchkit", "yes": True, "timeout": 0}
args = ["python", "train.py", "--lr", "0.1"]

if group == "workload":  # another repository's commit, a custom token secret, the workload's settings
    repo = GitRepoState(
        repo="allenai/OLMo-core",
        repo_url="https://github.com/allenai/OLMo-core",
        ref=sha,
        branch="feature-x",
    )
    launch_experiment(
        args,
        **common,
        git_repo=repo,
        gh_token_secret="MY_GH_TOKEN",
        description="a sweep",
        task_name="train",
        budget="ai2/oe-default",
        group_names=["sweeps"],
        clusters=["ai2/jupiter"],
        cpus=4.0,
        gpus=2,
        memory="64GiB",
        shared_memory="10GiB",
        env_vars=[("MODE", "workload"), "LR=0.1"],
        env_secrets=[("HF", "HF_TOKEN")],
        priority="high",
        task_timeout="2h",
        min_runtime="10m",
        retries=2,
        results="/out",
        exec_method="bash",
        pre_setup="echo pre",
        post_setup="echo post",
        install="pip install -e .",
        beaker_image="alice/base",
    )
elif group == "multinode":  # the checkout's own state, with its branch; torchrun on replicas
    launch_experiment(
        args,
        **common,
        git_repo=GitRepoState.from_env(),
        gpus=8,
        replicas=2,
        torchrun=True,
        clusters=["ai2/jupiter"],
        skip_nccl_setup=True,
        runtime_dir="/work/rt",
        auto_resume=False,
    )
elif group == "python":  # the job's Python, hostnames, mounts
    launch_experiment(
        args,
        **common,
        hostnames=["jupiter-node-1"],
        python_manager="uv",
        uv_venv="/opt/venv",
        uv_extras=["train"],
        uv_torch_backend="cu128",
        uv_cache_dir="/weka/uv-cache",
        default_python_version="3.12",
        weka=[("oe-training-default", "/weka/oe")],
        mounts=[("/net/nfs", "/nfs")],
        dataset_secrets=[("HF_TOKEN", "/secrets/hf")],
    )
elif group == "conda":  # conda, cloud credentials, constraints by type and tag
    launch_experiment(
        args,
        **common,
        python_manager="conda",
        conda_env="base",
        gpu_types=["h100"],
        tags=["storage:weka"],
        interconnect="ib",
        aws_config_secret="HF_TOKEN",
        aws_credentials_secret="WANDB_API_KEY",
        google_credentials_secret="GITHUB_TOKEN",
        preemptible=True,
    )
elif group == "nopython":
    launch_experiment(args, **common, no_python=True, system_python=False, propagate_failure=True)
print("LAUNCHED", name, flush=True)
