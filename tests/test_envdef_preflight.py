"""Preflight: the job's environment resolved for the node's platform (Linux x86_64, the job's Python)
before a Beaker submit; a corpus of small repositories, each broken in a different real way, with and
without a lock (uv.lock, pylock.toml)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from inproc import run_main
from launchkit.application import Application
from launchkit.errors import PreconditionError
from launchkit.pyenv import check_uv_lock, job_plan, preflight, preflight_lock
from launchkit.pyenv import preflight_inputs as _preflight_inputs
from lk_helpers import make_wheel

PROJECT = (
    '[project]\nname = "demo"\nversion = "0.1.0"\nrequires-python = "{rp}"\ndependencies = [{deps}]\n{more}'
)


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A flat index and nothing else (no network): tinydep 0.1.0/0.2.0, a macOS-only and a 3.13+ package."""
    folder = tmp_path / "index"
    make_wheel(folder, version="0.1.0")
    make_wheel(folder, version="0.2.0")
    mac = make_wheel(folder, name="macdep", version="1.0")
    mac.rename(folder / "macdep-1.0-py3-none-macosx_11_0_arm64.whl")
    make_wheel(folder, name="newpy", version="1.0").rename(
        folder / "newpy-1.0-cp313-cp313-manylinux_2_28_x86_64.whl"
    )
    monkeypatch.setenv("UV_FIND_LINKS", str(folder))
    monkeypatch.setenv("UV_NO_INDEX", "1")
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    return folder


def preflight_inputs(root, *, extras, all_extras, groups, **kw):
    """The compile inputs of what the job installs from `root` (its plan)."""
    return _preflight_inputs(job_plan(root, groups=groups, **kw), extras=extras, all_extras=all_extras)


def _project(tmp_path, name, deps="", rp=">=3.10", more="", files=None):
    root = tmp_path / name
    root.mkdir()
    (root / "pyproject.toml").write_text(PROJECT.format(rp=rp, deps=deps, more=more))
    for f, text in (files or {}).items():
        (root / f).write_text(text)
    return root


CORPUS = [
    # (name, pyproject deps, extra pyproject text, extras, groups, what uv says)
    ("missing-version", '"tinydep==9.9"', "", [], [], "tinydep==9.9"),
    ("no-such-package", '"nosuchpkg-lk"', "", [], [], "nosuchpkg-lk"),
    ("conflicting-pins", '"tinydep==0.1.0", "tinydep>=0.2"', "", [], [], "tinydep"),
    ("no-linux-wheel", '"macdep"', "", [], [], "macdep"),
    ("needs-newer-python", '"newpy"', "", [], [], "newpy"),
    (
        "broken-extra",
        "",
        '[project.optional-dependencies]\ngpu = ["nosuchpkg-lk"]\n',
        ["gpu"],
        [],
        "nosuchpkg-lk",
    ),
    ("broken-group", "", '[dependency-groups]\ntest = ["tinydep==7"]\n', [], ["test"], "tinydep==7"),
    ("pin-and-platform", '"tinydep==0.2.0", "macdep==1.0"', "", [], [], "macdep"),
    ("missing-transitive-extra", '"tinydep[nope]==9"', "", [], [], "tinydep"),
]


@pytest.mark.parametrize(
    ("name", "deps", "more", "extras", "groups", "said"), CORPUS, ids=[c[0] for c in CORPUS]
)
def test_each_broken_environment_is_refused(index, tmp_path, name, deps, more, extras, groups, said):
    root = _project(tmp_path, name, deps=deps, more=more)
    inputs = preflight_inputs(str(root), extras=extras, all_extras=False, groups=groups)
    assert inputs
    with pytest.raises(PreconditionError) as e:
        preflight(Application(), str(root), inputs, "3.12")
    msg = str(e.value)
    assert "cannot be resolved for Linux x86_64, python 3.12" in msg and said in msg, msg
    assert "\n" not in msg and "--no-preflight" in e.value.hint


def _requirements(tmp_path, name, text):
    root = tmp_path / name
    root.mkdir()
    (root / "requirements.txt").write_text(text)
    return root, preflight_inputs(str(root), extras=[], all_extras=False, groups=[])


def test_requirements_txt_that_cannot_resolve_is_refused(index, tmp_path):
    root, inputs = _requirements(tmp_path, "reqs", "tinydep==0.1.0\ntinydep==0.2.0\n")
    with pytest.raises(PreconditionError) as e:
        preflight(Application(), str(root), inputs, "3.12")
    assert "cannot be resolved for Linux x86_64" in str(e.value) and "tinydep" in str(e.value), e.value


def _sha256(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_healthy_requirements_txt_passes(index, tmp_path):
    """Plain, hashed and `--index-url`/`--find-links` requirement files, as real projects have them."""
    wheel = next(index.glob("tinydep-0.2.0-*.whl"))
    shapes = {
        "plain": "tinydep==0.2.0\n",
        "hashed": f"tinydep==0.2.0 --hash=sha256:{_sha256(wheel)}\n",
        "options": f"--find-links {index}\n--no-index\n# a comment\ntinydep>=0.1\n",
        "index-url": f"--index-url http://127.0.0.1:9/simple\n--find-links {index}\ntinydep\n",
    }
    for name, text in shapes.items():
        root, inputs = _requirements(tmp_path, name, text)
        assert inputs == ["requirements.txt"]
        preflight(Application(), str(root), inputs, "3.12")


def test_beaker_launch_of_a_requirements_txt_project(repo, fake_beaker, index):
    repo.commit({"requirements.txt": "tinydep==0.2.0\n"})
    r = run_main("run", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0 and "launched" in r.stderr, r.stderr
    repo.commit({"requirements.txt": "tinydep==9.9\n"})
    r = run_main("run", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 3 and "tinydep==9.9" in r.stderr and "launched" not in r.stderr, r.stderr


def test_a_healthy_project_passes(index, tmp_path):
    root = _project(
        tmp_path, "healthy", deps='"tinydep>=0.1"', more='[dependency-groups]\ntest = ["tinydep"]\n'
    )
    preflight(
        Application(),
        str(root),
        preflight_inputs(str(root), extras=[], all_extras=True, groups=["test"]),
        "3.12",
    )
    # the same project is fine for the Python newpy needs
    newer = _project(tmp_path, "newer", deps='"newpy"')
    preflight(
        Application(),
        str(newer),
        preflight_inputs(str(newer), extras=[], all_extras=False, groups=[]),
        "3.13",
    )


def test_nothing_to_resolve_with_a_lock(tmp_path):
    root = _project(tmp_path, "locked", deps='"tinydep"', files={"uv.lock": ""})
    assert preflight_inputs(str(root), extras=[], all_extras=False, groups=[]) == []
    # a pylock.toml holds the pins; the project on top of them is still resolved
    pinned = _project(tmp_path, "pinned", deps='"tinydep"', files={"pylock.toml": ""})
    assert preflight_inputs(str(pinned), extras=[], all_extras=False, groups=[]) == ["pyproject.toml"]


def _uv(*args, cwd):
    from uv import find_uv_bin

    r = subprocess.run(
        [find_uv_bin(), *args, "--quiet", "--offline", "--no-index"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr


def _locked(tmp_path, name, deps="", rp=">=3.10", more="", pylock=False):
    """A project locked by uv from the local index (universal, as `uv lock` does); with `pylock` the lock
    is exported to a pylock.toml, which the repository then has instead."""
    root = _project(tmp_path, name, deps=deps, rp=">=3.10", more=more)
    _uv("lock", cwd=root)
    for f in ("pyproject.toml", "uv.lock"):  # uv locks only for a Python it has: set the range after
        (root / f).write_text(
            (root / f).read_text().replace('requires-python = ">=3.10"', f'requires-python = "{rp}"')
        )
    if pylock:
        _uv(
            "export",
            "--frozen",
            "--format",
            "pylock.toml",
            "--no-emit-project",
            "-o",
            "pylock.toml",
            cwd=root,
        )
        (root / "uv.lock").unlink()
    return root


MAC_ONLY = "[tool.uv]\nenvironments = [\"sys_platform == 'darwin'\"]\n"
LOCK_CORPUS = [
    # (name, deps, requires-python, extra pyproject text, groups, pylock, what is said)
    ("lock-no-linux-wheel", '"tinydep", "macdep"', ">=3.10", "", [], False, "only has wheels"),
    (
        "lock-for-macos-only",
        '"tinydep"',
        ">=3.10",
        MAC_ONLY,
        [],
        False,
        "covers only: sys_platform == 'darwin'",
    ),
    ("lock-needs-newer-python", '"newpy"', ">=3.10", "", [], False, "cp313"),
    (
        "lock-excludes-the-python",
        '"tinydep"',
        ">=3.13",
        "",
        [],
        False,
        "Python 3.12: it requires Python >=3.13",
    ),
    ("lock-broken-group", "", ">=3.10", '[dependency-groups]\nmac = ["macdep"]\n', ["mac"], False, "macdep"),
    ("lock-missing-group", '"tinydep"', ">=3.10", "", ["nosuch"], False, "nosuch"),
    ("pylock-no-linux-wheel", '"macdep"', ">=3.10", "", [], True, "only has wheels"),
    (
        "pylock-for-macos-only",
        '"tinydep"',
        ">=3.10",
        MAC_ONLY,
        [],
        True,
        "covers only: sys_platform == 'darwin'",
    ),
]


@pytest.mark.parametrize(
    ("name", "deps", "rp", "more", "groups", "pylock", "said"), LOCK_CORPUS, ids=[c[0] for c in LOCK_CORPUS]
)
def test_each_broken_lock_is_refused(index, tmp_path, name, deps, rp, more, groups, pylock, said):
    root = _locked(tmp_path, name, deps=deps, rp=rp, more=more, pylock=pylock)
    with pytest.raises(PreconditionError) as e:
        preflight_lock(Application(), str(root), "3.12", extras=[], all_extras=True, groups=groups)
    msg = str(e.value)
    lock = "pylock.toml" if pylock else "uv.lock"
    assert msg.startswith(f"{lock} cannot be") and said in msg, msg
    assert "\n" not in msg and "--no-preflight" in e.value.hint


def test_a_healthy_lock_passes(index, tmp_path, capsys):
    more = '[dependency-groups]\ntest = ["tinydep"]\nmac = ["macdep"]\n'
    root = _locked(tmp_path, "healthy-lock", deps='"tinydep"', more=more)
    app = Application(verbosity=1)
    # the `mac` group is in the lock but not installed: only what the job installs is checked
    preflight_lock(app, str(root), "3.12", extras=[], all_extras=True, groups=["test"])
    preflight_lock(app, str(root), None, extras=[], all_extras=False, groups=[], no_default_groups=True)
    with pytest.raises(PreconditionError):
        preflight_lock(app, str(root), "3.12", extras=[], all_extras=True, groups=[], all_groups=True)
    pinned = _locked(tmp_path, "healthy-pylock", deps='"tinydep"', pylock=True)
    preflight_lock(app, str(pinned), "3.12", extras=[], all_extras=True, groups=[])
    err = capsys.readouterr().err
    assert "uv.lock installs on Linux x86_64, python 3.12" in err and "pylock.toml installs" in err, err
    newer = _locked(tmp_path, "newer-lock", deps='"newpy"')
    preflight_lock(app, str(newer), "3.13", extras=[], all_extras=True, groups=[])
    # a lock from a newer uv than launchkit's: the job's uv may read it, so one line and go on
    lock = (root / "uv.lock").read_text()
    (root / "uv.lock").write_text(lock.replace("version = 1\n", "version = 99\n", 1))
    preflight_lock(app, str(root), "3.12", extras=[], all_extras=True, groups=[])
    assert "preflight of uv.lock skipped" in capsys.readouterr().err


def test_unreachable_index_skips_with_one_line(tmp_path, monkeypatch, capsys):
    root = _project(tmp_path, "net", deps='"tinydep"')
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on port 9
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("UV_HTTP_RETRIES", "0")
    preflight(Application(), str(root), ["pyproject.toml"], "3.12", timeout=30)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "preflight skipped" in err


def test_beaker_submit_is_refused_and_no_preflight_submits(repo, fake_beaker, index):
    repo.commit({"pyproject.toml": PROJECT.format(rp=">=3.10", deps='"tinydep==9.9"', more="")})
    r = run_main("run", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 3 and "cannot be resolved for Linux x86_64" in r.stderr, r.stderr
    assert "launched" not in r.stderr
    r = run_main("run", "--no-preflight", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0 and "launched" in r.stderr, r.stderr


def test_beaker_submit_with_a_lock_is_refused_and_no_preflight_submits(repo, fake_beaker, index):
    root = _locked(repo.path.parent, "scratch", deps='"tinydep", "macdep"')
    repo.commit({f: (root / f).read_text() for f in ("pyproject.toml", "uv.lock")})
    r = run_main("run", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 3 and "uv.lock cannot be installed on Linux x86_64" in r.stderr, r.stderr
    assert "macdep" in r.stderr and "launched" not in r.stderr
    r = run_main("run", "--no-preflight", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 0 and "launched" in r.stderr, r.stderr


def test_stale_lock_is_refused_where_the_projects_python_is_missing(index, tmp_path, capsys):
    """.python-version names a Python this machine lacks: the stale-lock check still decides (with
    launchkit's interpreter; uv's own pick when the project excludes that one, which here cannot be had)."""
    root = _locked(tmp_path, "stale", deps='"tinydep"')
    (root / ".python-version").write_text("3.99\n")
    check_uv_lock(Application(), str(root), "0" * 40, network=False)
    assert "could not check" not in capsys.readouterr().err
    pyproject = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(pyproject.replace('"tinydep"', '"tinydep", "macdep"'))
    with pytest.raises(PreconditionError, match=r"uv\.lock does not match pyproject\.toml"):
        check_uv_lock(Application(), str(root), "0" * 40, network=False)
    (root / "pyproject.toml").write_text(pyproject.replace(">=3.10", ">=3.99"))
    check_uv_lock(Application(), str(root), "0" * 40, network=False)
    assert "could not check that uv.lock matches" in capsys.readouterr().err


def test_uv_never_writes_over_dev_null(tmp_path, monkeypatch):
    """uv writes its output file by renaming over it: `-o /dev/null` replaced the machine's /dev/null with
    a regular file (uv 0.5-0.10). The preflight gives it a file of its own."""
    import launchkit.pyenv as pyenv

    calls = []
    monkeypatch.setattr(pyenv, "_uv", lambda args, **kw: calls.append(args) or (0, ""))
    root = _project(tmp_path, "p", deps='"tinydep"')
    preflight(Application(), str(root), ["pyproject.toml"], "3.12")
    assert calls and all(os.devnull not in args for args in calls), calls


def test_default_and_all_groups_are_resolved_as_the_job_installs_them(index, tmp_path):
    """Without a lock the job installs the default groups ([tool.uv] default-groups, else `dev`) unless
    --uv-no-default-groups, every group with --uv-all-groups: the preflight resolves the same ones."""
    more = '[dependency-groups]\ndev = ["tinydep==7"]\ntest = ["tinydep"]\n'
    root = _project(tmp_path, "dev-broken", deps='"tinydep"', more=more)

    def check(**kw):
        groups = kw.pop("groups", [])
        inputs = preflight_inputs(str(root), extras=[], all_extras=False, groups=groups, **kw)
        preflight(Application(), str(root), inputs, "3.12")

    with pytest.raises(PreconditionError, match="tinydep==7"):
        check()
    check(no_default_groups=True, groups=["test"])
    with pytest.raises(PreconditionError, match="tinydep==7"):
        check(no_default_groups=True, all_groups=True)
    uv_default = more + '[tool.uv]\ndefault-groups = ["test"]\n'
    (root / "pyproject.toml").write_text(PROJECT.format(rp=">=3.10", deps='"tinydep"', more=uv_default))
    check()
    with pytest.raises(PreconditionError, match="tinydep==7"):
        check(groups=["dev"])


def test_a_python_version_file_the_runtime_cannot_run_is_refused_at_launch(repo):
    """.python-version 3.7 used to surface as a failed install (exit 106) once the job had started."""
    repo.commit({".python-version": "3.7\n"})
    r = run_main("run", "--dry-run", "--offline", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 3, r.stderr
    assert ".python-version asks for Python '3.7'" in r.stderr and "--python-version" in r.stderr
    assert "Traceback" not in r.stderr
    # a --python-version of its own (or no Python) decides instead
    assert (
        run_main("run", "--dry-run", "--offline", "--python-version", "3.12", "--", "x", cwd=repo.path).code
        == 0
    )
    assert run_main("run", "--dry-run", "--offline", "--no-python", "--", "x", cwd=repo.path).code == 0


# ---- the job's Python against the project's requires-python (issue 31)


def test_a_requires_python_the_job_cannot_have_is_refused(tmp_path):
    """pyproject.toml's requires-python excludes the job's Python: `uv pip compile` does not check it (it
    resolves the dependencies only), so this was submitted and failed in the job's `uv pip install .`."""
    root = _project(tmp_path, "newer-only", rp=">=3.13")
    with pytest.raises(PreconditionError) as e:
        _check(root, "3.12")
    msg, hint = str(e.value), e.value.hint
    assert msg == "pyproject.toml cannot be installed for the job's Python 3.12: it requires Python >=3.13"
    assert "--python-version" in hint and ".python-version" in hint and "--no-preflight" in hint
    never = _project(tmp_path, "no-python-at-all", rp="<3.8")
    with pytest.raises(PreconditionError, match=r"by any Python the job can run: it requires Python <3\.8"):
        _check(never, None)
    # a poetry project's `python` dependency is its requires-python (poetry-core builds it from that)
    poetry = tmp_path / "poetry"
    poetry.mkdir()
    (poetry / "pyproject.toml").write_text(
        '[tool.poetry]\nname = "p"\nversion = "0"\n[tool.poetry.dependencies]\npython = "^3.13"\n'
        '[build-system]\nrequires = ["poetry-core"]\nbuild-backend = "poetry.core.masonry.api"\n'
    )
    with pytest.raises(PreconditionError, match=r"Python 3\.12: it requires Python >=3\.13,<4$"):
        _check(poetry, "3.12")


def _check(root, python, **kw):
    from launchkit.pyenv import check_job_environment

    check_job_environment(Application(), str(root), python, extras=[], all_extras=False, groups=[], **kw)


def test_a_requires_python_the_job_has_is_resolved_for_it(tmp_path, monkeypatch):
    import launchkit.pyenv as pyenv

    calls = []
    monkeypatch.setattr(pyenv, "_uv", lambda args, **kw: calls.append(args) or (0, ""))
    for rp, python, resolved in [
        (">=3.13", "3.13", "3.13"),
        (">=3.12.4", "3.12", "3.12"),  # some 3.12 release is allowed
        (">=3.10", None, f"{sys.version_info.major}.{sys.version_info.minor}"),  # launchkit's own
        (">=3.8,<3.10", None, "3.8"),  # the oldest the project allows
    ]:
        root = _project(tmp_path, f"p{len(calls)}", rp=rp)
        _check(root, python)
        args = calls[-1]
        assert args[args.index("--python-version") + 1] == resolved, args


def test_beaker_launch_refuses_a_python_version_file_that_requires_python_excludes(repo, fake_beaker):
    repo.commit(
        {"pyproject.toml": PROJECT.format(rp=">=3.13", deps="", more=""), ".python-version": "3.12\n"}
    )
    r = run_main("run", "--", "python", "train.py", cwd=repo.path)
    assert r.code == 3, r.stderr
    assert "the job's Python 3.12: it requires Python >=3.13" in r.stderr and "launched" not in r.stderr
    assert "Traceback" not in r.stderr
    r = run_main(
        "run", "--python-version", "3.13", "--no-preflight", "--", "python", "train.py", cwd=repo.path
    )
    assert r.code == 0 and "launched" in r.stderr, r.stderr


# ---- the launching shell's uv settings (issue 31): only those saying where packages come from count


def test_preflight_keeps_only_the_shells_package_sources():
    from launchkit.pyenv import preflight_environ

    shell = {
        "PATH": "/bin",
        "UV_INDEX_URL": "https://mirror/simple",
        "UV_INDEX_PRIVATE_PASSWORD": "pw",
        "UV_EXTRA_INDEX_URL": "https://extra/simple",
        "UV_FIND_LINKS": "/wheels",
        "UV_CACHE_DIR": "/cache",
        "UV_HTTP_TIMEOUT": "60",
        "UV_NATIVE_TLS": "1",
        "UV_OFFLINE": "1",
        "UV_NO_BINARY": "1",
        "UV_EXCLUDE_NEWER": "2020-01-01",
        "UV_PYTHON": "3.9",
        "UV_TORCH_BACKEND": "cu128",
        "UV_FROZEN": "1",
    }
    kept = preflight_environ(shell)
    dropped = {"UV_OFFLINE", "UV_NO_BINARY", "UV_EXCLUDE_NEWER", "UV_PYTHON", "UV_TORCH_BACKEND", "UV_FROZEN"}
    assert kept == {k: v for k, v in shell.items() if k not in dropped}


@pytest.mark.parametrize("setting", ["UV_OFFLINE=1", "UV_EXCLUDE_NEWER=2001-01-01T00:00:00Z"])
def test_the_shells_uv_settings_do_not_refuse_what_the_job_installs(repo, fake_beaker, tmp_path, setting):
    """UV_OFFLINE=1 (and other settings the job does not have) in the launching shell refused launches the
    node installs fine: the preflight's 'online' attempt was offline too."""
    from lk_helpers import LocalIndex

    name, value = setting.split("=", 1)
    with LocalIndex(tmp_path / "index", ["tinydep"]) as index:
        repo.commit({"pyproject.toml": PROJECT.format(rp=">=3.10", deps='"tinydep"', more="")})
        env = {"UV_INDEX_URL": index.url, "UV_CACHE_DIR": str(tmp_path / "empty-cache"), name: value}
        r = run_main("run", "--", "python", "train.py", cwd=repo.path, env=env)
        assert r.code == 0 and "launched" in r.stderr, r.stderr
        assert "preflight skipped" not in r.stderr
        repo.commit({"pyproject.toml": PROJECT.format(rp=">=3.10", deps='"tinydep==9"', more="")})
        r = run_main("run", "--", "python", "train.py", cwd=repo.path, env=env)
        assert r.code == 3 and "tinydep==9" in r.stderr, r.stderr  # still checked, from the index


def test_the_jobs_own_uv_settings_count(repo, fake_beaker, tmp_path):
    """`--env UV_INDEX_URL=...`: the job installs from that index, so the preflight resolves from it (it
    resolved from the shell's index and refused a package only the job's index has)."""
    from launchkit.pyenv import preflight_environ
    from lk_helpers import LocalIndex

    job = {"UV_INDEX_URL": "https://job/simple", "UV_CACHE_DIR": "/weka/uv", "UV_LINK_MODE": "copy", "X": "1"}
    assert preflight_environ({"UV_INDEX_URL": "https://shell/simple"}, job) == {
        "UV_INDEX_URL": "https://job/simple"
    }
    with LocalIndex(tmp_path / "index", ["privatedep"]) as index:
        repo.commit({"pyproject.toml": PROJECT.format(rp=">=3.10", deps='"privatedep"', more="")})
        env = {"UV_CACHE_DIR": str(tmp_path / "empty-cache"), "UV_INDEX_URL": "http://127.0.0.1:9/simple"}
        r = run_main(
            "run", "--env", f"UV_INDEX_URL={index.url}", "--", "python", "train.py", cwd=repo.path, env=env
        )
        assert r.code == 0 and "launched" in r.stderr and "preflight skipped" not in r.stderr, r.stderr


def test_the_preflight_resolves_what_the_job_installs(tmp_path):
    """The inputs come from the job's own plan: a requirements.txt beside a pyproject.toml of dependency
    groups only is installed with the groups, so both are resolved (the requirements were left out)."""
    root = tmp_path / "reqs-and-groups"
    root.mkdir()
    (root / "requirements.txt").write_text("tinydep\n")
    (root / "pyproject.toml").write_text('[dependency-groups]\ndev = ["tinydep"]\n')
    inputs = preflight_inputs(str(root), extras=[], all_extras=False, groups=[])
    assert inputs == ["requirements.txt", "--group=pyproject.toml:dev"]
    (root / "pyproject.toml").write_text(PROJECT.format(rp=">=3.10", deps="", more=""))
    assert preflight_inputs(str(root), extras=["gpu"], all_extras=False, groups=[]) == [
        "pyproject.toml",
        "--extra=gpu",
    ]  # the project is installed, not the requirements (docs/runtime.md)
