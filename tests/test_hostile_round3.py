"""Issue 31: wrong blame, wrong exit codes and tracebacks on hostile input (round 3).

Each case is one line on stderr naming the value and the fix, with the documented exit code (2 usage,
3 precondition), or simply works.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Repo, Result, git, run_cli
from inproc import run_main
from lk_helpers import FAST_ENV, launched_id, processes_with, sigint_default, wait_finished
from test_error_paths import one_line

CMD = ["--", "python", "train.py"]
NOT_UTF8 = os.fsdecode(b"x\xff")  # the byte 0xff as Python keeps it from argv or a path


# -- git: what the repository is, told as git tells it ----------------------------------------------


@pytest.mark.parametrize("args", [[], ["--ref", "HEAD"], ["--local"]], ids=["plain", "ref", "local"])
def test_repository_owned_by_another_user_keeps_gits_message(repo, args):
    # git's own test switch for "owned by someone else": no root or chown needed
    env = {"GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"}
    r = run_main("run", "--dry-run", *args, *CMD, cwd=repo.path, env=env)
    line = one_line(r, 3, "dubious ownership", f"git config --global --add safe.directory {repo.path}")
    assert "has no URL" not in line


def test_repository_path_that_is_not_utf8_launches(tmp_path, repo):
    moved = tmp_path / ("proj-" + NOT_UTF8)
    os.rename(repo.path, moved)
    r = run_main("run", "--dry-run", *CMD, cwd=moved)
    assert r.code == 0, r.stderr
    assert "dry run: commit" in r.stderr


@pytest.mark.parametrize("upstream", [True, False], ids=["upstream", "no-upstream"])
@pytest.mark.parametrize("args", [[], ["--ref", "HEAD"], ["--local"]], ids=["plain", "ref", "local"])
def test_branch_name_that_is_not_utf8_is_named(repo: Repo, upstream, args):
    name = "feature-" + NOT_UTF8
    git(repo.path, "checkout", "-q", "-b", name)
    if upstream:
        git(repo.path, "push", "-q", "-u", "origin", "HEAD")
    r = run_main("run", "--dry-run", *args, *CMD, cwd=repo.path)
    one_line(r, 3, "branch 'feature-x\\xff' is not UTF-8", "git branch -m")


@pytest.mark.parametrize("packed", [False, True], ids=["loose", "packed"])
def test_version_tag_that_is_not_utf8_is_no_tag(repo: Repo, packed):
    git(repo.path, "tag", "v1.0-" + NOT_UTF8)
    if packed:  # in packed-refs beside the refs launchkit reads (as after a clone or `git gc`)
        git(repo.path, "pack-refs", "--all")
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert "LAUNCHKIT_GIT_TAG" not in r.stdout


# -- text a spec cannot carry: refused up front, as the command's own arguments are -------------------

NOT_UTF8_OPTIONS = [
    ("env", ["--env", "A=" + NOT_UTF8], "--env A: the value is not valid UTF-8"),
    ("description", ["--description", NOT_UTF8], "--description 'x\\udcff': is not valid UTF-8"),
    ("sweep", ["--sweep", "lr=1," + NOT_UTF8], "--sweep 'lr=1,x\\udcff': is not valid UTF-8"),
    ("name", ["--name", NOT_UTF8], "--name 'x\\udcff': is not valid UTF-8"),
    ("workspace", ["--workspace", "ai2/" + NOT_UTF8], "--workspace"),
    ("local", ["--local", "--description", NOT_UTF8], "--description"),
]


@pytest.mark.parametrize(
    "args, needle", [c[1:] for c in NOT_UTF8_OPTIONS], ids=[c[0] for c in NOT_UTF8_OPTIONS]
)
def test_option_value_not_utf8_is_refused_before_the_dry_run(repo, args, needle):
    r = run_main("run", "--dry-run", *args, *CMD, cwd=repo.path)
    one_line(r, 2, needle, "Beaker specs are UTF-8 text")


def test_env_value_copied_from_the_shell_not_utf8(repo):
    r = run_main("run", "--dry-run", "--env", "COPIED", *CMD, cwd=repo.path, env={"COPIED": "v" + NOT_UTF8})
    line = one_line(r, 2, "--env COPIED: the value is not valid UTF-8")
    assert "udcff" not in line  # a value may be a secret: never echoed


def test_environment_default_not_utf8_names_the_variable(repo):
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path, env={"LAUNCHKIT_BUDGET": "ai2/" + NOT_UTF8})
    one_line(r, 2, "LAUNCHKIT_BUDGET", "not valid UTF-8")


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["--env", "A=" + NOT_UTF8, "--", "python", "train.py"],
            "argument 5 of `launchkit mason` (the value of --env)",
        ),
        (["--description", NOT_UTF8, "--", "python", "train.py"], "the value of --description"),
        (["--", "python", NOT_UTF8], "argument 2 of the command"),
    ],
    ids=["env", "description", "command"],
)
def test_mason_values_not_utf8_are_refused(repo, args, needle):
    r = run_main("mason", "--cluster", "ai2/jupiter", "--dry-run", *args, cwd=repo.path)
    line = one_line(r, 2, needle, "not valid UTF-8")
    assert "udcff" not in line


def test_argv_bytes_not_utf8_through_the_real_cli(repo):
    """The same through a real process: the bytes as a shell passes them."""
    p = subprocess.run(
        [sys.executable, "-m", "launchkit", "run", "--dry-run", "--description", b"x\xff", *CMD],
        cwd=repo.path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    one_line(Result(p.returncode, p.stdout, p.stderr), 2, "--description", "not valid UTF-8")


# -- LAUNCHKIT_* yes/no variables: 0/false/no/off mean no, everywhere ---------------------------------

YES = ["1", "true", "YES", "on"]
NO = ["0", "false", "No", "off", ""]
LIB = Path(__file__).parents[1] / "src/launchkit/runtime/lib.sh"


@pytest.mark.parametrize("value", YES + NO)
def test_launchkit_debug_is_a_yes_no_value(repo, value):
    r = run_main("run", "--dry-run", "--gpus", "-1", *CMD, cwd=repo.path, env={"LAUNCHKIT_DEBUG": value})
    assert r.code == 2
    assert ("Traceback" in r.stderr) == (value in YES), r.stderr


def test_launchkit_cgroup_off_words_make_no_cgroup(monkeypatch):
    from launchkit.backends.local import procs

    monkeypatch.setattr(procs, "child_cgroup", lambda parent, run_id: f"/sys/fs/cgroup/{run_id}")
    for value in NO[:-1]:
        monkeypatch.setenv("LAUNCHKIT_CGROUP", value)
        assert procs.make_cgroup("r1") is None, value
    for value in [*YES, ""]:
        monkeypatch.setenv("LAUNCHKIT_CGROUP", value)
        assert procs.make_cgroup("r1") == "/sys/fs/cgroup/r1", value


def test_launchkit_cgroup_that_is_not_yes_no_fails_the_launch(repo):
    r = run_main("run", "--local", *CMD, cwd=repo.path, env={"LAUNCHKIT_CGROUP": "maybe"})
    one_line(r, 2, "LAUNCHKIT_CGROUP='maybe' is not a yes/no value", "LAUNCHKIT_CGROUP=0")


@pytest.mark.parametrize("value", YES + NO + ["maybe"])
def test_node_switches_read_like_launchkit(value):
    """The job's Python (runtime/node) and bash (lib.sh) read a switch as launchkit does."""
    from launchkit.envflags import WORDS
    from launchkit.runtime.node import switched_off
    from launchkit.runtime.node.environment.bytecode import off_reason

    off = WORDS.get(value.lower()) is False
    assert switched_off({"V": value}, "V") == off
    reason = off_reason({"LAUNCHKIT_BYTECODE_CACHE": value, "UV_CACHE_DIR": "/c"}, "/no/venv")
    assert ("LAUNCHKIT_BYTECODE_CACHE=0" in reason) == off, reason
    for fn, expected in (("lk_off", off), ("lk_on", WORDS.get(value.lower()) is True)):
        r = subprocess.run(["bash", "-c", f'source "{LIB}"; {fn} V'], env={"V": value}, timeout=30)
        assert (r.returncode == 0) == expected, (fn, value)


# -- a Beaker launch whose cache directory cannot be written: the directory, not the network ----------


def _unwritable(tmp_path: Path) -> str:
    if os.geteuid() == 0:  # root writes through permission bits; /sys refuses everyone
        return "/sys/launchkit-test-cache"
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    return str(d)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["unwritable", "a-file"])
def test_unusable_cache_directory_is_named_not_beaker(repo, fake_beaker, tmp_path, kind):
    if kind == "a-file":
        cache = tmp_path / "cache-file"
        cache.write_text("not a directory")
    else:
        cache = Path(_unwritable(tmp_path))
    env = {"XDG_CACHE_HOME": str(cache)}
    r = run_cli("run", "--workspace", "ai2/launchkit", *CMD, cwd=repo.path, env=env, timeout=90)
    line = one_line(
        r, 3, f"launchkit's cache directory {cache / 'launchkit'} is not usable", "XDG_CACHE_HOME"
    )
    assert "Beaker" not in line
    assert not fake_beaker.state.experiments  # nothing submitted


# -- run ids: bytes that are not UTF-8 name no run ---------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["why"], ["follow"], ["logs"], ["results"], ["stop", "--yes"], ["stop", "--yes", "local-1"]],
    ids=["why", "follow", "logs", "results", "stop", "stop-second"],
)
@pytest.mark.parametrize("run_id", ["local-" + NOT_UTF8, NOT_UTF8], ids=["local", "beaker"])
def test_run_id_that_is_not_utf8_is_one_line(args, run_id):
    r = run_main(*args, run_id)
    one_line(r, 2, "'" + run_id.replace(NOT_UTF8, "x\\xff") + "' is not a run id", "launchkit list")


# -- a TOML list 50,000 deep: one line naming the file ------------------------------------------------

DEEP = "x = " + "[" * 50_000 + "]" * 50_000 + "\n"


@pytest.mark.parametrize("where", ["user-config", "pyproject"])
@pytest.mark.parametrize("args", [["run", "--dry-run", *CMD], ["list", "--local"]], ids=["run", "list"])
def test_toml_nested_too_deeply_is_one_line(repo: Repo, tmp_path, where, args):
    env = {}
    if where == "user-config":
        path = tmp_path / "config.toml"
        path.write_text(DEEP)
        env["LAUNCHKIT_CONFIG"] = str(path)
    else:
        path = repo.path / "pyproject.toml"
        repo.commit({"pyproject.toml": "[tool.launchkit]\n" + DEEP}, "deep")
    r = run_main(*args, cwd=repo.path, env=env)
    one_line(r, 2, f"{path} cannot be read: its arrays or inline tables nest too deeply", "flatten")


def test_toml_nested_too_deeply_in_the_job_is_left_to_uv(tmp_path):
    from launchkit.runtime.node.environment.plan import plan_for

    (tmp_path / "pyproject.toml").write_text("[dependency-groups]\n" + DEEP)
    assert plan_for(str(tmp_path), ["dev"]).groups == ["dev"]  # uv names what is wrong with the file


# -- Ctrl-C in the first second of `run --local --follow`: exit 130, no traceback, nothing orphaned ----

# The launch with a hook after the supervisor has started: the terminal's Ctrl-C (SIGINT to the whole
# process group, the supervisor included) lands exactly between "a run exists" and "launched ID".
INTERRUPT_AFTER_SPAWN = """
import os, signal, sys
from launchkit.backends.local import spawn
started = spawn.start_supervisor
def start_then_interrupt(*args):
    pid = started(*args)
    os.killpg(os.getpgid(0), signal.SIGINT)
    return pid
spawn.start_supervisor = start_then_interrupt
from launchkit.cli.entry import main
main()
"""


def _launch(repo: Repo, marker: str, *python_args: str, start: str = "fork") -> subprocess.Popen:
    """`launchkit run --local --follow` of a long job, in a session of its own (killpg reaches it all)."""
    env = {**os.environ, **FAST_ENV, "LAUNCHKIT_SUPERVISOR_START": start}
    return subprocess.Popen(
        [sys.executable, *python_args, "run", "--local", "--follow", "--no-python", "--"]
        + ["bash", "-c", f"exec -a {marker} sleep 300"],
        cwd=repo.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_default,
    )


def _interrupt_on(proc: subprocess.Popen, needle: str) -> str:
    """Read stderr until a line has `needle`, then Ctrl-C (the process group); the whole stderr."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if needle in line:
            break
    else:
        proc.wait(timeout=60)
        raise AssertionError(f"never printed {needle!r}: {''.join(seen)}")
    os.killpg(proc.pid, signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    return "".join(seen) + rest


def _local_runs() -> dict[str, dict]:
    r = run_cli("list", "--local", "--json", "--limit", "100")
    return {x["id"]: x for x in json.loads(r.stdout)}


@pytest.mark.slow
@pytest.mark.parametrize("start", ["fork", "exec"])
def test_ctrl_c_between_start_and_launched_leaves_nothing(repo, marker, start):
    proc = _launch(repo, marker, "-c", INTERRUPT_AFTER_SPAWN, start=start)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    m = re.search(r"interrupted: (local-\S+) was stopped before it started", err)
    assert m, err
    assert "launched" not in err
    run = _local_runs()[m.group(1)]
    assert run["status"] == "canceled", run
    assert processes_with(marker) == [] and processes_with(m.group(1)) == []


# launchkit held in the middle of its imports (typer's, as the CLI imports it) until Ctrl-C: the test
# signals a process that cannot have moved on, however busy the machine (10 minutes at most: fails open).
INTERRUPT_WHILE_IMPORTING = """
import sys, time
class Hold:
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            sys.meta_path.remove(self)
            print("importing typer", file=sys.stderr, flush=True)
            time.sleep(600)
sys.meta_path.insert(0, Hold())
from launchkit.cli.entry import main
main()
"""


@pytest.mark.slow
def test_ctrl_c_while_launchkit_starts_is_130_without_a_traceback(repo, marker):
    proc = _launch(repo, marker, "-c", INTERRUPT_WHILE_IMPORTING)
    err = _interrupt_on(proc, "importing typer")
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-2000:]
    assert _local_runs() == {} and processes_with(marker) == []


@pytest.mark.slow
@pytest.mark.parametrize("needle", ["launched local-", "following local-"])
def test_ctrl_c_once_launched_detaches_and_says_so(repo, marker, needle):
    proc = _launch(repo, marker, "-m", "launchkit")
    err = _interrupt_on(proc, needle)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    run_id = launched_id(err)
    assert f"detached from {run_id}; it keeps running. Resume with: launchkit follow {run_id}" in err
    assert _local_runs()[run_id]["status"] in ("starting", "running")  # told, so not orphaned
    r = run_cli("stop", "--yes", run_id)
    assert r.code == 0, r.stderr


# -- --task-timeout on a local run: kept, as on Beaker ------------------------------------------------


@pytest.mark.slow
def test_local_task_timeout_stops_the_run_and_says_so(repo, marker):
    env = {**FAST_ENV}
    job = f"echo started; exec -a {marker} sleep 30"
    r = run_cli(
        "run",
        "--local",
        "--no-python",
        "--task-timeout",
        "2s",
        "--",
        "bash",
        "-c",
        job,
        cwd=repo.path,
        env=env,
    )
    assert r.code == 0, r.stderr
    run_id = launched_id(r.stderr)
    run = wait_finished(run_id, env)
    assert run["status"] == "canceled", run
    why = run_cli("why", run_id, "--json", env=env)
    end = json.loads(why.stdout)["end"]
    assert end["kind"] == "timeout" and "--task-timeout 2s passed" in end["line"], end
    assert processes_with(marker) == []
    assert b"started" in run_cli("logs", run_id, env=env).stdout.encode()


@pytest.mark.slow
def test_local_task_timeout_lets_a_shorter_job_succeed(repo):
    env = {**FAST_ENV}
    r = run_cli(
        "run",
        "--local",
        "--no-python",
        "--task-timeout",
        "1h",
        "--follow",
        "--",
        "true",
        cwd=repo.path,
        env=env,
    )
    assert r.code == 0, r.stderr
    assert "succeeded" in r.stderr


# -- a submodule with uncommitted changes: refused like a dirty tree ----------------------------------


@pytest.fixture
def with_submodule(repo: Repo, tmp_path) -> Repo:
    lib = tmp_path / "lib.git"
    work = tmp_path / "lib-work"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(lib)], check=True, timeout=60)
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True, timeout=60)
    (work / "lib.py").write_text("VALUE = 1\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "lib")
    git(work, "push", "-q", str(lib), "HEAD:main")
    git(repo.path, "-c", "protocol.file.allow=always", "submodule", "-q", "add", lib.as_uri(), "lib")
    repo.commit({}, "add the submodule")
    return repo


@pytest.mark.parametrize("upstream", [True, False], ids=["upstream", "local-branch"])
def test_submodule_with_uncommitted_changes_is_refused(with_submodule: Repo, upstream):
    repo = with_submodule
    if not upstream:
        git(repo.path, "checkout", "-q", "-b", "unpushed")
    (repo.path / "lib" / "lib.py").write_text("VALUE = 2\n")
    args = ["--local"] if not upstream else []
    r = run_main("run", "--dry-run", *args, *CMD, cwd=repo.path)
    one_line(r, 3, "submodule lib has uncommitted changes", "--allow-dirty")
    r = run_main("run", "--dry-run", "--allow-dirty", *args, *CMD, cwd=repo.path)
    assert r.code == 0, r.stderr


def test_submodule_with_only_untracked_files_launches(with_submodule: Repo):
    (with_submodule.path / "lib" / "scratch.txt").write_text("notes\n")
    r = run_main("run", "--dry-run", *CMD, cwd=with_submodule.path)
    assert r.code == 0, r.stderr
