"""Issue 41: hostile input, round 4 (env files, reserved names, the Python API, local retries, and the
cases earlier rounds left failing).

Each case is one line on stderr naming the value and the fix with the documented exit code (2 usage,
3 precondition), or a launchkit.errors exception from the Python API, with no state touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import Repo, run_cli
from inproc import run_main
from test_error_paths import one_line

CMD = ["--", "python", "train.py"]


# -- 1. files are read as files ------------------------------------------------------------------------


def _fifo(tmp_path) -> str:
    path = str(tmp_path / "fifo")
    os.mkfifo(path)
    return path


def _hostile_files(tmp_path) -> list[tuple[str, str]]:
    """(path, the words that name what it is): a FIFO nobody writes to, devices, a directory."""
    return [
        (_fifo(tmp_path), "is a FIFO (named pipe), not a regular file"),
        ("/dev/zero", "is a character device, not a regular file"),
        ("/dev/urandom", "is a character device, not a regular file"),
        (str(tmp_path), "is a directory, not a regular file"),
    ]


def test_env_file_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path, repo):
    for path, words in _hostile_files(tmp_path):
        # a real process: a FIFO that blocked would hang it (the timeout fails the test)
        r = run_cli("run", "--dry-run", "--env-file", path, *CMD, cwd=repo.path, timeout=60)
        one_line(r, 2, f"--env-file {path!r}: {words}", "dotenv file")


def test_secret_from_file_that_is_not_a_regular_file_is_refused(tmp_path):
    for path, words in _hostile_files(tmp_path):
        r = run_cli("secret", "set", "X", "--workspace", "ai2/w", "--from-file", path, timeout=60)
        one_line(r, 2, f"--from-file {path!r}: {words}")


def test_secret_from_stdin_has_a_size_limit(tmp_path):
    p = subprocess.run(
        f"{sys.executable} -m launchkit secret set X --workspace ai2/w < /dev/zero",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2, p.stderr
    assert "larger than 1 MiB" in p.stderr and "Traceback" not in p.stderr


def test_a_big_env_file_is_refused_with_the_limit(tmp_path, repo):
    big = tmp_path / "big.env"
    big.write_text("A=" + "x" * (1 << 20) + "\n")
    r = run_main("run", "--dry-run", "--env-file", str(big), *CMD, cwd=repo.path)
    one_line(r, 2, "--env-file", "is larger than launchkit reads (1 MiB at most)")


def test_a_big_secret_file_is_refused_with_the_limit(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * ((1 << 20) + 1))
    r = run_main("secret", "set", "X", "--workspace", "ai2/w", "--from-file", str(big))
    one_line(r, 2, "--from-file", "1 MiB at most")


def test_one_unclosed_quote_before_60000_lines_is_one_error_fast(tmp_path, repo):
    env = tmp_path / "a.env"
    env.write_text("A=1\nB='never closed\n" + "C=3\n" * 60_000)
    started = time.process_time()
    r = run_main("run", "--dry-run", "--env-file", str(env), *CMD, cwd=repo.path)
    one_line(r, 2, f"{env}:2: B's value has no closing '")
    # CPU time, not wall time: the quadratic parser took minutes here, a linear one milliseconds
    assert time.process_time() - started < 20


@pytest.mark.parametrize(
    "data, words",
    [
        (b"A=1\nB=x\x00y\n", ":2: has a NUL byte (byte 8)"),
        (b"A=1\n\nC='x\xffy'\n", ":3: is not UTF-8 text (byte 10)"),
    ],
    ids=["nul", "not-utf8"],
)
def test_env_file_bytes_that_cannot_travel_are_refused_naming_the_line(tmp_path, repo, data, words):
    env = tmp_path / "a.env"
    env.write_bytes(data)
    for local in ([], ["--local"]):
        r = run_main("run", "--dry-run", *local, "--env-file", str(env), *CMD, cwd=repo.path)
        line = one_line(r, 2, f"{env}{words}")
        assert "x" not in line.split(words)[1].split("(")[0]  # the value is never shown


def test_secret_value_with_a_nul_byte_is_refused(tmp_path):
    f = tmp_path / "v"
    f.write_bytes(b"ab\x00cd")
    r = run_main("secret", "set", "X", "--workspace", "ai2/w", "--from-file", str(f))
    line = one_line(r, 2, "has a NUL byte (byte 3 of 5)")
    assert "abcd" not in line and "cd" not in line.split("(")[0]


def test_a_huge_pyproject_is_refused_with_the_limit(repo: Repo):
    repo.commit({"pyproject.toml": "[tool.launchkit]\n" + "# padding\n" * 500_000})
    r = run_main("run", "--dry-run", *CMD, cwd=repo.path)
    one_line(r, 2, "pyproject.toml: is larger than launchkit reads (4 MiB at most)")


# -- 2. reserved names are reserved on every path ------------------------------------------------------

RESERVED = ["LAUNCHKIT_GIT_COMMIT", "LAUNCHKIT_SLACK_WEBHOOK", "RESULTS_DIR"]


@pytest.mark.parametrize("name", RESERVED)
@pytest.mark.parametrize("dry", [["--dry-run"], ["--dry-run", "--offline"], ["--local", "--dry-run"]])
def test_env_secret_cannot_replace_launchkits_own_variables(repo, name, dry):
    r = run_main("run", *dry, "--env-secret", f"{name}=X", *CMD, cwd=repo.path)
    one_line(r, 2, f"--env-secret {name!r}: is set by launchkit itself")


@pytest.mark.parametrize(
    "table, needle",
    [
        ('[tool.launchkit.env_secrets]\nLAUNCHKIT_GIT_COMMIT = "X"\n', "LAUNCHKIT_GIT_COMMIT"),
        ('[tool.launchkit.env]\nLAUNCHKIT_GIT_COMMIT = "abc"\n', "LAUNCHKIT_GIT_COMMIT"),
        (
            '[tool.launchkit.profiles.lab]\nclusters = ["ai2/lab-*"]\nenv = { LAUNCHKIT_RUN_ID = "x" }\n',
            "LAUNCHKIT_RUN_ID",
        ),
        (
            '[tool.launchkit.profiles.lab]\nclusters = ["ai2/lab-*"]\n'
            'setup = [{ export = { LAUNCHKIT_GIT_COMMIT = "x" } }]\n',
            "LAUNCHKIT_GIT_COMMIT",
        ),
    ],
    ids=["config-env-secrets", "config-env", "profile-env", "profile-export"],
)
def test_config_and_profiles_cannot_set_launchkits_own_variables(repo: Repo, table, needle):
    repo.commit({"pyproject.toml": table})
    r = run_main("run", "--dry-run", "--offline", "--cluster", "ai2/lab-1", *CMD, cwd=repo.path)
    one_line(r, 2, needle, "set by launchkit itself")


def test_env_file_cannot_set_launchkits_own_variables(tmp_path, repo):
    env = tmp_path / "a.env"
    env.write_text("OK=1\nLAUNCHKIT_GIT_COMMIT=abc\n")
    r = run_main("run", "--dry-run", "--env-file", str(env), *CMD, cwd=repo.path)
    one_line(r, 2, f"{env}:2 'LAUNCHKIT_GIT_COMMIT': is set by launchkit itself")


MASON = ["mason", "--cluster", "ai2/jupiter", "--dry-run", "--offline"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--env", "LAUNCHKIT_GIT_COMMIT=abc"], "--env 'LAUNCHKIT_GIT_COMMIT': is set by launchkit itself"),
        (
            ["--secret", "LAUNCHKIT_SLACK_WEBHOOK=hook"],
            "--secret 'LAUNCHKIT_SLACK_WEBHOOK': is set by launchkit",
        ),
        (["--secret", "RESULTS_DIR=x"], "--secret 'RESULTS_DIR': is set by launchkit itself"),
        (["--env", "A B=1"], "--env 'A B': is not a valid environment variable name"),
        (["--secret", "A=has space"], "--secret A='has space': is not a valid secret name"),
        (["--task_name", "a b"], "--task_name 'a b': is not a valid task name"),
        (["--image", ""], "--image '': is not an image name"),
    ],
    ids=["env", "secret", "results-dir", "env-name", "secret-name", "task-name", "image"],
)
def test_mason_options_refused_like_runs(repo, args, needle):
    r = run_main(*MASON, *args, "--", "python", "train.py", cwd=repo.path)
    one_line(r, 2, needle)


def test_a_request_built_directly_cannot_carry_launchkits_own_variables():
    from launchkit.core.request import EnvSecret, LaunchRequest

    with pytest.raises(ValueError, match="LAUNCHKIT_GIT_COMMIT is set by launchkit itself"):
        LaunchRequest(command=["x"], env_secrets=[EnvSecret(name="LAUNCHKIT_GIT_COMMIT", secret="s")])
