"""What the job installs from a checkout (docs/runtime.md "Python environment"): one planner, read by
the node runtime (pyenv.build_env installs by it) and by launchkit's preflight before a submit
(launchkit.pyenv checks the same plan), so the two never decide twice.

plan_for(root, groups...) -> Plan: the lock the job syncs (uv.lock), the pins it installs first
(pylock.toml, a hashed requirements.txt), the project, a plain requirements.txt, and the dependency
groups asked for: PEP 735 ones (uv reads them from pyproject.toml), poetry's
(`[tool.poetry.group.X.dependencies]`, `[tool.poetry.dev-dependencies]`) and PDM's
(`[tool.pdm.dev-dependencies]`), the last two turned into requirements;
the extras and groups as uv flags (`extra_flags`, `sync_group_flags`); the project's requires-python.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote

TYPE_CHECKING = False  # (typing costs a job's start-up: for the type checker only)
if TYPE_CHECKING:
    from typing import Any, Dict, Sequence

    Table = Dict[str, Any]


class PlanError(Exception):
    """The checkout asks for something the job cannot install; the message says what and the fix."""


# ---- the files


def read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def toml_lines(path: str) -> list[str]:
    """The file's lines, each without leading blanks (as TOML and requirements files allow them)."""
    return [line.lstrip(" \t") for line in read_text(path).splitlines()]


def assigns(line: str, key: str) -> bool:
    """`key = ...` (a TOML key set on this line)."""
    name, eq, _ = line.partition("=")
    return bool(eq) and name.strip() == key


def is_project(root: str) -> bool:
    """setup.py/setup.cfg, or a pyproject.toml with a [project] or [build-system] table (one holding
    only tool settings, say [tool.ruff], is not a project)."""
    if any(os.path.isfile(os.path.join(root, f)) for f in ("setup.py", "setup.cfg")):
        return True
    tables = ("[project]", "[build-system]")
    return any(line.startswith(tables) for line in toml_lines(os.path.join(root, "pyproject.toml")))


def hashed_requirements(path: str) -> bool:
    """A requirements file with `--hash` pins (pip-compile, `uv export`, `poetry export`)."""
    return any(
        "--hash=" in code or "--hash " in code for code in (x.partition("#")[0] for x in toml_lines(path))
    )


def has_own_line(path: str) -> bool:
    """The project's own line (`-e .` or `.`, as `uv export` writes it): it has no hash."""
    return any(
        line.split() in (["."], ["-e", "."]) for line in read_text(path).splitlines() if line[:1] in ".-"
    )


def load_pyproject(root: str) -> Table | None:
    """root/pyproject.toml as a table ({} when there is none or it is not valid TOML: uv says what is
    wrong with it); None when this Python cannot read TOML (tomllib: 3.11+)."""
    try:
        import tomllib
    except ImportError:
        return None
    try:
        with open(os.path.join(root, "pyproject.toml"), "rb") as f:
            data = tomllib.load(f)
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deeply for tomllib
        return {}
    return data if isinstance(data, dict) else {}


def requires_python(root: str) -> str | None:
    """The project's Python requirement: [project] requires-python, else poetry's `python` dependency (as
    PEP 440); None when it has neither or this Python cannot read TOML."""
    return requires_python_of(load_pyproject(root) or {})


def requires_python_of(data: Table) -> str | None:
    """requires_python of a pyproject.toml already read (launchkit reads the launched commit's)."""
    project = data.get("project")
    if isinstance(project, dict):
        requires = project.get("requires-python")
        return requires if isinstance(requires, str) else None
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    deps = poetry.get("dependencies") if isinstance(poetry, dict) else None
    python = deps.get("python") if isinstance(deps, dict) else None
    if not isinstance(python, str):
        return None
    try:
        return ",".join(op + v for op, v in _specifiers(python)) or None
    except ValueError:
        return None  # `^3.8 || ^4`: the build says what it makes of it


def extra_flags(extras: Sequence[str], every: bool) -> list[str]:
    """The extras asked for, as uv flags (`--extra=NAME`: a leading dash stays a value)."""
    return ["--all-extras"] if every else ["--extra=" + e for e in extras]


def sync_group_flags(groups: Sequence[str], every: bool, no_default: bool) -> list[str]:
    """The groups asked for, as flags of `uv sync` and `uv export` (they know default and all groups)."""
    flags = ["--all-groups"] if every else ["--group=" + g for g in groups]
    return flags + (["--no-default-groups"] if no_default else [])


# ---- the plan


class Plan:
    """What the job installs, in order: `pins` first (pylock.toml, or a hashed requirements.txt), then the
    project or a plain requirements.txt, with the groups; or, with a uv.lock, `uv sync --frozen`."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.locked = False  # uv.lock + pyproject.toml: `uv sync --frozen` (it picks the groups itself)
        self.pins = ""  # "pylock.toml" or "requirements.txt" (hashed)
        self.require_hashes = False  # the hashed requirements.txt has no hashless own line (`-e .`)
        self.project = False  # `uv pip install .`
        self.pyproject_deps = False  # pyproject.toml has a [project] table (dependencies without a build)
        self.requirements = False  # a plain requirements.txt, installed when there is no project
        self.groups: list[str] = []  # PEP 735 groups; uv names one that is missing
        self.poetry_groups: list[str] = []
        self.group_requirements: list[str] = []  # the poetry groups' requirement lines
        self.notes: list[str] = []  # what the install log should say

    def kind(self) -> str:
        """The kind of install, for the job's timing line (`uv.lock`, `project+pylock.toml`, ...)."""
        if self.locked:
            return "uv.lock"
        if self.project:
            return "project+" + self.pins if self.pins else "project"
        if self.requirements:
            return "requirements.txt"
        if self.groups or self.group_requirements:
            return self.pins + "+groups" if self.pins else "groups"
        return self.pins or "nothing to install"

    def group_args(self) -> list[str]:
        """The groups for `uv pip install`: `--group=pyproject.toml:NAME` (named, so that uv never reads
        them from a pylock.toml next to it), then the poetry groups' requirements."""
        args = ["--group=pyproject.toml:" + g for g in self.groups if g]
        for line in self.group_requirements:
            args += line.split(" ", 1) if line.startswith("-e ") else [line]
        return args


def plan_for(
    root: str, groups: Sequence[str] = (), all_groups: bool = False, no_default: bool = False
) -> Plan:
    """What the job installs from the checkout at `root`, with the dependency groups asked for (as `uv
    sync` means them). Raises PlanError for a poetry group it cannot install."""
    p = Plan(root)

    def has(name: str) -> bool:
        return os.path.isfile(os.path.join(root, name))

    if has("uv.lock") and has("pyproject.toml"):
        p.locked = True
        return p
    requirements = os.path.join(root, "requirements.txt")
    if has("pylock.toml"):
        p.pins = "pylock.toml"
    elif has("requirements.txt") and hashed_requirements(requirements):
        p.pins = "requirements.txt"
        p.require_hashes = not has_own_line(requirements)
    p.project = is_project(root)
    p.pyproject_deps = any(
        line.startswith("[project]") for line in toml_lines(os.path.join(root, "pyproject.toml"))
    )
    p.requirements = not p.project and not p.pins and has("requirements.txt")
    _plan_groups(p, list(groups), all_groups, no_default)
    return p


# ---- dependency groups: PEP 735's, poetry's and PDM's, as uv sync picks them

POETRY_HEADER = re.compile(
    r"\[tool\.poetry\.(?:group\.([^.\]]+|\"[^\"]+\")(?:\.dependencies)?|dev-dependencies)\]"
)
PDM_HEADER = "[tool.pdm.dev-dependencies]"  # one table: each key a group, a list of PEP 508 lines


def _plan_groups(p: Plan, names: list[str], every: bool, no_default: bool) -> None:
    """The named groups; every group, or the default ones unless `no_default`: [tool.uv] default-groups
    if set, else `dev` and, as `poetry install` (and uv after `uvx migrate-to-uv`), every poetry group
    not marked optional, and as `pdm install`, every PDM dev group."""
    lines = toml_lines(os.path.join(p.root, "pyproject.toml"))
    pep735 = any(line.startswith("[dependency-groups]") for line in lines)
    in_poetry = {_poetry_header_group(line) for line in lines} - {None}
    in_pdm = any(line.rstrip() == PDM_HEADER for line in lines)
    if not pep735 and not in_poetry and not in_pdm:
        p.groups = names  # uv names a missing group
        return
    data = load_pyproject(p.root)
    if data is None:
        asked = [n for n in names if n in in_poetry] or (names[:1] if in_pdm else [])
        if asked:
            raise PlanError(
                f"dependency group {asked[0]!r} may be a poetry or PDM group: reading it needs Python 3.11 "
                "or newer in the job (tomllib); pass --python-version 3.11 or newer, or move it to "
                "[dependency-groups]"
            )
        p.groups = names
        p.notes.append(
            "[launchkit] reading pyproject.toml needs Python 3.11+: default and all groups skipped"
        )
        return
    table = data.get("dependency-groups")
    standard = list(table) if isinstance(table, dict) else []
    poetry, optional = _poetry_groups(data, p.root)
    for name, lines_of in _pdm_groups(data, p.root).items():  # PDM's are poetry's idea: the same path
        poetry[name] = poetry.get(name, []) + [r for r in lines_of if r not in poetry.get(name, [])]
    known = standard + [g for g in poetry if g not in standard]
    picked = list(names)
    if every:
        picked += known
    elif not no_default:
        tool = data.get("tool")
        uv_table = tool.get("uv") if isinstance(tool, dict) else None
        default = uv_table.get("default-groups") if isinstance(uv_table, dict) else None
        if default == "all":
            picked += known
        elif isinstance(default, list):
            picked += [g for g in default if g in known]
        else:
            picked += [
                g for g in known if (g == "dev" and g in standard) or (g in poetry and g not in optional)
            ]
    picked = list(dict.fromkeys(picked))
    p.groups = [g for g in picked if g in standard or g not in poetry]
    p.poetry_groups = [g for g in picked if g in poetry]
    for g in p.poetry_groups:
        p.group_requirements += [r for r in poetry[g] if r not in p.group_requirements]


def _poetry_header_group(line: str) -> str | None:
    m = POETRY_HEADER.match(line.rstrip())
    if not m:
        return None
    return (m.group(1) or "dev").strip('"')


def _poetry_groups(data: Table, root: str) -> tuple[dict[str, list[str]], set[str]]:
    """Poetry's groups as requirement lines (name -> lines), and the names of the optional ones; path
    dependencies are relative to `root`."""
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    if not isinstance(poetry, dict):
        return {}, set()
    groups: dict[str, list[str]] = {}
    optional = set()
    legacy = poetry.get("dev-dependencies")
    if isinstance(legacy, dict):
        groups["dev"] = _requirements("dev", legacy, root)
    for name, group in (poetry.get("group") or {}).items():
        if not isinstance(group, dict):
            continue
        deps = group.get("dependencies")
        lines = _requirements(name, deps if isinstance(deps, dict) else {}, root)
        groups[name] = groups.get(name, []) + lines
        if group.get("optional") is True:
            optional.add(name)
    return groups, optional


def _pdm_groups(data: Table, root: str) -> dict[str, list[str]]:
    """PDM's dev groups (`[tool.pdm.dev-dependencies]`, all installed by `pdm install`) as requirement
    lines: PEP 508 already; `${PROJECT_ROOT}` is the checkout; an editable (`-e file:///${PROJECT_ROOT}/x`,
    `-e ./x`) as `-e PATH`."""
    tool = data.get("tool")
    pdm = tool.get("pdm") if isinstance(tool, dict) else None
    table = pdm.get("dev-dependencies") if isinstance(pdm, dict) else None
    if not isinstance(table, dict):
        return {}
    groups: dict[str, list[str]] = {}
    for name, lines in table.items():
        if not isinstance(lines, list):
            raise PlanError(
                f"PDM group {name!r}: [tool.pdm.dev-dependencies] {name} is not a list of requirements"
            )
        groups[name] = [_pdm_requirement(str(line), root) for line in lines]
    return groups


def _pdm_requirement(line: str, root: str) -> str:
    line = line.strip().replace("file:///${PROJECT_ROOT}", "file://" + root).replace("${PROJECT_ROOT}", root)
    if not line.startswith("-e "):
        return line
    target = line[3:].strip().split("#", 1)[0]
    if target.startswith("file://"):
        target = target[len("file://") :]
    return "-e " + os.path.normpath(os.path.join(root, target))


def known_groups(root: str) -> list[str] | None:
    """Every dependency group the project at `root` defines, as `--uv-group` can name them: PEP 735's,
    [tool.uv] dev-dependencies (uv's `dev`), poetry's and PDM's; None when pyproject.toml cannot be read
    here (no tomllib) or is not valid TOML (uv says what is wrong with it)."""
    data = load_pyproject(root)
    if not data:
        return None if data is None or os.path.isfile(os.path.join(root, "pyproject.toml")) else []
    table = data.get("dependency-groups")
    names = list(table) if isinstance(table, dict) else []
    tool = data.get("tool")
    uv_table = tool.get("uv") if isinstance(tool, dict) else None
    if isinstance(uv_table, dict) and "dev-dependencies" in uv_table:
        names.append("dev")
    try:
        names += list(_poetry_groups(data, root)[0]) + list(_pdm_groups(data, root))
    except PlanError:
        return None  # the planner says what is wrong with them
    return list(dict.fromkeys(names))


def _requirements(group: str, deps: Table, root: str) -> list[str]:
    lines = []
    for name, spec in deps.items():
        if name.lower() == "python":  # the group's Python requirement, not a package
            continue
        for one in spec if isinstance(spec, list) else [spec]:
            try:
                lines.append(_requirement(name, one, root))
            except ValueError as e:
                raise PlanError(
                    f"poetry group {group!r}: {name} = {one!r}: {e}; write it as a PEP 440 range, or move "
                    "the group to [dependency-groups]"
                ) from None
    return lines


def _requirement(name: str, spec: Any, root: str) -> str:
    """One poetry dependency as a PEP 508 requirement line (`-e PATH` for a `develop = true` path)."""
    if not isinstance(spec, dict):
        spec = {"version": spec}
    extras = spec.get("extras") or []
    named = name + (f"[{','.join(extras)}]" if extras else "")
    markers = []
    if spec.get("python"):
        markers += [_python_marker(op, v) for op, v in _specifiers(str(spec["python"]))]
    if spec.get("platform"):
        markers.append(f'sys_platform == "{spec["platform"]}"')
    if spec.get("markers"):
        markers.append(f"({spec['markers']})")
    marker = " ; " + " and ".join(markers) if markers else ""
    if "git" in spec:
        ref = spec.get("rev") or spec.get("tag") or spec.get("branch")
        url = "git+" + spec["git"] + ("@" + ref if ref else "")
        sub = spec.get("subdirectory")
        return f"{named} @ {url}{'#subdirectory=' + sub if sub else ''}{marker}"
    if "url" in spec:
        return f"{named} @ {spec['url']}{marker}"
    if "path" in spec:
        path = os.path.normpath(os.path.join(root, spec["path"]))
        if spec.get("develop"):
            return "-e " + path
        return f"{named} @ {_file_url(path)}{marker}"
    version = ",".join(op + v for op, v in _specifiers(str(spec.get("version", "*"))))
    return named + version + marker


def _python_marker(op: str, version: str) -> str:
    full = version.count(".") > 1 or "*" in version  # `python_version` is X.Y
    return f'{"python_full_version" if full else "python_version"} {op} "{version}"'


def _file_url(path: str) -> str:
    return "file://" + quote(os.path.abspath(path))


VERSION = re.compile(r"(\^|~=|~|===|==|!=|<=|>=|<|>|=)?\s*([0-9A-Za-z.*+!_-]+)")


def _specifiers(text: str) -> list[tuple[str, str]]:
    """A poetry version constraint as PEP 440 (operator, version) pairs: `^1.2` is >=1.2,<2 (the first
    non-zero part bumped), `~1.2` is >=1.2,<1.3, `1.2` and `1.2.*` are ==, `*` is anything."""
    text = text.strip()
    if "|" in text:
        raise ValueError("'||' (either range) has no PEP 508 form")
    out = []
    for op, version in VERSION.findall(text.replace(",", " ")):
        if version == "*":
            continue
        m = re.match(r"\d+(?:\.\d+)*", version)
        release = [int(n) for n in m.group().split(".")] if m else []
        if op in ("^", "~"):
            if not release:
                raise ValueError("no version after " + op)
            if op == "^":
                i = next((k for k, n in enumerate(release) if n), len(release) - 1)
            else:
                i = min(1, len(release) - 1)
            upper = release[:i] + [release[i] + 1]
            out += [(">=", version), ("<", ".".join(map(str, upper)))]
        elif op in ("", "="):
            out.append(("==", version))
        else:
            out.append((op, version))
    return out
