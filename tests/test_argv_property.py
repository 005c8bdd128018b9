"""Property: any argv (quotes, spaces, $, newlines, unicode, ...) reaches the spec unchanged.

NUL is the one character argv cannot carry (C strings), so it is excluded; so are lone surrogates,
which only appear when argv is not valid UTF-8 (launchkit refuses that with a usage error).
"""

from __future__ import annotations

import os
import sys

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from inproc import run_main

ARG = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
TRICKY = st.sampled_from(
    [
        "",
        " ",
        "$HOME",
        "${X:-y}",
        "`id`",
        "$(id)",
        "'",
        '"',
        "\\",
        "\n",
        "\r\n",
        "\t",
        "a b",
        "--",
        "-x",
        "--flag=v",
        "*",
        "~",
        "!",
        "#c",
        "&&",
        ";",
        "|",
        "\u2028",
        "\x85",
        "\ufeff",
        "ü",
        "日本",
        "🙂",
        "null",
        "true",
        "~",
        "0x10",
        "1e3",
        "- a",
        ": b",
        "? c",
        "{a: 1}",
        "[1]",
        "&anchor",
        "*alias",
        "%TAG",
        "@",
        "`",
    ]
)
# The program (argv[0]) may not be empty or whitespace (test_error_paths.py), nor, unless it is an
# absolute path, a word with whitespace that is no file of the commit (test_envdef_refusals.py): launchkit
# refuses those at launch. Every other word of every argv arrives unchanged.
ARGV = st.lists(st.one_of(ARG, TRICKY), min_size=1, max_size=8).filter(
    lambda a: a[0].strip() != "" and (a[0].startswith("/") or not any(c.isspace() for c in a[0]))
)


def _arguments(stdout: str) -> list[str]:
    return yaml.safe_load(stdout)["tasks"][0]["arguments"]


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=ARGV)
def test_argv_arrives_unchanged_in_process(repo, argv):
    r = run_main("run", "--dry-run", "--", *argv, cwd=repo.path)
    assert r.code == 0, r.stderr
    assert _arguments(r.stdout) == argv


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=ARGV)
def test_argv_arrives_unchanged_through_a_real_process(repo, argv):
    r = run_cli("run", "--dry-run", "--", *argv, cwd=repo.path, timeout=60)
    assert r.code == 0, r.stderr
    assert _arguments(r.stdout) == argv


def test_non_utf8_argv_is_a_usage_error(repo):
    import subprocess

    bad = os.fsencode("python"), b"caf\xe9"
    proc = subprocess.run(
        [sys.executable, "-m", "launchkit", "run", "--dry-run", "--", *bad],
        cwd=repo.path,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2 and b"not valid UTF-8" in proc.stderr and proc.stdout == b""


def test_long_and_awkward_arguments(repo):
    argv = [
        "python",
        "x " * 5000,
        "é\t" * 3000 + " ",
        "line\n" * 500,
        " leading",
        "a\r\nb",
        "\x7f\x01\x1b[31m",
    ]
    r = run_main("run", "--dry-run", "--", *argv, cwd=repo.path)
    assert r.code == 0 and _arguments(r.stdout) == argv
