"""The job's Python environment in the node runtime (runtime/node/environment/: pyenv.py, projectbuild.py), called
directly: what the commit contains -> which uv commands run, the project's stored build (RECORD read
as CSV), its key.
Fast tier: tmp_path trees, a recording log instead of uv (the end-to-end tests run the real uv)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from conftest import git
from launchkit.runtime.node.environment import plan as planner
from launchkit.runtime.node.environment import projectbuild, pyenv, steplog
from launchkit.runtime.node.environment.pyenv import InstallFailed, Settings, build_env


class Recorder(steplog.StepLog):
    """A step log that records the commands instead of running them; `fail` names argv prefixes
    (joined with spaces) that exit 1."""

    def __init__(self, path: Path, fail: Sequence[str] = ()) -> None:
        super().__init__(str(path))
        self.commands: list[list[str]] = []
        self.envs: list[Mapping[str, str] | None] = []
        self.fail = list(fail)

    def run(self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> int:
        self.write("$ " + " ".join(argv))
        self.commands.append(list(argv))
        self.envs.append(env)
        return 1 if any(" ".join(argv).startswith(f) for f in self.fail) else 0

    def quiet(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
        return self.run(argv, env)

    def text(self) -> str:
        return Path(self.path).read_text()


def tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


PROJECT = '[project]\nname = "demo"\nversion = "0.1.0"\n'
GROUPS = PROJECT + '\n[dependency-groups]\ndev = ["pytest"]\ntest = ["hypothesis"]\ndocs = ["mkdocs"]\n'


def plan(tmp_path: Path, files: Mapping[str, str], **settings) -> tuple[str, list[list[str]], Recorder]:
    root = tree(tmp_path / "checkout", files)
    log = Recorder(tmp_path / "install.log")
    kind = build_env(str(root), Settings(str(tmp_path / "venv"), **settings), log, cache="")
    return kind, log.commands, log


# ---- what the commit contains


@pytest.mark.parametrize(
    ("files", "project"),
    [
        ({"setup.py": ""}, True),
        ({"setup.cfg": ""}, True),
        ({"pyproject.toml": PROJECT}, True),
        ({"pyproject.toml": '[build-system]\nrequires = ["hatchling"]\n'}, True),
        ({"pyproject.toml": "  [project]\n"}, True),
        ({"pyproject.toml": "[tool.ruff]\nline-length = 100\n"}, False),  # tool settings only
        ({"pyproject.toml": '[tool.x]\ns = """\n[projects]\n"""\n'}, False),
        ({"requirements.txt": ""}, False),
    ],
)
def test_is_project(tmp_path, files, project):
    assert planner.is_project(str(tree(tmp_path, files))) is project


@pytest.mark.parametrize(
    ("text", "hashed", "own"),
    [
        ("tinydep==0.1.0 \\\n    --hash=sha256:abc\n", True, False),
        ("tinydep==0.1.0 --hash sha256:abc\n", True, False),
        ("# --hash=sha256:abc in a comment\ntinydep\n", False, False),
        ("-e .\ntinydep==0.1 --hash=sha256:abc\n", True, True),
        (".\n", False, True),
        ("-e ./sub\n", False, False),
    ],
)
def test_hashed_requirements_and_the_projects_own_line(tmp_path, text, hashed, own):
    path = tmp_path / "requirements.txt"
    path.write_text(text)
    assert planner.hashed_requirements(str(path)) is hashed
    assert planner.has_own_line(str(path)) is own


@pytest.mark.parametrize(
    ("pyproject", "settings", "groups"),
    [
        (GROUPS, {}, ["dev"]),  # uv's default: `dev` when it exists
        (GROUPS, {"groups": ["docs"]}, ["docs", "dev"]),
        (GROUPS, {"groups": ["dev"]}, ["dev"]),  # once
        (GROUPS, {"no_default_groups": True, "groups": ["test"]}, ["test"]),
        (GROUPS, {"all_groups": True}, ["dev", "test", "docs"]),
        (GROUPS + '[tool.uv]\ndefault-groups = ["test", "nope"]\n', {}, ["test"]),
        (GROUPS + '[tool.uv]\ndefault-groups = "all"\n', {}, ["dev", "test", "docs"]),
        (PROJECT, {"groups": ["missing"]}, ["missing"]),  # no [dependency-groups]: uv names it
        (PROJECT, {"all_groups": True}, []),
    ],
)
def test_pip_groups_as_uv_sync_picks_them(tmp_path, pyproject, settings, groups):
    root = tree(tmp_path, {"pyproject.toml": pyproject})
    s = Settings("v", **settings)
    assert planner.plan_for(str(root), s.groups, s.all_groups, s.no_default_groups).groups == groups


def test_settings_from_the_environment():
    s = Settings.from_environ(
        {
            "LAUNCHKIT_UV_EXTRAS": "a  -b",
            "LAUNCHKIT_UV_GROUPS": "test",
            "LAUNCHKIT_UV_NO_DEFAULT_GROUPS": "1",
            "LAUNCHKIT_SYSTEM_PYTHON": "1",
            "LAUNCHKIT_PYTHON_VERSION": "3.12",
            "UV_NO_EDITABLE": "1",
            "LAUNCHKIT_LOCAL_RUN": "local-1",
        },
        "/v",
    )
    assert s.extra_flags() == ["--extra=a", "--extra=-b"]  # one argument each: a dash stays a value
    assert s.group_flags() == ["--group=test", "--no-default-groups"]
    assert s.target() == ["--system", "--break-system-packages"]
    assert (s.python_version, s.uv_leaves_project, s.image_venv, s.local_run) == ("3.12", True, False, True)
    s = Settings.from_environ({"LAUNCHKIT_UV_ALL_EXTRAS": "1", "LAUNCHKIT_UV_ALL_GROUPS": "1"}, "/v")
    assert (s.extra_flags(), s.group_flags(), s.target()) == (["--all-extras"], ["--all-groups"], [])


# ---- which commands run


def test_uv_lock_is_synced_frozen(tmp_path):
    files = {"pyproject.toml": PROJECT, "uv.lock": "", "requirements.txt": "x\n"}
    kind, commands, _ = plan(tmp_path, files, extras=["gpu"], groups=["test"], python_version="3.12")
    assert kind == "uv.lock"
    assert commands == [["uv", "sync", "--frozen", "--extra=gpu", "--group=test", "--python=3.12"]]
    _, commands, _ = plan(tmp_path, files, image_venv=True)
    assert commands == [["uv", "sync", "--frozen", "--inexact"]]  # keep what the image's venv has


def test_uv_lock_tries_the_cache_alone_first(tmp_path):
    root = tree(tmp_path / "checkout", {"pyproject.toml": PROJECT, "uv.lock": ""})
    cache = tmp_path / "cache"
    (cache / "archive-v0").mkdir(parents=True)
    log = Recorder(tmp_path / "log", fail=["uv sync --frozen --offline"])
    assert build_env(str(root), Settings(str(tmp_path / "venv")), log, cache=str(cache)) == "uv.lock"
    assert log.commands == [["uv", "sync", "--frozen", "--offline"], ["uv", "sync", "--frozen"]]
    assert "not all in the uv cache: syncing online" in log.text()
    log = Recorder(tmp_path / "log2", fail=["uv sync"])
    with pytest.raises(InstallFailed):
        build_env(str(root), Settings(str(tmp_path / "venv")), log, cache=str(cache))


def test_uv_lock_into_the_images_python(tmp_path):
    _, commands, log = plan(tmp_path, {"pyproject.toml": PROJECT, "uv.lock": ""}, system=True, extras=["a"])
    assert commands == [["uv", "sync", "--frozen", "--inexact", "--extra=a"]]
    env = log.envs[0]
    assert env is not None and env["UV_PROJECT_ENVIRONMENT"] == sys.prefix


@pytest.mark.parametrize(
    ("files", "settings", "kind", "commands"),
    [
        ({"pyproject.toml": PROJECT}, {}, "project", [["uv", "pip", "install", "."]]),
        ({"setup.py": ""}, {"extras": ["a", "b"]}, "project", [["uv", "pip", "install", ".[a,b]"]]),
        (
            {"pyproject.toml": PROJECT},
            {"all_extras": True},
            "project",
            [["uv", "pip", "install", "--all-extras", "-r", "pyproject.toml", "."]],
        ),
        (
            {"pyproject.toml": PROJECT, "pylock.toml": ""},
            {"system": True, "extras": ["a"]},
            "project+pylock.toml",
            [
                [
                    "uv",
                    "pip",
                    "install",
                    "--system",
                    "--break-system-packages",
                    "--preview-features",
                    "pylock",
                ]
                + ["-r", "pylock.toml", "--extra=a"],
                ["uv", "pip", "install", "--system", "--break-system-packages", ".[a]"],
            ],
        ),
        (
            {"requirements.txt": "x==1 --hash=sha256:00\n"},
            {},
            "requirements.txt",
            [["uv", "pip", "install", "--require-hashes", "-r", "requirements.txt"]],
        ),
        (
            {"pyproject.toml": PROJECT, "requirements.txt": "-e .\nx==1 --hash=sha256:00\n"},
            {},
            "project+requirements.txt",
            [["uv", "pip", "install", "-r", "requirements.txt"], ["uv", "pip", "install", "."]],
        ),
        (
            {"pyproject.toml": "[tool.ruff]\n", "requirements.txt": "x\n"},
            {},
            "requirements.txt",
            [["uv", "pip", "install", "-r", "requirements.txt"]],
        ),
        ({"README.md": ""}, {}, "nothing to install", []),
        (
            {"pyproject.toml": "[dependency-groups]\ndev = []\n"},
            {},
            "groups",
            [["uv", "pip", "install", "--group=pyproject.toml:dev"]],
        ),
        (
            {"pyproject.toml": GROUPS},
            {"groups": ["test"]},
            "project",
            [["uv", "pip", "install", ".", "--group=pyproject.toml:test", "--group=pyproject.toml:dev"]],
        ),
    ],
)
def test_what_the_commit_contains_decides_the_commands(tmp_path, files, settings, kind, commands):
    got_kind, got, log = plan(tmp_path, files, **settings)
    assert (got_kind, got) == (kind, commands)
    assert all(f"$ {' '.join(c)}\n" in log.text() for c in commands)  # the progress line shows them


def test_a_failed_command_fails_the_install(tmp_path):
    root = tree(tmp_path / "checkout", {"pyproject.toml": PROJECT, "pylock.toml": ""})
    log = Recorder(tmp_path / "log", fail=["uv pip install --preview-features"])
    with pytest.raises(InstallFailed):
        build_env(str(root), Settings(str(tmp_path / "venv")), log, cache="")
    assert len(log.commands) == 1  # the project is not installed over failed pins


def test_conda_installs_with_pip(tmp_path):
    root = tree(tmp_path / "checkout", {"requirements.txt": "x\n"})
    log = Recorder(tmp_path / "log", fail=["/py -m pip --version"])
    assert pyenv.conda_install(str(root), log, python="/py") == "requirements.txt"
    assert log.commands[1:] == [
        ["/py", "-m", "ensurepip", "--upgrade"],
        ["/py", "-m", "pip", "install", "--disable-pip-version-check", "-r", "requirements.txt"],
    ]
    (root / "setup.py").write_text("")
    log = Recorder(tmp_path / "log2")
    assert pyenv.conda_install(str(root), log, python="/py") == "project"
    assert log.commands[-1][-1] == "."
    assert pyenv.conda_install(str(tree(tmp_path / "empty", {})), log, python="/py") == "nothing to install"


# ---- the project's stored build


def make_venv(
    tmp_path: Path, root: Path, record: str, files: Mapping[str, str], editable: bool = True
) -> Path:
    venv = tmp_path / "venv"
    sp = venv / "lib/python3.12/site-packages"
    dist = sp / "demo-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.3\n")
    url = {"url": root.as_uri(), "dir_info": {"editable": editable}}
    (dist / "direct_url.json").write_text(json.dumps(url, separators=(",", ":")))
    (dist / "RECORD").write_text(record)
    for name, text in files.items():
        path = (sp / name).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return venv


RECORD = (
    "demo.pth,sha256=x,10\n"
    '"odd,name.py",sha256=y,3\n'  # a path with a comma: CSV-quoted
    "demo-0.1.0.dist-info/uv_cache.json,,\n"
    "../../../bin/demo-hello,sha256=z,5\n"
    "demo-0.1.0.dist-info/RECORD,,\n"
)
BUILT = {
    "demo.pth": "/checkout/src\n",
    "odd,name.py": "X = 1\n",
    "demo-0.1.0.dist-info/uv_cache.json": "{}",
    "../../../bin/demo-hello": "#!/bin/sh\n",
}


def test_record_is_read_as_csv_quoted_paths_included(tmp_path):
    root = tree(tmp_path / "checkout", {"pyproject.toml": PROJECT})
    venv = make_venv(tmp_path, root, RECORD, BUILT)
    dist = projectbuild.editable_dist(str(root), str(venv))
    assert dist.endswith("demo-0.1.0.dist-info")
    sp = "lib/python3.12/site-packages/"
    assert projectbuild.record_files(dist, str(venv)) == [
        sp + "demo.pth",
        sp + "odd,name.py",
        "bin/demo-hello",
        sp + "demo-0.1.0.dist-info/RECORD",
    ]
    (Path(dist) / "RECORD").write_text(RECORD + "../../../../outside.txt,,\n")
    assert projectbuild.record_files(dist, str(venv)) == []  # not ours to store


def test_only_one_editable_install_of_this_checkout_is_stored(tmp_path):
    root = tree(tmp_path / "checkout", {"pyproject.toml": PROJECT})
    venv = make_venv(tmp_path, root, RECORD, BUILT, editable=False)
    assert projectbuild.editable_dist(str(root), str(venv)) == ""
    assert not projectbuild.store_project(
        str(root), str(venv), str(tmp_path / "s.tar"), Recorder(tmp_path / "l")
    )
    editable = json.dumps({"url": root.as_uri(), "dir_info": {"editable": True}})
    (venv / "lib/python3.12/site-packages/demo-0.1.0.dist-info/direct_url.json").write_text(editable)
    assert projectbuild.editable_dist(str(root), str(venv)) != ""
    other = venv / "lib/python3.12/site-packages/other-1.dist-info"
    other.mkdir()
    (other / "direct_url.json").write_text(editable)
    assert projectbuild.editable_dist(str(root), str(venv)) == ""  # two: not ours to guess


def test_stored_build_round_trip(tmp_path):
    root = tree(tmp_path / "checkout", {"pyproject.toml": PROJECT})
    venv = make_venv(tmp_path, root, RECORD, BUILT)
    (venv / "bin/demo-hello").chmod(0o755)
    stored = tmp_path / "cache" / projectbuild.PROJECTS / "KEY.tar"
    log = Recorder(tmp_path / "log")
    assert projectbuild.store_project(str(root), str(venv), str(stored), log)
    assert "project: stored its build as KEY.tar" in log.text()
    assert oct(stored.stat().st_mode & 0o777) == oct(0o644)
    assert [p.name for p in stored.parent.iterdir()] == ["KEY.tar"]  # no temporary file left
    with tarfile.open(stored) as tar:
        assert "lib/python3.12/site-packages/odd,name.py" in tar.getnames()
        assert not any(n.endswith("uv_cache.json") for n in tar.getnames())

    fresh = make_venv(tmp_path / "job2", root, "", {})
    assert projectbuild.install_stored(str(stored), str(fresh)) == ""
    sp = fresh / "lib/python3.12/site-packages"
    assert (sp / "odd,name.py").read_text() == "X = 1\n" and (sp / "demo.pth").exists()
    assert os.access(fresh / "bin/demo-hello", os.X_OK)


def evil_tar(path: Path, name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, link
        data = b"import os\n"
        info.size = len(data) if kind == tarfile.REGTYPE else 0
        tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return path


@pytest.mark.parametrize(
    ("name", "kind", "link"),
    [
        ("../escape.pth", tarfile.REGTYPE, ""),
        ("/abs/escape.pth", tarfile.REGTYPE, ""),
        ("lib/link", tarfile.SYMTYPE, "/etc"),
        ("lib/link", tarfile.SYMTYPE, "../../.."),
        ("lib/fifo", tarfile.FIFOTYPE, ""),
    ],
)
def test_a_planted_stored_build_cannot_write_outside_the_venv(tmp_path, name, kind, link):
    venv = tmp_path / "job" / "venv"
    venv.mkdir(parents=True)
    stored = evil_tar(tmp_path / "cache/KEY.tar", name, kind, link)
    assert projectbuild.install_stored(str(stored), str(venv)) != ""
    assert list(venv.iterdir()) == [] and not (tmp_path / "job/escape.pth").exists()


def stored_build(cache: Path) -> Path:
    """A stored build (key K) of the project: its editable .pth."""
    stored = cache / projectbuild.PROJECTS / "K.tar"
    stored.parent.mkdir(parents=True)
    with tarfile.open(stored, "w") as tar:
        data = b"/checkout/src\n"
        info = tarfile.TarInfo("lib/python3.12/site-packages/demo.pth")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return stored


def test_sync_uses_the_stored_build_and_rebuilds_when_unreadable(tmp_path, monkeypatch):
    root = tree(tmp_path / "checkout", {"pyproject.toml": PROJECT, "uv.lock": ""})
    venv = make_venv(tmp_path, root, "", {})
    s = Settings(str(venv))
    monkeypatch.setattr(projectbuild, "project_key", lambda *a, **k: "K")
    cache = tmp_path / "cache"
    stored = stored_build(cache)
    log = Recorder(tmp_path / "log")
    pyenv.sync_locked(str(root), s, log, str(cache))
    assert log.commands == [["uv", "sync", "--frozen", "--no-install-project"]]
    assert (venv / "lib/python3.12/site-packages/demo.pth").exists()
    assert "installed its stored build K.tar (packaging files unchanged)" in log.text()

    stored.write_bytes(b"not a tar" * 100)
    log = Recorder(tmp_path / "log2")
    pyenv.sync_locked(str(root), s, log, str(cache))
    assert log.commands == [["uv", "sync", "--frozen", "--no-install-project"], ["uv", "sync", "--frozen"]]
    assert "the stored build is unreadable" in log.text()

    log = Recorder(tmp_path / "log-local")
    pyenv.sync_locked(str(root), Settings(str(venv), local_run=True), log, str(cache))
    assert log.commands == [["uv", "sync", "--frozen"]]  # a local run: its path is new every run

    stored.unlink()  # none stored: built by uv, then kept (nothing editable here: nothing to keep)
    log = Recorder(tmp_path / "log3")
    pyenv.sync_locked(str(root), s, log, str(cache))
    assert log.commands == [["uv", "sync", "--frozen"]]


def test_a_complete_env_store_hit_installs_the_stored_build_without_uv(tmp_path, monkeypatch):
    lock = 'version = 1\n[[package]]\nname = "demo"\nversion = "0.1.0"\nsource = { editable = "." }\n'
    root = tree(tmp_path / "checkout", {"pyproject.toml": PROJECT, "uv.lock": lock})
    venv = make_venv(tmp_path, root, "", {})
    s = Settings(str(venv))
    monkeypatch.setattr(projectbuild, "project_key", lambda *a, **k: "K")
    cache = tmp_path / "cache"
    (cache / "archive-v0").mkdir(parents=True)
    stored = stored_build(cache)
    log = Recorder(tmp_path / "log")
    pyenv.sync_locked(str(root), s, log, str(cache), linked=True)
    assert log.commands == []  # the store holds the rest: no uv at all
    assert (venv / "lib/python3.12/site-packages/demo.pth").exists()
    assert "no uv sync" in log.text()

    log = Recorder(tmp_path / "log-unlinked")  # not linked: uv checks and installs the rest
    pyenv.sync_locked(str(root), s, log, str(cache))
    assert log.commands == [["uv", "sync", "--frozen", "--no-install-project", "--offline"]]

    member = lock + '[[package]]\nname = "lib"\nversion = "1.0"\nsource = { editable = "packages/lib" }\n'
    (root / "uv.lock").write_text(member)  # a workspace member is left out of the store: uv installs it
    log = Recorder(tmp_path / "log-member")
    pyenv.sync_locked(str(root), s, log, str(cache), linked=True)
    assert log.commands == [["uv", "sync", "--frozen", "--no-install-project", "--offline"]]

    (root / "uv.lock").write_text(lock)
    stored.write_bytes(b"not a tar" * 100)  # unreadable: uv builds the project
    log = Recorder(tmp_path / "log-unreadable")
    pyenv.sync_locked(str(root), s, log, str(cache), linked=True)
    assert log.commands == [["uv", "sync", "--frozen"]]

    stored.unlink()  # nothing stored: uv builds and installs the project as before
    log = Recorder(tmp_path / "log-none")
    pyenv.sync_locked(str(root), s, log, str(cache), linked=True)
    assert log.commands == [["uv", "sync", "--frozen", "--offline"]]


def test_install_with_bytecode_prints_its_line(tmp_path, monkeypatch, capsys):
    """`install LOG VENV --bytecode BCLOG CHECKOUT`: the kind, then `bytecode MS [TREE]` (the bash
    reads both); the bytecode step never fails the install."""
    root = tree(tmp_path / "checkout", {"README": ""})
    monkeypatch.chdir(root)
    venv = tmp_path / "venv"
    monkeypatch.setattr(sys, "stderr", sys.stderr)  # (StepLog(errors=True) takes it)
    monkeypatch.setenv("LAUNCHKIT_SYSTEM_PYTHON", "1")  # (no env store, nothing to install)
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)
    argv = [str(tmp_path / "install.log"), str(venv), "--bytecode", str(tmp_path / "bc.log"), str(root)]
    assert pyenv.install(argv) == 0
    kind, line = capsys.readouterr().out.splitlines()
    assert kind == "nothing to install" and line.split()[0] == "bytecode" and line.split()[1].isdigit()
    assert len(line.split()) == 2  # no uv cache: no tree

    from launchkit.runtime.node.environment import bytecode

    def broken(*a, **k):
        raise OSError("disk gone")

    monkeypatch.setattr(bytecode, "choose", broken)
    assert pyenv.install(argv) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[0] == "bytecode"
    assert "not used (OSError: disk gone)" in (tmp_path / "bc.log").read_text()
    assert pyenv.install([*argv[:2], "--bytcode", *argv[3:]]) == 100


# ---- the key of the project's build


def project_repo(tmp_path: Path, files: Mapping[str, str]) -> Path:
    root = tree(tmp_path / "checkout", files)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "c")
    return root


def commit(root: Path, files: Mapping[str, str]) -> None:
    tree(root, files)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "c")


def key(root: Path, venv: Path, **settings) -> str:
    return projectbuild.project_key(str(root), str(venv), Settings(str(venv), **settings))


def test_project_key_stands_for_the_packaging_by_content(tmp_path):
    root = project_repo(tmp_path, {"pyproject.toml": PROJECT, "src/demo/__init__.py": "A = 1\n"})
    venv = make_venv(tmp_path, root, "", {})
    first = key(root, venv)
    assert len(first) == 32
    commit(root, {"src/demo/__init__.py": "A = 2\n", "README.md": "x"})
    assert key(root, venv) != first  # a new top-level name
    second = key(root, venv)
    commit(root, {"src/demo/__init__.py": "A = 3\n"})
    assert key(root, venv) == second  # only code changed: the same build
    commit(root, {"src/other/__init__.py": ""})
    assert key(root, venv) != second  # a new package under src/
    third = key(root, venv)
    commit(root, {"pyproject.toml": PROJECT.replace("0.1.0", "0.2.0")})
    assert key(root, venv) != third  # the packaging changed
    (venv / "pyvenv.cfg").write_text("version_info = 3.13.0\n")
    assert key(root, venv) not in (third, "")


def test_project_key_per_commit_or_left_to_uv(tmp_path):
    root = project_repo(tmp_path, {"pyproject.toml": PROJECT + 'dynamic = ["version"]\n', "a.py": ""})
    venv = make_venv(tmp_path, root, "", {})
    first = key(root, venv)
    commit(root, {"a.py": "A = 1\n"})
    assert key(root, venv) != first  # dynamic metadata: reused only for the same commit
    assert key(root, venv, uv_leaves_project=True) == ""
    commit(root, {"pyproject.toml": PROJECT + "[tool.uv.workspace]\nmembers = []\n"})
    assert key(root, venv) == ""
    commit(root, {"pyproject.toml": PROJECT + "[tool.uv]\ncache-keys = []\n"})
    assert key(root, venv) == ""
    commit(root, {"pyproject.toml": PROJECT})
    (venv / "pyvenv.cfg").unlink()
    assert key(root, venv) == ""


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"zz/x.py": ""},  # a name after src
        {"naïve.txt": "", "src/ünï/__init__.py": ""},  # names git quotes: listed apart, same key
        {"srcs/a.py": "", "src-x.txt": ""},  # names sorting around src/
    ],
)
def test_project_key_is_the_one_the_bash_runtime_computed(tmp_path, extra):
    """Stored builds on shared caches stay valid across the move: same inputs, same bytes hashed
    (one `git ls-tree` call now where the bash runtime made three)."""
    root = project_repo(
        tmp_path,
        {"pyproject.toml": PROJECT, "setup.cfg": "", "src/demo/__init__.py": "", "tests/t.py": "", **extra},
    )
    venv = make_venv(tmp_path, root, "", {})
    bash = r"""
        py=$(grep -m1 '^version_info' "$2/pyvenv.cfg")
        { printf 'launchkit-project-v1\n%s\n%s\n%s\n%s\n' "$PWD" "$2" "$py" ""
          git ls-tree HEAD -- pyproject.toml setup.py setup.cfg
          git ls-tree --name-only HEAD
          git ls-tree --name-only HEAD:src 2>/dev/null || true; } | sha256sum
    """
    out = subprocess.run(
        ["bash", "-c", bash, "k", str(root), str(venv)], cwd=root, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert key(root, venv) == out.stdout[:32]


def test_child_commands_do_not_see_the_runtime_on_pythonpath():
    here = str(Path(steplog.__file__).parents[2])
    env = steplog.child_environ({"PYTHONPATH": os.pathsep.join([here, "/user/lib"]), "A": "1"})
    assert env == {"PYTHONPATH": "/user/lib", "A": "1"}
    assert "PYTHONPATH" not in steplog.child_environ({"PYTHONPATH": here})


def test_members_outside_the_venv_are_refused_on_any_python(tmp_path):
    """The check itself, not only tarfile's `data` filter (which older Pythons lack)."""
    for name, kind, link in [("../x", tarfile.REGTYPE, ""), ("a/l", tarfile.SYMTYPE, "/etc/passwd")]:
        with tarfile.open(evil_tar(tmp_path / f"{kind!r}.tar", name, kind, link)) as tar:
            with pytest.raises(ValueError, match="outside the environment"):
                projectbuild.safe_members(tar, str(tmp_path / "venv"))
    with tarfile.open(evil_tar(tmp_path / "ok.tar", "lib/ok.pth")) as tar:
        assert [m.name for m in projectbuild.safe_members(tar, str(tmp_path / "venv"))] == ["lib/ok.pth"]


def test_uv_cache_dir_without_asking_uv_when_it_is_given(tmp_path, monkeypatch):
    assert pyenv.uv_cache_dir({"UV_CACHE_DIR": str(tmp_path)}) == str(tmp_path)
    assert pyenv.uv_cache_dir({"UV_CACHE_DIR": str(tmp_path), "UV_NO_CACHE": "1"}) == ""
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("PATH", str(tmp_path / "no-uv-here"))
    assert pyenv.uv_cache_dir({}) == ""  # asks uv, which is not there


def test_the_users_modules_do_not_shadow_the_runtimes(tmp_path):
    """The runtime runs in the checkout (`python -m launchkit_node`, cwd first on sys.path): a
    repository's own subprocess.py or csv.py is not what the runtime imports."""
    from launchkit.runtime import NODE_PACKAGE, node_files

    package = tmp_path / "node" / NODE_PACKAGE
    package.mkdir(parents=True)
    for name, text in node_files().items():
        (package / name).parent.mkdir(exist_ok=True)
        (package / name).write_text(text)
    checkout = tree(
        tmp_path / "checkout",
        dict.fromkeys(
            ("subprocess.py", "re.py", "hashlib.py"),
            "raise SystemExit('the checkout shadowed ' + __name__)\n",
        ),
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "node"), "RESULTS_DIR": str(tmp_path / "r")}
    log = tmp_path / "install.log"
    r = subprocess.run(
        [sys.executable, "-s", "-m", NODE_PACKAGE, "install", str(log), str(tmp_path / "venv")],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + (log.read_text() if log.exists() else "")
    assert r.stdout == "nothing to install\n"
