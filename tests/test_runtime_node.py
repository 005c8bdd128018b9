"""The node-side Python runtime (runtime/node): Python 3.8 syntax, stdlib only, reached from bash."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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


def _node_imports(files: dict[str, str]) -> dict[str, set[str]]:
    """module -> the node modules it imports (relative imports anywhere in it, function-local ones
    too); a module is named by its dotted path inside the package ("" is the package itself)."""
    parsed = {}
    for name, text in files.items():
        parts = name.removesuffix(".py").split("/")
        package = parts[:-1]  # where its relative imports start
        if parts[-1] == "__init__":
            parts.pop()
        parsed[".".join(parts)] = (package, ast.parse(text))
    graph: dict[str, set[str]] = {}
    for module, (package, tree) in parsed.items():
        edges = graph.setdefault(module, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package[: len(package) - node.level + 1] + (node.module or "").split(".")
                base = [part for part in base if part]
                # `from . import watchdog` imports a module, `from . import log` a name of the package
                for alias in node.names:
                    sub = ".".join([*base, alias.name])
                    edges.add(sub if sub in parsed else ".".join(base))
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of graph, as the list of modules around it, or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str]:
        state[module] = 1
        path.append(module)
        for nxt in sorted(graph.get(module, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[module] = 2
        return []

    for module in sorted(graph):
        if module not in state and (found := visit(module)):
            return found
    return []


def test_the_node_runtime_has_no_import_cycle() -> None:
    """No module of runtime/node reaches itself through its imports (function-local ones included),
    and its two concerns, environment/ and launch/, do not import each other."""
    graph = _node_imports(node_files())
    assert {"launch.procs", "launch"} <= graph["launch.ray_cluster"]  # the graph is read right
    assert {"environment.plan", ""} <= graph["environment.envstore"] | graph["environment.pyenv"]
    assert _cycle(graph) == []
    concern = {m: m.split(".")[0] for m in graph}  # environment/, launch/ or the package's own modules
    apart = [
        (m, n) for m in graph for n in graph[m] if {concern[m], concern.get(n)} == {"environment", "launch"}
    ]
    assert apart == []  # the two concerns share only what node/__init__.py holds


def test_the_cycle_check_sees_a_cycle() -> None:
    files = {"__init__.py": "", "a/__init__.py": "", "a/x.py": "from .y import f\n"}
    files.update({"a/y.py": "from .. import z\n", "z.py": "def g():\n    from .a import x\n"})
    assert _cycle(_node_imports(files)) == ["a.x", "a.y", "z", "a.x"]


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
        (tmp_path / NODE_PACKAGE / name).parent.mkdir(exist_ok=True)
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


OLD_PYTHON_SITE = """
import importlib.machinery, sys

sys.version_info = (3, 6, 15, "final", 0)  # as Python 3.6 tells it
compile_source = importlib.machinery.SourceFileLoader.source_to_code


def source_to_code(self, data, path, *args, **kwargs):  # as Python 3.6 compiles it
    if b"from __future__ import annotations" in data:
        raise SyntaxError("future feature annotations is not defined", (path, 1, 1, ""))
    return compile_source(self, data, path, *args, **kwargs)


importlib.machinery.SourceFileLoader.source_to_code = source_to_code
"""


@pytest.fixture
def python36(tmp_path):
    """An interpreter that behaves as Python 3.6 does with the runtime: it tells 3.6.15 and refuses
    to compile `from __future__ import annotations` (no real 3.6 here)."""
    site = tmp_path / "py36site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(OLD_PYTHON_SITE)
    stub = tmp_path / "python3.6"
    stub.write_text(
        f'#!/bin/sh\nPYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}" exec {sys.executable} -B "$@"\n'
    )
    stub.chmod(0o755)
    return stub


def _lk_node(tmp_path, python, *args: str) -> subprocess.CompletedProcess[str]:
    files = materialise(tmp_path / "rt")
    lib = (entrypoint_script().split("# ---- lib.sh\n", 1)[1]).split("# ---- nccl.sh\n", 1)[0]
    (tmp_path / "t.sh").write_text(lib + 'lk_node "$@"\n')
    return subprocess.run(
        ["bash", str(tmp_path / "t.sh"), str(python), *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "LK_NODE_DIR": str(files)},
    )


def test_the_stub_fails_as_python36_does(python36, tmp_path) -> None:
    """What the runtime met on 3.6 before bash checked: a traceback and exit 1."""
    files = materialise(tmp_path / "rt")
    r = subprocess.run(
        [str(python36), "-s", "-m", NODE_PACKAGE, "ping"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(files)},
    )
    assert r.returncode == 1 and "Traceback" in r.stderr and "future feature annotations" in r.stderr


@pytest.mark.parametrize("sub", ["ping", "install", "conda-install", "no-such"])
def test_a_python_older_than_the_runtime_is_refused_in_one_line(python36, tmp_path, sub) -> None:
    r = _lk_node(tmp_path, python36, sub, "x")
    assert r.returncode == 106 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"the job's Python is 3.6.15 ({python36.parent}" not in r.stderr  # the interpreter, not the stub
    assert "the job's Python is 3.6.15 (" in r.stderr and "--python-version 3.12" in r.stderr, r.stderr


def test_lk_node_runs_the_package_as_dash_m_does(tmp_path) -> None:
    """argv as with `-m`, and the working directory (a checkout) stands in for no module."""
    (tmp_path / NODE_PACKAGE).mkdir()
    (tmp_path / NODE_PACKAGE / "__init__.py").write_text("raise SystemExit('the checkout')\n")
    r = _lk_node(tmp_path, sys.executable, "ping", "a", "b")
    assert r.returncode == 0 and r.stdout.split()[-2:] == ["a", "b"], r.stderr


def test_the_runtime_and_the_launch_agree_on_the_oldest_python() -> None:
    from launchkit.core.parse import MIN_JOB_PYTHON, too_old_python

    assert f"sys.version_info[:2] < {MIN_JOB_PYTHON}:" in node_files()["boot.py"]
    assert too_old_python("3.7") and too_old_python("3.6.15") and not too_old_python("3.8")
    assert not too_old_python("3.13.1") and not too_old_python("pypy")


def test_the_boot_file_is_in_syntax_every_python_reads() -> None:
    """boot.py, the file bash starts the runtime with (lib.sh: lk_node), before any version check: no
    f-string, annotation, __future__ import, keyword-only or walrus that an old Python cannot parse, and
    no import before the check but sys (issue 45: it was a Python string inside bash)."""
    tree = ast.parse(node_files()["boot.py"])
    new = (ast.JoinedStr, ast.AnnAssign, ast.NamedExpr, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    assert not [type(n).__name__ for n in ast.walk(tree) if isinstance(n, new)]
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    first_import_after = [n for n in tree.body if isinstance(n, ast.Import)]
    assert [a.name for a in first_import_after[0].names] == ["sys"] and tree.body[1].test  # the check next
    assert "LK_NODE_MAIN" not in entrypoint_script() and "runpy" not in entrypoint_script()


def _bash_code_lines(text: str) -> int:
    """Lines that are neither blank nor only a comment."""
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def test_the_runtime_bash_stays_a_bootstrap() -> None:
    """The bash parts stay what a bootstrap needs (issue 45: 741 code lines, 704 the round before): what
    can be Python moves to the node package. Raise this only with a reason that belongs in bash."""
    from launchkit.runtime import _FOLDER

    lines = {part: _bash_code_lines(Path(_FOLDER, part).read_text()) for part in PARTS}
    assert sum(lines.values()) < 720, lines


def test_lk_children_says_nothing_of_processes_that_end_meanwhile(tmp_path) -> None:
    """A process that exits between lk_children's glob and its read is skipped without a word (issue 45:
    `entrypoint.sh: line 60: /proc/30561/stat: No such file or directory` reached a user)."""
    lib = (entrypoint_script().split("# ---- lib.sh\n", 1)[1]).split("# ---- nccl.sh\n", 1)[0]
    (tmp_path / "t.sh").write_text(
        lib
        + "( for i in $(seq 400); do /bin/true & done; wait ) &\n"  # processes come and go meanwhile
        + "churn=$!\n"
        + "for i in $(seq 60); do lk_children $$ >/dev/null; done\n"
        + 'wait "$churn"; sleep 30 & lk_children $$; kill $!\n'
    )
    r = subprocess.run(["bash", str(tmp_path / "t.sh")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert len(r.stdout.split()) == 1  # (and it still finds a child)
