"""Reference data from open-instruct's real `mason.py` (issue 20, item 3), and what it means.

`tests/data/mason/` holds real `mason.py` command lines from open-instruct's `scripts/` and docs
(`lines.jsonl`), and what the unmodified mason.py did with each against the fake Beaker
(`results.jsonl`, `specs/ID.yaml`); `tests/data/mason/record.py` re-records them and
`tests/data/mason/README.md` says how. This module is the shared half, independent of launchkit:

- `load_lines()` / `load_results()` / `load_spec(id)`: the recorded data.
- `derive_argv(...)`: how a line's argv follows from its raw text and the substitutions (bash).
- `build_fake_state(lines)`: a fake-Beaker `State` that knows every cluster, workspace, budget, image,
  secret and dataset the lines use (`corpus_needs`).
- `mason_meaning(spec)`: a mason spec -> a normalised dict (see its docstring, field by field), so that
  a `launchkit mason` spec can be run through a counterpart extractor and compared.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "mason"
LINES_FILE = DATA / "lines.jsonl"
RESULTS_FILE = DATA / "results.jsonl"
SPECS = DATA / "specs"

# The Beaker user the recording runs as, and the workspace used when a line names none.
WHOAMI = "jdoe"
DEFAULT_WORKSPACE = "ai2/oe-adapt-default-ws"
DEFAULT_BUDGET = "ai2/oe-adapt"
# mason's default --image (mason.py get_args).
MASON_DEFAULT_IMAGE = "ai2/cuda11.8-cudnn8-dev-ubuntu20.04"
# Secrets every workspace holds: three per-user ones (mason prefers `<whoami>_NAME`), one plain
# (`OPENAI_API_KEY`: mason falls back to `NAME`), and the rest of mason's `useful_secrets` absent
# (mason then omits them silently). Values are never recorded.
USER_SECRETS = ("HF_TOKEN", "WANDB_API_KEY", "BEAKER_TOKEN")
PLAIN_SECRETS = ("OPENAI_API_KEY",)

# Machine-local values mason copies into what it submits, replaced when recording so that the data does
# not depend on where it was recorded: the launching directory (`cd DIR && ...` unless
# --pure_docker_mode) and the launching shell's PATH (env var PATH unless --pure_docker_mode).
LAUNCH_DIR = "{LAUNCH_DIR}"
LAUNCH_PATH = "{LAUNCH_PATH}"

_MASON_CALL = re.compile(r"(?:\buv run )?(?:\bpython3? )?\bmason\.py\b")


@dataclass(frozen=True)
class MasonLine:
    """One real mason.py invocation.

    `raw` is the command as written (continuation lines joined with one space, runs of blanks squeezed),
    starting at the mason call. `variables` are shell variables set before it (representative values,
    most taken from the script itself); `replacements` are exact pieces of `raw` replaced before bash
    reads it (command substitutions such as `$(date +%s)`); `positional` are the script's `$1 ...`.
    `argv` is what bash passes to mason.py (`derive_argv`). `stdin` is typed at mason's y/n prompt
    (multi-node jobs outside the interconnect clusters), `launch_env` extra variables of the launching
    shell (mason reads WANDB_PROJECT/WANDB_ENTITY/WANDB_TAGS from it).
    """

    id: str
    path: str
    line: int
    raw: str
    argv: list[str]
    variables: dict[str, str] = field(default_factory=dict)
    replacements: dict[str, str] = field(default_factory=dict)
    positional: list[str] = field(default_factory=list)
    stdin: str | None = None
    launch_env: dict[str, str] = field(default_factory=dict)
    features: list[str] = field(default_factory=list)
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "path": self.path, "line": self.line, "raw": self.raw}
        for key in ("variables", "replacements", "positional", "launch_env"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.stdin is not None:
            out["stdin"] = self.stdin
        out["features"] = self.features
        if self.note:
            out["note"] = self.note
        out["argv"] = self.argv
        return out


def load_lines(path: Path = LINES_FILE) -> list[MasonLine]:
    return [MasonLine(**json.loads(t)) for t in path.read_text().splitlines() if t.strip()]


def load_results(path: Path = RESULTS_FILE) -> dict[str, dict[str, Any]]:
    out = {}
    for t in path.read_text().splitlines():
        if t.strip():
            r = json.loads(t)
            out[r["id"]] = r
    return out


def load_spec(line_id: str, specs: Path = SPECS) -> dict[str, Any]:
    import yaml

    data: dict[str, Any] = yaml.safe_load((specs / f"{line_id}.yaml").read_text())
    return data


def mason_arguments(raw: str) -> str:
    """The part of `raw` after the mason call (`python mason.py`, `uv run python mason.py`, `uv run mason.py`)."""
    m = _MASON_CALL.search(raw)
    if m is None:
        raise ValueError(f"no mason.py call in {raw[:80]!r}")
    return raw[m.end() :]


def derive_argv(
    raw: str,
    variables: dict[str, str] | None = None,
    replacements: dict[str, str] | None = None,
    positional: list[str] | None = None,
    *,
    timeout: float = 30,
) -> list[str]:
    """mason.py's argv for `raw`: bash expands the words after the mason call with `variables` set
    (`set -u`: an unset variable is an error) and `positional` as `$@`, after `replacements`."""
    text = mason_arguments(raw)
    for old, new in (replacements or {}).items():
        if old not in text:
            raise ValueError(f"replacement {old!r} does not occur in the line")
        text = text.replace(old, new)
    script = ["set -u"]
    script += [f"{k}={shlex.quote(v)}" for k, v in (variables or {}).items()]
    script.append("set -- " + " ".join(shlex.quote(a) for a in positional or []))
    script.append("printf '%s\\0'" + text)
    r = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", "\n".join(script)],
        capture_output=True,
        timeout=timeout,
        check=False,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
    )
    if r.returncode != 0:
        raise ValueError(f"bash could not expand the line: {r.stderr.decode().strip()}")
    return r.stdout.decode().split("\0")[:-1]


# mason.py's own options at e6c3044 (get_args) and the cluster lists it reads
# (open_instruct/launch_utils.py), for describing the corpus.
MASON_FLAGS = frozenset(
    "--cluster --hostname --max_retries --budget --gpus --shared_memory --num_nodes --image --workspace "
    "--beaker_datasets --description --task_name --priority --preemptible --pure_docker_mode "
    "--mount_docker_socket --no_hf_cache_env --no_mount_nfs --non_resumable --no_auto_dataset_cache "
    "--auto_output_dir_path --auto_checkpoint_state_dir --artifact_ttl --env --secret "
    "--no-host-networking --timeout".split()
)
WEKA_CLUSTERS = frozenset(
    "ai2/jupiter ai2/saturn ai2/titan ai2/neptune ai2/ceres ai2/triton ai2/rhea ai2/prometheus ai2/holmes".split()
)
INTERCONNECT_CLUSTERS = frozenset("ai2/jupiter ai2/ceres ai2/titan ai2/holmes".split())
OPEN_INSTRUCT_COMMANDS = (
    "open_instruct/finetune.py",
    "open_instruct/dpo.py",
    "open_instruct/dpo_tune_cache.py",
    "open_instruct/grpo.py",
    "open_instruct/grpo_fast.py",
    "open_instruct/reward_modeling.py",
)


def split_argv(argv: list[str]) -> tuple[list[str], list[list[str]]]:
    """mason's options and its commands: the words before the first `--`, then one list per
    `--`-separated command (empty ones dropped, as mason's parse_commands does)."""
    if "--" not in argv:
        return argv, []
    i = argv.index("--")
    commands: list[list[str]] = [[]]
    for w in argv[i + 1 :]:
        if w == "--":
            commands.append([])
        else:
            commands[-1].append(w)
    return argv[:i], [c for c in commands if c]


def line_features(line: MasonLine) -> list[str]:
    """What a line exercises, derived from its argv (stored in lines.jsonl as `features`)."""
    head, commands = split_argv(line.argv)
    flags = [w for w in head if w.startswith("--")]
    feats = {f"flag:{f}" for f in flags if f in MASON_FLAGS}
    feats |= {f"unknown-flag:{f}" for f in flags if f not in MASON_FLAGS}
    feats |= {f"repeated:{f}" for f in flags if flags.count(f) > 1 and f in ("--cluster", "--hostname")}
    clusters = (_flag_values(line.argv, "--cluster") or [[]])[-1]
    if clusters and all(c in WEKA_CLUSTERS for c in clusters):
        feats.add("clusters:all-weka")
    elif any(c in WEKA_CLUSTERS for c in clusters):
        feats.add("clusters:some-weka")
    else:
        feats.add("clusters:no-weka")
    feats.add(f"clusters:{len(clusters)}")
    nodes = (_flag_values(line.argv, "--num_nodes") or [["1"]])[-1]
    feats.add("multi-node" if nodes and nodes[0] != "1" else "single-node")
    feats.add(f"commands:{len(commands)}")
    words = [w for c in commands for w in c]
    feats |= {f"script:{s}" for s in OPEN_INSTRUCT_COMMANDS if s in words}
    if {"open_instruct/grpo.py", "open_instruct/grpo_fast.py"} & set(words) and "--non_resumable" not in head:
        feats.add("resumable")
    if "accelerate" in words:
        feats.add("launcher:accelerate")
    if any(w.startswith("torchrun") for w in words):
        feats.add("launcher:torchrun")
    if "configs/beaker_configs/ray_node_setup.sh" in words:
        feats.add("launcher:ray")
    if "&&" in words:
        feats.add("and-chain")
    if any("{" in w for w in words):
        feats.add("json-word")
    if any("</" in w for w in words):
        feats.add("stop-string-word")
    if line.stdin is not None:
        feats.add(f"prompt-answer:{line.stdin.strip()}")
    if line.launch_env:
        feats.add("launch-env")
    return sorted(feats)


# --------------------------------------------------------------------------- the fake's world


def _flag_values(argv: list[str], flag: str) -> list[list[str]]:
    """Values of each occurrence of `flag` among mason's own options (before the first `--`), with
    argparse's nargs="+"/"*" reading: every following word up to the next option."""
    head = argv[: argv.index("--")] if "--" in argv else argv
    out = []
    for i, a in enumerate(head):
        if a == flag:
            vals = []
            for b in head[i + 1 :]:
                if b.startswith("--"):
                    break
                vals.append(b)
            out.append(vals)
    return out


def corpus_needs(lines: list[MasonLine]) -> dict[str, set[str]]:
    """Every cluster, workspace, budget, image, secret and dataset the lines name."""
    needs: dict[str, set[str]] = {
        k: set() for k in ("clusters", "workspaces", "budgets", "images", "secrets", "datasets")
    }
    needs["images"].add(MASON_DEFAULT_IMAGE)
    needs["workspaces"].add(DEFAULT_WORKSPACE)
    needs["budgets"].add(DEFAULT_BUDGET)
    for line in lines:
        a = line.argv
        for flag, key in (
            ("--cluster", "clusters"),
            ("--workspace", "workspaces"),
            ("--budget", "budgets"),
            ("--image", "images"),
            ("--beaker_datasets", "datasets"),
        ):
            for vals in _flag_values(a, flag):
                for v in vals:
                    needs[key].add(v.split(":", 1)[1] if key == "datasets" and ":" in v else v)
        for vals in _flag_values(a, "--secret"):
            for v in vals:
                if "=" in v:
                    needs["secrets"].add(v.split("=", 1)[1])
    return needs


# Clusters as Beaker has them (short canonical names; the pre-2025 `-cirrascale` names are aliases).
_ALIASES = {
    "ai2/jupiter": ["jupiter-cirrascale-2"],
    "ai2/saturn": ["saturn-cirrascale"],
    "ai2/neptune": ["neptune-cirrascale"],
    "ai2/ceres": ["ceres-cirrascale"],
    "ai2/titan": ["titan-cirrascale"],
}
_IB = {"ai2/jupiter", "ai2/ceres", "ai2/titan", "ai2/holmes"}


# Nodes per cluster: enough for the corpus's largest multi-node line (32 nodes; real clusters have
# more), since launchkit refuses replicas a cluster's nodes could never hold (core/fit.py).
NODES = 64


def build_fake_state(lines: list[MasonLine], *, user: str = WHOAMI):
    """A `fakebeaker.State` with what the lines need: user `user` (token `token-<user>`), every
    workspace (budget DEFAULT_BUDGET, no priority cap, the secrets above plus those `--secret` names),
    budgets, images (their authors as users), clusters (8-GPU nodes; old names as aliases) and the
    `--beaker_datasets` ids. Clusters written under an old alias are created under the canonical name."""
    from fakebeaker import State
    from fakebeaker.state import Dataset

    needs = corpus_needs(lines)
    s = State()
    s.add_user(user, f"token-{user}")
    for b in sorted(needs["budgets"]):
        s.add_budget(b)
    secrets = {f"{user}_{n}": f"value-of-{user}_{n}" for n in USER_SECRETS}
    secrets |= {n: f"value-of-{n}" for n in PLAIN_SECRETS}
    secrets |= {n: f"value-of-{n}" for n in sorted(needs["secrets"])}
    for w in sorted(needs["workspaces"]):
        s.add_workspace(w, budget=DEFAULT_BUDGET, author=user, secrets=secrets)
    for img in sorted(needs["images"]):
        author = img.split("/", 1)[0]
        try:
            s.find_user(author)
        except Exception:
            s.add_user(author)
        s.add_image(img)
    canonical = {f"ai2/{a}": c for c, al in _ALIASES.items() for a in al}
    for c in sorted({canonical.get(c, c) for c in needs["clusters"]}):
        tags = ["interconnect:ib"] if c in _IB else []
        s.add_cluster(c, aliases=_ALIASES.get(c, []), tags=tags, nodes=[{} for _ in range(NODES)])
    ws = s.find_workspace(DEFAULT_WORKSPACE)
    author_id = s.find_user(user).id
    for d in sorted(needs["datasets"]):
        s.datasets[d] = Dataset(d, f"dataset-{d.lower()}", author_id, ws.id, s.now(), committed=s.now())
    return s


# --------------------------------------------------------------------------- meaning of a mason spec

WANDB_ID = "<wandb-id>"  # stands for mason's per-invocation 8-character id
CKPT_STAMP = "<time>_<rand>"  # stands for `{int(time.time())}_{random.randint(0, 1000000)}`
_CKPT_STATE = re.compile(r"(/deletable_checkpoint_states/[^/\s]+/)\d+_\d+")
_CKPT_OUT_ENV = re.compile(r"^(.*/deletable_checkpoint_states/)([a-z0-9]{8})$")
_INLINE_ENV = re.compile(r"^(WANDB_TAGS|WANDB_PROJECT|WANDB_ENTITY)=(\S*) ")
_VALUE_FLAGS = (
    "--output_dir",
    "--checkpoint_state_dir",
    "--hf_entity",
    "--wandb_entity",
    "--num_processes",
    "--num_machines",
    "--machine_rank",
    "--main_process_ip",
    "--main_process_port",
)


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _last_value(words: list[str], flag: str) -> str | None:
    value = None
    for i, w in enumerate(words[:-1]):
        if w == flag:
            value = words[i + 1]
        elif w.startswith(flag + "="):
            value = w.split("=", 1)[1]
    if words and words[-1].startswith(flag + "="):
        value = words[-1].split("=", 1)[1]
    return value


def _wandb_id(env_vars: list[dict[str, Any]]) -> str | None:
    for ev in env_vars:
        if ev.get("name") == "WANDB_RUN_ID" and "value" in ev:
            return str(ev["value"])
    for ev in env_vars:
        m = (
            _CKPT_OUT_ENV.match(str(ev.get("value", "")))
            if ev.get("name") == "CHECKPOINT_OUTPUT_DIR"
            else None
        )
        if m:
            return m.group(2)
    return None


def normalise_volatile(text: str, wandb_id: str | None) -> str:
    """Replace mason's random values: the W&B id and the checkpoint-state `<time>_<rand>` directory."""
    text = _CKPT_STATE.sub(lambda m: m.group(1) + CKPT_STAMP, text)
    if wandb_id:
        text = text.replace(wandb_id, WANDB_ID)
    return text


def split_command(script: str) -> dict[str, Any]:
    """Split the `bash -c` script of a mason task into what mason added and what the user wrote.

    `setup`: mason's `cd <launching dir>` (None with --pure_docker_mode); `inline_env`: the
    `WANDB_TAGS=... WANDB_PROJECT=... WANDB_ENTITY=...` words mason puts before the command when they
    are set on the launching machine; `command`: the rest, i.e. the user's words after mason's rewrites.
    """
    setup = None
    rest = script
    if rest.startswith("cd "):
        head, sep, tail = rest.partition(" && ")
        if sep:
            setup, rest = head, tail
    inline: dict[str, str] = {}
    while m := _INLINE_ENV.match(rest):
        inline[m.group(1)] = m.group(2)
        rest = rest[m.end() :]
    return {"setup": setup, "inline_env": inline, "command": rest}


def _mount(m: dict[str, Any]) -> tuple[str, str]:
    src = m.get("source") or {}
    for key, label in (("weka", "weka"), ("beaker", "dataset"), ("hostPath", "host"), ("secret", "secret")):
        if src.get(key):
            return m["mountPath"], f"{label}:{src[key]}"
    return m["mountPath"], "other:" + json.dumps(src, sort_keys=True)


def _task_meaning(task: dict[str, Any], wandb_id: str | None) -> dict[str, Any]:
    norm = lambda s: normalise_volatile(s, wandb_id)
    env: dict[str, str] = {}
    secrets: dict[str, str] = {}
    seen: list[str] = []
    for ev in task.get("envVars") or []:
        seen.append(ev["name"])
        if ev.get("secret") is not None:
            secrets[ev["name"]] = ev["secret"]
        else:
            env[ev["name"]] = norm(str(ev.get("value", "")))
    resources = task.get("resources") or {}
    context = task.get("context") or {}
    constraints = task.get("constraints") or {}
    args = task.get("arguments") or []
    script = norm(args[0]) if len(args) == 1 else None
    parts = (
        split_command(script) if script is not None else {"setup": None, "inline_env": {}, "command": None}
    )
    words = _words(parts["command"]) if parts["command"] is not None else []
    timeout = task.get("timeout")
    return {
        "name": task.get("name"),
        "image": (task.get("image") or {}).get("beaker") or (task.get("image") or {}).get("docker"),
        "gpus": int(resources.get("gpuCount") or 0),
        "shared_memory": resources.get("sharedMemory"),
        "cpus": resources.get("cpuCount"),
        "memory": resources.get("memory"),
        "clusters": list(constraints.get("cluster") or []),
        "hostnames": list(constraints.get("hostname") or []),
        "env": env,
        "secrets": secrets,
        "env_duplicates": sorted({n for n in seen if seen.count(n) > 1}),
        # launchkit's runtime dataset (/launchkit) is how its entrypoint travels, not a mount of the job's
        "mounts": dict(
            sorted(_mount(m) for m in task.get("datasets") or [] if m.get("mountPath") != "/launchkit")
        ),
        "result_path": (task.get("result") or {}).get("path"),
        "replicas": int(task.get("replicas") or 1),
        "leader_selection": bool(task.get("leaderSelection", False)),
        "host_networking": bool(task.get("hostNetworking", False)),
        "propagate_failure": bool(task.get("propagateFailure", False)),
        "propagate_preemption": bool(task.get("propagatePreemption", False)),
        "synchronized_start_timeout": task.get("synchronizedStartTimeout"),
        "priority": context.get("priority"),
        "preemptible": bool(context.get("preemptible", False)),
        "timeout_seconds": None if timeout is None else int(timeout) / 1e9,
        "entrypoint": list(task.get("command") or []),
        "script": script,
        "setup": parts["setup"],
        "inline_env": parts["inline_env"],
        "command": parts["command"],
        "args": {f: _last_value(words, f) for f in _VALUE_FLAGS if _last_value(words, f) is not None},
    }


def mason_meaning(doc: dict[str, Any], *, workspace: str | None = None) -> dict[str, Any]:
    """What a mason experiment spec means, as a plain dict, with mason's random values normalised.

    `doc` is a `specs/ID.yaml` document (`{recorded: {workspace, author}, spec}`) or a bare Beaker
    experiment spec in wire form (camelCase; then pass `workspace`). How mason.py (e6c3044) encodes
    each field, and what the dict holds:

    Experiment:
    - `workspace`: not in the spec; mason creates the experiment with `Beaker.from_env(default_workspace=
      --workspace)`, else in the config's default workspace. Secrets are looked up in that workspace.
    - `budget`: `spec.budget` = `--budget`, or absent (None: the workspace's budget).
    - `description`: `--description`, default `$RUN_NAME` of the launching shell, else "Beaker-Mason job.".
    - `retries`: `spec.retry.allowedTaskRetries` = `--max_retries`, always present (default 0).
    - `tasks`: one per `--`-separated command, identical except `name`, `script`.

    Each task:
    - `name`: `f"{--task_name}__{i}"` (default `beaker_mason__0`, `__1`, ...).
    - `image`: `image.beaker` = `--image` (default `ai2/cuda11.8-cudnn8-dev-ubuntu20.04`).
    - `gpus`, `shared_memory`: `resources.gpuCount` = `--gpus` (default 0), `resources.sharedMemory` =
      `--shared_memory` (default `10.24gb`); mason never sets `cpus`/`memory` (None).
    - `clusters` / `hostnames`: `constraints.cluster` = `--cluster` (the LAST `--cluster` flag's values
      when given twice: argparse `nargs="+"` replaces), or `constraints.hostname` = `--hostname` instead.
    - `env` (name -> value) and `secrets` (env name -> Beaker secret name), from `envVars` in this
      order: mason's 5 defaults (RAY_CGRAPH_get_timeout=300, VLLM_DISABLE_COMPILE_CACHE=1,
      NCCL_DEBUG=ERROR, VLLM_LOGGING_LEVEL=WARNING, VLLM_ALLOW_INSECURE_SERIALIZATION=1) minus names given
      with `--env`; `--env NAME=value`; `--secret NAME=secret`; for each of HF_TOKEN, WANDB_API_KEY,
      BEAKER_TOKEN, OPENAI_API_KEY, AZURE_API_KEY, AZURE_API_BASE, ANTHROPIC_API_KEY, SLACK_WEBHOOK_URL the
      secret `<whoami>_NAME` if the workspace has it, else `NAME` if it has that, else nothing; PATH =
      the launching shell's PATH (`{LAUNCH_PATH}`) unless --pure_docker_mode; if EVERY cluster is a Weka
      cluster: HF_HOME, HF_DATASETS_CACHE (both /weka/oe-adapt-default/allennlp/.cache/huggingface),
      HF_HUB_CACHE (.../.cache/hub), CHECKPOINT_OUTPUT_DIR=/weka/oe-adapt-default/allennlp/
      deletable_checkpoint_states/<wandb-id>, and with --num_nodes > 1 NCCL_SOCKET_IFNAME=ib,
      NCCL_IB_HCA=^=mlx5_bond_0; if resumable (grpo.py/grpo_fast.py in a command, no --non_resumable):
      WANDB_RUN_ID=<wandb-id>, WANDB_RESUME=allow. A name given twice (e.g. `--secret OPENAI_API_KEY=x`
      and the useful secret OPENAI_API_KEY) is listed in `env_duplicates`; the dicts keep the last.
    - `mounts` (mount path -> `weka:BUCKET` | `dataset:ID` | `host:PATH`): if every cluster is Weka,
      weka oe-adapt-default and oe-training-default at /weka/<bucket>; `--mount_docker_socket`: host
      /var/run/docker.sock; each `--beaker_datasets MOUNT:ID`.
    - `result_path`: `result.path`, always `/output`.
    - `replicas` = `--num_nodes` (always written, 1 too); with --num_nodes > 1 `leader_selection`,
      `propagate_failure`, `propagate_preemption` are True (else absent or false: False);
      `host_networking` True unless `--no-host-networking`, single-node too; mason never sets
      `synchronized_start_timeout` (None).
    - `priority`, `preemptible`: `context.priority` = `--priority` (default normal),
      `context.preemptible` = `--preemptible`, False written explicitly.
    - `timeout_seconds`: `timeout` = `--timeout` parsed by beaker-py into ns (absent: None).
    - `entrypoint`: `command`, always `["/bin/bash", "-c"]`; `script`: the one `arguments` entry.
    - `setup`: `cd <launching dir>` (`{LAUNCH_DIR}`) unless --pure_docker_mode, joined with ` && `;
      `inline_env`: WANDB_TAGS/WANDB_PROJECT/WANDB_ENTITY of the launching shell put before the command
      (they reach only the first command of an `&&` chain); `command`: the rest, the user's words
      space-joined after mason's rewrites: words containing `</` or `{` wrapped in single quotes; for
      open-instruct training scripts (finetune.py, dpo.py, dpo_tune_cache.py, grpo.py, grpo_fast.py,
      reward_modeling.py as a word) `--hf_entity allenai` / `--wandb_entity ai2-llm` appended when no
      word mentions them, `--checkpoint_state_dir /weka/oe-adapt-default/allennlp/
      deletable_checkpoint_states/<whoami>/<time>_<rand>[/tmp-TTL]` replacing a non-/weka/ one for
      grpo(_fast), `--output_dir /weka/oe-adapt-default/allennlp/deletable_checkpoint/<whoami>/[tmp-TTL/]`
      replacing a non-/weka/ one when ANY cluster is Weka; with --num_nodes N > 1 every
      `--num_processes K` becomes `--num_processes K*N --num_machines N --machine_rank
      $BEAKER_REPLICA_RANK --main_process_ip $BEAKER_LEADER_REPLICA_HOSTNAME --main_process_port 29400 `.
    - `args`: the last value of each of --output_dir, --checkpoint_state_dir, --hf_entity,
      --wandb_entity, --num_processes, --num_machines, --machine_rank, --main_process_ip,
      --main_process_port in `command` (shell words), for comparing rewrites without the whole string.

    Normalised: the W&B id -> `<wandb-id>` and the checkpoint-state `<time>_<rand>` -> `<time>_<rand>`,
    everywhere (env values, script, command, args).
    """
    if "spec" in doc and "tasks" not in doc:
        workspace = workspace or (doc.get("recorded") or {}).get("workspace")
        spec = doc["spec"]
    else:
        spec = doc
    tasks = spec.get("tasks") or []
    wandb_id = next((w for t in tasks if (w := _wandb_id(t.get("envVars") or []))), None)
    return {
        "workspace": workspace,
        "budget": spec.get("budget"),
        "description": spec.get("description"),
        "retries": (spec.get("retry") or {}).get("allowedTaskRetries"),
        "tasks": [_task_meaning(t, wandb_id) for t in tasks],
    }
