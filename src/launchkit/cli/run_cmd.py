"""`launchkit run [OPTIONS] -- COMMAND...`: launch the committed and pushed repo state as a job."""

from __future__ import annotations

from typing import Optional

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


def _defaults() -> dict[str, tuple[object, str]]:
    from launchkit.config import help_defaults

    return help_defaults()


def register(app: typer.Typer) -> None:
    defaults = _defaults()

    def _src(key: str) -> dict[str, object]:
        """Show a configured default and where it came from in `run --help`."""
        if key not in defaults:
            return {}
        value, label = defaults[key]
        if isinstance(value, dict):
            value = " ".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            value = ", ".join(map(str, value))
        elif isinstance(value, bool):
            value = str(value).lower()
        return {"show_default": f"{value} (from {label})"}

    @app.command("run", context_settings={"help_option_names": ["-h", "--help"]})
    def run(
        extra: Optional[list[str]] = typer.Argument(None, hidden=True),
        # workload
        name: Optional[str] = typer.Option(None, "--name", "-n", help="Experiment name.", rich_help_panel=P_WORKLOAD),
        description: Optional[str] = typer.Option(None, "--description", "-d", rich_help_panel=P_WORKLOAD),
        workspace: Optional[str] = typer.Option(None, "--workspace", "-w", help="Beaker workspace (org/name).",
                                                rich_help_panel=P_WORKLOAD, **_src("workspace")),
        budget: Optional[str] = typer.Option(None, "--budget", "-b", help="Beaker budget (org/name).",
                                             rich_help_panel=P_WORKLOAD, **_src("budget")),
        group: Optional[list[str]] = typer.Option(None, "--group", help="Add to a Beaker group (repeatable).",
                                                  rich_help_panel=P_WORKLOAD, **_src("groups")),
        # launch
        backend: Optional[str] = typer.Option(None, "--backend", help="beaker or local.", rich_help_panel=P_LAUNCH, **_src("backend")),
        local: bool = typer.Option(False, "--local", help="Shortcut for --backend local.", rich_help_panel=P_LAUNCH),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the Beaker spec (YAML) and exit. Offline.",
                                     rich_help_panel=P_LAUNCH),
        save_spec: Optional[str] = typer.Option(None, "--save-spec", help="Also write the spec to FILE.",
                                                rich_help_panel=P_LAUNCH),
        follow: bool = typer.Option(False, "--follow", "-f", help="Follow the job after submitting.",
                                    rich_help_panel=P_LAUNCH),
        allow_dirty: bool = typer.Option(False, "--allow-dirty", help="Launch despite uncommitted changes.",
                                         rich_help_panel=P_LAUNCH),
        yes: bool = typer.Option(False, "--yes", "-y", help="Never prompt.", rich_help_panel=P_LAUNCH),
        # constraints
        cluster: Optional[list[str]] = typer.Option(None, "--cluster", "-c", help="Cluster name, alias or glob.",
                                                    rich_help_panel=P_CONSTRAINTS, **_src("clusters")),
        gpu_type: Optional[list[str]] = typer.Option(None, "--gpu-type", rich_help_panel=P_CONSTRAINTS, **_src("gpu_types")),
        interconnect: Optional[str] = typer.Option(None, "--interconnect", help="ib or tcpxo.",
                                                   rich_help_panel=P_CONSTRAINTS, **_src("interconnect")),
        tag: Optional[list[str]] = typer.Option(None, "--tag", help="Required cluster tag.",
                                                rich_help_panel=P_CONSTRAINTS, **_src("tags")),
        hostname: Optional[list[str]] = typer.Option(None, "--hostname", rich_help_panel=P_CONSTRAINTS),
        # resources
        cpus: Optional[float] = typer.Option(None, "--cpus", rich_help_panel=P_RESOURCES, **_src("cpus")),
        gpus: Optional[int] = typer.Option(None, "--gpus", rich_help_panel=P_RESOURCES, **_src("gpus")),
        memory: Optional[str] = typer.Option(None, "--memory", help="e.g. 64GiB.", rich_help_panel=P_RESOURCES, **_src("memory")),
        shared_memory: Optional[str] = typer.Option(None, "--shared-memory", help="e.g. 10GiB.",
                                                    rich_help_panel=P_RESOURCES, **_src("shared_memory")),
        # inputs
        beaker_image: Optional[str] = typer.Option(None, "--beaker-image", rich_help_panel=P_INPUTS, **_src("beaker_image")),
        docker_image: Optional[str] = typer.Option(None, "--docker-image", rich_help_panel=P_INPUTS, **_src("docker_image")),
        dataset: Optional[list[str]] = typer.Option(None, "--dataset", help="NAME[:SUBPATH]:/MOUNT.",
                                                    rich_help_panel=P_INPUTS),
        mount: Optional[list[str]] = typer.Option(None, "--mount", "-m", help="HOST_PATH:/MOUNT.",
                                                  rich_help_panel=P_INPUTS),
        weka: Optional[list[str]] = typer.Option(None, "--weka", help="BUCKET:/MOUNT.", rich_help_panel=P_INPUTS),
        upload: Optional[list[str]] = typer.Option(None, "--upload", "-u", help="LOCAL_PATH:/MOUNT.",
                                                   rich_help_panel=P_INPUTS),
        env: Optional[list[str]] = typer.Option(None, "--env", "-e", help="NAME=VALUE, or NAME to copy it from here.",
                                                rich_help_panel=P_INPUTS, **_src("env")),
        env_secret: Optional[list[str]] = typer.Option(None, "--env-secret", help="NAME=SECRET, or NAME.",
                                                       rich_help_panel=P_INPUTS, **_src("env_secrets")),
        no_auto_secrets: bool = typer.Option(False, "--no-auto-secrets",
                                             help="Don't add well-known secrets (HF_TOKEN, ...).",
                                             rich_help_panel=P_INPUTS),
        git_token_secret: Optional[str] = typer.Option(None, "--git-token-secret",
                                                       help="Secret with a token for private repos.",
                                                       rich_help_panel=P_INPUTS, **_src("git_token_secret")),
        results: Optional[str] = typer.Option(None, "--results", help="Results directory in the job.",
                                              rich_help_panel=P_INPUTS, **_src("results")),
        # git
        ref: Optional[str] = typer.Option(None, "--ref", help="Launch this commit/ref.", rich_help_panel=P_GIT),
        branch: Optional[str] = typer.Option(None, "--branch", rich_help_panel=P_GIT),
        remote: Optional[str] = typer.Option(None, "--remote", help="Remote name or URL.", rich_help_panel=P_GIT),
        # task
        task_name: Optional[str] = typer.Option(None, "--task-name", "-t", rich_help_panel=P_TASK, **_src("task_name")),
        priority: Optional[str] = typer.Option(None, "--priority", help="low|normal|high|urgent|immediate.",
                                               rich_help_panel=P_TASK, **_src("priority")),
        task_timeout: Optional[str] = typer.Option(None, "--task-timeout", rich_help_panel=P_TASK, **_src("task_timeout")),
        min_runtime: Optional[str] = typer.Option(None, "--min-runtime", rich_help_panel=P_TASK, **_src("min_runtime")),
        no_auto_resume: bool = typer.Option(False, "--no-auto-resume", rich_help_panel=P_TASK),
        preemptible: Optional[bool] = typer.Option(None, "--preemptible/--not-preemptible", rich_help_panel=P_TASK, **_src("preemptible")),
        retries: Optional[int] = typer.Option(None, "--retries", rich_help_panel=P_TASK, **_src("retries")),
        # multi-node
        replicas: Optional[int] = typer.Option(None, "--replicas", rich_help_panel=P_MULTINODE, **_src("replicas")),
        leader_selection: Optional[bool] = typer.Option(None, "--leader-selection/--no-leader-selection",
                                                        rich_help_panel=P_MULTINODE),
        host_networking: Optional[bool] = typer.Option(None, "--host-networking/--no-host-networking",
                                                       rich_help_panel=P_MULTINODE),
        propagate_failure: Optional[bool] = typer.Option(None, "--propagate-failure/--no-propagate-failure",
                                                         rich_help_panel=P_MULTINODE),
        propagate_preemption: Optional[bool] = typer.Option(
            None, "--propagate-preemption/--no-propagate-preemption", rich_help_panel=P_MULTINODE),
        synchronized_start_timeout: Optional[str] = typer.Option(None, "--synchronized-start-timeout",
                                                                 rich_help_panel=P_MULTINODE),
        torchrun: bool = typer.Option(False, "--torchrun", rich_help_panel=P_MULTINODE),
        accelerate: bool = typer.Option(False, "--accelerate", rich_help_panel=P_MULTINODE),
        ray: bool = typer.Option(False, "--ray", rich_help_panel=P_MULTINODE),
        resumable: bool = typer.Option(False, "--resumable", help="Stable WANDB_RUN_ID across restarts.",
                                       rich_help_panel=P_MULTINODE),
        profile: Optional[str] = typer.Option(None, "--profile", help="Cluster profile to apply.",
                                              rich_help_panel=P_MULTINODE, **_src("profile")),
        no_profile: bool = typer.Option(False, "--no-profile", rich_help_panel=P_MULTINODE),
        skip_nccl_setup: bool = typer.Option(False, "--skip-nccl-setup", rich_help_panel=P_MULTINODE),
        # runtime
        exec_method: Optional[str] = typer.Option(None, "--exec-method", help="exec or bash.",
                                                  rich_help_panel=P_RUNTIME, **_src("exec_method")),
        pre_setup: Optional[str] = typer.Option(None, "--pre-setup", rich_help_panel=P_RUNTIME, **_src("pre_setup")),
        post_setup: Optional[str] = typer.Option(None, "--post-setup", rich_help_panel=P_RUNTIME, **_src("post_setup")),
        # python
        install: Optional[str] = typer.Option(None, "--install", help="Replace the install step.",
                                              rich_help_panel=P_PYTHON, **_src("install")),
        no_python: bool = typer.Option(False, "--no-python", rich_help_panel=P_PYTHON, **_src("no_python")),
        system_python: bool = typer.Option(False, "--system-python", rich_help_panel=P_PYTHON, **_src("system_python")),
        python_version: Optional[str] = typer.Option(None, "--python-version", rich_help_panel=P_PYTHON, **_src("python_version")),
        uv_extra: Optional[list[str]] = typer.Option(None, "--uv-extra", rich_help_panel=P_PYTHON, **_src("uv_extras")),
        uv_all_extras: bool = typer.Option(False, "--uv-all-extras", rich_help_panel=P_PYTHON, **_src("uv_all_extras")),
        uv_no_extras: bool = typer.Option(False, "--uv-no-extras", rich_help_panel=P_PYTHON),
        torch_backend: Optional[str] = typer.Option(None, "--torch-backend", rich_help_panel=P_PYTHON, **_src("torch_backend")),
        uv_cache_dir: Optional[str] = typer.Option(None, "--uv-cache-dir", rich_help_panel=P_PYTHON, **_src("uv_cache_dir")),
    ) -> None:
        """Launch the committed, pushed state of this repository as a job: [bold]launchkit run -- CMD...[/]"""
        from launchkit.launch import launch

        given = {k: v for k, v in locals().items() if k not in ("extra", "defaults", "_src")}
        launch(given, extra=extra or [], command=state.user_command)
