"""The node-side Python runtime (runtime/node): Python 3.8 syntax, stdlib only, reached from bash."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from launchkit.runtime import NODE_PACKAGE, PARTS, entrypoint_script, materialise, node_files, runtime_files
from launchkit.runtime.node import __main__ as node_main


@pytest.mark.parametrize("name", sorted(node_files()))
def test_node_module_is_python38_and_stdlib_only(name: str) -> None:
    tree = ast.parse(node_files()[name], filename=name, feature_version=(3, 8))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots = [(node.module or "").split(".")[0]]
        else:
            continue
        for root in roots:
            assert root == "__future__" or root in sys.stdlib_module_names, f"{name}: imports {root}"


def test_subcommands_name_real_functions() -> None:
    import importlib

    for sub, target in node_main.SUBCOMMANDS.items():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(f"launchkit.runtime.node.{module}"), func)), sub


def test_unknown_subcommand_is_an_input_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert node_main.main(["no-such"]) == 100
    assert "runtime subcommand ['no-such'] unknown" in capsys.readouterr().err


def test_bash_hands_over_to_the_python_runtime(tmp_path) -> None:
    files = materialise(tmp_path / "rt")
    lib = (entrypoint_script().split("# ---- lib.sh\n", 1)[1]).split("# ---- nccl.sh\n", 1)[0]
    (tmp_path / "t.sh").write_text(lib + 'lk_node "$1" ping a b\n')
    out = subprocess.run(  # a script beside a package-less folder: the runtime's own is found by LK_NODE_DIR
        ["bash", str(tmp_path / "t.sh"), sys.executable],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": "/nonexistent", "LK_NODE_DIR": str(files)},
    )
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    assert words[0] == NODE_PACKAGE and words[-2:] == ["a", "b"]
    assert words[2] == str(files / NODE_PACKAGE)


def test_the_entrypoint_finds_the_package_beside_it(tmp_path) -> None:
    lib = (entrypoint_script().split("# ---- lib.sh\n", 1)[1]).split("# ---- nccl.sh\n", 1)[0]
    (tmp_path / "t.sh").write_text(lib + 'cd /; lk_node "$1" ping\n')
    run = ["bash", str(tmp_path / "t.sh"), sys.executable]
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run(run, capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 100 and "no launchkit_node package beside" in out.stderr
    (tmp_path / NODE_PACKAGE).mkdir()
    for name, text in node_files().items():
        (tmp_path / NODE_PACKAGE / name).write_text(text)
    out = subprocess.run(run, capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0 and out.stdout.split()[2] == str(tmp_path / NODE_PACKAGE), out.stderr


def test_the_runtime_travels_as_files() -> None:
    script = entrypoint_script()
    assert all(f"# ---- {p}\n" in script for p in PARTS)
    files = runtime_files()
    # the built-in profiles' setup programs travel there too (core/profiles.py: stored_setup)
    assert set(files) == {"entrypoint.sh", "profiles.txt"} | {f"{NODE_PACKAGE}/{n}" for n in node_files()}
    assert len(files["entrypoint.sh"]) < 128 * 1024  # fits one argument, were it ever passed as one


def test_a_python_older_than_the_runtime_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 7, 17, "final", 0))
    assert node_main.main(["ping"]) == 106
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the job's Python is 3.7.17" in err and "--python-version" in err


def test_the_runtime_and_the_launch_agree_on_the_oldest_python() -> None:
    from launchkit.core.parse import MIN_JOB_PYTHON, too_old_python

    assert node_main.MIN_PYTHON == MIN_JOB_PYTHON == (3, 8)
    assert too_old_python("3.7") and too_old_python("3.6.15") and not too_old_python("3.8")
    assert not too_old_python("3.13.1") and not too_old_python("pypy")


def test_the_entry_parses_under_old_pythons_so_the_refusal_can_show() -> None:
    for name in ("__init__.py", "__main__.py"):
        ast.parse(node_files()[name], filename=name, feature_version=(3, 6))
