"""What would fail in the job is refused at launch: a path relative to the subdirectory `run` was
started from, one command word with spaces, an origin a Beaker node cannot clone."""

from __future__ import annotations

import pytest

from conftest import git
from inproc import run_main
from launchkit.errors import PreconditionError, UsageError
from launchkit.jobchecks import beaker_address, check_command, check_remote_reachable, local_remote

DRY = ("run", "--local", "--dry-run", "--no-python")


@pytest.fixture
def layout(repo):
    """A repository with a script in a subdirectory (as `examples/x/train.py` layouts have)."""
    repo.commit(
        {"sub/s.py": "print('s')\n", "sub/run.sh": "echo run\n", "my script.sh": "echo hi\n"}, "layout"
    )
    return repo


def _check(repo, cmd: list[str], cwd, exec_method: str = "exec") -> None:
    sha = git(repo.path, "rev-parse", "HEAD")
    check_command([cmd], exec_method=exec_method, root=str(repo.path), commit=sha, cwd=str(cwd))


def test_a_path_from_the_subdirectory_is_refused_with_the_root_path(layout):
    with pytest.raises(UsageError) as e:
        _check(layout, ["python", "s.py"], layout.path / "sub")
    assert "'s.py' is sub/s.py from the repository root" in str(e.value) and e.value.hint.endswith("sub/s.py")
    with pytest.raises(UsageError) as e:
        _check(layout, ["./run.sh"], layout.path / "sub")
    assert e.value.hint.endswith("./sub/run.sh")
    with pytest.raises(UsageError):  # --multi commands and torchrun-style arguments too
        _check(layout, ["torchrun", "--nproc-per-node", "2", "s.py", "--lr", "1"], layout.path / "sub")
    # what the job finds is fine: a root path from the subdirectory, anything from the root
    _check(layout, ["python", "train.py"], layout.path / "sub")
    _check(layout, ["python", "sub/s.py"], layout.path)
    _check(layout, ["python", "s.py"], layout.path)  # no sub/ prefix from the root: not ours to guess


def test_one_word_with_spaces_is_refused_unless_it_is_a_file_or_a_shell_line(layout):
    with pytest.raises(UsageError) as e:
        _check(layout, ["python3 train.py"], layout.path)
    assert "one word with spaces" in str(e.value) and "--exec-method bash" in e.value.hint
    _check(layout, ["my script.sh"], layout.path)  # a file of that name is in the commit
    _check(layout, ["python3 train.py"], layout.path, exec_method="bash")  # bash joins the words


def test_refusals_through_the_cli(layout):
    r = run_main(*DRY, "--", "python", "s.py", cwd=layout.path / "sub")
    assert r.code == 2 and "give the path from the root: sub/s.py" in r.stderr, r.stderr
    r = run_main(*DRY, "--", "python3 train.py", cwd=layout.path)
    assert r.code == 2 and "one word with spaces" in r.stderr, r.stderr
    r = run_main(*DRY, "--", "python", "sub/s.py", cwd=layout.path)
    assert r.code == 0, r.stderr


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("/srv/git/repo.git", True),
        ("file:///srv/git/repo.git", True),
        ("../repo", True),
        ("https://github.com/o/r.git", False),
        ("git@example.com:o/r.git", False),
        ("ssh://git@example.com/o/r", False),
    ],
)
def test_local_remotes(url, local):
    assert local_remote(url) is local


def test_a_local_origin_is_refused_for_beaker_unless_beaker_is_on_this_machine(tmp_path):
    with pytest.raises(PreconditionError) as e:
        check_remote_reachable("file:///srv/r.git", beaker_addr=None)
    assert "a Beaker node cannot clone it" in str(e.value) and "--local" in e.value.hint
    with pytest.raises(PreconditionError):
        check_remote_reachable("/srv/r.git", beaker_addr="https://beaker.org")
    check_remote_reachable("/srv/r.git", beaker_addr="https://127.0.0.1:4443")  # a Beaker here (a test's)
    check_remote_reachable("https://github.com/o/r.git", beaker_addr=None)
    cfg = tmp_path / "config.yml"
    cfg.write_text("user_token: t\nagent_address: https://beaker.example.com\n")
    assert beaker_address({"BEAKER_CONFIG": str(cfg)}) == "https://beaker.example.com"
    assert beaker_address({"BEAKER_ADDR": "https://x", "BEAKER_CONFIG": str(cfg)}) == "https://x"


def test_beaker_run_with_a_local_origin_is_refused_before_submitting(repo, tmp_path):
    cfg = tmp_path / "config.yml"
    cfg.write_text("user_token: t\nagent_address: https://beaker.invalid\ndefault_workspace: ai2/x\n")
    env = {"BEAKER_CONFIG": str(cfg)}
    r = run_main("run", "--no-python", "--", "python", "train.py", cwd=repo.path, env=env)
    assert r.code == 3 and "a Beaker node cannot clone it" in r.stderr, r.stderr
    r = run_main("-v", "run", "--dry-run", "--offline", "--", "python", "train.py", cwd=repo.path, env=env)
    assert r.code == 0 and "submitting it would be refused" in r.stderr, r.stderr
    r = run_main("run", "--local", "--dry-run", "--", "python", "train.py", cwd=repo.path, env=env)
    assert r.code == 0 and "cannot clone" not in r.stderr, r.stderr


def test_a_root_with_nothing_to_install_names_the_packages_below_it(repo):
    """markitdown's layout: the package is packages/markitdown, the root installs nothing, and the job ran
    `exec: markitdown: not found` with no word about it (issue 31)."""
    project = '[project]\nname = "{}"\nversion = "0"\n'
    repo.commit(
        {
            "packages/markitdown/pyproject.toml": project.format("markitdown"),
            "packages/markitdown-mcp/pyproject.toml": project.format("markitdown-mcp"),
            "tools/deep/er/still/setup.py": "",  # deeper than a package layout: not named
        },
        "monorepo",
    )
    args = ("run", "--dry-run", "--offline", "--", "markitdown", "x.pdf")
    r = run_main(*args, cwd=repo.path)
    assert r.code == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if "installs nothing" in line]
    assert len(lines) == 1, r.stderr
    assert "packages found in packages/markitdown, packages/markitdown-mcp;" in lines[0]
    assert "--install 'uv pip install ./packages/markitdown'" in lines[0] and "tools/" not in lines[0]
    assert "installs nothing" not in run_main(*args[:3], "--install", "true", "--", "x", cwd=repo.path).stderr
    # a root that installs something says nothing
    repo.commit({"requirements.txt": "markitdown\n"})
    assert "installs nothing" not in run_main(*args, cwd=repo.path).stderr


def test_a_script_only_repository_says_nothing(repo):
    r = run_main("run", "--dry-run", "--offline", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0 and "installs nothing" not in r.stderr, r.stderr
