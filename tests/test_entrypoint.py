"""The runtime entrypoint, run directly the way a spec runs it (real bash, git, uv, processes)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lk_helpers import entrypoint, entrypoint_path, make_wheel, policy_env, uv_lock_project

PRINT_ARGV = "import json, sys; print('ARGV:' + json.dumps(sys.argv[1:]))"
NO_PY = {"LAUNCHKIT_NO_PYTHON": "1"}


@pytest.fixture(scope="session")
def uv_cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("uv-cache"))


def argv_of(out: str) -> list[str]:
    line = next(x for x in out.splitlines() if x.startswith("ARGV:"))
    return json.loads(line[5:])


def test_runs_the_exact_commit_and_reports_timings(repo, tmp_path):
    first = repo.commit({"v.txt": "one"}, "one")
    repo.commit({"v.txt": "two"}, "two")
    r = entrypoint(tmp_path, str(repo.remote), first, ["cat", "v.txt"], NO_PY)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "one"
    timing = [x for x in r.stderr.splitlines() if "setup done in" in x]
    assert len(timing) == 1 and "clone" in timing[0]
    assert (tmp_path / "results/.launchkit/logs").is_dir()
    assert any(p.name.endswith("_clone.log") for p in (tmp_path / "results/.launchkit/logs").iterdir())


def test_reports_all_missing_inputs_at_once(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAUNCHKIT_")}
    r = subprocess.run(
        ["bash", entrypoint_path()],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 100
    for what in ("LAUNCHKIT_GIT_REMOTE", "LAUNCHKIT_GIT_COMMIT", "no command"):
        assert what in r.stderr


def test_missing_commit_fails_clearly(repo, tmp_path):
    marker = tmp_path / "ran"
    r = entrypoint(tmp_path, str(repo.remote), "0" * 40, ["touch", str(marker)], NO_PY)
    assert r.returncode == 101
    assert f"commit {'0' * 40} is not in" in r.stderr and "pushed" in r.stderr
    assert not marker.exists()


def test_unpushed_commit_is_not_found(repo, tmp_path):
    sha = repo.commit({"x": "y"}, "local only", push=False)
    r = entrypoint(tmp_path, str(repo.remote), sha, ["true"], NO_PY)
    assert r.returncode == 101 and "was it pushed" in r.stderr


def test_clone_retries_after_transient_failure(repo, tmp_path):
    sha = git_head(repo)
    flaky = tmp_path / "flaky-upload-pack"
    flaky.write_text(
        f"#!/bin/bash\nif [ ! -e {tmp_path}/tried ]; then touch {tmp_path}/tried; "
        "echo 'fatal: the remote end hung up unexpectedly' >&2; exit 128; fi\n"
        'exec git-upload-pack "$@"\n'
    )
    flaky.chmod(0o755)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[remote "origin"]\n\tuploadpack = {flaky}\n')
    r = entrypoint(
        tmp_path, str(repo.remote), sha, ["cat", "train.py"], {**NO_PY, "GIT_CONFIG_GLOBAL": str(gitconfig)}
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "tried").exists()
    log = next((tmp_path / "results/.launchkit/logs").glob("*_clone.log")).read_text()
    assert "attempt 1/5 failed" in log


def test_unreachable_remote_gives_up_after_retries(tmp_path):
    r = entrypoint(
        tmp_path, str(tmp_path / "nope.git"), "a" * 40, ["true"], {**NO_PY, "LAUNCHKIT_GIT_RETRIES": "3"}
    )
    assert r.returncode == 101 and "after 3 attempts" in r.stderr


def test_uv_lock_is_synced_frozen(repo, tmp_path, uv_cache):
    env = {"UV_CACHE_DIR": uv_cache, "UV_OFFLINE": "1"}
    sha = uv_lock_project(repo, env)
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        sha,
        ["python", "-c", "import tinydep, sys; print(tinydep.VALUE, sys.prefix)"],
        env,
    )
    assert r.returncode == 0, r.stderr
    value, prefix = r.stdout.split()
    assert value == "42" and prefix == str(tmp_path / "runtime/.venv")
    assert "install[uv.lock]" in r.stderr
    assert (
        "uv sync --frozen" in next((tmp_path / "results/.launchkit/logs").glob("*_install.log")).read_text()
    )


def test_requirements_txt_is_installed(repo, tmp_path, uv_cache):
    make_wheel(repo.path / "wheels", value="7")
    sha = repo.commit({"requirements.txt": "./wheels/tinydep-0.1.0-py3-none-any.whl\n"}, "reqs")
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        sha,
        ["python", "-c", "import tinydep; print(tinydep.VALUE)"],
        {"UV_CACHE_DIR": uv_cache},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "7" and "install[requirements.txt]" in r.stderr


def test_install_failure_fails_the_job_and_the_command_never_runs(repo, tmp_path, uv_cache):
    """gantry 3.6+ swallows this failure and runs the command anyway."""
    sha = repo.commit({"requirements.txt": "./wheels/missing-0.1-py3-none-any.whl\n"}, "broken reqs")
    marker = tmp_path / "ran"
    r = entrypoint(tmp_path, str(repo.remote), sha, ["touch", str(marker)], {"UV_CACHE_DIR": uv_cache})
    assert r.returncode == 106, r.stderr
    assert "install failed" in r.stderr and "the command was not started" in r.stderr
    assert "missing-0.1" in r.stderr  # the end of the install log is shown
    assert not marker.exists()


def test_custom_install_failure_fails_too(repo, tmp_path):
    marker = tmp_path / "ran"
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        git_head(repo),
        ["touch", str(marker)],
        {"LAUNCHKIT_INSTALL_CMD": "echo installing; false; echo not reached"},
    )
    assert r.returncode == 106 and not marker.exists()
    # said on the job's stderr, not only in the install log the hook's output goes to (before: the EXIT
    # trap ran inside that redirection), and no word of bash's own (`line 96: 123 Killed ...`)
    assert r.stderr.endswith("[launchkit] error: install failed (exit 1); the command was not started\n")
    assert "installing" in r.stderr and "not reached" not in r.stderr
    assert not re.search(r"entrypoint\.sh: line \d+|Killed|Terminated|wait_for", r.stderr), r.stderr


def test_hooks_run_in_the_job_shell(repo, tmp_path):
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        git_head(repo),
        ["bash", "-c", 'echo "$PRE/$POST"'],
        {**NO_PY, "LAUNCHKIT_PRE_SETUP": "export PRE=pre", "LAUNCHKIT_POST_SETUP": "export POST=post"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "pre/post"


@pytest.mark.slow
def test_no_python_still_runs_the_install_command(repo, tmp_path):
    """gantry 3.0+: `--no-python --install CMD` runs CMD (in the job shell) and sets up no Python."""
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        git_head(repo),
        ["bash", "-c", 'echo "installed=$INSTALLED venv=${VIRTUAL_ENV:-none}"'],
        {**NO_PY, "LAUNCHKIT_INSTALL_CMD": "export INSTALLED=yes"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "installed=yes venv=none"
    r = entrypoint(
        tmp_path / "2",
        str(repo.remote),
        git_head(repo),
        ["true"],
        {**NO_PY, "LAUNCHKIT_INSTALL_CMD": "exit 4"},
    )
    assert r.returncode == 106, r.stderr


def test_failing_pre_setup_hook_has_its_own_code(repo, tmp_path):
    r = entrypoint(
        tmp_path, str(repo.remote), git_head(repo), ["true"], {**NO_PY, "LAUNCHKIT_PRE_SETUP": "exit 3"}
    )
    assert r.returncode == 103 and "pre-setup hook failed" in r.stderr


def _as_method(method: str, argv: list[str]) -> list[str]:
    """The command line a user gives for `method`: argv as is (exec), or one quoted script (bash)."""
    return argv if method == "exec" else [shlex.join(argv)]


@pytest.mark.parametrize("method", ["exec", "bash"])
def test_exit_code_is_the_commands(repo, tmp_path, method):
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        git_head(repo),
        _as_method(method, ["bash", "-c", "exit 7"]),
        {**NO_PY, "LAUNCHKIT_EXEC_METHOD": method},
    )
    assert r.returncode == 7


def test_bash_method_runs_the_words_as_a_script_like_gantry(repo, tmp_path):
    """gantry's `--exec-method bash` is `bash -c "$*"`: variables, && and quotes work in the job."""
    cmd = ["echo", "rank=$BEAKER_REPLICA_RANK", "&&", "echo", "'a  b'", "&&", "false", "||", "echo", "or"]
    env = {**NO_PY, "BEAKER_REPLICA_RANK": "3"}
    r = entrypoint(tmp_path, str(repo.remote), git_head(repo), cmd, {**env, "LAUNCHKIT_EXEC_METHOD": "bash"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-3:] == ["rank=3", "a  b", "or"]
    # the default method keeps argv byte for byte: nothing expands
    r = entrypoint(tmp_path / "x", str(repo.remote), git_head(repo), cmd[:2], env)
    assert r.stdout.splitlines()[-1] == "rank=$BEAKER_REPLICA_RANK"


def test_bash_method_keeps_bash_as_the_parent(repo, tmp_path):
    probe = "import os; print(open(f'/proc/{os.getppid()}/comm').read().strip())"
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        git_head(repo),
        _as_method("bash", [sys.executable, "-c", probe]),
        {**NO_PY, "LAUNCHKIT_EXEC_METHOD": "bash"},
    )
    assert r.returncode == 0 and r.stdout.strip() == "bash", r.stderr


@pytest.mark.parametrize("method", ["exec", "bash"])
def test_sigterm_reaches_the_user_process(repo, tmp_path, method):
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(42)))\n"
        "print('ready', flush=True)\ntime.sleep(60)\n"
    )

    env = {
        **os.environ,
        **NO_PY,
        "LAUNCHKIT_GIT_REMOTE": str(repo.remote),
        "LAUNCHKIT_GIT_COMMIT": git_head(repo),
        "RESULTS_DIR": str(tmp_path / "r"),
        "LAUNCHKIT_RUNTIME_DIR": str(tmp_path / "rt"),
        "LAUNCHKIT_EXEC_METHOD": method,
    }
    p = subprocess.Popen(
        ["bash", entrypoint_path(), *_as_method(method, [sys.executable, "-c", script])],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGTERM)
        assert p.stdout.readline().strip() == "got TERM"
        assert p.wait(timeout=30) == 42
    finally:
        p.kill()


def test_token_reaches_git_only_through_the_credential_helper(tmp_path):
    lib = Path(__file__).parents[1] / "src/launchkit/runtime/lib.sh"
    script = f'source {lib}; printf "protocol=https\\nhost=github.com\\n\\n" | lk_git credential fill'
    r = subprocess.run(
        ["bash", "-c", script],
        env={**os.environ, "GITHUB_TOKEN": "s3cr3t-value"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "password=s3cr3t-value" in r.stdout
    assert "username=x-access-token" in r.stdout
    # the helper is configured by reference: the value is never part of git's argv
    real_git = subprocess.run(["bash", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    (tmp_path / "bin").mkdir()
    spy = tmp_path / "bin/git"
    spy.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" >> {tmp_path}/argv\nexec {real_git} "$@"\n')
    spy.chmod(0o755)
    r = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "GITHUB_TOKEN": "s3cr3t-value", "PATH": f"{tmp_path}/bin:{os.environ['PATH']}"},
    )
    argv = (tmp_path / "argv").read_text()
    assert "password=s3cr3t-value" in r.stdout
    assert "$GITHUB_TOKEN" in argv and "s3cr3t-value" not in argv


def test_ssh_remote_becomes_https_with_a_token():
    lib = Path(__file__).parents[1] / "src/launchkit/runtime/lib.sh"
    r = subprocess.run(
        ["bash", "-c", f"source {lib}; lk_https_remote git@github.com:org/repo.git"],
        env={**os.environ, "GITHUB_TOKEN": "t"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.stdout.strip() == "https://github.com/org/repo.git"


argv_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["exec", "bash"])
def test_argv_round_trip_through_the_entrypoint(repo, tmp_path_factory, method):
    sha = git_head(repo)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(argv_text, max_size=6))
    def check(args: list[str]) -> None:
        tmp = tmp_path_factory.mktemp("rt")
        r = entrypoint(
            tmp,
            str(repo.remote),
            sha,
            _as_method(method, [sys.executable, "-c", PRINT_ARGV, *args]),
            {**NO_PY, "LAUNCHKIT_EXEC_METHOD": method},
        )
        assert r.returncode == 0, r.stderr
        assert argv_of(r.stdout) == args

    check()


@pytest.mark.slow
def test_extras_are_off_by_default_and_selectable(repo, tmp_path, uv_cache):
    env = {"UV_CACHE_DIR": uv_cache, "UV_OFFLINE": "1"}
    make_wheel(repo.path / "wheels")
    make_wheel(repo.path / "wheels", name="extradep")
    repo.commit(
        {
            "pyproject.toml": (
                '[project]\nname = "demo"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = ["tinydep"]\n'
                '[project.optional-dependencies]\nfancy = ["extradep"]\n[tool.uv]\npackage = false\n'
                '[tool.uv.sources]\ntinydep = { path = "wheels/tinydep-0.1.0-py3-none-any.whl" }\n'
                'extradep = { path = "wheels/extradep-0.1.0-py3-none-any.whl" }\n'
            )
        },
        "extras",
    )
    subprocess.run(["uv", "lock", "-q"], cwd=repo.path, check=True, timeout=120, env={**os.environ, **env})
    sha = repo.commit({}, "lock")
    probe = ["python", "-c", "import importlib.util as u; print(bool(u.find_spec('extradep')))"]
    assert entrypoint(tmp_path / "a", str(repo.remote), sha, probe, env).stdout.strip() == "False"
    r = entrypoint(tmp_path / "b", str(repo.remote), sha, probe, {**env, "LAUNCHKIT_UV_EXTRAS": "fancy"})
    assert r.stdout.strip() == "True", r.stderr
    r = entrypoint(tmp_path / "c", str(repo.remote), sha, probe, {**env, "LAUNCHKIT_UV_ALL_EXTRAS": "1"})
    assert r.stdout.strip() == "True", r.stderr


def test_system_python_uses_the_images_interpreter(repo, tmp_path):
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        git_head(repo),
        ["python3", "-c", "import sys; print(sys.prefix == sys.base_prefix)"],
        {"LAUNCHKIT_SYSTEM_PYTHON": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


def test_no_uv_and_no_way_to_install_it_is_a_clear_failure(repo, tmp_path):
    """An image without uv, pip or curl: exit code 104, the command never starts."""
    bare = tmp_path / "bin"
    bare.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for name in os.listdir(folder):
            if name.startswith(("uv", "python", "pip", "curl", "wget")) or (bare / name).exists():
                continue
            (bare / name).symlink_to(os.path.join(folder, name))
    marker = tmp_path / "ran"
    r = entrypoint(
        tmp_path,
        str(repo.remote),
        git_head(repo),
        ["touch", str(marker)],
        {"PATH": str(bare), "LAUNCHKIT_TOOLS_DIR": str(tmp_path / "tools")},
    )
    assert r.returncode == 104, r.stderr
    assert "uv is not available" in r.stderr and not marker.exists()


def git_head(repo) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo.path, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.parametrize("method", ["exec", "bash"])
def test_the_watchdog_stops_a_stalled_command_through_the_entrypoint(repo, tmp_path, method):
    """With a watchdog setting, bash hands the command to the Python runtime, which ends it when its
    progress stops; the log's last line says why (what the backends read), and the job exits 124."""
    # bash, not Python: its first line comes at once (a Python under coverage can take longer than the
    # 1 s stall timeout to start)
    script = "echo 'step 1'; while :; do echo 'NCCL WARN'; sleep 0.05; done"
    env = {
        **NO_PY,
        "LAUNCHKIT_EXEC_METHOD": method,
        **policy_env(stall_timeout=1, stall_grace=0),
    }
    argv = _as_method(method, ["bash", "-c", script])
    r = entrypoint(tmp_path, str(repo.remote), git_head(repo), argv, env)
    assert r.returncode == 124, r.stderr
    assert r.stdout.startswith("step 1\nNCCL WARN\n")
    assert "setup done in" in r.stderr  # the command had started
    assert (
        r.stderr.strip()
        .splitlines()[-1]
        .startswith("[launchkit] stopped: no progress for 1s (last: step 1 at ")
    )
