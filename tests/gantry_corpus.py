"""Real `gantry run` command lines, gantry 3.7.0's own specs for them, and what each spec means (issue 19).

Data (tests/data/gantry_corpus/):
- `lines.jsonl`: one real invocation a line, sorted by repo/path/line: `id`, `repo`, `commit`, `path`,
  `line`..`end_line`, `raw` (continuations joined), `argv` (what follows `gantry run`, after the shell
  expansions recorded in `substitutions`), or `skip` (why the line cannot be used), `seen_also`
  (exact duplicates elsewhere), `note`.
- `gantry.jsonl`: per usable line, gantry 3.7.0's answer to `gantry run ARGV --dry-run --save-spec F --yes`
  against the fake Beaker: `exit`, `workspace` (from its dry-run header), `stderr_tail` when it refuses.
- `gantry/ID.yaml`: the spec gantry saved. `record.py` re-records all of it.

Meaning (`meaning(spec, tool)`): the same normalised dict from a gantry spec and from a launchkit spec.

| key | gantry 3.7.0 encodes it as | launchkit encodes it as |
|---|---|---|
| resources | task.resources (cpuCount, gpuCount, memory, sharedMemory) | the same |
| clusters | constraints.cluster, resolved from -c/--gpu-type/--tag/--interconnect (canonical names) | constraints.cluster after prepare (aliases mapped to canonical names here) |
| hostnames | constraints.hostname | the same |
| env | envVars with a value, minus gantry's own (GANTRY_*, GITHUB_REPO, GIT_REF, GIT_BRANCH, RESULTS_DIR) | envVars with a value, minus LAUNCHKIT_*, gantry's own (its Python API sets them as gantry does) and ADDED_ENV |
| secrets | envVars with a secret (GITHUB_TOKEN only if the user asked for it) | the same |
| credentials | GANTRY_AWS_CONFIG / GANTRY_AWS_CREDENTIALS / GANTRY_GOOGLE_CREDENTIALS secrets | LAUNCHKIT_AWS_CONFIG / ..._AWS_CREDENTIALS / ..._GOOGLE_CREDENTIALS |
| mounts | datasets by mountPath (not gantry's /gantry entrypoint): weka, hostPath, secret, beaker (ids mapped to names; uploads as "upload") | the same (not launchkit's /launchkit runtime) |
| multinode | replicas (1 = none), leaderSelection, hostNetworking, propagateFailure, propagatePreemption, synchronizedStartTimeout | the same |
| priority, preemptible, min_runtime, auto_resume | task.context | the same |
| budget, retries, timeout | spec.budget (else the workspace's, which Beaker charges), spec.retry.allowedTaskRetries, task.timeout | the same |
| workspace | dry-run header `Workspace:` (not in the spec) | a `workspace: ORG/NAME` stderr line if launchkit prints one; else the one given, else the config's |
| image | task.image (beaker ids mapped to names) | the same |
| command | task.arguments (task.command is bash /gantry/entrypoint.sh) | task.arguments (task.command is the runtime's bootstrap) |
| results, task_name | task.result.path, task.name | the same |
| python | GANTRY_NO_PYTHON, _PYTHON_MANAGER, _USE_SYSTEM_PYTHON, _UV_VENV, _CONDA_ENV, _CONDA_FILE, _DEFAULT_PYTHON_VERSION (None when it is gantry's local default), _INSTALL_CMD, _UV_ALL_EXTRAS (not compared with an install command, which replaces the uv install it is for), _UV_EXTRAS, UV_TORCH_BACKEND | LAUNCHKIT_NO_PYTHON, _PYTHON_MANAGER, _SYSTEM_PYTHON, _UV_VENV, _CONDA_ENV, _CONDA_FILE, _PYTHON_VERSION, _INSTALL_CMD, _UV_ALL_EXTRAS, _UV_EXTRAS, UV_TORCH_BACKEND |
| runtime | GANTRY_EXEC_METHOD, GANTRY_USE_TORCHRUN, GANTRY_SKIP_NCCL_SETUP, GANTRY_PRE/POST_SETUP_CMD, GANTRY_RUNTIME_DIR (None at the default) | LAUNCHKIT_EXEC_METHOD, LAUNCHKIT_LAUNCHER=torchrun, LAUNCHKIT_SKIP_NCCL_SETUP, LAUNCHKIT_PRE/POST_SETUP, LAUNCHKIT_RUNTIME_DIR |

Differences are allowed only where `ADDED_ENV` lists a cluster fact launchkit adds on purpose.

Script mode: `uv run python tests/gantry_corpus.py report` (per line: pass/fail and differing fields,
then a count by category).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "gantry_corpus"
LINES = DATA / "lines.jsonl"
RECORDS = DATA / "gantry.jsonl"
SPECS = DATA / "gantry"
# Nodes per GPU cluster in the corpus's fake: the largest line asks 112 replicas (real clusters have more); launchkit
# refuses replicas a cluster's nodes could never hold (core/fit.py).
CORPUS_NODES = 128
GITHUB_REMOTE = "https://github.com/allenai/corpus-proj.git"
DEFAULT_WORKSPACE = "ai2/launchkit"  # the fake's default workspace (its beaker config)
GANTRY_PYTHON_DEFAULT = "3.11"  # the Python of the venv gantry 3.7.0 runs in (its default version)

Line = dict[str, Any]
Meaning = dict[str, Any]

# Environment variables launchkit adds to a job on purpose, with the reason. Nothing else may differ.
ADDED_ENV: dict[str, str] = {
    "LAUNCHKIT_PROFILE_SETUP": "cluster fact: the NCCL/interconnect setup the cluster needs (runtime/nccl.sh)",
    "NCCL_SOCKET_IFNAME": "cluster fact: NCCL network interface of InfiniBand/TCPXO clusters",
    "NCCL_IB_HCA": "cluster fact: InfiniBand adapters of the cluster",
    "NCCL_DEBUG": "cluster fact: NCCL diagnostics on multi-node clusters",
}
ADDED_ENV_PREFIXES: dict[str, str] = {
    "LAUNCHKIT_": "launchkit's own contract variables; each has a GANTRY_* counterpart compared under python/runtime",
}
GANTRY_OWN = {"GITHUB_REPO", "GIT_REF", "GIT_BRANCH", "RESULTS_DIR"}


# ---- the corpus


def load_lines(path: Path = LINES) -> list[Line]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def load_records(path: Path = RECORDS) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    return {r["id"]: r for r in (json.loads(ln) for ln in path.read_text().splitlines() if ln.strip())}


def gantry_options(argv: list[str]) -> list[str]:
    return argv[: argv.index("--")] if "--" in argv else argv


def option_values(argv: list[str], *names: str) -> list[str]:
    """Values of options `names` (`--x v` and `--x=v`) before `--`."""
    out, opts = [], gantry_options(argv)
    for i, a in enumerate(opts):
        for n in names:
            if a == n and i + 1 < len(opts):
                out.append(opts[i + 1])
            elif a.startswith(n + "="):
                out.append(a[len(n) + 1 :])
    return out


def dry_run_argv(argv: list[str], spec_file: str) -> list[str]:
    """The user's flags, plus --dry-run, --save-spec FILE (replacing theirs) and --yes."""
    opts, rest = gantry_options(argv), argv[len(gantry_options(argv)) :]
    out: list[str] = []
    skip = False
    for a in opts:
        if skip:
            skip = False
            continue
        if a == "--save-spec":
            skip = True
            continue
        if a.startswith("--save-spec="):
            continue
        out.append(a)
    extra = ["--save-spec", spec_file]
    if "--dry-run" not in out:
        extra.insert(0, "--dry-run")
    if "--yes" not in out and "-y" not in out:
        extra.append("--yes")
    return out + extra + rest


# ---- the fake Beaker scenario and the repository the lines run in


def _canonical_cluster(name: str) -> tuple[str, list[str]]:
    org, short = name.split("/", 1) if "/" in name else ("ai2", name)
    base = re.sub(r"-(cirrascale(-2)?|google-1|elanding)$", "", short)
    return f"{org}/{base}", ([short] if base != short else [])


def scenario_names(lines: Iterable[Line]) -> dict[str, set[str]]:
    """Every workspace, budget, cluster, image, secret, dataset and group the usable lines name."""
    names: dict[str, set[str]] = {
        k: set() for k in ("workspaces", "budgets", "clusters", "images", "secrets", "datasets", "groups")
    }
    for ln in lines:
        argv = ln.get("argv")
        if argv is None:
            continue
        names["workspaces"].update(option_values(argv, "--workspace", "-w"))
        names["budgets"].update(option_values(argv, "--budget", "-b"))
        names["clusters"].update(c for c in option_values(argv, "--cluster", "-c") if "*" not in c)
        names["images"].update(option_values(argv, "--beaker-image"))
        names["groups"].update(option_values(argv, "--group"))
        for v in option_values(argv, "--env-secret", "--secret-env"):
            names["secrets"].add(v.split("=", 1)[-1])
        for v in option_values(argv, "--dataset-secret"):
            names["secrets"].add(v.split(":", 1)[0])
        names["secrets"].update(
            option_values(
                argv,
                "--gh-token-secret",
                "--aws-config-secret",
                "--aws-credentials-secret",
                "--google-credentials-secret",
            )
        )
        for v in option_values(argv, "--dataset"):
            src = v.split(":", 1)[0]
            if src:
                names["datasets"].add(src)
    return names


def build_state(lines: Iterable[Line]) -> Any:
    """The `basic` scenario plus everything the corpus names (each workspace has a budget and every
    secret; clusters carry weka and InfiniBand tags and H100 nodes)."""
    import dataclasses

    from fakebeaker import State, scenarios

    st = scenarios.basic(State())
    names = scenario_names(lines)
    for b in sorted(names["budgets"]):
        if "/" in b:
            st.add_budget(b)
    secrets = {s: f"value-of-{s}" for s in sorted(names["secrets"] | {"HF_TOKEN", "WANDB_API_KEY"})}
    for ws in sorted(names["workspaces"] | {"ai2/launchkit"}):
        if "/" not in ws:
            continue
        try:
            w = st.find_workspace(ws)
        except Exception:
            w = st.add_workspace(ws, budget="ai2/oe-default", author="alice")
        w.max_priority = "urgent"
        for k, v in secrets.items():
            st.put_secret(w.id, k, v)
    by_name = {c.name: c for c in st.clusters.values()}
    by_name["phobos"].tags.append("storage:weka")  # listed as a Weka cluster in Sep 2025 (fact sheet 1)
    for c in sorted(names["clusters"]):
        canon, aliases = _canonical_cluster(c)
        short = canon.split("/", 1)[1]
        known = by_name.get(short) or next(
            (x for x in by_name.values() if c.split("/", 1)[-1] in x.aliases), None
        )
        if known is None:
            known = by_name[short] = st.add_cluster(
                canon,
                aliases=aliases,
                tags=["interconnect:ib", "storage:weka"],
                nodes=[{"gpu_type": "NVIDIA_H100", "assigned": 0} for _ in range(2)],
            )
        else:
            known.aliases.extend(a for a in aliases if a not in known.aliases)
        gpu_nodes = [n for n in known.nodes if n.gpu_count]
        for _ in range(len(known.nodes), CORPUS_NODES if gpu_nodes else 0):  # more busy nodes of its kind
            like = gpu_nodes[0]
            st.add_node(known.id, gpu_type=like.gpu_type, gpus=like.gpu_count, assigned=like.gpu_count)
    users = {u.name for u in st.users.values()}

    def user(name: str) -> None:
        if name not in users:
            st.add_user(name)
            users.add(name)

    for img in sorted(names["images"]):
        full = img if "/" in img else f"alice/{img}"  # a bare name is the user's own image
        user(full.split("/", 1)[0])
        try:
            st.add_image(full)
        except Exception:
            pass
    for ds in sorted(names["datasets"]):
        if "/" in ds:
            author, dname = ds.split("/", 1)
            user(author)
            st.create_dataset("ai2/launchkit", dname, author=author)
        else:  # an ID, or a bare word Beaker tries as an ID
            d = st.create_dataset("ai2/launchkit", f"by-id-{ds.lower()}", author="alice")
            st.datasets.pop(d.id)
            st.datasets[ds] = dataclasses.replace(d, id=ds) if dataclasses.is_dataclass(d) else d
    for g in sorted(names["groups"]):
        st.add_group("ai2/launchkit", g.split("/", 1)[-1], author="alice")
    return st


def corpus_files(lines: Iterable[Line]) -> dict[str, str]:
    """Files the lines refer to (conda files, uploads, requirement files) with placeholder text."""
    files = {
        "pyproject.toml": "[project]\nname = 'corpus-proj'\nversion = '0.1.0'\n",
        "train.py": "print('train')\n",
    }
    for ln in lines:
        argv = ln.get("argv") or []
        for v in option_values(argv, "--conda-file", "--conda"):
            files[v] = "name: job\ndependencies: [python=3.11]\n"
        for v in option_values(argv, "--pip"):
            files[v] = "numpy\n"
        for v in option_values(argv, "--upload", "-u"):
            files[v.split(":", 1)[0].rstrip("/") + ("/data.txt" if ":" in v else "")] = "x\n"
    return files


def make_repo(path: Path, files: dict[str, str]) -> Path:
    """A real git repository whose origin is a GitHub https URL, with `files` committed."""
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        p = path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "corpus"],
        ["remote", "add", "origin", GITHUB_REMOTE],
        # as after `git push -u origin main` (the remote is GitHub: nothing is pushed from a test)
        ["update-ref", "refs/remotes/origin/main", "HEAD"],
        ["config", "branch.main.remote", "origin"],
        ["config", "branch.main.merge", "refs/heads/main"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, timeout=60)
    return path


# ---- meaning


def _clean(v: Any) -> Any:
    if isinstance(v, dict):
        out = {k: _clean(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x not in (None, {}, [], False)}
    return v


def meaning(
    spec: dict[str, Any],
    tool: str,
    *,
    workspace: str | None = None,
    clusters: dict[str, str] | None = None,
    datasets: dict[str, str] | None = None,
    images: dict[str, str] | None = None,
    budgets: dict[str, str] | None = None,
) -> Meaning:
    """The normalised meaning of a gantry (`tool="gantry"`) or launchkit spec (see the module docstring).
    `clusters`, `datasets`, `images` map IDs and aliases to canonical names; `budgets` maps a workspace
    to its budget (a spec without one is charged to the workspace's, as Beaker does)."""
    clusters, datasets, images = clusters or {}, datasets or {}, images or {}
    task = spec["tasks"][0]
    ctx = task.get("context") or {}
    cons = task.get("constraints") or {}
    res = task.get("resources") or {}
    env_all = {e["name"]: e for e in task.get("envVars") or []}
    values = {k: e["value"] for k, e in env_all.items() if "value" in e}
    own = (
        (lambda k: k.startswith("GANTRY_") or k in GANTRY_OWN)
        if tool == "gantry"
        else (lambda k: k.startswith("LAUNCHKIT_") or k in GANTRY_OWN)  # gantry's API sets gantry's too
    )
    cred_prefix = "GANTRY_" if tool == "gantry" else "LAUNCHKIT_"
    cred_names = {
        f"{cred_prefix}AWS_CONFIG",
        f"{cred_prefix}AWS_CREDENTIALS",
        f"{cred_prefix}GOOGLE_CREDENTIALS",
    }
    env = {k: v for k, v in values.items() if not own(k) and k != "UV_TORCH_BACKEND"}
    secrets = {
        k: e["secret"] for k, e in env_all.items() if "secret" in e and k not in cred_names and not own(k)
    }
    if tool == "launchkit":
        for k in ADDED_ENV:
            env.pop(k, None)
    credentials = {
        k[len(cred_prefix) :].lower(): env_all[k].get("secret") for k in sorted(cred_names) if k in env_all
    }

    mounts: dict[str, Any] = {}
    for d in task.get("datasets") or []:
        mp, src = d["mountPath"], dict(d.get("source") or {})
        if (tool == "gantry" and mp == "/gantry") or (tool != "gantry" and mp == "/launchkit"):
            continue  # each tool's own runtime dataset
        if "beaker" in src:
            name = datasets.get(src["beaker"], src["beaker"])
            src["beaker"] = (
                "upload" if re.match(r"^(gantry|launchkit-upload)-", name.split("/")[-1]) else name
            )
        if d.get("subPath"):
            src["subPath"] = d["subPath"]
        mounts[mp] = src

    g = (
        (lambda n: values.get(f"GANTRY_{n}"))
        if tool == "gantry"
        else (lambda n: values.get(f"LAUNCHKIT_{n}"))
    )
    if tool == "gantry":
        no_python = values.get("GANTRY_NO_PYTHON") == "1"
        version = values.get("GANTRY_DEFAULT_PYTHON_VERSION")
        python = {
            "manager": "none" if no_python else values.get("GANTRY_PYTHON_MANAGER", "uv"),
            "system_python": values.get("GANTRY_USE_SYSTEM_PYTHON") == "1",
            "version": None if version == GANTRY_PYTHON_DEFAULT else version,
            "install": g("INSTALL_CMD"),
            "uv_venv": g("UV_VENV"),
            "conda_env": g("CONDA_ENV"),
            "conda_file": g("CONDA_FILE"),
            "uv_all_extras": g("UV_ALL_EXTRAS") == "1",
            "uv_extras": g("UV_EXTRAS"),
            "torch_backend": values.get("UV_TORCH_BACKEND"),
        }
        if python["manager"] == "conda" and python["system_python"]:  # gantry: the base environment
            python.update(system_python=False, conda_env=python["conda_env"] or "base")
        runtime = {
            "exec_method": None if g("EXEC_METHOD") in (None, "exec") else g("EXEC_METHOD"),
            "torchrun": g("USE_TORCHRUN") == "1",
            "skip_nccl_setup": g("SKIP_NCCL_SETUP") == "1",
            "pre_setup": g("PRE_SETUP_CMD"),
            "post_setup": g("POST_SETUP_CMD"),
            "runtime_dir": None if g("RUNTIME_DIR") in (None, "/gantry-runtime") else g("RUNTIME_DIR"),
        }
    else:
        no_python = g("NO_PYTHON") == "1"
        python = {
            "manager": "none" if no_python else (g("PYTHON_MANAGER") or "uv"),
            "system_python": g("SYSTEM_PYTHON") == "1",
            "version": g("PYTHON_VERSION"),
            "install": g("INSTALL_CMD"),
            "uv_venv": g("UV_VENV"),
            "conda_env": g("CONDA_ENV"),
            "conda_file": g("CONDA_FILE"),
            "uv_all_extras": g("UV_ALL_EXTRAS") == "1",
            "uv_extras": g("UV_EXTRAS"),
            "torch_backend": values.get("UV_TORCH_BACKEND"),
        }
        runtime = {
            "exec_method": None if g("EXEC_METHOD") in (None, "exec") else g("EXEC_METHOD"),
            "torchrun": g("LAUNCHER") == "torchrun",
            "skip_nccl_setup": g("SKIP_NCCL_SETUP") == "1",
            "pre_setup": g("PRE_SETUP"),
            "post_setup": g("POST_SETUP"),
            # gantry's API keeps gantry's default (launchkit.gantry: RUNTIME_DIR), the CLI launchkit's
            "runtime_dir": None
            if g("RUNTIME_DIR") in (None, "/launchkit-runtime", "/gantry-runtime")
            else g("RUNTIME_DIR"),
        }
    if python["install"]:  # both entrypoints hand extras only to their own uv install, which this replaces
        python["uv_all_extras"] = None
    image = dict(task.get("image") or {})
    if "beaker" in image:
        image["beaker"] = images.get(image["beaker"], image["beaker"])
    replicas = task.get("replicas")
    m = {
        "resources": {
            "cpus": res.get("cpuCount"),
            "gpus": res.get("gpuCount") or None,
            "memory": res.get("memory"),
            "shared_memory": res.get("sharedMemory"),
        },
        "clusters": sorted({clusters.get(c, c) for c in cons.get("cluster") or []}),
        "hostnames": sorted(cons.get("hostname") or []),
        "env": env,
        "secrets": secrets,
        "credentials": credentials,
        "mounts": mounts,
        "multinode": {
            "replicas": replicas if replicas and replicas > 1 else None,
            "leader_selection": bool(task.get("leaderSelection")),
            "host_networking": bool(task.get("hostNetworking")),
            "propagate_failure": bool(task.get("propagateFailure")),
            "propagate_preemption": bool(task.get("propagatePreemption")),
            "synchronized_start_timeout": task.get("synchronizedStartTimeout"),
        },
        "priority": ctx.get("priority"),
        "preemptible": ctx.get("preemptible"),
        "min_runtime": ctx.get("minRuntime"),
        "auto_resume": ctx.get("autoResume"),
        "budget": spec.get("budget") or (budgets or {}).get(workspace or ""),
        "workspace": workspace,
        "retries": (spec.get("retry") or {}).get("allowedTaskRetries"),
        "timeout": task.get("timeout"),
        "image": image,
        "command": list(task.get("arguments") or []),
        "results": (task.get("result") or {}).get("path"),
        "task_name": task.get("name"),
        "groups": sorted(spec.get("groups") or []),
        "python": python,
        "runtime": runtime,
    }
    return _clean(m)


def differences(gantry: Meaning, launchkit: Meaning) -> dict[str, tuple[Any, Any]]:
    """Differing fields (dotted to depth two) -> (gantry value, launchkit value)."""
    out: dict[str, tuple[Any, Any]] = {}
    for k in sorted(set(gantry) | set(launchkit)):
        a, b = gantry.get(k), launchkit.get(k)
        if a == b:
            continue
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = a or {}, b or {}
            for kk in sorted(set(a) | set(b)):
                if a.get(kk) != b.get(kk):
                    out[f"{k}.{kk}"] = (a.get(kk), b.get(kk))
        else:
            out[k] = (a, b)
    return out


def category(field: str, pair: tuple[Any, Any]) -> str:
    """A to-do category: `env.HF_HOME` -> "env added by launchkit" etc."""
    head = field.split(".", 1)[0]
    a, b = pair
    if field in ("refusal", "accepted by gantry, refused"):
        m = re.search(r"No such option: (\S+)", str(b))
        if m:
            return f"{field}: only 'No such option {m.group(1)}' (no deprecation or migration)"
        return f"{field}: " + re.sub(r"'[^']*'", "'…'", str(b))[:70]
    if head in ("env", "secrets", "mounts"):
        what = (
            "added by launchkit" if a is None else "missing in launchkit" if b is None else "different value"
        )
        return f"{head}: {what}"
    return field


# ---- the replay through launchkit


def state_maps(state: Any) -> dict[str, dict[str, str]]:
    """ID/alias -> canonical name maps for `meaning` from a fake's state."""
    users = {u.id: u.name for u in state.users.values()}
    clusters: dict[str, str] = {}
    for c in state.clusters.values():
        org = "ai2"
        clusters[c.id] = f"{org}/{c.name}"
        for a in c.aliases:
            clusters[f"{org}/{a}"] = f"{org}/{c.name}"
    datasets = {d.id: f"{users.get(d.author_id, '?')}/{d.name}" for d in state.datasets.values()}
    images = {i.id: f"{users.get(i.author_id, '?')}/{i.name}" for i in state.images.values()}
    orgs = {o.id: o.name for o in state.orgs.values()}
    budget_names = {b.id: f"{orgs.get(b.org_id, 'ai2')}/{b.name}" for b in state.budgets.values()}
    budgets = {
        f"{orgs.get(w.org_id, 'ai2')}/{w.name}": budget_names[w.budget_id]
        for w in state.workspaces.values()
        if w.budget_id in budget_names
    }
    return {"clusters": clusters, "datasets": datasets, "images": images, "budgets": budgets}


# gantry refusals that say nothing about the line: gantry needed the GitHub CLI to find `--remote`'s
# newest commit, and neither the CLI nor github.com is on this machine.
MACHINE_REFUSALS = ("GitHub CLI",)
DEPRECATED = ("--venv", "--nfs", "--no-nfs", "--no-conda", "--pip", "--conda", "--python-version")


def report(rows: list[tuple[str, str, dict[str, tuple[Any, Any]]]]) -> str:
    """Table: id, status, differing fields; then counts by category."""
    out = []
    cats: Counter[str] = Counter()
    status: Counter[str] = Counter()
    for lid, st, diffs in rows:
        status[st] += 1
        out.append(f"{lid:52} {st:8} {', '.join(diffs) if diffs else ''}")
        cats.update({category(f, pair) for f, pair in diffs.items()})
    out.append("")
    out.append("status: " + ", ".join(f"{k} {v}" for k, v in status.most_common()))
    out.append("differences by category (lines affected):")
    out.extend(f"  {v:4}  {k}" for k, v in cats.most_common())
    return "\n".join(out)


def replay_all(records_path: Path = RECORDS) -> list[tuple[str, str, dict[str, tuple[Any, Any]]]]:
    """Replay every recorded line through `launchkit run --dry-run` against one fake (script mode)."""
    import os
    import tempfile

    from fakebeaker import FakeBeaker

    lines = load_lines()
    records = load_records(records_path)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp) / "repo", corpus_files(lines))
        home = Path(tmp) / "home"
        home.mkdir()
        with FakeBeaker(build_state(lines), directory=Path(tmp) / "fb") as fake:
            maps = state_maps(fake.state)
            env = {**fake.env, "HOME": str(home), "NO_COLOR": "1", "COLUMNS": "200"}
            saved = dict(os.environ)
            os.environ.update(env)
            try:
                for ln in lines:
                    rec = records.get(ln["id"])
                    if rec is None:
                        continue
                    st, diffs = replay_line(ln, rec, repo, maps)
                    rows.append((ln["id"], st, diffs))
            finally:
                os.environ.clear()
                os.environ.update(saved)
    return rows


def launchkit_argv(argv: list[str]) -> list[str]:
    opts, rest = gantry_options(argv), argv[len(gantry_options(argv)) :]
    out = [a for a in opts if a not in ("--dry-run",)]
    return ["run", "--dry-run", *out, *rest]


def replay_line(
    ln: Line, rec: dict[str, Any], repo: Path, maps: dict[str, dict[str, str]]
) -> tuple[str, dict[str, tuple[Any, Any]]]:
    """("same" | "differs" | "refused-ok" | "fails", differences) for one recorded line."""
    import yaml

    sys.path.insert(0, str(HERE))
    from inproc import run_main

    r = run_main(*launchkit_argv(ln["argv"]), cwd=repo)
    if rec["exit"] != 0:
        deprecated = [a for a in gantry_options(ln["argv"]) if a.split("=")[0] in DEPRECATED]
        if r.code == 0 and deprecated and "deprecat" in r.stderr.lower():
            return "refused-ok", {}
        one = r.stderr.strip().splitlines()
        # refused with the migration: one line, exit 2, more than click's generic "No such option"
        if r.code == 2 and len(one) == 1 and "no such option" not in one[0].lower():
            return "refused-ok", {}
        # gantry refused for want of something on this machine (the GitHub CLI, the network): launchkit
        # must also stop, in one line, as a usage error or a precondition the user can fix
        machine = any(m in " ".join(rec.get("stderr_tail", [])) for m in MACHINE_REFUSALS)
        if machine and r.code in (2, 3) and len(one) == 1 and "Traceback" not in r.stderr:
            return "refused-ok", {}
        tail = (r.stderr.strip().splitlines() or ["(no output)"])[-1][:120]
        return "fails", {"refusal": (rec.get("stderr_tail", [""])[-1:], f"exit {r.code}: {tail}")}
    if r.code != 0:
        tail = (r.stderr.strip().splitlines() or ["(no output)"])[-1][:120]
        return "fails", {"accepted by gantry, refused": ("exit 0", f"exit {r.code}: {tail}")}
    lk_spec = yaml.safe_load(r.stdout)
    g_spec = yaml.safe_load((SPECS / f"{ln['id']}.yaml").read_text())
    m = re.search(r"workspace[: ]+([\w.-]+/[\w.-]+)", r.stderr, re.IGNORECASE)
    # launchkit's dry run names no workspace unless it says so: the one it was given, else the config's
    given = option_values(ln["argv"], "--workspace", "-w")
    ws = m.group(1) if m else (given[-1] if given else DEFAULT_WORKSPACE)
    gm = meaning(g_spec, "gantry", workspace=rec.get("workspace"), **maps)
    lm = meaning(lk_spec, "launchkit", workspace=ws, **maps)
    diffs = differences(gm, lm)
    return ("same" if not diffs else "differs"), diffs


def main(argv: list[str]) -> int:
    if argv[:1] != ["report"]:
        print("usage: python tests/gantry_corpus.py report", file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))
    print(report(replay_all()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
