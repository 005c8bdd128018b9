"""A gantry 3.7.0 user switches by changing one word (issue 10).

Every `gantry run` spelling (long and short forms, both halves of paired flags) goes through
`launchkit run --dry-run` in-process and the spec field it sets is checked; gantry options launchkit
does not do are refused with a reason (exit 2). [tool.gantry] configures a repository like
[tool.launchkit]. The other commands' gantry flags and the gantry skill's command lines run against
the fake Beaker (subprocesses); the waiting limits run against real local processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import Result, run_cli
from inproc import run_main
from lk_helpers import launched_id, wait_finished

Spec = dict[str, Any]


def _task(spec: Spec) -> Spec:
    return spec["tasks"][0]


def _env(spec: Spec) -> dict[str, Any]:
    return {e["name"]: e.get("value", {"secret": e.get("secret")}) for e in _task(spec)["envVars"]}


def _mounts(spec: Spec) -> dict[str, dict[str, Any]]:
    return {d["mountPath"]: d["source"] for d in _task(spec).get("datasets") or []}


def env_is(name: str, value: Any) -> Callable[[Spec], bool]:
    return lambda s: _env(s).get(name) == value


def field(*path: str, value: Any) -> Callable[[Spec], bool]:
    def check(s: Spec) -> bool:
        node: Any = s
        for p in path:
            node = node.get(p) if isinstance(node, dict) else None
        return node == value

    return check


def task_field(*path: str, value: Any) -> Callable[[Spec], bool]:
    return lambda s: field(*path, value=value)(_task(s))


def accepted(s: Spec) -> bool:  # options that change how `run` behaves, not the spec
    return True


# (gantry 3.7.0 spelling, what it sets in the spec). Each long and short form, both halves of pairs.
RUN_SPELLINGS: list[tuple[list[str], Callable[[Spec], bool]]] = [
    # Workload
    (["--name", "exp-1"], accepted),
    (["-n", "exp-1"], accepted),
    (["--description", "about"], lambda s: s["description"].startswith("about")),
    (["-d", "about"], lambda s: s["description"].startswith("about")),
    (["--workspace", "ai2/ws"], accepted),
    (["-w", "ai2/ws"], accepted),
    (["--budget", "ai2/b"], field("budget", value="ai2/b")),
    (["-b", "ai2/b"], field("budget", value="ai2/b")),
    (["--group", "g1", "--group", "g2"], field("groups", value=["g1", "g2"])),
    # Launch
    (["--show-logs"], accepted),
    (["--no-logs"], accepted),
    (["--timeout", "0"], accepted),
    (["--timeout", "5m"], accepted),
    (["--timeout", "-1"], accepted),
    (["--show-logs", "--start-timeout", "10m"], accepted),
    (["--start-timeout", "10m"], accepted),  # not waiting: a warning (tests/test_gantry_semantics.py)
    (["--show-logs", "--inactive-timeout", "30m"], accepted),
    (["--show-logs", "--inactive-soft-timeout", "15m"], accepted),
    (["--allow-dirty"], accepted),
    (["--yes"], accepted),
    (["-y"], accepted),
    (["--dry-run"], accepted),
    # Constraints
    (["--cluster", "ai2/jupiter"], task_field("constraints", "cluster", value=["ai2/jupiter"])),
    (["-c", "ai2/*-cirrascale"], task_field("constraints", "cluster", value=["ai2/*-cirrascale"])),
    (["--gpu-type", "h100"], env_is("LAUNCHKIT_CONSTRAINT_GPU_TYPES", "h100")),
    (["--interconnect", "ib"], env_is("LAUNCHKIT_INTERCONNECT", "ib")),
    (["--tag", "storage:weka"], env_is("LAUNCHKIT_CONSTRAINT_TAGS", "storage:weka")),
    (["--hostname", "node-1"], task_field("constraints", "hostname", value=["node-1"])),
    # Resources
    (["--cpus", "2.5"], task_field("resources", "cpuCount", value=2.5)),
    (["--gpus", "2"], task_field("resources", "gpuCount", value=2)),
    (["--memory", "64GiB"], task_field("resources", "memory", value="64GiB")),
    (["--shared-memory", "10GiB"], task_field("resources", "sharedMemory", value="10GiB")),
    # Inputs
    (["--beaker-image", "ai2/cuda"], task_field("image", "beaker", value="ai2/cuda")),
    (["--docker-image", "python:3.11"], task_field("image", "docker", value="python:3.11")),
    (["--dataset", "ds:/data"], lambda s: _mounts(s)["/data"] == {"beaker": "ds"}),
    (["--mount", "/host:/m"], lambda s: _mounts(s)["/m"] == {"hostPath": "/host"}),
    (["-m", "/host:/m"], lambda s: _mounts(s)["/m"] == {"hostPath": "/host"}),
    (["--weka", "bucket:/w"], lambda s: _mounts(s)["/w"] == {"weka": "bucket"}),
    (["--upload", "train.py:/up"], lambda s: _mounts(s)["/up"]["beaker"].startswith("launchkit-upload-")),
    (["-u", "train.py:/up"], lambda s: _mounts(s)["/up"]["beaker"].startswith("launchkit-upload-")),
    (["--env", "FOO=bar"], env_is("FOO", "bar")),
    (["--env-secret", "TOK=my-secret"], env_is("TOK", {"secret": "my-secret"})),
    (["--secret-env", "TOK=my-secret"], env_is("TOK", {"secret": "my-secret"})),
    (["--dataset-secret", "cfg:/etc/cfg"], lambda s: _mounts(s)["/etc/cfg"] == {"secret": "cfg"}),
    (["--ref", "HEAD"], lambda s: len(_env(s)["LAUNCHKIT_GIT_COMMIT"]) == 40),
    (["--branch", "main"], env_is("LAUNCHKIT_GIT_BRANCH", "main")),
    (["--remote", "origin"], lambda s: _env(s)["LAUNCHKIT_GIT_REMOTE"].endswith("remote.git")),
    (["--gh-token-secret", "PAT"], env_is("LAUNCHKIT_GIT_TOKEN", {"secret": "PAT"})),
    (["--aws-config-secret", "awsc"], env_is("LAUNCHKIT_AWS_CONFIG", {"secret": "awsc"})),
    (["--aws-credentials-secret", "awsk"], env_is("LAUNCHKIT_AWS_CREDENTIALS", {"secret": "awsk"})),
    (["--google-credentials-secret", "gcp"], env_is("LAUNCHKIT_GOOGLE_CREDENTIALS", {"secret": "gcp"})),
    # Outputs
    (["--results", "/out"], task_field("result", "path", value="/out")),
    # Task
    (["--task-name", "train"], task_field("name", value="train")),
    (["-t", "train"], task_field("name", value="train")),
    (["--priority", "low"], task_field("context", "priority", value="low")),
    (["--task-timeout", "2h"], task_field("timeout", value=2 * 3600 * 10**9)),
    (["--min-runtime", "10m"], task_field("context", "minRuntime", value=600 * 10**9)),
    (["--no-auto-resume"], task_field("context", "autoResume", value=False)),
    (["--preemptible"], task_field("context", "preemptible", value=True)),
    (["--not-preemptible"], task_field("context", "preemptible", value=False)),
    (["--retries", "3"], field("retry", "allowedTaskRetries", value=3)),
    # Multi-node
    (["--replicas", "2"], task_field("replicas", value=2)),
    (["--replicas", "2", "--leader-selection"], task_field("leaderSelection", value=True)),
    (["--replicas", "2", "--no-leader-selection"], task_field("leaderSelection", value=False)),
    (["--replicas", "2", "--host-networking"], task_field("hostNetworking", value=True)),
    (["--replicas", "2", "--no-host-networking"], task_field("hostNetworking", value=False)),
    (["--replicas", "2", "--propagate-failure"], task_field("propagateFailure", value=True)),
    (["--replicas", "2", "--no-propagate-failure"], task_field("propagateFailure", value=False)),
    (["--replicas", "2", "--propagate-preemption"], task_field("propagatePreemption", value=True)),
    (["--replicas", "2", "--no-propagate-preemption"], task_field("propagatePreemption", value=False)),
    (
        ["--replicas", "2", "--synchronized-start-timeout", "5m"],
        task_field("synchronizedStartTimeout", value=300 * 10**9),
    ),
    (["--skip-nccl-setup"], env_is("LAUNCHKIT_SKIP_NCCL_SETUP", "1")),
    (["--skip-tcpxo-setup"], env_is("LAUNCHKIT_SKIP_NCCL_SETUP", "1")),
    # Runtime
    (["--runtime-dir", "/gantry-runtime"], env_is("LAUNCHKIT_RUNTIME_DIR", "/gantry-runtime")),
    (["--exec-method", "exec"], env_is("LAUNCHKIT_EXEC_METHOD", None)),  # the entrypoint's default
    (["--exec-method", "bash"], env_is("LAUNCHKIT_EXEC_METHOD", "bash")),
    (["--gpus", "8", "--torchrun"], env_is("LAUNCHKIT_LAUNCHER", "torchrun")),
    # Setup hooks
    (["--pre-setup", "echo pre"], env_is("LAUNCHKIT_PRE_SETUP", "echo pre")),
    (["--post-setup", "echo post"], env_is("LAUNCHKIT_POST_SETUP", "echo post")),
    # Python
    (["--python-manager", "uv"], env_is("LAUNCHKIT_UV_ALL_EXTRAS", "1")),
    (["--python-manager", "conda"], env_is("LAUNCHKIT_PYTHON_MANAGER", "conda")),
    (["--conda-env", "base"], env_is("LAUNCHKIT_CONDA_ENV", "base")),
    (["--conda-file", "environment.yml"], env_is("LAUNCHKIT_CONDA_FILE", "environment.yml")),
    (["--slack-webhook-url", "https://hooks.example/x"], lambda s: "hooks.example" not in repr(s)),
    (["--default-python-version", "3.11"], env_is("LAUNCHKIT_PYTHON_VERSION", "3.11")),
    (["--system-python"], env_is("LAUNCHKIT_SYSTEM_PYTHON", "1")),
    (["--install", "pip install ."], env_is("LAUNCHKIT_INSTALL_CMD", "pip install .")),
    (["--no-python"], env_is("LAUNCHKIT_NO_PYTHON", "1")),
    # uv
    (["--uv-venv", "/opt/venv"], env_is("LAUNCHKIT_UV_VENV", "/opt/venv")),
    (["--uv-extra", "gpu", "--uv-extra", "dev"], env_is("LAUNCHKIT_UV_EXTRAS", "gpu dev")),
    (["--uv-all-extras"], env_is("LAUNCHKIT_UV_ALL_EXTRAS", "1")),
    (["--uv-no-extras"], lambda s: "LAUNCHKIT_UV_ALL_EXTRAS" not in _env(s)),
    ([], env_is("LAUNCHKIT_UV_ALL_EXTRAS", "1")),  # gantry's default: all extras
    (["--uv-torch-backend", "cu129"], env_is("UV_TORCH_BACKEND", "cu129")),
    (["--uv-cache-dir", "/weka/uv"], env_is("UV_CACHE_DIR", "/weka/uv")),
]

# gantry options launchkit refuses, with the reason (never accepted and ignored)
REFUSED: list[tuple[list[str], str]] = [
    (["--callback-module", "my.callbacks"], "no callbacks"),
    (["--callback", "{type: slack}"], "no callbacks"),
    (["--show-logs", "--timeout", "0"], "0 means don't wait"),
]


def _dry_run(repo, *args: str, cwd: Path | None = None) -> tuple[Result, Spec | None]:
    r = run_main("run", "--dry-run", *args, "--", "python", "train.py", cwd=cwd or repo.path)
    return r, (yaml.safe_load(r.stdout) if r.code == 0 else None)


@pytest.mark.parametrize(
    ("args", "check"), RUN_SPELLINGS, ids=[" ".join(a) or "(none)" for a, _ in RUN_SPELLINGS]
)
def test_every_gantry_run_spelling_sets_its_spec_field(repo, args, check):
    if "--allow-dirty" in args:
        (repo.path / "train.py").write_text("print('edited')\n")
    if "--conda-file" in args:
        repo.commit({"environment.yml": "name: job\ndependencies: [python=3.11]\n"})
    r, spec = _dry_run(repo, *args)
    assert r.code == 0, r.stderr
    assert spec is not None and check(spec), r.stdout


@pytest.mark.parametrize(("args", "reason"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_gantry_options_launchkit_does_not_do_are_refused_with_the_reason(repo, args, reason):
    r, _ = _dry_run(repo, *args)
    assert r.code == 2 and reason in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_every_gantry_run_option_is_covered_and_aliases_are_hidden_from_help(repo):
    """The table above names each of gantry 3.7.0's 75 `run` options; help shows launchkit's names."""
    gantry_flags = set(
        "--name -n --description -d --workspace -w --budget -b --group --show-logs --no-logs --timeout "
        "--start-timeout --inactive-timeout --inactive-soft-timeout --allow-dirty --yes -y --dry-run "
        "--save-spec --callback-module --callback --slack-webhook-url --cluster -c --gpu-type --interconnect "
        "--tag --hostname --cpus --gpus --memory --shared-memory --beaker-image --docker-image --dataset "
        "--mount -m --weka --upload -u --env --env-secret --secret-env --dataset-secret --ref --branch "
        "--remote --gh-token-secret --aws-config-secret --aws-credentials-secret --google-credentials-secret "
        "--results --task-name -t --priority --task-timeout --min-runtime --no-auto-resume --preemptible "
        "--not-preemptible --retries --replicas --leader-selection --no-leader-selection --host-networking "
        "--no-host-networking --propagate-failure --no-propagate-failure --propagate-preemption "
        "--no-propagate-preemption --synchronized-start-timeout --skip-nccl-setup --skip-tcpxo-setup "
        "--runtime-dir --exec-method --torchrun --pre-setup --post-setup --python-manager "
        "--default-python-version --system-python --install --no-python --uv-venv --uv-extra --uv-all-extras "
        "--uv-no-extras --uv-torch-backend --uv-cache-dir --conda-file --conda-env".split()
    )
    tested = {a for args, _ in RUN_SPELLINGS + REFUSED for a in args if a.startswith("-") and a != "-1"}
    assert gantry_flags - tested == {"--save-spec"}  # test_skill_run_lines covers --save-spec
    help_text = run_main("run", "--help").stdout
    for alias in ("--secret-env", "--gh-token-secret", "--uv-torch-backend", "--show-logs", "--no-logs"):
        assert alias not in help_text
    assert "--env-secret" in help_text and "--torch-backend" in help_text and "--follow" in help_text


# ---- [tool.gantry]

GANTRY_SETTINGS = """
workspace = "ai2/ws"
budget = "ai2/budget"
clusters = ["ai2/jupiter", "ai2/ceres"]
gpus = 4
env = {FOO = "bar", N = "1"}
"""


def test_tool_gantry_gives_the_same_spec_as_tool_launchkit(repo):
    specs = {}
    for table in ("launchkit", "gantry"):
        repo.commit(
            {"pyproject.toml": f"[project]\nname = 'x'\nversion = '0'\n[tool.{table}]\n{GANTRY_SETTINGS}"}
        )
        r, specs[table] = _dry_run(repo)
        assert r.code == 0, r.stderr
        assert ("[tool.gantry]" in r.stderr) == (table == "gantry")
    assert specs["gantry"]["budget"] == "ai2/budget" and _env(specs["gantry"])["FOO"] == "bar"
    for spec in specs.values():  # the commits differ; everything else is the same
        for e in _task(spec)["envVars"]:
            if e["name"] in ("LAUNCHKIT_GIT_COMMIT", "LAUNCHKIT_RUN_ID"):
                e["value"] = "-"
    assert specs["gantry"] == specs["launchkit"]


def test_tool_gantry_keys_are_mapped_and_gantry_only_keys_named(repo):
    repo.commit(
        {
            "pyproject.toml": "[tool.gantry]\nworkspace = 'ai2/ws'\ngh_token_secret = 'PAT'\nlog_level = 'debug'\n"
        }
    )
    r, spec = _dry_run(repo)
    assert r.code == 0, r.stderr
    assert spec is not None and _env(spec)["LAUNCHKIT_GIT_TOKEN"] == {"secret": "PAT"}
    notice = [ln for ln in r.stderr.splitlines() if "[tool.gantry]" in ln]
    assert len(notice) == 1 and "log_level" in notice[0]


def test_tool_launchkit_wins_over_tool_gantry(repo):
    repo.commit({"pyproject.toml": "[tool.launchkit]\nbudget = 'ai2/a'\n[tool.gantry]\nbudget = 'ai2/b'\n"})
    r, spec = _dry_run(repo)
    assert r.code == 0 and spec is not None and spec["budget"] == "ai2/a"
    assert "[tool.gantry]" not in r.stderr


# ---- the gantry skill's command lines (shared/reference/002_*.txt), `gantry` -> `launchkit`

SKILL_RUN_LINES = [
    "run --gpus=1 --gpu-type=h100 --budget=ai2/BUDGET -- python train.py --config config.yaml",
    "run --gpus=8 --gpu-type=h100 --cluster=ai2/jupiter -- torchrun --nproc-per-node=8 train.py",
    "run --gpus=8 --gpu-type=h100 --replicas=4 --torchrun -- python -m my_training_module",
    "run --gpus=8 --weka=oe-training-default:/weka/oe-training-default -- python train.py "
    "--data-dir /weka/oe-training-default/data/my-dataset --checkpoint-dir /weka/oe-training-default/ckpt",
    "run --gpus=8 --weka=oe-training-default:/weka/oe-training-default "
    "--weka=oe-eval-default:/weka/oe-eval-default -- python train.py",
    "run --preemptible --retries=3 --gpus=8 -- python train.py",
    "run --gpus=8 --uv-extra=gpu --uv-extra=dev --uv-torch-backend=cu129 -- python train.py",
    "run --uv-no-extras -- python eval.py",
    "run --install=uv_pip_install_._torch_--torch-backend=cu129 -- python train.py",
    "run --dry-run --save-spec=spec.yaml --gpus=8 -- python train.py",
    "run --beaker-image=ai2/cuda12.8-ubuntu22.04-torch2.6.0 --system-python --gpus=8 -- python train.py",
]


@pytest.mark.parametrize("line", SKILL_RUN_LINES)
def test_skill_run_lines(repo, line):
    argv = [a.replace("_", " ") if a.startswith("--install=") else a for a in line.split()]
    if "--dry-run" not in argv:
        argv.insert(1, "--dry-run")  # they would submit
    r = run_main(*argv, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert yaml.safe_load(r.stdout)["tasks"][0]["arguments"] == argv[argv.index("--") + 1 :]
    if "--save-spec=spec.yaml" in argv:
        assert (repo.path / "spec.yaml").read_text() == r.stdout


def _later(seconds: float, fn: Callable[[], object]) -> None:
    t = threading.Timer(seconds, fn)
    t.daemon = True
    t.start()


def _pty_answer(args: list[str], answer: bytes, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """Run launchkit with a terminal on stdin that already holds `answer` (a confirmation prompt)."""
    master, slave = os.openpty()
    try:
        os.write(master, answer)
        return subprocess.run(
            [sys.executable, "-m", "launchkit", *args],
            stdin=slave,
            capture_output=True,
            timeout=120,
            env={**os.environ, **env},
            check=False,
        )
    finally:
        os.close(slave)
        os.close(master)


@pytest.mark.slow
def test_skill_monitoring_lines_against_the_fake_beaker(fake_beaker, tmp_path):
    """The skill's 14 monitoring command lines, as written (with real ids)."""
    from fakebeaker.state import AutoRun

    fake_beaker.state.set_auto(AutoRun(run_for=None, lines=["step 1", "step 2"]))
    exp = fake_beaker.state.add_experiment(
        "ai2/launchkit", "skill-exp", author="alice", description="[launchkit]"
    )
    other = fake_beaker.state.add_experiment(
        "ai2/launchkit", "skill-2", author="alice", description="[launchkit]"
    )
    assert fake_beaker.state.wait_for(lambda: exp.jobs and exp.jobs[-1].status_name == "RUNNING")
    env = {"COLUMNS": "200"}
    lines: list[tuple[str, Callable[[Result], bool]]] = [
        ("find-gpus", lambda r: "jupiter" in r.stdout),
        ("find-gpus --gpu-type h100", lambda r: "A100" not in r.stdout and "H100" in r.stdout),
        ("find-gpus --all", lambda r: "ceres" in r.stdout),
        ("list --me", lambda r: "skill-exp" in r.stdout),
        ("list --status=running", lambda r: "skill-exp" in r.stdout),
        ("list --limit=20", lambda r: "skill-2" in r.stdout),
        (f"logs {exp.id}", lambda r: "step 1" in r.stdout),
        (f"logs {exp.id} -o {tmp_path}/logs/", lambda r: any((tmp_path / "logs").iterdir())),
        (f"logs {exp.id} --tail=1", lambda r: r.stdout.strip() == "step 2"),
        (f"open {exp.id}", lambda r: f"/ex/{exp.id}" in r.stdout),
    ]
    for line, ok in lines:
        r = run_cli(*line.split(), env=env)
        assert r.code == 0 and ok(r), f"launchkit {line}: {r.stderr}"
    # follow ends when the job does
    _later(1.0, lambda: fake_beaker.state.finish_job(other, 0))
    r = run_cli("follow", "--latest", env=env)
    assert r.code == 0 and "step 1" in r.stdout, r.stderr
    _later(1.0, lambda: fake_beaker.state.finish_job(exp, 0))
    r = run_cli("follow", exp.id, env=env)
    assert r.code == 0 and "step 2" in r.stdout, r.stderr
    # stop: the prompt is answered on a terminal, as a person would
    third = fake_beaker.state.add_experiment(
        "ai2/launchkit", "skill-3", author="alice", description="[launchkit]"
    )
    p = _pty_answer(["stop", third.id], b"y\n", fake_beaker.env)
    assert p.returncode == 0, p.stderr
    assert fake_beaker.state.wait_for(lambda: third.finalized)
    fourth = fake_beaker.state.add_experiment(
        "ai2/launchkit", "skill-4", author="alice", description="[launchkit]"
    )
    r = run_cli("stop", "--latest", "--yes", env=env)
    assert r.code == 0 and fourth.id in r.stderr, r.stderr


# ---- the other commands' gantry flags against the fake Beaker


@pytest.mark.slow
def test_list_flags(fake_beaker):
    from fakebeaker.state import AutoRun

    s = fake_beaker.state
    s.set_auto(AutoRun(run_for=None))
    a = s.add_experiment("ai2/launchkit", "alpha-run", author="alice", description="[launchkit]")
    s.add_experiment("ai2/launchkit", "beta-run", author="bob", description="[launchkit]")
    s.add_experiment("ai2/no-budget", "gamma-run", author="alice", description="[launchkit]")
    g = s.add_group("ai2/launchkit", "sweep")
    g.experiment_ids.append(a.id)

    def names(*args: str) -> set[str]:
        r = run_cli("list", "--json", *args)
        assert r.code == 0, r.stderr
        import json

        return {row["name"] for row in json.loads(r.stdout)}

    # gantry's scope: the workspace configured for launchkit (or gantry), else the whole organization
    # (Beaker's own default workspace is not used)
    assert names() == {"alpha-run", "beta-run", "gamma-run"}
    r = run_cli("list", "--json", env={"LAUNCHKIT_WORKSPACE": "ai2/launchkit"})
    assert r.code == 0 and {row["name"] for row in json.loads(r.stdout)} == {"alpha-run", "beta-run"}
    assert names("-w", "ai2/no-budget") == {"gamma-run"}
    assert names("--workspace", "ai2/no-budget") == {"gamma-run"}
    assert names("-g", "sweep") == {"alpha-run"}
    assert names("--group", g.id) == {"alpha-run"}
    assert len(names("-l", "1")) == len(names("--limit", "1")) == 1
    assert names("-t", "beta") == names("--text", "beta") == {"beta-run"}
    assert names("-a", "bob") == names("--author", "bob") == {"beta-run"}
    assert names("-s", "running") == names("--status", "running") == {"alpha-run", "beta-run", "gamma-run"}
    r = run_cli("list", "--local", "-w", "ai2/x")
    assert r.code == 2 and "--workspace" in r.stderr


@pytest.mark.slow
def test_logs_follow_stop_find_gpus_flags(fake_beaker, tmp_path):
    import json

    from fakebeaker.state import AutoRun

    s = fake_beaker.state
    s.set_auto(AutoRun(run_for=None, lines=[f"line {i}" for i in range(5)]))
    exp = s.add_experiment("ai2/launchkit", "flags", author="alice", description="[launchkit]")
    assert s.wait_for(lambda: exp.jobs and exp.jobs[-1].status_name == "RUNNING")
    for args, want in (
        (["-t", "2"], "line 3\nline 4\n"),
        (["--tail", "2"], "line 3\nline 4\n"),
        (["-n", "1"], "line 0\n"),
        (["--head", "1"], "line 0\n"),
        (["-a", "-o", str(tmp_path / "all") + "/"], ""),
        (["--run", "1"], "".join(f"line {i}\n" for i in range(5))),
    ):
        r = run_cli("logs", exp.id, *args)
        assert r.code == 0 and r.stdout == want, (args, r.stderr)
    r = run_cli("logs", exp.id, "-s", "1h")
    assert r.code == 0 and "line 4" in r.stdout
    r = run_cli("logs", exp.id, "--run", "2")
    assert r.code == 4 and "no attempt 2" in r.stderr
    _later(1.5, lambda: s.finish_job(exp, 0))
    r = run_cli("logs", exp.id, "-f")
    assert r.code == 0 and "line 4" in r.stdout, r.stderr
    # follow --latest -w -a -t
    exp2 = s.add_experiment("ai2/launchkit", "flags-2", author="alice", description="[launchkit]")
    assert s.wait_for(lambda: exp2.jobs and exp2.jobs[-1].status_name == "RUNNING")
    _later(1.5, lambda: s.finish_job(exp2, 0))
    r = run_cli("follow", "-l", "-w", "ai2/launchkit", "-a", "alice", "-t")
    assert r.code == 0 and "line 4" in r.stdout and f"following {exp2.id}" in r.stderr, r.stderr
    # stop -w --latest --dry-run --json
    exp3 = s.add_experiment("ai2/launchkit", "flags-3", author="alice", description="[launchkit]")
    r = run_cli("stop", "--latest", "-w", "ai2/launchkit", "--dry-run", "--json")
    assert r.code == 0 and [x["id"] for x in json.loads(r.stdout)] == [exp3.id], r.stderr
    # find-gpus -a -g --json; the clusters are remembered for completion
    free = json.loads(run_cli("find-gpus", "--json").stdout)
    every = json.loads(run_cli("find-gpus", "-a", "--json").stdout)
    assert len(every) > len(free)
    h100 = json.loads(run_cli("find-gpus", "-a", "-g", "h100", "--json").stdout)
    assert h100 and all("H100" in str(row["gpu_types"]).upper() for row in h100)
    r = run_cli("secret", "list", "--json")
    assert r.code == 0 and "HF_TOKEN" in json.loads(r.stdout)


@pytest.mark.slow
def test_open_takes_several_targets_of_every_kind(fake_beaker):
    s = fake_beaker.state
    exp = s.add_experiment("ai2/launchkit", "to-open", author="alice", description="[launchkit]")
    g = s.add_group("ai2/launchkit", "grp")
    s.schedule_job(exp)  # its result dataset comes with the assignment
    ds = next(iter(s.datasets.values()))
    targets = [exp.id, "ai2/launchkit", "ai2/jupiter-cirrascale-2", "alice/base", ds.id, g.id]
    r = run_cli("open", "--print", *targets)
    assert r.code == 0, r.stderr
    urls = r.stdout.splitlines()
    assert len(urls) == 6
    assert f"/ex/{exp.id}" in urls[0] and "/clusters/" in urls[2] and f"/gr/{g.id}" in urls[5]
    assert "/im/" in urls[3] and "/ds/" in urls[4]
    r = run_cli("open", "--print", exp.id, "no-such-thing")
    assert r.code == 4 and "no-such-thing" in r.stderr and not r.stdout


# ---- scripts read the result; waiting limits on real local processes


def _local_run(repo, *args: str, timeout: float = 120) -> Result:
    return run_cli("run", "--local", "--no-python", *args, cwd=repo.path, timeout=timeout)


@pytest.mark.slow
def test_run_prints_the_run_id_alone_with_q(repo):
    r = run_cli("-q", "run", "--local", "--no-python", "--", "true", cwd=repo.path, timeout=120)
    assert r.code == 0, r.stderr
    run_id = r.stdout.strip()
    assert r.stdout == run_id + "\n" and run_id.startswith("local-") and not r.stderr
    wait_finished(run_id, {})


@pytest.mark.slow
def test_timeout_stops_the_job_and_exits_124(repo):
    r = _local_run(repo, "--timeout", "3", "--", "bash", "-c", "echo started; sleep 60")
    assert r.code == 124, r.stderr
    assert "started" in r.stdout and "--timeout 3s passed" in r.stderr
    row = wait_finished(launched_id(r.stderr), {})
    assert row["status"] == "canceled"


@pytest.mark.slow
def test_no_logs_timeout_waits_silently(repo):
    r = _local_run(repo, "--no-logs", "--timeout", "60", "--", "bash", "-c", "echo hidden")
    assert r.code == 0, r.stderr
    assert "hidden" not in r.stdout and r.stdout.strip().startswith("local-")


@pytest.mark.slow
def test_inactive_timeout_stops_a_silent_job(repo):
    r = _local_run(
        repo, "--follow", "--inactive-timeout", "3", "--", "bash", "-c", "echo one; sleep 60", timeout=120
    )
    assert r.code == 124 and "one" in r.stdout, r.stderr
    assert "stopped by launchkit: no output for 3s (--inactive-timeout)" in r.stderr, r.stderr


@pytest.mark.slow
def test_soft_inactive_timeout_only_warns(repo):
    r = _local_run(
        repo, "--follow", "--inactive-soft-timeout", "2", "--", "bash", "-c", "echo a; sleep 4; echo b"
    )
    warning = "[launchkit] warning: no output for 2s (--inactive-soft-timeout)"  # in the job's log
    assert r.code == 0 and warning in r.stdout and "b" in r.stdout, r.stdout


@pytest.mark.slow
def test_start_timeout_does_not_fire_once_started(repo):
    r = _local_run(repo, "--follow", "--start-timeout", "30", "--", "bash", "-c", "sleep 2; echo done")
    assert r.code == 0 and "done" in r.stdout, r.stderr


# ---- completion


def _complete(words: str, env: dict[str, str] | None = None) -> list[str]:
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "launchkit"],
        env={
            **os.environ,
            **(env or {}),
            "COMP_WORDS": words,
            "COMP_CWORD": str(cword),
            "_LAUNCHKIT_COMPLETE": "complete_bash",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    imported = [ln.split("|")[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")]
    assert not any(m.startswith(("beaker", "grpc", "git")) for m in imported)  # no network stack
    return r.stdout.split()


@pytest.mark.slow
def test_completion_scripts_and_values(tmp_path):
    for shell, marker in (
        ("bash", "complete -o default"),
        ("zsh", "#compdef launchkit"),
        ("fish", "complete --command"),
    ):
        r = run_cli("completion", shell)
        assert r.code == 0 and marker in r.stdout, r.stderr
    assert run_cli("completion", "tcsh").code == 2
    assert _complete("launchkit run --priority ") == ["low", "normal", "high", "urgent", "immediate"]
    assert "generic" in _complete("launchkit run --profile ")
    assert _complete("launchkit list --status r") == ["running"]
    assert _complete("launchkit run --cluster ") == []  # nothing cached yet
    cache = tmp_path / "cache"
    (cache / "launchkit").mkdir(parents=True)
    (cache / "launchkit" / "clusters.json").write_text('["ai2/jupiter-cirrascale-2"]')
    got = _complete("launchkit run --cluster ai2/j", {"XDG_CACHE_HOME": str(cache)})
    assert got == ["ai2/jupiter-cirrascale-2"]
    assert "--install-completion" in run_cli("--help").stdout
