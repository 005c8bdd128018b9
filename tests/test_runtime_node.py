"""The node-side Python runtime (runtime/node): Python 3.8 syntax, stdlib only, reached from bash."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from launchkit.runtime import NODE_PACKAGE, PARTS, _node_unpack_part, entrypoint_script, node_files
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
    lib = (entrypoint_script().split("# ---- lib.sh\n", 1)[1]).split("# ---- nccl.sh\n", 1)[0]
    script = _node_unpack_part() + lib + 'lk_node "$1" ping a b\n'
    out = subprocess.run(
        ["bash", "-c", script, "t", sys.executable],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path), "PYTHONPATH": "/nonexistent"},
    )
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    assert words[0] == NODE_PACKAGE and words[-2:] == ["a", "b"]
    assert words[2].startswith(str(tmp_path)) and words[2].endswith(NODE_PACKAGE)


def test_every_part_is_in_the_script() -> None:
    script = entrypoint_script()
    assert all(f"# ---- {p}\n" in script for p in PARTS)
    assert all(f'/{NODE_PACKAGE}/{n}"' in script for n in node_files())
