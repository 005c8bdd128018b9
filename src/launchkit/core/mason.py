"""`launchkit mason`: open-instruct's `mason.py` command line -> a launchkit request. Pure: no I/O.

Mirrors mason.py at allenai/open-instruct e6c3044 (docs/from-mason.md): the same parser (argparse,
abbreviations included), the same command rewrites (`--hf_entity`/`--wandb_entity`, the Weka
`--output_dir` and `--checkpoint_state_dir`, multi-node `--num_processes`, quoting of `</` and `{`
words), the same spec fields (results at /output, 10.24gb shared memory, host networking, one task per
`--` command). Team conventions (mason's default env, well-known secrets, Weka caches and mounts) come
from the `open-instruct` preset (core/presets.py), not from here. What needs the launching machine
(the Beaker user, the clock, the dataset-cache run) is passed in or done by cli/mason_body.py. mason's
parser and its parsed flags are core/mason_args.py (`launchkit mason --help` loads only that).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from launchkit.core.contract import reserved_env
from launchkit.core.mason_args import MasonArgs, parser
from launchkit.core.parse import ENV_NAME, NAME, SECRET
from launchkit.core.profiles import BUILTIN_PROFILES
from launchkit.core.redact import refuse_secret_value
from launchkit.core.request import (
    DatasetMount,
    EnvSecret,
    EnvVar,
    ExecMethod,
    HostMount,
    LaunchRequest,
    Priority,
)
from launchkit.core.units import UnitError, parse_duration, parse_size
from launchkit.errors import UsageError

MASON_COMMIT = "e6c3044aa6201c8bfa4573c1b03142af599e730d"  # the mason.py this mirrors
PRESET = "open-instruct"

OPEN_INSTRUCT_COMMANDS = (
    "open_instruct/finetune.py",
    "open_instruct/dpo.py",
    "open_instruct/dpo_tune_cache.py",
    "open_instruct/grpo.py",
    "open_instruct/grpo_fast.py",
    "open_instruct/reward_modeling.py",
)
OPEN_INSTRUCT_RESUMABLES = ("open_instruct/grpo.py", "open_instruct/grpo_fast.py")
CACHE_EXCLUDED_ARGS = {  # flag -> takes a value
    "--with_tracking": False,
    "--checkpoint_state_freq": True,
    "--checkpoint_state_dir": True,
    "--gs_checkpoint_state_dir": True,
}
INTERCONNECT_CLUSTERS = ("ai2/jupiter", "ai2/ceres", "ai2/titan", "ai2/holmes")  # launch_utils.py
NO_EVAL = (
    "--try_launch_beaker_eval_jobs False",
    "--try_launch_beaker_eval_jobs_on_weka False",
    "--no_try_launch_beaker_eval_jobs",
    "--no_try_launch_beaker_eval_jobs_on_weka",
)
CHECKPOINT_OUTPUT_DIR = "/weka/oe-adapt-default/allennlp/deletable_checkpoint_states"
WANDB_PASS_THROUGH = ("WANDB_ENTITY", "WANDB_PROJECT", "WANDB_TAGS")
EXTERNAL_USER = "external_user"
RESULTS_DIR = "/output"
ACCELERATE_PORT = 29400


def parse_args(argv: list[str], *, run_name: str | None = None) -> MasonArgs:
    """mason's flags (everything before the first `--`). Unknown flags are usage errors: mason too
    refuses them (its command must start at `--`)."""
    ns, unknown = parser(run_name).parse_known_args(argv)
    if unknown:
        raise UsageError(
            f"{unknown[0]!r} is not a mason option",
            hint="put the command after `--` (launchkit mason [MASON OPTIONS] -- COMMAND)",
        )
    args = MasonArgs(**vars(ns))
    if args.priority not in {p.value for p in Priority}:
        raise UsageError(
            f"--priority {args.priority!r}: unknown priority",
            hint="use low, normal, high, urgent or immediate",
        )
    for flag, value in (("--gpus", args.gpus), ("--max_retries", args.max_retries)):
        if value < 0:
            raise UsageError(f"{flag} {value}: must not be negative", hint=f"give e.g. {flag} 1")
    if args.num_nodes < 1:
        raise UsageError(f"--num_nodes {args.num_nodes}: must be at least 1", hint="give e.g. --num_nodes 2")
    if args.offline and not args.dry_run:
        raise UsageError("--offline needs --dry-run", hint="add --dry-run, or drop --offline")
    if not NAME.fullmatch(args.task_name):
        raise UsageError(
            f"--task_name {args.task_name!r}: is not a valid task name",
            hint="use letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
    if not args.image.strip() or any(c.isspace() for c in args.image):
        raise UsageError(
            f"--image {args.image!r}: is not an image name",
            hint="give a Beaker image such as ai2/cuda11.8-cudnn8-dev-ubuntu20.04, or omit --image",
        )
    for opt, pairs in (("--env", args.env), ("--secret", args.secret)):
        for name, text in pairs:
            if not ENV_NAME.fullmatch(name):
                raise UsageError(
                    f"{opt} {name!r}: is not a valid environment variable name",
                    hint="use letters, digits and '_', not starting with a digit",
                )
            if reserved_env(name):  # launchkit's own (the pinned commit, the Slack webhook, ...)
                raise UsageError(
                    f"{opt} {name!r}: is set by launchkit itself",
                    hint="use the matching mason option instead",
                )
            if opt == "--secret" and not SECRET.fullmatch(text):
                raise UsageError(
                    f"--secret {name}={text!r}: is not a valid secret name",
                    hint="use letters, digits, '.', '_' or '-'",
                )
    return args


def split_commands(tokens: list[str] | None) -> list[list[str]]:
    """mason's `parse_commands` on what follows the first `--`: one command per `--`, empty ones dropped."""
    commands: list[list[str]] = []
    current: list[str] = []
    for token in tokens or []:
        if token == "--":
            if current:
                commands.append(current)
                current = []
        else:
            current.append(token)
    if current:
        commands.append(current)
    if not commands:
        raise UsageError(
            "no command after `--`", hint="e.g. launchkit mason --cluster ai2/jupiter -- python train.py"
        )
    return commands


def is_weka(cluster: str) -> bool:
    """A cluster of the ai2-weka profile (mason's WEKA_CLUSTERS, the same nine)."""
    return any(fnmatchcase(cluster.lower(), p.lower()) for p in BUILTIN_PROFILES["ai2-weka"].clusters)


def is_resumable(args: MasonArgs, commands: list[list[str]]) -> bool:
    return not args.non_resumable and any(t in c for c in commands for t in OPEN_INSTRUCT_RESUMABLES)


def is_training(command: list[str]) -> bool:
    return any(c in command for c in OPEN_INSTRUCT_COMMANDS)


def without_args(command: list[str], remove: Mapping[str, bool]) -> list[str]:
    """mason's `build_command_without_args`: a valued flag takes the next word unless it starts with `--`."""
    out: list[str] = []
    i = 0
    while i < len(command):
        word = command[i]
        if word in remove:
            takes = remove[word] and i + 1 < len(command) and not command[i + 1].startswith("--")
            i += 2 if takes else 1
            continue
        out.append(word)
        i += 1
    return out


@dataclass(frozen=True)
class Launch:
    """What the launching machine supplies: the Beaker user (None: no credentials, mason's external
    user), mason's per-invocation W&B id, `time.time()` and a random 0..1e6 (the checkpoint-state
    dir), and the launching shell's environment (RUN_NAME, WANDB_ENTITY/PROJECT/TAGS)."""

    whoami: str | None
    wandb_id: str
    now: float
    rand: int
    environ: Mapping[str, str] = field(default_factory=dict)

    @property
    def external(self) -> bool:
        return self.whoami is None

    @property
    def user(self) -> str:
        return self.whoami or EXTERNAL_USER


def render_command(command: list[str], args: MasonArgs, launch: Launch) -> str:
    """mason's `make_internal_command`, minus what launchkit does otherwise: no `cd <launching dir>`
    (the job runs in the clone of the pushed commit) and W&B variables as task env, not inline."""
    command = _with_entities(command)
    if is_training(command):
        command = _checkpoint_state_dir(command, args, launch)
        command = _output_dir(command, args, launch)
    command = [f"'{w}'" if "{" in w else w for w in command]
    joined = " ".join(command)
    if args.num_nodes > 1:
        if "--num_processes" not in joined and "accelerate" in joined:
            raise UsageError(
                f"--num_nodes {args.num_nodes} with accelerate: the command has no --num_processes",
                hint="give accelerate launch --num_processes N (per node); launchkit multiplies it",
            )
        n = args.num_nodes
        joined = re.sub(
            r"--num_processes (\d+)",
            lambda m: (
                f"--num_processes {int(m.group(1)) * n} --num_machines {n} "
                "--machine_rank $BEAKER_REPLICA_RANK --main_process_ip $BEAKER_LEADER_REPLICA_HOSTNAME "
                f"--main_process_port {ACCELERATE_PORT} "
            ),
            joined,
        )
    return joined


def _with_entities(command: list[str]) -> list[str]:
    """mason's first steps: `</` words single-quoted; `--hf_entity allenai` / `--wandb_entity ai2-llm`
    appended to open-instruct training commands that mention neither."""
    command = [f"'{w}'" if "</" in w else w for w in command]
    if is_training(command):
        if not any("hf_entity" in w for w in command):
            command += ["--hf_entity", "allenai"]
        if not any("wandb_entity" in w for w in command):
            command += ["--wandb_entity", "ai2-llm"]
    return command


def checkpoint_state_dir(args: MasonArgs, launch: Launch) -> str:
    path = f"{args.auto_checkpoint_state_dir.rstrip('/')}/{launch.user}/{int(launch.now)}_{launch.rand}"
    return f"{path}/tmp-{args.artifact_ttl}" if args.artifact_ttl else path


def _checkpoint_state_dir(command: list[str], args: MasonArgs, launch: Launch) -> list[str]:
    if not any(f in command for f in OPEN_INSTRUCT_RESUMABLES):
        return command
    if not args.auto_checkpoint_state_dir or launch.external:
        return command
    last = max((i for i, w in enumerate(command) if w == "--checkpoint_state_dir"), default=None)
    if last is not None and last + 1 < len(command) and "/weka/" in command[last + 1]:
        return command
    kept = without_args(command, {"--checkpoint_state_dir": True})
    return [*kept, "--checkpoint_state_dir", checkpoint_state_dir(args, launch)]


def _output_dir(command: list[str], args: MasonArgs, launch: Launch) -> list[str]:
    if not any(is_weka(c) for c in args.cluster):
        return command
    if not args.auto_output_dir_path:
        if not any(n in command for n in NO_EVAL):  # mason compares whole words, as here
            raise UsageError(
                "--auto_output_dir_path is empty on a Weka cluster: auto-evaluation needs a /weka/ "
                "output dir",
                hint="give --auto_output_dir_path /weka/..., an --output_dir under /weka/, or "
                "--no_try_launch_beaker_eval_jobs in the command",
            )
        return command
    if any(w == "--output_dir" and "/weka/" in command[i + 1] for i, w in enumerate(command[:-1])):
        return command
    if launch.external:
        return command
    path = f"{args.auto_output_dir_path.rstrip('/')}/{launch.user}"
    if args.artifact_ttl:
        path += f"/tmp-{args.artifact_ttl}"
    return [*without_args(command, {"--output_dir": True}), "--output_dir", f"{path}/"]


def cache_commands(commands: list[list[str]], args: MasonArgs) -> list[list[str]]:
    """The argv of each local `--cache_dataset_only` run mason does before launching (its order: for
    each command, each training script in it), without `python` in front."""
    if args.no_auto_dataset_cache:
        return []
    out = []
    for command in map(_with_entities, commands):
        if not is_training(command):
            continue
        for script in OPEN_INSTRUCT_COMMANDS:
            if script in command:
                rest = command[command.index(script) :]
                out.append([*without_args(rest, CACHE_EXCLUDED_ARGS), "--cache_dataset_only"])
    return out


@dataclass(frozen=True)
class GsTokenizer:
    """mason's `maybe_download_tokenizer_from_gs_bucket`: a gs:// model's tokenizer files, copied to a
    local folder (if it does not exist yet) that replaces the model path in the cache command."""

    files: list[str]
    folder: str
    argv: list[str]


def gs_tokenizer(argv: list[str], args: MasonArgs, user: str) -> GsTokenizer | None:
    if "--model_name_or_path" not in argv:
        return None
    i = argv.index("--model_name_or_path") + 1
    model = argv[i].rstrip("/") if i < len(argv) else ""
    if not model.startswith("gs://"):
        return None
    digest = hashlib.md5(model.encode("utf-8")).hexdigest()[:8]  # mason's folder name
    folder = f"{args.auto_output_dir_path}/{user}/tokenizer_{digest}/"
    files = [f"{model}/{f}" for f in ("tokenizer.json", "tokenizer_config.json", "config.json")]
    return GsTokenizer(files, folder, [*argv[:i], folder, *argv[i + 1 :]])


# launch_utils.download_from_gs_bucket
GSUTIL_CP = "gsutil -o GSUtil:parallel_thread_count=1 -o GSUtil:sliced_object_download_threshold=150 -m cp -r"


def secret_reference(value: str) -> str | None:
    """The secret a `secret:NAME` value names (a form open-instruct scripts write in `--env`), else None.
    mason writes such a value into the spec as it is: the job sees the text, not the secret's value."""
    name = value.removeprefix("secret:")
    return name if name != value and SECRET.fullmatch(name) else None


def secret_reference_notes(args: MasonArgs) -> list[str]:
    """One line per `--env NAME=secret:OTHER`: passed as the literal text, as mason passes it; the flag
    that gives the job the secret's value is `--secret NAME=OTHER`."""
    return [
        f"--env {n}={v}: passed as the text {v!r}, as mason passes it (the job does not get the secret "
        f"{other}'s value; for that pass --secret {n}={other})"
        for n, v in args.env
        if (other := secret_reference(v))
    ]


def interconnect_warning(args: MasonArgs) -> str | None:
    """mason asks y/n for multi-node jobs outside its InfiniBand clusters; launchkit says it once."""
    if args.num_nodes > 1 and not all(c in INTERCONNECT_CLUSTERS for c in args.cluster):
        return (
            f"--num_nodes {args.num_nodes} on {', '.join(args.cluster)}: mason wants InfiniBand clusters "
            f"({', '.join(INTERCONNECT_CLUSTERS)}) for multi-node jobs; launching anyway"
        )
    return None


def to_request(args: MasonArgs, commands: list[list[str]], launch: Launch) -> LaunchRequest:
    """The launchkit request for a mason invocation: one task per command, run by bash as mason does."""
    rendered = [render_command(list(c), args, launch) for c in commands]
    try:
        shared_memory = parse_size(args.shared_memory)
    except UnitError as e:
        raise UsageError(f"--shared_memory {args.shared_memory!r}: {e.problem}", hint=e.hint) from None
    timeout = None
    if args.timeout is not None:
        try:
            timeout = parse_duration(args.timeout)
        except UnitError as e:
            raise UsageError(f"--timeout {args.timeout!r}: {e.problem}", hint=e.hint) from None
        if timeout <= 0:
            raise UsageError(f"--timeout {args.timeout!r}: must be greater than zero", hint="give e.g. 2h")
    given = {n for n, _ in args.env}
    if unknown := [n for n in args.env_not_secret if n not in given]:
        raise UsageError(
            f"--env-not-secret {unknown[0]!r}: is not set with --env", hint=f"pass --env {unknown[0]}=VALUE"
        )
    env = [EnvVar(name=n, value=v) for n, v in args.env]
    names = given | {n for n, _ in args.secret}
    extra: list[tuple[str, str]] = [(n, launch.environ[n]) for n in WANDB_PASS_THROUGH if n in launch.environ]
    passed_on = [(n, v) for n, v in extra if n not in names]  # WANDB_ENTITY, ... from this shell
    for n, v in [*args.env, *passed_on]:  # written into the spec: the rule run's --env values follow
        if n not in args.env_not_secret and not (n in given and secret_reference(v)):
            where = "--env" if n in given else "this shell's"
            fix = f"store it with `launchkit secret set {n}` and pass --secret {n}={n}"
            hint = f"{fix} (not a secret? --env-not-secret {n})" if n in given else fix
            refuse_secret_value(where, n, v, values="mason --env values", hint=hint)
    if all(is_weka(c) for c in args.cluster):
        extra.append(("CHECKPOINT_OUTPUT_DIR", f"{CHECKPOINT_OUTPUT_DIR}/{launch.wandb_id}"))
    if is_resumable(args, commands):
        extra += [("WANDB_RUN_ID", launch.wandb_id), ("WANDB_RESUME", "allow")]
    env += [EnvVar(name=n, value=v) for n, v in extra if n not in names]
    several = len(rendered) > 1
    multi = args.num_nodes > 1
    hostnames = list(args.hostname or [])
    fields: dict[str, Any] = {
        "command": [rendered[0]],
        "commands": [[r] for r in rendered] if several else [],
        "multi": several,
        "description": args.description,
        "workspace": args.workspace,
        "budget": args.budget,
        "clusters": [] if hostnames else list(args.cluster),
        "hostnames": hostnames,
        # mason's family is decided by --cluster even when --hostname constrains the job
        "profile": "ai2-weka" if hostnames and all(is_weka(c) for c in args.cluster) else None,
        "gpus": args.gpus or None,
        "shared_memory": shared_memory,
        "beaker_image": args.image,
        "datasets": [DatasetMount(dataset=d, mount_path=m) for m, d in args.beaker_datasets],
        "mounts": [HostMount(host_path="/var/run/docker.sock", mount_path="/var/run/docker.sock")]
        if args.mount_docker_socket
        else [],
        "env": env,
        "env_secrets": [EnvSecret(name=n, secret=s) for n, s in args.secret],
        "results_dir": RESULTS_DIR,
        "task_name": args.task_name if several else f"{args.task_name}__0",
        "priority": Priority(args.priority),
        "preemptible": args.preemptible,
        "task_timeout": timeout,
        "retries": args.max_retries,
        "replicas": args.num_nodes,
        "leader_selection": multi,
        "host_networking": not args.no_host_networking,
        "propagate_failure": multi,
        "propagate_preemption": multi,
        "presets": [PRESET],
        "exec_method": ExecMethod.bash,
        "dry_run": args.dry_run,
        "offline": args.offline,
        "save_spec": args.save_spec,
        "follow": args.follow,
        # mason runs the working tree: launchkit launches the last pushed commit, naming what is left out
        "allow_dirty": True,
    }
    try:
        return LaunchRequest(**fields)
    except ValueError as e:  # pydantic's ValidationError; the checks above should have caught it
        raise UsageError(f"mason: {str(e).splitlines()[-1].strip()}") from None
