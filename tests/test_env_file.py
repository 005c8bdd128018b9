"""`run --env-file FILE` (issue 31): dotenv syntax, repeatable, values checked as --env's, errors that
name FILE:LINE."""

from __future__ import annotations

import pytest

from launchkit.core import dotenv
from launchkit.core.parse import build_request
from launchkit.errors import UsageError

TOKEN = "hf_" + "a1B2c3D4e5" * 3

DOTENV = """\
# a comment
export MODEL=llama-3   # the model
EMPTY=
 SPACED = padded value
SINGLE='keeps $HOME and \\n as they are'
DOUBLE="line one\\nsay \\"hi\\" costs \\$5"
MULTI="first
second"
HASH=a#b
FROM_SHELL
"""


def _env(tmp_path, *files: str, environ: dict[str, str] | None = None, **given):
    paths = []
    for i, text in enumerate(files):
        p = tmp_path / f"{i}.env"
        p.write_text(text)
        paths.append(p.name)
    request = build_request(
        {"env_file": paths, **given}, ["python", "x"], environ=environ or {}, cwd=str(tmp_path)
    )
    return {e.name: e.value for e in request.env}


def test_dotenv_syntax(tmp_path):
    env = _env(tmp_path, DOTENV, environ={"FROM_SHELL": "here"})
    assert env == {
        "MODEL": "llama-3",
        "EMPTY": "",
        "SPACED": "padded value",
        "SINGLE": "keeps $HOME and \\n as they are",
        "DOUBLE": 'line one\nsay "hi" costs $5',
        "MULTI": "first\nsecond",
        "HASH": "a#b",
        "FROM_SHELL": "here",
    }
    assert [e.line for e in dotenv.parse(DOTENV, "f")] == [2, 3, 4, 5, 6, 7, 9, 10]


def test_repeatable_later_files_win_and_env_wins_over_files(tmp_path):
    env = _env(tmp_path, "A=1\nB=1\n", "B=2\nC=2\n", env=["C=3"])
    assert env == {"A": "1", "B": "2", "C": "3"}


def test_config_env_is_the_base(tmp_path):
    from launchkit.config import load_config

    (tmp_path / "pyproject.toml").write_text('[tool.launchkit.env]\nA = "config"\nB = "config"\n')
    cfg = load_config(cwd=str(tmp_path), environ={})
    (tmp_path / "x.env").write_text("B=file\n")
    r = build_request({"env_file": ["x.env"]}, ["x"], config=cfg, cwd=str(tmp_path), environ={})
    assert {e.name: e.value for e in r.env} == {"A": "config", "B": "file"}


@pytest.mark.parametrize(
    "text,words",
    [
        (
            f"OK=1\n\nHF_TOKEN={TOKEN}\n",
            ["0.env:3 'HF_TOKEN'", "Hugging Face token", "--env-secret HF_TOKEN"],
        ),
        ("A=1\nLAUNCHKIT_RUN_ID=x\n", ["0.env:2 'LAUNCHKIT_RUN_ID'", "set by launchkit"]),
        ("1BAD=x\n", ["0.env:1 '1BAD'", "not a valid environment variable name"]),
        ('A=1\nB="open\nstill open\n', ["0.env:2: B's value has no closing \""]),
        ("P=${HOME}/x\n", ["0.env:1: P's value refers to a variable", "single-quote"]),
        ('P="$HOME/x"\n', ["0.env:1: P's value refers to a variable"]),
        ("Q='a'b\n", ["0.env:1: Q: 'b' after the closing '"]),
        ("MISSING\n", ["0.env:1 'MISSING': MISSING is not set in this shell"]),
    ],
)
def test_errors_name_the_file_and_line(tmp_path, text, words):
    with pytest.raises(UsageError) as e:
        _env(tmp_path, text)
    line = e.value.one_line()
    assert all(w in line for w in words), line
    assert TOKEN not in line


def test_a_false_positive_passes_with_env_not_secret(tmp_path):
    value = "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY"
    assert _env(tmp_path, f"CODE={value}\n", env_not_secret=["CODE"]) == {"CODE": value}


def test_a_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"--env-file 'nope.env': cannot be read \(No such file"):
        build_request({"env_file": ["nope.env"]}, ["x"], environ={}, cwd=str(tmp_path))


def test_run_env_file_reaches_the_spec(repo):
    import yaml

    from inproc import run_main

    (repo.path / ".env").write_text("export WANDB_PROJECT=proj\n")
    r = run_main(
        "run", "--dry-run", "--offline", "--env-file", ".env", "--", "python", "train.py", cwd=repo.path
    )
    assert r.code == 0, r.stderr
    env = {e["name"]: e.get("value") for e in yaml.safe_load(r.stdout)["tasks"][0]["envVars"]}
    assert env["WANDB_PROJECT"] == "proj"
    bad = run_main(
        "run", "--dry-run", "--offline", "--env-file", "none.env", "--", "python", "train.py", cwd=repo.path
    )
    assert bad.code == 2 and "--env-file 'none.env'" in bad.stderr, bad.stderr
