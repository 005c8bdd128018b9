"""`run`'s options, each declared once: flags, kind, help panel, help text, metavar and config key.

The Typer command (cli/run_cmd.py), the config-key lookup in launchkit.core.parse and the
docs table (docs/gen_run_reference.py) are all built from `RUN_OPTIONS`; a new option is one row
here plus its validation in core/parse.py. Import-free on purpose: `launchkit --help` loads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable


class Kind(Enum):
    """The value an option collects (raw, unvalidated: core/parse.py validates)."""

    STR = "str"
    LIST = "list"  # repeatable
    INT = "int"
    FLOAT = "float"
    FLAG = "flag"  # --x: False means "not given"
    TRISTATE = "tristate"  # --x/--no-x: False is an answer, None means "not given"


STR, LIST, INT, FLOAT, FLAG, TRISTATE = Kind.STR, Kind.LIST, Kind.INT, Kind.FLOAT, Kind.FLAG, Kind.TRISTATE


def number(kind: Callable[[str], Any], value: Any) -> Any:
    """A whole (`kind` int) or decimal (float) number option's value as given: the number, or its
    digits as text; ValueError naming what it must be. The CLI (cli/params.py) and the Python API."""
    if type(value) is kind or (kind is float and type(value) is int):
        number = kind(value)
    else:
        try:
            number = kind(value.strip()) if isinstance(value, str) else None
        except ValueError:
            number = None
    if number is None or (kind is float and not math.isfinite(number)):
        raise ValueError("not a whole number" if kind is int else "not a number")
    return number


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


class BackendChoice(NamedTuple):
    """The registered backends (launchkit.backends.registry), given to the parser by the CLI: the core
    names no backend. Without it, `--backend` is taken as given and checked when the backend loads."""

    known: tuple[str, ...] = ()
    here: str = ""  # the backend `--local` means


@dataclass(frozen=True)
class Opt:
    name: str  # the parameter name, and the key of the raw values dict parse.build_request takes
    kind: Kind
    flags: tuple[str, ...]
    panel: str
    metavar: str | None = None
    key: str | None = None  # config key ([tool.launchkit], LAUNCHKIT_*): a configurable default
    help: str = ""
    # gantry 3.7.0's spellings launchkit has a better name for: accepted, hidden from help
    aliases: tuple[str, ...] = ()
    # a gantry option launchkit does not do: given, it is refused with this reason (exit 2)
    refuse: str | None = None
    # a spelling gantry removed before 3.7: given, it means the option named here (None: nothing),
    # with one deprecation line naming the 3.7 spelling (cli/launching.py)
    deprecated: str | None = None
    means: str | None = None  # the RUN_OPTIONS name it stands for

    @property
    def hidden(self) -> bool:
        return self.refuse is not None or self.deprecated is not None

    @property
    def flag(self) -> str:
        """The long flag, e.g. `--gpu-type` (`--preemptible` for `--preemptible/--not-preemptible`)."""
        return self.flags[0].split("/")[0]


RUN_OPTIONS: tuple[Opt, ...] = (
    Opt(
        "name",
        STR,
        ("--name", "-n"),
        P_WORKLOAD,
        metavar="NAME",
        help="Experiment name (letters, digits, . _ -).",
    ),
    Opt(
        "description",
        STR,
        ("--description", "-d"),
        P_WORKLOAD,
        metavar="TEXT",
        help="Experiment description.",
    ),
    Opt(
        "workspace",
        STR,
        ("--workspace", "-w"),
        P_WORKLOAD,
        metavar="ORG/NAME",
        key="workspace",
        help="Beaker workspace.",
    ),
    Opt(
        "budget", STR, ("--budget", "-b"), P_WORKLOAD, metavar="ORG/NAME", key="budget", help="Beaker budget."
    ),
    Opt(
        "group",
        LIST,
        ("--group",),
        P_WORKLOAD,
        metavar="NAME",
        key="groups",
        help="Add the experiment to a Beaker group (repeatable).",
    ),
    Opt(
        "backend",
        STR,
        ("--backend",),
        P_LAUNCH,
        metavar="beaker|local",
        key="backend",
        help="Where to run.  [default: beaker]",
    ),
    Opt("local", FLAG, ("--local",), P_LAUNCH, help="Run on this machine (= --backend local)."),
    Opt(
        "dry_run",
        FLAG,
        ("--dry-run",),
        P_LAUNCH,
        help="Print the spec `run` would submit (YAML) and exit. With Beaker credentials it resolves "
        "clusters, image, secrets, budget and the runtime dataset read-only: nothing is created or "
        "uploaded (what submit would create is named on stderr).",
    ),
    Opt(
        "offline",
        FLAG,
        ("--offline",),
        P_LAUNCH,
        help="With --dry-run: do not ask Beaker; clusters, image id, secrets and budget are left to submit.",
    ),
    Opt(
        "save_spec",
        STR,
        ("--save-spec",),
        P_LAUNCH,
        metavar="FILE",
        help="Also write the spec (YAML) to FILE, on real runs too.",
    ),
    Opt(
        "follow",
        TRISTATE,
        ("--follow/--no-follow", "-f"),
        P_LAUNCH,
        aliases=("--show-logs/--no-logs",),
        help="Wait for the job, streaming its logs (--no-follow: wait silently with --timeout).",
    ),
    Opt(
        "timeout",
        STR,
        ("--timeout",),
        P_LAUNCH,
        metavar="DURATION",
        help="Wait up to this long, then stop the job (0: don't wait, -1: wait until it ends).",
    ),
    Opt(
        "start_timeout",
        STR,
        ("--start-timeout",),
        P_LAUNCH,
        metavar="DURATION",
        help="While waiting: stop the job if it has not started within this long.",
    ),
    Opt(
        "inactive_timeout",
        STR,
        ("--inactive-timeout",),
        P_LAUNCH,
        metavar="DURATION",
        help="Stop the job after this long without output (checked where it runs, followed or not).",
    ),
    Opt(
        "inactive_soft_timeout",
        STR,
        ("--inactive-soft-timeout",),
        P_LAUNCH,
        metavar="DURATION",
        help="Warn in the job's log after this long without output.",
    ),
    Opt(
        "stall_timeout",
        STR,
        ("--stall-timeout",),
        P_LAUNCH,
        metavar="DURATION",
        help="Stop the job after this long without a progress line (checked where it runs); auto:"
        " from its step intervals.",
    ),
    Opt(
        "progress_pattern",
        LIST,
        ("--progress-pattern",),
        P_LAUNCH,
        metavar="REGEX",
        help="What a progress line matches, for --stall-timeout (repeatable).  [default: common trainers]",
    ),
    Opt(
        "stall_grace",
        STR,
        ("--stall-grace",),
        P_LAUNCH,
        metavar="DURATION",
        help="Extra time before the first progress line.  [default: 10m]",
    ),
    Opt(
        "allow_dirty",
        FLAG,
        ("--allow-dirty",),
        P_LAUNCH,
        help="Launch the last commit despite uncommitted changes to tracked files (a warning names them).",
    ),
    Opt("yes", FLAG, ("--yes", "-y"), P_LAUNCH, help="Never prompt."),
    Opt(
        "json_output",
        FLAG,
        ("--json",),
        P_LAUNCH,
        help="One JSON object on stdout: the plan, then the run's id and url (with --dry-run the plan "
        "and the spec); a refusal is a JSON object too.",
    ),
    *(
        Opt(
            name,
            LIST,
            (flag_,),
            P_LAUNCH,
            refuse="launchkit has no callbacks (gantry ran them only while it followed the job); "
            "use --follow and act on launchkit's exit code",
        )
        for name, flag_ in (
            ("callback_module", "--callback-module"),
            ("callback", "--callback"),
        )
    ),
    Opt(
        "slack_webhook_url",
        STR,
        ("--slack-webhook-url",),
        P_LAUNCH,
        metavar="URL",
        help="Post start/end/failure to Slack while following; a local run posts from where it runs "
        "(env LAUNCHKIT_SLACK_WEBHOOK_URL).",
    ),
    Opt(
        "slack_webhook_secret",
        STR,
        ("--slack-webhook-secret",),
        P_LAUNCH,
        metavar="NAME",
        key="slack_webhook_secret",
        help="Post to Slack from where the job runs, with the webhook in this secret "
        "(docs/notifications.md).",
    ),
    Opt(
        "notify_url",
        STR,
        ("--notify-url",),
        P_LAUNCH,
        metavar="URL",
        help="POST each of the run's events as JSON to URL from where the job runs (https, or http on "
        "127.0.0.1). The URL is in the spec in plain text: use --notify-secret for one that is a "
        "credential (docs/notifications.md).",
    ),
    Opt(
        "notify_secret",
        STR,
        ("--notify-secret",),
        P_LAUNCH,
        metavar="NAME",
        key="notify_secret",
        help="As --notify-url, with the URL in this secret: never in the spec, a log or the "
        "command's environment.",
    ),
    Opt(
        "cluster",
        LIST,
        ("--cluster", "-c"),
        P_CONSTRAINTS,
        metavar="NAME",
        key="clusters",
        help="Cluster name, alias or glob (repeatable).",
    ),
    Opt(
        "gpu_type",
        LIST,
        ("--gpu-type",),
        P_CONSTRAINTS,
        metavar="TYPE",
        key="gpu_types",
        help="Only clusters with this GPU type, e.g. h100.",
    ),
    Opt(
        "interconnect",
        STR,
        ("--interconnect",),
        P_CONSTRAINTS,
        metavar="ib|tcpxo",
        key="interconnect",
        help="Only clusters with this interconnect.",
    ),
    Opt(
        "tag",
        LIST,
        ("--tag",),
        P_CONSTRAINTS,
        metavar="TAG",
        key="tags",
        help="Only clusters with this tag (repeatable).",
    ),
    Opt(
        "hostname",
        LIST,
        ("--hostname",),
        P_CONSTRAINTS,
        metavar="HOST",
        help="Only these machines (not with cluster filters).",
    ),
    Opt("cpus", FLOAT, ("--cpus",), P_RESOURCES, metavar="N", key="cpus", help="CPUs, e.g. 8 or 0.5."),
    Opt("gpus", INT, ("--gpus",), P_RESOURCES, metavar="N", key="gpus", help="GPUs."),
    Opt("memory", STR, ("--memory",), P_RESOURCES, metavar="SIZE", key="memory", help="Memory, e.g. 64GiB."),
    Opt(
        "shared_memory",
        STR,
        ("--shared-memory",),
        P_RESOURCES,
        metavar="SIZE",
        key="shared_memory",
        help="/dev/shm size, e.g. 10GiB.",
    ),
    Opt(
        "beaker_image",
        STR,
        ("--beaker-image",),
        P_INPUTS,
        metavar="IMAGE",
        key="beaker_image",
        help="Beaker image name or id.  [default: beaker-py/gantry, as gantry]",
    ),
    Opt(
        "docker_image",
        STR,
        ("--docker-image",),
        P_INPUTS,
        metavar="IMAGE",
        key="docker_image",
        help="Docker image (instead of a Beaker image).",
    ),
    Opt(
        "dataset",
        LIST,
        ("--dataset",),
        P_INPUTS,
        metavar="NAME[:SUB]:/PATH",
        help="Mount a Beaker dataset (repeatable).",
    ),
    Opt(
        "mount",
        LIST,
        ("--mount", "-m"),
        P_INPUTS,
        metavar="HOST:/PATH[:ro]",
        help="Mount a path of the node (repeatable).",
    ),
    Opt(
        "weka",
        LIST,
        ("--weka",),
        P_INPUTS,
        metavar="BUCKET:/PATH[:ro]",
        help="Mount a Weka bucket (repeatable).",
    ),
    Opt(
        "upload",
        LIST,
        ("--upload", "-u"),
        P_INPUTS,
        metavar="LOCAL:/PATH",
        help="Upload a local file or directory and mount it (repeatable; reused if unchanged).",
    ),
    Opt(
        "env",
        LIST,
        ("--env", "-e"),
        P_INPUTS,
        metavar="NAME[=VALUE]",
        key="env",
        help="Set a variable; NAME alone copies its value from here.",
    ),
    Opt(
        "env_file",
        LIST,
        ("--env-file",),
        P_INPUTS,
        metavar="FILE",
        help="Set variables from a dotenv file (repeatable; --env wins; values checked as --env's).",
    ),
    Opt(
        "env_secret",
        LIST,
        ("--env-secret",),
        P_INPUTS,
        aliases=("--secret-env",),
        metavar="NAME[=SECRET]",
        key="env_secrets",
        help="Set a variable from a Beaker secret (by name only).",
    ),
    Opt(
        "env_not_secret",
        LIST,
        ("--env-not-secret",),
        P_INPUTS,
        metavar="NAME",
        key="env_not_secret",
        help="Keep --env NAME's value although it looks like a secret (a false positive; repeatable).",
    ),
    Opt(
        "no_auto_secrets",
        FLAG,
        ("--no-auto-secrets",),
        P_INPUTS,
        help="Don't add secrets a preset asks for (HF_TOKEN, ...) or GITHUB_TOKEN.",
    ),
    Opt(
        "git_token_secret",
        STR,
        ("--git-token-secret",),
        P_INPUTS,
        aliases=("--gh-token-secret",),
        metavar="SECRET",
        key="git_token_secret",
        help="Secret holding a token to clone a private repository.",
    ),
    Opt(
        "dataset_secret",
        LIST,
        ("--dataset-secret",),
        P_INPUTS,
        metavar="SECRET:/PATH",
        help="Mount a Beaker secret as a file at PATH (repeatable).",
    ),
    Opt(
        "aws_config_secret",
        STR,
        ("--aws-config-secret",),
        P_INPUTS,
        metavar="SECRET",
        key="aws_config_secret",
        help="Secret as the job's AWS config file (AWS_CONFIG_FILE; ~/.aws/config on Beaker).",
    ),
    Opt(
        "aws_credentials_secret",
        STR,
        ("--aws-credentials-secret",),
        P_INPUTS,
        metavar="SECRET",
        key="aws_credentials_secret",
        help="Secret as the job's AWS credentials (AWS_SHARED_CREDENTIALS_FILE; ~/.aws/credentials).",
    ),
    Opt(
        "google_credentials_secret",
        STR,
        ("--google-credentials-secret",),
        P_INPUTS,
        metavar="SECRET",
        key="google_credentials_secret",
        help="Secret as the job's Google credentials file (GOOGLE_APPLICATION_CREDENTIALS).",
    ),
    Opt(
        "results",
        STR,
        ("--results",),
        P_INPUTS,
        metavar="/PATH",
        key="results",
        help="Results directory in the job.  [default: /results]",
    ),
    Opt(
        "ref",
        STR,
        ("--ref",),
        P_GIT,
        metavar="REF",
        help="Launch this commit, tag or branch instead of HEAD.",
    ),
    Opt("branch", STR, ("--branch",), P_GIT, metavar="BRANCH", help="Launch the pushed tip of this branch."),
    Opt(
        "remote",
        STR,
        ("--remote",),
        P_GIT,
        metavar="NAME|URL",
        help="Remote (name or URL) the job fetches from.",
    ),
    Opt(
        "task_name",
        STR,
        ("--task-name", "-t"),
        P_TASK,
        metavar="NAME",
        key="task_name",
        help="Task name.  [default: main]",
    ),
    Opt(
        "multi",
        FLAG,
        ("--multi",),
        P_TASK,
        help="Every later `--` starts another command, run as its own task (write \\-- for a literal --).",
    ),
    Opt(
        "sweep",
        LIST,
        ("--sweep",),
        P_TASK,
        metavar="KEY=V1,V2",
        help="One task per combination of values (repeatable); {KEY} in the command is replaced.",
    ),
    Opt(
        "sweep_experiments",
        FLAG,
        ("--sweep-experiments",),
        P_TASK,
        help="With --sweep: one experiment per combination instead of one task each.",
    ),
    Opt(
        "priority",
        STR,
        ("--priority",),
        P_TASK,
        metavar="LEVEL",
        key="priority",
        help="low, normal, high, urgent or immediate.",
    ),
    Opt(
        "task_timeout",
        STR,
        ("--task-timeout",),
        P_TASK,
        metavar="DURATION",
        key="task_timeout",
        help="Stop the task after this long, e.g. 2h30m.",
    ),
    Opt(
        "min_runtime",
        STR,
        ("--min-runtime",),
        P_TASK,
        metavar="DURATION",
        key="min_runtime",
        help="Not preempted before this long.",
    ),
    Opt(
        "no_auto_resume",
        FLAG,
        ("--no-auto-resume",),
        P_TASK,
        help="Don't restart the task after a preemption.",
    ),
    Opt(
        "preemptible",
        TRISTATE,
        ("--preemptible/--not-preemptible",),
        P_TASK,
        key="preemptible",
        help="Deprecated by Beaker: prefer --min-runtime.",
    ),
    Opt(
        "retries",
        INT,
        ("--retries",),
        P_TASK,
        metavar="N",
        key="retries",
        help="Retry a failed task up to N times (with --retry-on: the cap, default 3).",
    ),
    Opt(
        "retry_on",
        LIST,
        ("--retry-on",),
        P_TASK,
        metavar="CAUSE",
        key="retry_on",
        help="Retry only on these causes (repeatable, or comma-separated): preemption, stalled,"
        " never-started, failure, exit:CODES (e.g. exit:29,75).",
    ),
    Opt(
        "require_resume",
        FLAG,
        ("--require-resume",),
        P_TASK,
        help="Stop a retried attempt that starts below the step the one before reached.",
    ),
    Opt("replicas", INT, ("--replicas",), P_MULTINODE, metavar="N", key="replicas", help="Number of nodes."),
    Opt(
        "leader_selection",
        TRISTATE,
        ("--leader-selection/--no-leader-selection",),
        P_MULTINODE,
        help="Elect a leader replica.",
    ),
    Opt(
        "host_networking",
        TRISTATE,
        ("--host-networking/--no-host-networking",),
        P_MULTINODE,
        help="Use the node's network.",
    ),
    Opt(
        "propagate_failure",
        TRISTATE,
        ("--propagate-failure/--no-propagate-failure",),
        P_MULTINODE,
        help="One replica fails: stop all.",
    ),
    Opt(
        "propagate_preemption",
        TRISTATE,
        ("--propagate-preemption/--no-propagate-preemption",),
        P_MULTINODE,
        help="One replica preempted: preempt all.",
    ),
    Opt(
        "synchronized_start_timeout",
        STR,
        ("--synchronized-start-timeout",),
        P_MULTINODE,
        metavar="DURATION",
        help="Wait this long for all replicas to start (with a launcher: 90s a replica, 5m-90m).",
    ),
    Opt("torchrun", FLAG, ("--torchrun",), P_MULTINODE, help="Run the command under torchrun."),
    Opt(
        "accelerate",
        FLAG,
        ("--accelerate",),
        P_MULTINODE,
        help="Run the command under accelerate launch (or give yours the topology).",
    ),
    Opt("ray", FLAG, ("--ray",), P_MULTINODE, help="Start a Ray cluster, run the command on the head."),
    Opt(
        "resumable",
        FLAG,
        ("--resumable",),
        P_MULTINODE,
        help="A new W&B run per launch, resumed across restarts.",
    ),
    Opt(
        "preset",
        LIST,
        ("--preset",),
        P_MULTINODE,
        metavar="NAME",
        key="presets",
        help="Turn on a preset (repeatable), e.g. ai2-oe or vllm; see `launchkit profiles --list`.",
    ),
    Opt(
        "profile",
        STR,
        ("--profile",),
        P_MULTINODE,
        metavar="NAME",
        key="profile",
        help="Cluster profile to apply.",
    ),
    Opt("no_profile", FLAG, ("--no-profile",), P_MULTINODE, help="Apply no cluster profile."),
    Opt(
        "skip_nccl_setup",
        FLAG,
        ("--skip-nccl-setup",),
        P_MULTINODE,
        aliases=("--skip-tcpxo-setup",),
        help="Don't set NCCL variables in the job.",
    ),
    Opt(
        "exec_method",
        STR,
        ("--exec-method",),
        P_RUNTIME,
        metavar="exec|bash",
        key="exec_method",
        help="exec the argv, or run it through bash -c.",
    ),
    Opt(
        "runtime_dir",
        STR,
        ("--runtime-dir",),
        P_RUNTIME,
        metavar="/PATH",
        key="runtime_dir",
        help="Where the job clones the repository.  [default: /launchkit-runtime]",
    ),
    Opt(
        "pre_setup",
        STR,
        ("--pre-setup",),
        P_RUNTIME,
        metavar="CMD",
        key="pre_setup",
        help="Shell command (or .sh file) before the Python setup.",
    ),
    Opt(
        "post_setup",
        STR,
        ("--post-setup",),
        P_RUNTIME,
        metavar="CMD",
        key="post_setup",
        help="Shell command (or .sh file) after the Python setup.",
    ),
    Opt(
        "install",
        STR,
        ("--install",),
        P_PYTHON,
        metavar="CMD",
        key="install",
        help="Replace the install step with this command.",
    ),
    Opt(
        "python_manager",
        STR,
        ("--python-manager",),
        P_PYTHON,
        metavar="uv|conda",
        key="python_manager",
        help="Who builds the environment.  [default: uv; conda with --conda-file/--conda-env]",
    ),
    Opt(
        "conda_file",
        STR,
        ("--conda-file",),
        P_PYTHON,
        metavar="FILE",
        key="conda_file",
        help="Conda environment file in the repository (environment.yml).",
    ),
    Opt(
        "conda_env",
        STR,
        ("--conda-env",),
        P_PYTHON,
        metavar="NAME|/PATH",
        key="conda_env",
        help="Existing conda environment in the image to use (updated from --conda-file).",
    ),
    Opt(
        "uv_venv",
        STR,
        ("--uv-venv",),
        P_PYTHON,
        metavar="/PATH",
        key="uv_venv",
        help="Existing virtual environment in the image to install into.",
    ),
    Opt("no_python", FLAG, ("--no-python",), P_PYTHON, key="no_python", help="Skip the Python setup."),
    Opt(
        "no_preflight",
        FLAG,
        ("--no-preflight",),
        P_PYTHON,
        key="no_preflight",
        help="Do not resolve the job's environment for Linux before submitting to Beaker.",
    ),
    Opt(
        "system_python",
        FLAG,
        ("--system-python",),
        P_PYTHON,
        key="system_python",
        help="Use the image's Python, no virtual environment.",
    ),
    Opt(
        "python_version",
        STR,
        ("--python-version",),
        P_PYTHON,
        aliases=("--default-python-version",),
        metavar="X.Y",
        key="python_version",
        help="Python version for the environment (3.8 or newer).",
    ),
    Opt(
        "uv_extra",
        LIST,
        ("--uv-extra",),
        P_PYTHON,
        metavar="EXTRA",
        key="uv_extras",
        help="Install this extra of the project (repeatable).",
    ),
    Opt(
        "uv_all_extras",
        FLAG,
        ("--uv-all-extras",),
        P_PYTHON,
        key="uv_all_extras",
        help="Install all extras of the project (the default without --uv-extra).",
    ),
    Opt(
        "uv_no_extras", FLAG, ("--uv-no-extras",), P_PYTHON, help="Install no extras (overrides the config)."
    ),
    Opt(
        "uv_group",
        LIST,
        ("--uv-group",),
        P_PYTHON,
        metavar="GROUP",
        key="uv_groups",
        help="Install this dependency group ([dependency-groups], PEP 735) too (repeatable).",
    ),
    Opt(
        "uv_all_groups",
        FLAG,
        ("--uv-all-groups",),
        P_PYTHON,
        key="uv_all_groups",
        help="Install all dependency groups of the project.",
    ),
    Opt(
        "uv_no_default_groups",
        FLAG,
        ("--uv-no-default-groups",),
        P_PYTHON,
        key="uv_no_default_groups",
        help="Skip the default groups (dev, or [tool.uv] default-groups); only --uv-group ones.",
    ),
    Opt(
        "torch_backend",
        STR,
        ("--torch-backend",),
        P_PYTHON,
        aliases=("--uv-torch-backend",),
        metavar="NAME",
        key="torch_backend",
        help="uv's torch backend, e.g. cu128, cpu, auto.",
    ),
    Opt(
        "uv_cache_dir",
        STR,
        ("--uv-cache-dir",),
        P_PYTHON,
        metavar="/PATH",
        key="uv_cache_dir",
        help="uv cache directory in the job.",
    ),
    # Spellings gantry removed before 3.7 (its CHANGELOG), still in scripts: where 3.7 has the meaning,
    # accepted with a deprecation line; where it has none, refused with the migration.
    Opt("old_venv", STR, ("--venv",), P_PYTHON, deprecated="use --conda-env (gantry 3.0)", means="conda_env"),
    Opt(
        "old_conda",
        STR,
        ("--conda",),
        P_PYTHON,
        deprecated="use --conda-file (gantry 3.0)",
        means="conda_file",
    ),
    Opt(
        "old_no_conda",
        FLAG,
        ("--no-conda",),
        P_PYTHON,
        deprecated="use --system-python (gantry 3.0 replaced it)",
        means="system_python",
    ),
    Opt(
        "old_no_nfs",
        FLAG,
        ("--no-nfs",),
        P_INPUTS,
        deprecated="drop it: gantry 1.12.2 removed NFS, nothing mounts it any more",
    ),
    Opt(
        "old_nfs",
        FLAG,
        ("--nfs",),
        P_INPUTS,
        refuse="gantry 1.12.2 removed the NFS mount and the cirrascale NFS is gone; "
        "mount storage with --weka BUCKET:/PATH or --mount HOST_PATH:/PATH",
    ),
    Opt(
        "old_pip",
        STR,
        ("--pip",),
        P_PYTHON,
        refuse='gantry 3.0 removed it; install a requirements file with --install "pip install -r FILE" '
        "(or list it in your project's dependencies)",
    ),
    Opt(
        "old_stop_preemptible",
        FLAG,
        ("--stop-preemptible",),
        P_TASK,
        refuse="gantry removed it before 3.7 and nothing replaces it; drop it "
        "(--priority high or urgent gets a job scheduled sooner)",
    ),
)

# Request fields that say how launchkit launches, not what the job is: left out of the run's id
# (core/spec.run_id), so they change neither it nor what derives from it (the rendezvous port).
# `placed_clusters` is the backend's answer for the same request. tests/test_run_identity.py checks
# both ways: each of these leaves the id and the spec alone, every other field changes the spec.
LAUNCH_ONLY = frozenset(
    {
        "dry_run",
        "offline",
        "save_spec",
        "follow",
        "show_logs",
        "timeout",
        "start_timeout",
        "yes",
        "json_output",
        "backend",
        "local",
        "placed_clusters",
        "slack_webhook_url",
        "allow_dirty",
        "no_preflight",
    }
)

BY_NAME: dict[str, Opt] = {o.name: o for o in RUN_OPTIONS}
CONFIG_KEYS: dict[str, str] = {o.flag: o.key for o in RUN_OPTIONS if o.key}  # long flag -> config key
TRISTATE_OPTIONS = frozenset(o.name for o in RUN_OPTIONS if o.kind is Kind.TRISTATE)
# gantry spellings hidden from `run --help` (each an alias of a launchkit name)
ALIAS_FLAGS = frozenset(f for o in RUN_OPTIONS for decl in o.aliases for f in decl.split("/"))


def config_key(name: str) -> str:
    """The config key holding a default for option (or setting) `name`."""
    opt = BY_NAME.get(name)
    return (opt.key if opt is not None and opt.key else None) or name
