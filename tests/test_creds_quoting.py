"""Every string that reaches the entrypoint is quoted (issue 21 item 5): hostile extras, Python
versions and paths run the REAL entrypoint (bash, git) with a stub `uv` on PATH that records its argv;
each value arrives as exactly one argument, unchanged, and nothing in it is executed or globbed."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lk_helpers import entrypoint

# uv stub: one record per call, arguments NUL-terminated, then \x01; `uv venv` makes the venv's python
STUB_UV = """#!/bin/bash
{ printf '%s\\0' "$@"; printf '\\1\\0'; } >>"$LK_TEST_UV_LOG"
if [[ $1 == venv ]]; then
    venv=${@: -1}
    mkdir -p -- "$venv/bin" && ln -sf "$LK_TEST_PYTHON" "$venv/bin/python"
    printf 'version_info = 3.11.0\\n' >"$venv/pyvenv.cfg"
fi
exit 0
"""
# no whitespace: extras are space-separated names (run refuses spaces in them)
NASTY = [
    "*",
    "?",
    "[a-z]*",
    "$(>{canary})",
    "`>{canary}`",
    "';>{canary};'",
    '"',
    "-x",
    "--all",
    "~",
    "$HOME",
    "a\\b",
    "{a,b}",
    "!1",
]


def calls(log: Path) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for arg in log.read_text().split("\0")[:-1] if log.exists() else []:
        if arg == "\x01":
            out.append([])
        else:
            out[-1].append(arg)
    return out[:-1]


@pytest.fixture
def locked_repo(repo):
    """A checkout with uv.lock and pyproject.toml (the `uv sync` path) and files a glob would find."""
    repo.commit(
        {"pyproject.toml": '[project]\nname = "d"\nversion = "0"\n', "uv.lock": "", "job.py": ""}, "lock"
    )
    return repo


def run(
    tmp: Path, repo, extras: list[str], python: str | None, runtime: str = "runtime"
) -> tuple[list[list[str]], object]:
    tmp.mkdir(parents=True, exist_ok=True)
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "uv").write_text(STUB_UV)
    (bin_dir / "uv").chmod(0o755)
    log = tmp / "uv.log"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "LK_TEST_UV_LOG": str(log),
        "LK_TEST_PYTHON": sys.executable,
        "LAUNCHKIT_UV_EXTRAS": " ".join(extras),
        "LAUNCHKIT_PYTHON_VERSION": python,
        "LAUNCHKIT_RUNTIME_DIR": str(tmp / runtime),
    }
    r = entrypoint(tmp, str(repo.remote), _head(repo), ["true"], env, timeout=60)
    return calls(log), r


def _head(repo) -> str:
    from conftest import git

    return git(repo.path, "rev-parse", "HEAD")


def check(tmp: Path, repo, extras: list[str], python: str | None, runtime: str = "runtime") -> None:
    canary = tmp / "pwned"
    extras = [e.replace("{canary}", str(canary)) for e in extras]
    python = python.replace("{canary}", str(canary)) if python else python
    got, r = run(tmp, repo, extras, python, runtime)
    assert r.returncode == 0, r.stderr  # type: ignore[attr-defined]
    assert not canary.exists(), "a value was executed"
    sync = next(c for c in got if c[:1] == ["sync"])
    assert [a for a in sync if a.startswith("--extra")] == [f"--extra={e}" for e in extras]
    venv = next(c for c in got if c[:1] == ["venv"])
    for c in (sync, venv):
        if python:
            assert f"--python={python}" in c
        else:
            assert not any(a.startswith("--python") for a in c)
    assert venv[-1] == str(tmp / runtime / ".venv") and venv[-2] == "--"


def test_glob_and_command_substitution_in_extras_stay_values(locked_repo, tmp_path):
    """The bug of issue 21: `--uv-extra '*'` became `--extra job.py --extra uv.lock ...`."""
    check(tmp_path / "a", locked_repo, ["*", "$(>{canary})", "-x"], "3.11")
    check(tmp_path / "b", locked_repo, ["`>{canary}`"], "-3.12 $(touch {canary})")
    check(tmp_path / "c", locked_repo, ["a"], None, runtime="-rt $(touch canary) *")


extra = st.one_of(
    st.sampled_from(NASTY),
    st.text(st.characters(blacklist_categories=("Cs", "Zs", "Cc")), min_size=1, max_size=8),
)


@pytest.mark.slow
def test_hostile_values_arrive_as_one_argument_each(locked_repo, tmp_path_factory):
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        st.lists(extra, min_size=1, max_size=3),
        st.one_of(
            st.none(),
            st.sampled_from(NASTY),
            st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=8),
        ),
        st.sampled_from(["runtime", "-r", "a b*", "$(touch {canary})", "`x`'\"", "[x]?"]),
    )
    def prop(extras: list[str], python: str | None, runtime: str) -> None:
        check(
            tmp_path_factory.mktemp("q"), locked_repo, extras, python, runtime.replace("{canary}", "canary")
        )

    prop()
