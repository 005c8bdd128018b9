"""`launchkit run [OPTIONS] -- COMMAND...`: launch the committed and pushed repo state as a job.

Options only collect raw values here; all validation lives in `launchkit.core.parse`.
"""

# no `from __future__ import annotations`: Typer would eval ~70 string annotations on every start

from typing import Any

import typer

from launchkit.cli import state

P_WORKLOAD = "Workload"
P_LAUNCH = "Launch"
P_CONSTRAINTS = "Constraints"
P_RESOURCES = "Resources (per replica)"
P_INPUTS = "Inputs"
P_GIT = "Git"
P_TASK = "Task"
P_MULTINODE = "Multi-node"
P_RUNTIME = "Runtime"
P_PYTHON = "Python"


# long option -> config key (for docs/gen_run_reference.py), filled as the options are declared
CONFIG_KEYS: dict[str, str] = {}


def _help_defaults() -> dict[str, tuple[Any, str]]:
    from launchkit.config import help_defaults

    return help_defaults()


def register(app: typer.Typer) -> None:
    defaults = _help_defaults()

    def opt(
        default: Any, *decls: str, panel: str, help: str, metavar: str | None = None, key: str | None = None
    ) -> Any:
        """A `run` option; `key` names its config key, so help shows a configured default and its source."""
        if key:
            CONFIG_KEYS[decls[0].split("/")[0]] = key
        if key in defaults:
            value, label = defaults[key]
            if isinstance(value, dict):
                value = " ".join(f"{k}={v}" for k, v in value.items())
            elif isinstance(value, list):
                value = ", ".join(map(str, value))
            elif isinstance(value, bool):
                value = str(value).lower()
            help = help.split("  [default:")[0] + f"  [default: {value} (from {label})]"
        return typer.Option(
            default, *decls, help=help, metavar=metavar, rich_help_panel=panel, show_default=False
        )

    @app.command(
        "run",
        options_metavar="[OPTIONS] -- COMMAND...",
        short_help="Launch the committed, pushed state of this repository as a job.",
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    def run(
        extra: list[str] | None = typer.Argument(None, hidden=True),
        # workload
        name: str | None = opt(
            None,
            "--name",
            "-n",
            panel=P_WORKLOAD,
            metavar="NAME",
            help="Experiment name (letters, digits, . _ -).",
        ),
        description: str | None = opt(
            None, "--description", "-d", panel=P_WORKLOAD, metavar="TEXT", help="Experiment description."
        ),
        workspace: str | None = opt(
            None,
            "--workspace",
            "-w",
            panel=P_WORKLOAD,
            metavar="ORG/NAME",
            key="workspace",
            help="Beaker workspace.",
        ),
        budget: str | None = opt(
            None, "--budget", "-b", panel=P_WORKLOAD, metavar="ORG/NAME", key="budget", help="Beaker budget."
        ),
        group: list[str] | None = opt(
            None,
            "--group",
            panel=P_WORKLOAD,
            metavar="NAME",
            key="groups",
            help="Add the experiment to a Beaker group (repeatable).",
        ),
        # launch
        backend: str | None = opt(
            None,
            "--backend",
            panel=P_LAUNCH,
            metavar="beaker|local",
            key="backend",
            help="Where to run.  [default: beaker]",
        ),
        local: bool = opt(False, "--local", panel=P_LAUNCH, help="Run on this machine (= --backend local)."),
        dry_run: bool = opt(
            False,
            "--dry-run",
            panel=P_LAUNCH,
            help="Print the Beaker spec as YAML and exit. Offline: no Beaker, no network.",
        ),
        save_spec: str | None = opt(
            None,
            "--save-spec",
            panel=P_LAUNCH,
            metavar="FILE",
            help="Also write the spec (YAML) to FILE, on real runs too.",
        ),
        follow: bool = opt(
            False, "--follow", "-f", panel=P_LAUNCH, help="Follow the job's logs after submitting."
        ),
        allow_dirty: bool = opt(
            False,
            "--allow-dirty",
            panel=P_LAUNCH,
            help="Launch the last commit despite uncommitted changes to tracked files.",
        ),
        yes: bool = opt(False, "--yes", "-y", panel=P_LAUNCH, help="Never prompt."),
        # constraints
        cluster: list[str] | None = opt(
            None,
            "--cluster",
            "-c",
            panel=P_CONSTRAINTS,
            metavar="NAME",
            key="clusters",
            help="Cluster name, alias or glob (repeatable).",
        ),
        gpu_type: list[str] | None = opt(
            None,
            "--gpu-type",
            panel=P_CONSTRAINTS,
            metavar="TYPE",
            key="gpu_types",
            help="Only clusters with this GPU type, e.g. h100.",
        ),
        interconnect: str | None = opt(
            None,
            "--interconnect",
            panel=P_CONSTRAINTS,
            metavar="ib|tcpxo",
            key="interconnect",
            help="Only clusters with this interconnect.",
        ),
        tag: list[str] | None = opt(
            None,
            "--tag",
            panel=P_CONSTRAINTS,
            metavar="TAG",
            key="tags",
            help="Only clusters with this tag (repeatable).",
        ),
        hostname: list[str] | None = opt(
            None,
            "--hostname",
            panel=P_CONSTRAINTS,
            metavar="HOST",
            help="Only these machines (not with cluster filters).",
        ),
        # resources
        cpus: float | None = opt(
            None, "--cpus", panel=P_RESOURCES, metavar="N", key="cpus", help="CPUs, e.g. 8 or 0.5."
        ),
        gpus: int | None = opt(None, "--gpus", panel=P_RESOURCES, metavar="N", key="gpus", help="GPUs."),
        memory: str | None = opt(
            None, "--memory", panel=P_RESOURCES, metavar="SIZE", key="memory", help="Memory, e.g. 64GiB."
        ),
        shared_memory: str | None = opt(
            None,
            "--shared-memory",
            panel=P_RESOURCES,
            metavar="SIZE",
            key="shared_memory",
            help="/dev/shm size, e.g. 10GiB.",
        ),
        # inputs
        beaker_image: str | None = opt(
            None,
            "--beaker-image",
            panel=P_INPUTS,
            metavar="IMAGE",
            key="beaker_image",
            help="Beaker image name or id.",
        ),
        docker_image: str | None = opt(
            None,
            "--docker-image",
            panel=P_INPUTS,
            metavar="IMAGE",
            key="docker_image",
            help="Docker image.  [default: python:3.12]",
        ),
        dataset: list[str] | None = opt(
            None,
            "--dataset",
            panel=P_INPUTS,
            metavar="NAME[:SUB]:/PATH",
            help="Mount a Beaker dataset (repeatable).",
        ),
        mount: list[str] | None = opt(
            None,
            "--mount",
            "-m",
            panel=P_INPUTS,
            metavar="HOST:/PATH[:ro]",
            help="Mount a path of the node (repeatable).",
        ),
        weka: list[str] | None = opt(
            None,
            "--weka",
            panel=P_INPUTS,
            metavar="BUCKET:/PATH[:ro]",
            help="Mount a Weka bucket (repeatable).",
        ),
        upload: list[str] | None = opt(
            None,
            "--upload",
            "-u",
            panel=P_INPUTS,
            metavar="LOCAL:/PATH",
            help="Upload a local file or directory and mount it (repeatable).",
        ),
        env: list[str] | None = opt(
            None,
            "--env",
            "-e",
            panel=P_INPUTS,
            metavar="NAME[=VALUE]",
            key="env",
            help="Set a variable; NAME alone copies its value from here.",
        ),
        env_secret: list[str] | None = opt(
            None,
            "--env-secret",
            panel=P_INPUTS,
            metavar="NAME[=SECRET]",
            key="env_secrets",
            help="Set a variable from a Beaker secret (by name only).",
        ),
        no_auto_secrets: bool = opt(
            False, "--no-auto-secrets", panel=P_INPUTS, help="Don't add well-known secrets (HF_TOKEN, ...)."
        ),
        git_token_secret: str | None = opt(
            None,
            "--git-token-secret",
            panel=P_INPUTS,
            metavar="SECRET",
            key="git_token_secret",
            help="Secret holding a token to clone a private repository.",
        ),
        results: str | None = opt(
            None,
            "--results",
            panel=P_INPUTS,
            metavar="/PATH",
            key="results",
            help="Results directory in the job.  [default: /results]",
        ),
        # git
        ref: str | None = opt(
            None,
            "--ref",
            panel=P_GIT,
            metavar="REF",
            help="Launch this commit, tag or branch instead of HEAD.",
        ),
        branch: str | None = opt(
            None, "--branch", panel=P_GIT, metavar="BRANCH", help="Launch the pushed tip of this branch."
        ),
        remote: str | None = opt(
            None,
            "--remote",
            panel=P_GIT,
            metavar="NAME|URL",
            help="Remote (name or URL) the job fetches from.",
        ),
        # task
        task_name: str | None = opt(
            None,
            "--task-name",
            "-t",
            panel=P_TASK,
            metavar="NAME",
            key="task_name",
            help="Task name.  [default: main]",
        ),
        priority: str | None = opt(
            None,
            "--priority",
            panel=P_TASK,
            metavar="LEVEL",
            key="priority",
            help="low, normal, high, urgent or immediate.",
        ),
        task_timeout: str | None = opt(
            None,
            "--task-timeout",
            panel=P_TASK,
            metavar="DURATION",
            key="task_timeout",
            help="Stop the task after this long, e.g. 2h30m.",
        ),
        min_runtime: str | None = opt(
            None,
            "--min-runtime",
            panel=P_TASK,
            metavar="DURATION",
            key="min_runtime",
            help="Not preempted before this long.",
        ),
        no_auto_resume: bool = opt(
            False, "--no-auto-resume", panel=P_TASK, help="Don't restart the task after a preemption."
        ),
        preemptible: bool | None = opt(
            None,
            "--preemptible/--not-preemptible",
            panel=P_TASK,
            key="preemptible",
            help="Deprecated by Beaker: prefer --min-runtime.",
        ),
        retries: int | None = opt(
            None,
            "--retries",
            panel=P_TASK,
            metavar="N",
            key="retries",
            help="Retry a failed task up to N times.",
        ),
        # multi-node
        replicas: int | None = opt(
            None, "--replicas", panel=P_MULTINODE, metavar="N", key="replicas", help="Number of nodes."
        ),
        leader_selection: bool | None = opt(
            None,
            "--leader-selection/--no-leader-selection",
            panel=P_MULTINODE,
            help="Elect a leader replica.",
        ),
        host_networking: bool | None = opt(
            None, "--host-networking/--no-host-networking", panel=P_MULTINODE, help="Use the node's network."
        ),
        propagate_failure: bool | None = opt(
            None,
            "--propagate-failure/--no-propagate-failure",
            panel=P_MULTINODE,
            help="One replica fails: stop all.",
        ),
        propagate_preemption: bool | None = opt(
            None,
            "--propagate-preemption/--no-propagate-preemption",
            panel=P_MULTINODE,
            help="One replica preempted: preempt all.",
        ),
        synchronized_start_timeout: str | None = opt(
            None,
            "--synchronized-start-timeout",
            panel=P_MULTINODE,
            metavar="DURATION",
            help="Wait this long for all replicas to start.",
        ),
        torchrun: bool = opt(False, "--torchrun", panel=P_MULTINODE, help="Run the command under torchrun."),
        accelerate: bool = opt(
            False, "--accelerate", panel=P_MULTINODE, help="Run the command under accelerate launch."
        ),
        ray: bool = opt(
            False, "--ray", panel=P_MULTINODE, help="Start a Ray cluster, run the command on the head."
        ),
        resumable: bool = opt(
            False, "--resumable", panel=P_MULTINODE, help="Stable WANDB_RUN_ID across restarts."
        ),
        profile: str | None = opt(
            None,
            "--profile",
            panel=P_MULTINODE,
            metavar="NAME",
            key="profile",
            help="Cluster profile to apply.",
        ),
        no_profile: bool = opt(False, "--no-profile", panel=P_MULTINODE, help="Apply no cluster profile."),
        skip_nccl_setup: bool = opt(
            False, "--skip-nccl-setup", panel=P_MULTINODE, help="Don't set NCCL variables in the job."
        ),
        # runtime
        exec_method: str | None = opt(
            None,
            "--exec-method",
            panel=P_RUNTIME,
            metavar="exec|bash",
            key="exec_method",
            help="exec the argv, or run it through bash -c.",
        ),
        pre_setup: str | None = opt(
            None,
            "--pre-setup",
            panel=P_RUNTIME,
            metavar="CMD",
            key="pre_setup",
            help="Shell command (or .sh file) before the Python setup.",
        ),
        post_setup: str | None = opt(
            None,
            "--post-setup",
            panel=P_RUNTIME,
            metavar="CMD",
            key="post_setup",
            help="Shell command (or .sh file) after the Python setup.",
        ),
        # python
        install: str | None = opt(
            None,
            "--install",
            panel=P_PYTHON,
            metavar="CMD",
            key="install",
            help="Replace the install step with this command.",
        ),
        no_python: bool = opt(
            False, "--no-python", panel=P_PYTHON, key="no_python", help="Skip the Python setup."
        ),
        system_python: bool = opt(
            False,
            "--system-python",
            panel=P_PYTHON,
            key="system_python",
            help="Use the image's Python, no virtual environment.",
        ),
        python_version: str | None = opt(
            None,
            "--python-version",
            panel=P_PYTHON,
            metavar="X.Y",
            key="python_version",
            help="Python version for the environment.",
        ),
        uv_extra: list[str] | None = opt(
            None,
            "--uv-extra",
            panel=P_PYTHON,
            metavar="EXTRA",
            key="uv_extras",
            help="Install this extra of the project (repeatable).",
        ),
        uv_all_extras: bool = opt(
            False,
            "--uv-all-extras",
            panel=P_PYTHON,
            key="uv_all_extras",
            help="Install all extras of the project.",
        ),
        uv_no_extras: bool = opt(
            False, "--uv-no-extras", panel=P_PYTHON, help="Install no extras (overrides the config)."
        ),
        torch_backend: str | None = opt(
            None,
            "--torch-backend",
            panel=P_PYTHON,
            metavar="NAME",
            key="torch_backend",
            help="uv's torch backend, e.g. cu128, cpu, auto.",
        ),
        uv_cache_dir: str | None = opt(
            None,
            "--uv-cache-dir",
            panel=P_PYTHON,
            metavar="/PATH",
            key="uv_cache_dir",
            help="uv cache directory in the job.",
        ),
    ) -> None:
        """Launch the committed, pushed state of this repository as a job.

        Everything after `--` is the command, passed to the job exactly as given.
        Defaults come from [tool.launchkit] in pyproject.toml, the user config file and LAUNCHKIT_*
        variables (the command line wins); `[default: ...]` shows where one came from.
        """
        from launchkit.launch import launch

        given = {k: v for k, v in locals().items() if k != "extra"}
        launch(given, extra=extra or [], command=state.user_command)
