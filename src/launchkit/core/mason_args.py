"""mason.py's command line (allenai/open-instruct e6c3044): its argparse parser, plus launchkit's own
launch flags, and the flags it parses. Light (argparse, no request models): `launchkit mason --help`
prints this parser's help (cli/mason_cmd.py); core/mason.py translates the parsed flags."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from launchkit.errors import UsageError


@dataclass(frozen=True)
class MasonArgs:
    """mason.py's parsed flags (its argparse namespace), plus launchkit's own launch flags."""

    cluster: list[str]
    hostname: list[str] | None = None
    max_retries: int = 0
    budget: str | None = None
    gpus: int = 0
    shared_memory: str = "10.24gb"
    num_nodes: int = 1
    image: str = "ai2/cuda11.8-cudnn8-dev-ubuntu20.04"
    workspace: str | None = None
    beaker_datasets: list[tuple[str, str]] = field(default_factory=list)  # (mount path, dataset id)
    description: str = "Beaker-Mason job."
    task_name: str = "beaker_mason"
    priority: str = "normal"
    preemptible: bool = False
    pure_docker_mode: bool = False
    mount_docker_socket: bool = False
    no_hf_cache_env: bool = False
    no_mount_nfs: bool = False
    non_resumable: bool = False
    no_auto_dataset_cache: bool = False
    auto_output_dir_path: str = "/weka/oe-adapt-default/allennlp/deletable_checkpoint"
    auto_checkpoint_state_dir: str = "/weka/oe-adapt-default/allennlp/deletable_checkpoint_states"
    artifact_ttl: str | None = None
    env: list[tuple[str, str]] = field(default_factory=list)
    secret: list[tuple[str, str]] = field(default_factory=list)
    no_host_networking: bool = False
    timeout: str | None = None
    # launchkit's own (hyphenated; mason has none of these)
    dry_run: bool = False
    offline: bool = False
    save_spec: str | None = None
    follow: bool = False
    env_not_secret: list[str] = field(default_factory=list)
    allow_dirty: bool = False


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"mason: {message}", hint="see `launchkit mason --help`")


def _pair(kind: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> tuple[str, str]:
        name, sep, value = text.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"{text!r} must look like NAME={kind}")
        if not name:
            raise argparse.ArgumentTypeError(f"{text!r}: the name before '=' is empty")
        return name, value

    return parse


def _dataset(text: str) -> tuple[str, str]:
    parts = text.split(":")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{text!r} must look like MOUNT_PATH:BEAKER_DATASET_ID")
    return parts[0], parts[1]


def parser(run_name: str | None = None) -> argparse.ArgumentParser:
    """mason.py's `get_args()` parser (same flags, types, defaults), plus launchkit's launch flags."""
    p = _Parser(prog="launchkit mason", add_help=False)
    a = p.add_argument
    a("--cluster", type=str, nargs="+", required=True, help="Beaker clusters the job may run on.")
    a("--hostname", type=str, nargs="+", default=None, help="Hostnames instead of --cluster constraints.")
    a("--max_retries", type=int, default=0, help="Task retries.")
    a("--budget", type=str, default=None, help="Budget (default: the workspace's).")
    a("--gpus", type=int, default=0, help="GPUs per node.")
    a("--shared_memory", type=str, default="10.24gb", help="Shared memory size.")
    a("--num_nodes", type=int, default=1, help="Nodes (replicas).")
    a("--image", type=str, default="ai2/cuda11.8-cudnn8-dev-ubuntu20.04", help="Beaker image.")
    a("--workspace", type=str, default=None, help="Beaker workspace (default: your default).")
    a("--beaker_datasets", nargs="*", type=_dataset, default=[], help="MOUNT_PATH:DATASET_ID ...")
    a("--description", type=str, default=run_name or "Beaker-Mason job.", help="Experiment description.")
    a("--task_name", type=str, default="beaker_mason", help="Task name (tasks are NAME__i).")
    a("--priority", type=str, default="normal", help="low, normal, high, urgent or immediate.")
    for flag, what in (
        ("--preemptible", "Run as preemptible."),
        ("--pure_docker_mode", "No PATH env var (launchkit never cds into the launching directory)."),
        ("--mount_docker_socket", "Mount the host's /var/run/docker.sock."),
        ("--no_hf_cache_env", "Deprecated by mason: does nothing."),
        ("--no_mount_nfs", "Deprecated by mason: does nothing."),
        ("--non_resumable", "No fixed W&B run id / checkpoint-state dir for grpo jobs."),
        ("--no_auto_dataset_cache", "Skip the local `--cache_dataset_only` run."),
    ):
        a(flag, action="store_true", help=what)
    a("--auto_output_dir_path", type=str, default=MasonArgs.auto_output_dir_path, help="--output_dir prefix.")
    a(
        "--auto_checkpoint_state_dir",
        type=str,
        default=MasonArgs.auto_checkpoint_state_dir,
        help="--checkpoint_state_dir prefix.",
    )
    a("--artifact_ttl", type=str, default=None, help="Append tmp-TTL to the automatic dirs.")
    a("--env", type=_pair("value"), action="append", default=[], help="NAME=value (repeatable).")
    a("--secret", type=_pair("SECRET"), action="append", default=[], help="NAME=SECRET (repeatable).")
    a("--no-host-networking", action="store_true", help="No host networking.")
    a("--timeout", type=str, default=None, help="Task timeout, e.g. 15m, 2h30m.")
    # launchkit's own
    a("--dry-run", action="store_true", help="launchkit: print the spec, submit nothing.")
    a("--offline", action="store_true", help="launchkit: with --dry-run, do not ask Beaker.")
    a("--save-spec", metavar="FILE", default=None, help="launchkit: also write the spec to FILE.")
    a("--follow", action="store_true", help="launchkit: wait for the job and stream its logs.")
    a(
        "--env-not-secret",
        metavar="NAME",
        action="append",
        default=[],
        help="launchkit: keep --env NAME's value although it looks like a secret (repeatable).",
    )
    a(
        "--allow-dirty",
        action="store_true",
        help="launchkit: launch the last pushed commit despite uncommitted changes (the default here; "
        "a warning names them).",
    )
    return p
