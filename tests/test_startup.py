"""`launchkit --help` and `launchkit CMD --help` stay light: no beaker-py, grpc, GitPython, yaml or pydantic;
a launch loads GitPython (the one git reader, launchkit.git) but no Beaker client (see bench/ for timings)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("beaker", "grpc", "git", "gitdb", "rich", "yaml", "google")  # libraries imported where used
LIGHT = ("pydantic",)  # not for the root's help nor run's (bench_startup's targets)


def imported_modules(*args: str, cwd=None, env=None) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "launchkit", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", proc.stderr, re.MULTILINE)
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "light"),
    [
        (["--help"], True),
        (["run", "--help"], True),
        (["run", "-h"], True),
        (["--version"], True),
    ],
)
def test_help_imports_nothing_heavy(args, light, repo):
    """The lazy group imports a command's module only for that command; `run --help` needs only the
    option table (its body is imported when it runs), so neither it nor the root loads pydantic (every
    other command's --help: tests/test_help_imports.py)."""
    (repo.path / "pyproject.toml").write_text('[tool.launchkit]\nworkspace = "ai2/x"\n')
    mods = imported_modules(*args, cwd=repo.path)
    heavy = sorted(m for m in mods if m.split(".")[0] in HEAVY + (LIGHT if light else ()))
    assert not heavy, heavy
    if light:  # nor the job's runtime package (its content hash loads hashlib)
        assert not sorted(m for m in mods if m.startswith("launchkit.runtime"))


@pytest.mark.slow
def test_dry_run_does_not_load_the_beaker_client(repo):
    """The dry run needs beaker-py's spec types and GitPython only: no gRPC client, requests or PyYAML,
    nor Typer's pydantic coercion."""
    mods = imported_modules("run", "--dry-run", "--", "python", "train.py", cwd=repo.path)
    assert "beaker.beaker_pb2" in mods  # beaker.types itself loads via importlib (not listed)
    assert not sorted(_unneeded(mods))
    assert "git.repo" in mods  # the repository's state, read where it is used


def _unneeded(mods: set[str]) -> set[str]:
    """What a launch must not load: gRPC, requests, PyYAML, beaker-py's client, and Typer's pydantic
    coercion (cli/params.py processes the options)."""
    return {
        m
        for m in mods
        if m.split(".")[0] in ("grpc", "requests", "yaml") or m in ("beaker._client", "typer._adapters")
    }


def loaded_modules(*args: str, cwd, env=None) -> set[str]:
    """sys.modules after `launchkit ARGS` ran in a fresh interpreter (in-process main: no fast exit)."""
    code = (
        "import sys\nfrom launchkit.cli.app import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('modules:', *sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        # not measured by coverage (--cov), whose own imports (sqlite3) would be counted as ours
        env={**{k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(proc.stdout.splitlines()[-1].split()[1:])


# What only a launch needs: the last-run record (cli/backend_choice, sqlite3), --follow, Slack (urllib).
LAUNCH_ONLY = (
    "launchkit.cli.launching",
    "launchkit.cli.backend_choice",
    "launchkit.cli.following",
    "launchkit.notify",
    "sqlite3",
    "urllib.request",
)


def test_dry_run_loads_nothing_only_a_launch_needs(repo):
    """`run --dry-run` runs cli/dry_run.py (cli/run_cmd.py: BodyCommand's dry_run_handler), which
    prints the spec; cli/launching.py, for a launch, is not imported."""
    mods = loaded_modules("run", "--dry-run", "--", "python", "train.py", cwd=repo.path)
    assert not sorted(m for m in LAUNCH_ONLY if m in mods)
    assert "launchkit.cli.dry_run" in mods


# What the offline dry run does not use (cc8c626's loaded none of them): the Python API (its Run, events
# and follow machinery; the CLI builds its request with launchkit/run_request.py), the job's watchdog,
# a run's masked output and ending, platformdirs (the remembered runtime ids: only with a workspace).
NOT_FOR_A_DRY_RUN = (
    "launchkit.api",
    "launchkit.events",
    "launchkit.runtime.node.launch.watchdog",
    "launchkit.masking",
    "launchkit.backends.ending",
    "platformdirs",
)


def test_dry_run_loads_nothing_it_does_not_use(repo):
    """bench_startup's target (the offline dry run within 1.2x of cc8c626) is kept by not importing
    what printing a spec does not use; the launch path (launchkit.launch) and the plan are used."""
    mods = loaded_modules("run", "--dry-run", "--", "python", "train.py", cwd=repo.path)
    assert not sorted(m for m in NOT_FOR_A_DRY_RUN if m in mods)
    assert {"launchkit.launch", "launchkit.run_request", "launchkit.core.plan"} <= mods


def test_list_loads_no_follow_machinery(repo, tmp_path):
    """`list` formats a many-task run's counts (core/status.py: task_summary) without `follow`'s
    module, its notifiers or the job's event stream."""
    mods = loaded_modules("list", "--local", cwd=repo.path, env={"LAUNCHKIT_LOCAL_HOME": str(tmp_path / "s")})
    assert not sorted(
        m for m in ("launchkit.cli.following", "launchkit.notify", "launchkit.events") if m in mods
    )


def test_commands_that_choose_a_backend_build_no_launch_request(repo, tmp_path):
    """cli/backend_choice (list, follow, logs, stop, ...) takes BackendChoice from core/run_options:
    the launch request's pydantic models (core/request.py) are built only for a launch."""
    mods = loaded_modules("list", "--local", cwd=repo.path, env={"LAUNCHKIT_LOCAL_HOME": str(tmp_path / "s")})
    assert "launchkit.cli.backend_choice" in mods
    assert "launchkit.core.request" not in mods


@pytest.mark.slow
def test_local_run_loads_no_beaker_client(repo, tmp_path):
    """`run --local --no-python --follow -- echo hi`: no gRPC, requests or PyYAML, nor Typer's pydantic
    coercion or the spec's YAML."""
    env_home = {"LAUNCHKIT_LOCAL_HOME": str(tmp_path / "state")}
    mods = imported_modules(
        "run", "--local", "--no-python", "--follow", "--", "echo", "hi", cwd=repo.path, env=env_home
    )
    assert not sorted(_unneeded(mods))


def test_version():
    proc = subprocess.run(
        [sys.executable, "-m", "launchkit", "--version"], capture_output=True, text=True, timeout=60
    )
    from launchkit import __version__

    assert proc.returncode == 0 and proc.stdout.strip() == f"launchkit {__version__}"


def test_run_is_parsed_without_pydantic():
    """`run`'s and `session`'s options and the root's, given or not, are click options of their kind
    (cli/params.py): parsing them loads no pydantic."""
    code = """
import sys
from launchkit.cli.app import root_group
group = root_group()
ctx = group.make_context("launchkit", ["-vv", "--beaker-timeout", "5", "run", "--gpus", "2"])
run = group.get_command(ctx, "run")
args = ["--gpus", "2", "--cpus", "1.5", "--env", "A=1", "--env", "B=2", "--follow", "--dry-run", "x"]
sub = run.make_context("run", args, parent=ctx)
p = sub.params
assert (p["gpus"], p["cpus"], p["env"], p["follow"], p["dry_run"], p["preemptible"], p["extra"]) == (
    2, 1.5, ["A=1", "B=2"], True, True, None, ["x"]), p
assert ctx.params["verbose"] == 2 and ctx.params["beaker_timeout"] == 5.0, ctx.params
assert "pydantic" not in sys.modules and "typer._adapters" not in sys.modules, "pydantic loaded"
session = group.get_command(ctx, "session")  # its module builds sessions (models): its options are ours too
assert session.make_context("session", ["--port", "8888", "--port", "22"], parent=ctx).params["port"] == [8888, 22]
assert "typer._adapters" not in sys.modules, "Typer's pydantic coercion"
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--gpus", "x"], "--gpus 'x': not a whole number"),
        (["run", "--cpus", "1.5x"], "--cpus '1.5x': not a number"),
        (["run", "--cpus", "nan"], "--cpus 'nan': not a number"),
        (["--beaker-timeout", "soon", "list"], "--beaker-timeout 'soon': not a number"),
        (["session", "--port", "ssh"], "--port 'ssh': not a whole number"),
    ],
)
def test_a_bad_number_is_a_usage_error_naming_it(args, message, capsys):
    from launchkit.cli.app import main

    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


SRC = Path(__file__).resolve().parents[1] / "src" / "launchkit"


def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(SRC)): ast.parse(p.read_text()) for p in sorted(SRC.rglob("*.py"))}


def _importing(private: str) -> set[str]:
    """The modules of src/launchkit that import a private module of a library (`typer._`, `beaker._`)."""
    return {
        path
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith(private))
        or (isinstance(node, ast.Import) and any(a.name.startswith(private) for a in node.names))
    }


def test_typer_private_modules_are_imported_in_one_module():
    """Typer's private modules (`typer._click`, `typer._coercion`, ...) only in cli/params.py."""
    assert _importing("typer._") == {"cli/params.py"}


def test_beaker_py_private_modules_are_imported_in_one_module():
    """beaker-py's private modules (`beaker._service_client`: RpcMethod, coerce_rpc_error) only in
    backends/beaker/unwrapped.py."""
    assert _importing("beaker._") == {"backends/beaker/unwrapped.py"}


def test_no_gc_pauses_class_swaps_or_environment_edits_at_start_up():
    """Start-up the plain way: no `gc.disable()`, no `obj.__class__ = ...`, no os.environ edited by
    the CLI's own code (a child process gets its own env dict)."""
    found = []
    for path, tree in _modules().items():
        if path.startswith("runtime/"):
            continue  # the node's runtime sets up the job's own process environment
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("gc.disable", "gc.freeze"):
                found.append(f"{path}:{node.lineno} {ast.unparse(node)}")
            targets = node.targets if isinstance(node, ast.Assign) else []
            targets += [node.target] if isinstance(node, ast.AugAssign) else []
            for target in targets + (node.targets if isinstance(node, ast.Delete) else []):
                text = ast.unparse(target)
                if text.endswith(".__class__") or text.startswith("os.environ["):
                    found.append(f"{path}:{node.lineno} {text}")
    assert not found, found


# The function-local imports that stay, besides those of HEAVY libraries: (module, statement) -> why.
# /work/wt/hoist_imports.py (issue 36) moves every other one to its module's top and prints this list.
LOCAL_IMPORTS = {
    (
        "config.py",
        "from launchkit.core.configmodel import check_layer",
    ): "validation loads pydantic: not on --help",
    ("cli/completing.py", "from launchkit.core.profiles import BUILTIN_PROFILES"): "a TAB completer",
    ("cli/completing.py", "from launchkit.config import help_defaults"): (
        "a TAB completer (the config layers: not on `list --help`, which completes statuses)"
    ),
    ("application.py", "from launchkit.config import load_config"): (
        "read on first use: every --help loads the Application, none reads the config (tomllib, platformdirs)"
    ),
    ("application.py", "from launchkit.core.redact import redact_text"): "only for a message with a URL",
    # json where JSON is written or read: every --help loads these modules, none writes JSON
    ("application.py", "import json"): "--json output only (print_json)",
    ("cli/app.py", "import json"): "a --json refusal only (_json_error)",
    ("cli/completing.py", "import json"): "the clusters cache: find-gpus writes it, a TAB completer reads it",
    ("config.py", "from platformdirs import user_config_dir"): (
        "off Linux only: on Linux the XDG path without platformdirs' import (~4-28 ms, `run --help` reads config)"
    ),
    ("backends/beaker_remembered.py", "import platformdirs"): (
        "only where a remembered id is read or written: a dry run without a workspace reads none (~5-12 ms)"
    ),
    ("config.py", "from platformdirs import user_state_dir as platform_state_dir"): (
        "only for the state directory (the last-run record, local runs): not on --help"
    ),
    ("runtime/__init__.py", "from launchkit.core.profiles import STORED_SETUP_FILE, stored_setup"): (
        "importing the node package (the run's policy: the spec, SpecView, the local supervisor) runs this"
        " module first: only building the runtime's files needs the profiles"
    ),
    (
        "backends/__init__.py",
        "from launchkit.backends import protocol",
    ): "PEP 562: the supervisor starts light",
    ("backends/local/__init__.py", "from launchkit.backends.local.backend import LocalBackend"): "PEP 562",
    ("backends/local/procs.py", "import ctypes"): "optional (except: no subreaper)",
    ("cli/entry.py", "from launchkit.cli.app import main as cli_main"): "Ctrl-C while importing: exit 130",
    ("backends/local/outcome.py", "from launchkit.core.runs import Job, RunView, Shape"): (
        "the supervisor (it runs for the whole job) loads pydantic only for a run of several jobs"
    ),
    ("backends/local/outcome.py", "from launchkit.core.runs import outcome"): "the same",
    ("backends/local/retry.py", "from launchkit.backends import ending"): "the same, when a log is read",
    ("backends/local/retry.py", "from launchkit.runtime.node.launch import watchdog"): (
        "the supervisor, only for a retry (the step the attempt before reached)"
    ),
    ("runtime/node/environment/plan.py", "import tomllib"): "optional: Python 3.11+ on the node",
    ("backends/registry.py", "from launchkit.runtime.node import policy as P"): (
        "--help reads the registry: the runtime package (the run's policy) only when a launch checks causes"
    ),
    ("__init__.py", "import launchkit.api"): "PEP 562: `import launchkit` stays light",
    ("api.py", "from launchkit.notify import SweepDigest, sweep_digest"): (
        "`wait`'s sweep digest only: building or launching a request from Python loads no poster"
    ),
    **{
        ("runtime/node/launch/notify.py", stmt): "the local supervisor imports it: http.client only to post"
        for stmt in ("import http.client", "import json")
    },
    # the local supervisor starts its job sooner without these (issue 46: the local launch path)
    ("backends/__init__.py", "from launchkit.backends import registry"): (
        "the supervisor imports this package: the registry (pathlib, typing) only to pick a backend"
    ),
    ("backends/local/procs.py", "import psutil"): "processes searched (no cgroup, a stop, leftovers) only",
    ("backends/local/supervisor.py", "import psutil"): "the same: the process tree without a cgroup",
    ("backends/local/bell.py", "import tempfile"): "a follower's bell in a short temp dir only",
    ("backends/local/bell.py", "import socket"): "a bell made or rung: after the job's start",
    ("backends/local/cleanup.py", "import shutil"): "a run's end, credential files to remove",
    ("backends/local/supervisor.py", "from launchkit.backends.local.uploads import unlink_uploads"): (
        "a run's end: the uploads' links (pathlib) removed"
    ),
    ("runtime/__init__.py", "from pathlib import Path"): "the same: building the runtime's files only",
    **{
        ("runtime/__init__.py", stmt): "the supervisor imports the node package: building the runtime only"
        for stmt in ("import hashlib", "import shutil", "import tempfile")
    },
    # the job's runtime: a feature's modules only in a job that uses it (issue 46)
    (
        "runtime/node/launch/launchers.py",
        "from . import notify",
    ): "a job with a webhook: the poster's threads",
    ("runtime/node/launch/launchers.py", "from . import ray_cluster"): "--ray: Ray's head or worker",
    ("runtime/node/launch/launchers.py", "import socket"): "a multi-node launcher: the leader's address",
    ("runtime/node/launch/stackdump.py", "import subprocess"): "a stall stop: py-spy's dump",
    ("config.py", "import tomllib"): (
        "a config file to parse: `run --help` without one (or with a pyproject.toml that does not name"
        " launchkit) parses none (~2 ms)"
    ),
    ("core/digest.py", "from launchkit.core import runs"): (
        "a sweep's tasks only: RunInfo (every backend's protocol, a dry run) needs TaskState, not the run model"
    ),
    **{
        ("pyenv.py", stmt): "a requires-python to read: not on a launch without one (~2-4 ms)"
        for stmt in (
            "from packaging.specifiers import InvalidSpecifier, SpecifierSet",
            "from packaging.version import InvalidVersion, Version",
            "from packaging.version import Version",
        )
    },
    ("backends/local/posts.py", "from launchkit.backends import ending"): (
        "at a failed run's end only: the supervisor starts without pydantic"
    ),
    **{
        ("backends/local/posts.py", stmt): "an event's words (--notify-*), when one is posted: the same"
        for stmt in (
            "from pathlib import Path",
            "from launchkit.backends.local.ended import run_end",
            "from launchkit.core.runs import attempt_text",
        )
    },
}


def test_function_local_imports_are_the_heavy_libraries_and_the_listed_ones():
    found = set()
    for path, tree in _modules().items():
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    top = node.names[0].name.split(".")[0]
                elif isinstance(node, ast.ImportFrom):
                    top = "" if node.level else (node.module or "").split(".")[0]
                else:
                    continue
                if top not in HEAVY:
                    found.add((path, ast.unparse(node)))
    assert found == set(LOCAL_IMPORTS), (
        sorted(found - set(LOCAL_IMPORTS)),
        sorted(set(LOCAL_IMPORTS) - found),
    )
