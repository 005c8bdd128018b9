"""Launch-time checks of the repository's Python environment files (runs uv and reads files: I/O).

- `check_uv_lock`: a committed uv.lock that no longer matches pyproject.toml is refused before
  anything is submitted (the job would otherwise install the stale lock with `uv sync --frozen`).
- `repo_relative`: `--conda-file` as a path inside the repository (the job runs from the clone).
- `version_tag`: the commit's nearest version tag, recreated in the job's clone for `git describe`.
- `check_job_environment`: the preflight before a Beaker submit. What the job installs is decided by the
  node runtime's planner (runtime/node/environment/plan.py, `job_plan`); `preflight` resolves it for
  Linux x86_64 and the job's Python (exit 3 when uv cannot, with uv's reason, or when
  requires-python excludes that Python); `preflight_lock`: the same for a uv.lock or pylock.toml,
  installed as a dry run (a pin without a Linux wheel, a lock for another platform or Python).
- `committed_files` (several files by one git process), `python_request_in`, `requires_python_in`,
  `python_obtainable`, `requires_python_request`, `released_python_allows`: the job's one interpreter
  (launch.choose_job_python).
- `foreign_lock_line`: a poetry.lock or pdm.lock the job does not install from, named with its fix;
  `nothing_to_install_line`: a root that installs nothing while packages sit below it (a monorepo).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping, Sequence

from uv import find_uv_bin

from launchkit.application import Application
from launchkit.errors import PreconditionError, UsageError
from launchkit.runtime.node.environment.plan import (
    Plan,
    PlanError,
    extra_flags,
    hashed_requirements,
    known_groups,
    plan_for,
    requires_python,
    requires_python_of,
    sync_group_flags,
)
from launchkit.userfile import LOCK_FILE_LIMIT, read_user_file

STALE = "needs to be updated"
OFFLINE_UNDECIDED = "network was disabled"


# The launching shell's uv settings that say where packages come from and how to reach them (indexes and
# their credentials, find-links, the cache, TLS and HTTP): the preflight keeps these and drops every other
# UV_* (UV_OFFLINE, UV_NO_BINARY, UV_EXCLUDE_NEWER, UV_PYTHON, ...), which the job does not have.
SOURCE_SETTINGS = (
    "UV_INDEX",  # UV_INDEX, UV_INDEX_URL, UV_INDEX_STRATEGY, UV_INDEX_<NAME>_USERNAME/_PASSWORD
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "UV_NO_INDEX",
    "UV_KEYRING_PROVIDER",
    "UV_CACHE_DIR",
    "UV_CONFIG_FILE",
    "UV_NO_CONFIG",
    "UV_NATIVE_TLS",
    "UV_SYSTEM_CERTS",
    "UV_INSECURE_HOST",
    "UV_HTTP_",
)


# The job's own uv settings that describe the node, not what it installs: not for the preflight.
NODE_SETTINGS = (
    "UV_CACHE_DIR",
    "UV_LINK_MODE",
    "UV_PROJECT_ENVIRONMENT",
    "UV_OFFLINE",
    "UV_NO_CACHE",
    "UV_PYTHON",  # UV_PYTHON, UV_PYTHON_INSTALL_DIR, ...: the preflight names its own interpreter
)


def preflight_environ(environ: Mapping[str, str], job: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of the preflight's uv calls: the launching shell's, without its UV_* settings but
    those of SOURCE_SETTINGS, and the job's own UV_* settings (`job`: its --env and --torch-backend) but
    NODE_SETTINGS (docs/runtime.md "Preflight")."""
    env = {k: v for k, v in environ.items() if not k.startswith("UV_") or k.startswith(SOURCE_SETTINGS)}
    env.update(
        {k: v for k, v in (job or {}).items() if k.startswith("UV_") and not k.startswith(NODE_SETTINGS)}
    )
    return env


def _uv(
    args: list[str],
    *,
    offline: bool,
    timeout: float,
    cwd: str | None = None,
    environ: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Run uv (the one launchkit ships with) for a check: exit code and output; -1 when it could not run.
    `environ`: the environment (default: this process's)."""
    env = {**(os.environ if environ is None else environ), "UV_PYTHON_DOWNLOADS": "never"}  # never fetch one
    env.pop("VIRTUAL_ENV", None)
    try:
        r = subprocess.run(
            [find_uv_bin(), *args, "--no-progress", *(["--offline"] if offline else [])],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, f"uv {args[0]} took longer than {timeout:.0f}s"
    except OSError as e:
        return -1, str(e)
    return r.returncode, r.stdout + r.stderr


def _uv_lock_check(root: str, offline: bool, timeout: float) -> tuple[int, str]:
    # Naming launchkit's interpreter spares uv a search for the project's Python (1-3 s through pyenv
    # shims, and no check at all where that Python is missing); a project that excludes it gets uv's pick.
    args = ["lock", "--check", "--directory", root]
    code, out = _uv([*args, "--python", sys.executable], offline=offline, timeout=timeout)
    if code != 0 and "incompatible with the project's Python requirement" in out:
        code, out = _uv(args, offline=offline, timeout=timeout)
    return code, out


def check_uv_lock(app: Application, root: str, commit: str, *, network: bool) -> None:
    """Refuse (exit 3) when `uv lock --check` says root/uv.lock is stale. Offline first (fast, and
    enough whenever the lock matches); online only when offline cannot decide and `network` is allowed."""
    if not (
        os.path.isfile(os.path.join(root, "uv.lock")) and os.path.isfile(os.path.join(root, "pyproject.toml"))
    ):
        return
    code, out = _uv_lock_check(root, offline=True, timeout=30)
    if code != 0 and STALE not in out and OFFLINE_UNDECIDED in out and network:
        code, out = _uv_lock_check(root, offline=False, timeout=60)
    if code == 0:
        app.debug("uv.lock matches pyproject.toml")
        return
    if STALE in out:
        raise PreconditionError(
            f"uv.lock does not match pyproject.toml at commit {commit[:12]}",
            hint="run `uv lock`, commit uv.lock and push; or pass --install to install your own way",
        )
    last = next((line for line in reversed(out.strip().splitlines()) if line.strip()), "no output")
    app.warn(f"could not check that uv.lock matches pyproject.toml ({last.strip()}); launching anyway")


# Locks of other tools that launchkit does not install from, and how to turn each into one it does.
FOREIGN_LOCKS = {
    "poetry.lock": "`poetry export -o requirements.txt` (hashed: installed as pinned) or `uvx migrate-to-uv`",
    "pdm.lock": "`pdm export -f pylock -o pylock.toml` (or `pdm export -o requirements.txt`)",
}


def foreign_lock_line(root: str) -> str | None:
    """One line when root has a poetry.lock or pdm.lock but no lock the job installs from (uv.lock,
    pylock.toml, a requirements.txt with hashes): the job would resolve the versions anew."""
    if any(os.path.isfile(os.path.join(root, f)) for f in ("uv.lock", "pylock.toml")) or hashed_requirements(
        os.path.join(root, "requirements.txt")
    ):
        return None
    for name, fix in FOREIGN_LOCKS.items():
        if os.path.isfile(os.path.join(root, name)):
            return (
                f"{name} is not installed from: the job resolves pyproject.toml afresh and may get other "
                f"versions; to pin them commit {fix}, or pass --install"
            )
    return None


def nothing_to_install_line(
    root: str, *, groups: list[str], all_groups: bool = False, no_default_groups: bool = False
) -> str | None:
    """One line when the job installs nothing from the repository root (job_plan) while subdirectories
    hold packages (a monorepo such as markitdown's `packages/markitdown`): the command would run with a
    bare Python (`exec: markitdown: not found`)."""
    try:
        plan = plan_for(root, groups, all_groups, no_default_groups)
    except PlanError:
        return None  # the preflight says what is wrong with it
    if plan.kind() != "nothing to install":
        return None
    found = subdirectory_packages(root)
    if not found:
        return None
    shown = ", ".join(found[:5]) + (f" (+{len(found) - 5} more)" if len(found) > 5 else "")
    return (
        "the job installs nothing: the repository root has no project (pyproject.toml, setup.py) or "
        f"requirements.txt; packages found in {shown}; install one with "
        f"--install 'uv pip install ./{found[0]}' (or commit a root project that depends on it)"
    )


def subdirectory_packages(root: str, *, depth: int = 3, timeout: float = 10) -> list[str]:
    """Directories below `root` (at most `depth` levels) with a committed pyproject.toml, setup.py or
    setup.cfg, shallowest first."""
    try:
        r = subprocess.run(
            ["git", "ls-files", "-z", "--", "*/pyproject.toml", "*/setup.py", "*/setup.cfg"],
            cwd=root,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    if r.returncode != 0:
        return []
    dirs = {os.path.dirname(p) for p in r.stdout.decode("utf-8", "replace").split("\0") if p}
    shallow = [d for d in dirs if d.count("/") < depth]
    return sorted(shallow, key=lambda d: (d.count("/"), d))


def version_tag(root: str, commit: str, timeout: float = 10) -> tuple[str, str, int] | None:
    """The nearest version tag of `commit` as `git describe --tags --match '*[0-9]*'` (setuptools-scm's,
    hatch-vcs's and versioneer's question) finds it: (tag, tagged commit, commits since), or None."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}

    def git(*args: str) -> str | None:
        try:
            cmd = ["git", *args]
            r = subprocess.run(
                cmd, cwd=root, capture_output=True, text=True, timeout=timeout, env=env, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    described = git("describe", "--tags", "--long", "--match", "*[0-9]*", commit)
    if not described or described.count("-") < 2:
        return None
    tag, distance, _ = described.rsplit("-", 2)
    tagged = git("rev-parse", "--verify", "-q", f"refs/tags/{tag}^{{commit}}")
    if not tagged or not distance.isdigit():
        return None
    return tag, tagged, int(distance)


def repo_relative(flag: str, path: str, root: str, cwd: str | None = None) -> str:
    """`path` (relative to cwd, or absolute) as a path inside the repository at `root`; it must exist."""
    full = os.path.realpath(os.path.join(cwd or os.getcwd(), os.path.expanduser(path)))
    real_root = os.path.realpath(root)
    if not os.path.isfile(full):
        raise UsageError(
            f"{flag} {path!r}: no such file here", hint="give the path of a file in the repository"
        )
    if os.path.commonpath([full, real_root]) != real_root:
        raise UsageError(
            f"{flag} {path!r} is outside the repository {root}",
            hint="the job only has the repository's files: commit the file into it",
        )
    return os.path.relpath(full, real_root)


PLATFORM = "x86_64-manylinux_2_28"  # AI2's Beaker nodes: x86_64 Linux, glibc 2.28 or newer
NETWORK_ERRORS = ("error sending request", "failed to fetch", "dns error", "connection refused", "timed out")


def job_plan(
    root: str, *, groups: list[str], all_groups: bool = False, no_default_groups: bool = False
) -> Plan:
    """What the job installs from the checkout at `root` (the node runtime's own planner,
    runtime/node/environment/plan.py); a poetry group it cannot install refused (exit 3)."""
    try:
        return plan_for(root, groups, all_groups, no_default_groups)
    except PlanError as e:
        raise PreconditionError(str(e), hint="fix pyproject.toml and push, or pass --no-preflight") from None


def preflight_inputs(plan: Plan, *, extras: list[str], all_extras: bool) -> list[str]:
    """The `uv pip compile` sources and flags for what the job installs with `uv pip` (docs/runtime.md):
    the project's dependencies (a [project] table, with the extras), a plain requirements.txt (or a hashed
    one with no [project] beside it), the PEP 735 groups; [] when there is none of these. A uv.lock and a
    pylock.toml's pins are `preflight_lock`'s; the poetry groups' requirements are `preflight`'s."""
    if plan.locked:
        return []
    inputs: list[str] = []
    if plan.pyproject_deps:
        inputs += ["pyproject.toml", *extra_flags(extras, all_extras)]
    if plan.requirements or (plan.pins == "requirements.txt" and not plan.pyproject_deps):
        inputs.append("requirements.txt")  # a source file: `uv pip compile` takes no `-r`
    return inputs + [f"--group=pyproject.toml:{g}" for g in plan.groups]


def check_job_environment(
    app: Application,
    root: str,
    python: str | None,
    *,
    extras: list[str],
    all_extras: bool,
    groups: list[str],
    all_groups: bool = False,
    no_default_groups: bool = False,
    job_env: Mapping[str, str] | None = None,
) -> None:
    """The preflight before a Beaker submit: what the job installs (job_plan) resolved for the node's
    platform and Python (`preflight`), its lock installed as a dry run (`preflight_lock`). The project's
    requires-python (uv pip compile resolves the dependencies only) that excludes the job's Python is
    refused first (job_python); with a uv.lock, the lock's is checked. `job_env`: the job's own variables
    (its UV_* settings count: preflight_environ)."""
    plan = job_plan(root, groups=groups, all_groups=all_groups, no_default_groups=no_default_groups)
    if plan.project and not plan.locked and (requires := requires_python(root)) is not None:
        python = job_python("pyproject.toml", requires, python)
    inputs = preflight_inputs(plan, extras=extras, all_extras=all_extras)
    if inputs or plan.group_requirements:
        preflight(app, root, inputs, python, requirements=plan.group_requirements, job_env=job_env)
    preflight_lock(
        app,
        root,
        python,
        extras=extras,
        all_extras=all_extras,
        groups=groups,
        all_groups=all_groups,
        no_default_groups=no_default_groups,
        job_env=job_env,
    )


def _cache_then_index(
    app: Application, args: list[str], root: str, timeout: float, env: dict[str, str]
) -> tuple[int, str] | None:
    """uv with `args` from its cache alone, then online if that cannot decide; None (said in one line)
    when the index cannot be reached."""
    code, out = _uv(args, offline=True, timeout=timeout, cwd=root, environ=env)
    if code != 0 and OFFLINE_UNDECIDED in out:
        code, out = _uv(args, offline=False, timeout=timeout, cwd=root, environ=env)
        if code != 0 and (code == -1 or any(e in out.lower() for e in NETWORK_ERRORS)):
            app.info(f"preflight skipped: the package index cannot be reached ({_last(out)})")
            return None
    return code, out


def preflight(
    app: Application,
    root: str,
    inputs: list[str],
    python: str | None,
    *,
    requirements: list[str] | tuple[str, ...] = (),
    job_env: Mapping[str, str] | None = None,
    timeout: float = 30,
) -> None:
    """Resolve the job's requirements for the node's platform; refuse (exit 3) with uv's explanation
    when they cannot be; one line and go on when the index cannot be reached. `requirements`: lines
    resolved with the inputs (the poetry groups the job installs); `job_env`: the job's own variables."""
    args = [*inputs, "--python-platform", PLATFORM, *(["--python-version", python] if python else [])]
    # The target platform and version are given: this interpreter only runs builds of metadata, and
    # naming it spares uv a search for a local Python of the job's version (1 s through pyenv shims).
    args += ["--python", sys.executable]
    # Never `-o /dev/null`: uv writes its output by renaming a file over it (uv 0.5-0.10 replaced the
    # machine's /dev/null with a regular file).
    with tempfile.TemporaryDirectory(prefix="launchkit-preflight-") as tmp:
        out_file = os.path.join(tmp, "requirements.txt")
        if requirements:
            groups_file = os.path.join(tmp, "poetry-groups.in")
            with open(groups_file, "w", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in requirements))
            args.insert(0, groups_file)
        compile_args = ["pip", "compile", "--quiet", "--no-header", "-o", out_file, *args]
        done = _cache_then_index(app, compile_args, root, timeout, preflight_environ(os.environ, job_env))
    if done is None:
        return
    code, out = done
    if code == 0:
        app.debug(
            f"preflight: the environment resolves for {PLATFORM}" + (f", python {python}" if python else "")
        )
        return
    where = f"Linux x86_64{f', python {python}' if python else ''}"
    raise PreconditionError(
        f"the job's environment cannot be resolved for {where}: {_explanation(out)}",
        hint="fix the requirements and push, or pass --no-preflight to submit anyway",
    )


LOCK_HINT = (
    "make the lock cover Linux x86_64 and that Python (uv: [tool.uv] environments and required-environments,"
    " then `uv lock`), commit and push; or pass --no-preflight to submit anyway"
)


def preflight_lock(
    app: Application,
    root: str,
    python: str | None,
    *,
    extras: list[str],
    all_extras: bool,
    groups: list[str],
    all_groups: bool = False,
    no_default_groups: bool = False,
    job_env: Mapping[str, str] | None = None,
    timeout: float = 30,
) -> None:
    """The job's lock installed as a dry run for the node's platform and Python: a uv.lock exported
    (`uv export --frozen`, with the extras and groups the job's `uv sync --frozen` installs) to a
    pylock.toml, or the repository's pylock.toml; refuse (exit 3) with uv's explanation when a pin has
    no distribution for Linux x86_64, or the lock covers another platform or Python only."""
    extra_args = extra_flags(extras, all_extras)
    env = preflight_environ(os.environ, job_env)
    plan = plan_for(root, no_default=True)
    if plan.locked:
        group_args = sync_group_flags(groups, all_groups, no_default_groups)
        with tempfile.TemporaryDirectory(prefix="launchkit-preflight-") as tmp:
            exported = os.path.join(tmp, "pylock.toml")
            # the workspace's own packages are built from the clone: only the pins are checked
            export = ["export", "--frozen", "--quiet", "--format", "pylock.toml", "--no-emit-workspace"]
            code, out = _uv(
                [*export, *extra_args, *group_args, "-o", exported],
                offline=True,
                timeout=timeout,
                cwd=root,
                environ=env,
            )
            if code == -1 or "unsupported schema version" in out:  # a newer uv's lock: the job's may read it
                app.warn(f"preflight of uv.lock skipped: {_explanation(out)}")
                return
            if code != 0:
                raise PreconditionError(
                    f"uv.lock cannot be exported as the job installs it: {_explanation(out)}",
                    hint="fix the extras and groups asked for (--uv-extra, --uv-group) or the project's; "
                    "or pass --no-preflight to submit anyway",
                )
            _dry_run_install(app, "uv.lock", root, exported, [], python, timeout, tmp, env)
    elif plan.pins == "pylock.toml":
        with tempfile.TemporaryDirectory(prefix="launchkit-preflight-") as tmp:
            _dry_run_install(app, "pylock.toml", root, "pylock.toml", extra_args, python, timeout, tmp, env)


def _dry_run_install(
    app: Application,
    name: str,
    root: str,
    lock: str,
    args: list[str],
    python: str | None,
    timeout: float,
    tmp: str,
    env: dict[str, str],
) -> None:
    try:
        raw = read_user_file(os.path.join(root, lock), name, limit=LOCK_FILE_LIMIT, hint=LOCK_HINT)
        data = tomllib.loads(raw.decode("utf-8"))
    except UsageError as e:
        raise PreconditionError(e.message, hint=LOCK_HINT) from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as e:
        raise PreconditionError(f"{name} cannot be read: {e}", hint=LOCK_HINT) from None
    requires = data.get("requires-python")
    version = job_python(name, requires if isinstance(requires, str) else None, python)
    where = f"Linux x86_64{f', python {version}' if version else ''}"
    cmd = ["pip", "install", "--dry-run", "--quiet", "--target", os.path.join(tmp, "target")]
    cmd += ["--python-platform", PLATFORM, "--python", sys.executable, "--preview-features", "pylock"]
    cmd += [*(["--python-version", version] if version else []), "-r", lock, *args]
    done = _cache_then_index(app, cmd, root, timeout, env)
    if done is None:
        return
    code, out = done
    if code == 0:
        app.debug(f"preflight: {name} installs on {where}")
        return
    if code == -1:
        app.warn(f"preflight of {name} skipped: {out}")
        return
    envs = data.get("environments")
    covers = f" ({name} covers only: {'; '.join(map(str, envs))})" if isinstance(envs, list) and envs else ""
    raise PreconditionError(
        f"{name} cannot be installed on {where}: {_explanation(out)}{covers}", hint=LOCK_HINT
    )


def job_python(name: str, requires: str | None, python: str | None) -> str | None:
    """The Python version to check `name` (a pyproject.toml or a lock) for: the job's (`python`: the
    --python-version or .python-version); when it is not known at launch, launchkit's own if `requires`
    (the file's requires-python) allows it, else the oldest 3.x that it does. Refuses (exit 3) when
    `requires` excludes the job's Python, or every Python the runtime runs on (3.8 or newer)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        allowed = SpecifierSet(requires or "")
    except InvalidSpecifier:
        return python  # uv says what is wrong with it
    if python:
        try:
            # `3.12` is any 3.12.x: allowed when some release of it is
            candidates = [python] + ([f"{python}.99"] if python.count(".") == 1 else [])
            if any(Version(v) in allowed for v in candidates):
                return python
        except InvalidVersion:
            return python  # a request such as `pypy@3.10`: uv says what it makes of it
        raise PreconditionError(
            f"{name} cannot be installed for the job's Python {python}: it requires Python {requires}",
            hint=f"launch with a --python-version that {name} allows (or change .python-version, or its "
            "requires-python) and push; or pass --no-preflight to submit anyway",
        )
    own = f"{sys.version_info.major}.{sys.version_info.minor}"
    versions = [own, *(f"3.{n}" for n in range(8, 20))]
    usable = [v for v in versions if Version(v) in allowed or Version(f"{v}.99") in allowed]
    if not usable:
        raise PreconditionError(
            f"{name} cannot be installed by any Python the job can run: it requires Python {requires} "
            "(launchkit's runtime needs 3.8 or newer)",
            hint=f"fix requires-python in {name} and push; or pass --no-preflight to submit anyway",
        )
    return next((v for v in usable if Version(v) in allowed), usable[0])


def _last(out: str) -> str:
    return next((line.strip() for line in reversed(out.strip().splitlines()) if line.strip()), "no output")


def _explanation(out: str) -> str:
    """uv's reason in one line: the lines after `No solution found...` (or its error), joined."""
    lines = [line.strip() for line in out.splitlines() if line.strip() and not line.startswith("warning:")]
    reason = [
        line.removeprefix("╰─▶ ").removeprefix("error: ").removeprefix("hint: ").removeprefix("cause: ")
        for line in lines
    ]
    return " ".join(reason)[:600] or "uv gave no reason"


# ---- one interpreter per job (issue 45): chosen once at launch, used by every step in the job

PYTHON_VERSION_FILE = ".python-version"


def committed_files(
    root: str, commit: str, paths: Sequence[str], timeout: float = 10
) -> dict[str, str | None]:
    """The text of each of `paths` at `commit` (what the job's clone has), read by one git process
    (`cat-file --batch`); None for a path the commit has no file at (or when git cannot answer)."""
    found: dict[str, str | None] = dict.fromkeys(paths)
    try:
        r = subprocess.run(
            ["git", "-C", root, "cat-file", "--batch"],
            input="".join(f"{commit}:{path}\n" for path in paths).encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return found
    out, at = r.stdout, 0
    for path in paths:  # each answer: "<sha> <type> <size>\n<bytes>\n", or "<name> missing\n"
        end = out.find(b"\n", at)
        if end < 0:
            break
        head = out[at:end].split()
        at = end + 1
        if len(head) == 3 and head[2].isdigit():
            size = int(head[2])
            if head[1] == b"blob":
                found[path] = out[at : at + size].decode("utf-8", "replace")
            at += size + 1
    return found


def python_request_in(text: str | None) -> str | None:
    """The first word of a .python-version's text (None: no file, or an empty one)."""
    words = (text or "").split()
    return words[0] if words else None


def requires_python_in(text: str | None) -> str | None:
    """The Python requirement of a pyproject.toml's text as the job's planner reads it ([project]
    requires-python, else poetry's `python` dependency: plan.requires_python_of); None when it has none
    or the text is not TOML (the job's uv says what is wrong with it)."""
    if not text:
        return None
    try:
        return requires_python_of(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, RecursionError):
        return None


RUNTIME_FLOOR = "3.8"  # the oldest Python the job's runtime runs on (core/parse.py MIN_JOB_PYTHON)


def requires_python_request(requires: str) -> str | None:
    """The request every step of the job gets for a requires-python (`>=3.10`): the range itself, so
    that its first step (`uv venv`) picks the one interpreter as uv would for `uv sync` (one installed
    that the range allows, else the newest CPython uv downloads for it) and every later step keeps it;
    the runtime's floor added when the range reaches below it. None when it allows any; ValueError
    when it is no version range (uv and pip refuse such a pyproject.toml)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    try:
        allowed = SpecifierSet(requires)
    except InvalidSpecifier:
        raise ValueError(f"not a version range: {requires!r}") from None
    if not str(allowed):
        return None
    given = ",".join(part.strip() for part in requires.split(","))  # as written (SpecifierSet sorts them)
    if any(Version(f"3.{n}.99") in allowed or Version(f"3.{n}") in allowed for n in range(8)):
        return f"{given},>={RUNTIME_FLOOR}"
    return given


# CPython minors released before this launchkit (uv downloads each one's patch releases)
RELEASED_MINORS = range(8, 16)


def released_python_allows(request: str) -> bool:
    """Whether a CPython release (3.8.0 to 3.15.x) is in the range `request`: then uv can download one
    for it, without asking uv (its list costs ~0.1 s)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        allowed = SpecifierSet(request)
    except InvalidSpecifier:
        return False
    return any(allowed.contains(f"3.{minor}.{patch}") for minor in RELEASED_MINORS for patch in range(20))


def python_obtainable(
    request: str, environ: Mapping[str, str] | None = None, timeout: float = 60
) -> bool | None:
    """Whether uv can download or find a Python for `request` (`3.12`, `3.12.4`, `pypy@3.10`, `>=3.11`):
    its own list of downloads first (no network, no probing of interpreters), then this machine's.
    None when uv cannot say (a request it does not parse, no uv): the job's uv says what it makes of it.
    UV_PYTHON_DOWNLOADS=never: installed ones only."""
    environ = os.environ if environ is None else environ
    never = environ.get("UV_PYTHON_DOWNLOADS", "").lower() == "never"
    for only in [["--only-installed"]] if never else [["--only-downloads"], ["--only-installed"]]:
        cmd = [find_uv_bin(), "python", "list", request, "--all-versions", *only, "--output-format", "json"]
        try:
            r = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False, env=dict(environ))
            if r.returncode != 0:
                return None
            if json_list(r.stdout):
                return True
        except (OSError, subprocess.TimeoutExpired, ValueError):
            return None
    return False


def json_list(data: bytes) -> list[object]:
    value = json.loads(data)
    if not isinstance(value, list):
        raise ValueError("not a list")
    return value


def check_groups(root: str, names: list[str]) -> None:
    """Each `--uv-group` names a group the project defines (PEP 735's, uv's legacy `dev`, poetry's, PDM's):
    one it lacks is refused now, not by uv inside the job (exit 106 after the wait for a node)."""
    known = known_groups(root)
    if known is None:
        return  # pyproject.toml unreadable here: the planner and uv say what is wrong with it
    where = "pyproject.toml" if os.path.isfile(os.path.join(root, "pyproject.toml")) else ""
    for name in names:
        if name in known:
            continue
        if not where:
            raise UsageError(
                f"--uv-group {name}: the repository has no pyproject.toml to define groups in",
                hint="drop --uv-group, or define the group in pyproject.toml ([dependency-groups]) and push",
            )
        raise UsageError(
            f"--uv-group {name}: pyproject.toml has no dependency group {name!r} "
            f"(its groups: {', '.join(known) if known else 'none'})",
            hint="check the spelling, or define it in pyproject.toml ([dependency-groups]), commit and push",
        )
