"""Launch-time checks of the repository's Python environment files (runs uv and reads files: I/O).

- `check_uv_lock`: a committed uv.lock that no longer matches pyproject.toml is refused before
  anything is submitted (the job would otherwise install the stale lock with `uv sync --frozen`).
- `repo_relative`: `--conda-file` as a path inside the repository (the job runs from the clone).
- `version_tag`: the commit's nearest version tag, recreated in the job's clone for `git describe`.
- `preflight`: the job's environment resolved for Linux x86_64 before a Beaker submit (exit 3 when
  uv cannot resolve it, with uv's reason); `preflight_lock`: the same for a uv.lock or pylock.toml,
  installed as a dry run (a pin without a Linux wheel, a lock for another platform or Python).
- `foreign_lock_line`: a poetry.lock or pdm.lock the job does not install from, named with its fix.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Any

from launchkit.application import Application
from launchkit.errors import PreconditionError, UsageError

STALE = "needs to be updated"
OFFLINE_UNDECIDED = "network was disabled"


def _uv(args: list[str], *, offline: bool, timeout: float, cwd: str | None = None) -> tuple[int, str]:
    """Run uv (the one launchkit ships with) for a check: exit code and output; -1 when it could not run."""
    from uv import find_uv_bin

    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}  # a check: never fetch an interpreter
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
    if any(os.path.isfile(os.path.join(root, f)) for f in ("uv.lock", "pylock.toml")) or _hashed(
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


def _hashed(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return any("--hash" in line.split("#", 1)[0] for line in f)
    except OSError:
        return False


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


def preflight_inputs(
    root: str,
    *,
    extras: list[str],
    all_extras: bool,
    groups: list[str],
    all_groups: bool = False,
    no_default_groups: bool = False,
) -> list[str] | None:
    """The `uv pip compile` inputs that describe what the job installs (as the entrypoint picks it:
    docs/runtime.md), or None when there is nothing to resolve (a uv.lock is `preflight_lock`'s; with a
    pylock.toml the project installed on top of its pins is resolved here, the pins there)."""

    def has(name: str) -> bool:
        return os.path.isfile(os.path.join(root, name))

    if has("uv.lock") and has("pyproject.toml"):
        return None
    inputs: list[str] = []
    if has("pyproject.toml"):
        import tomllib

        with open(os.path.join(root, "pyproject.toml"), encoding="utf-8", errors="replace") as f:
            text = f.read()
        if "[project]" in text:
            inputs += ["pyproject.toml"] + (
                ["--all-extras"] if all_extras else [f"--extra={e}" for e in extras]
            )
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError):  # (nested too deeply for tomllib)
            data = {}  # uv says what is wrong with it
        names = _pip_groups(data, groups, all_groups, no_default_groups)
        inputs += [f"--group=pyproject.toml:{g}" for g in names]
    if not inputs and has("requirements.txt"):
        inputs = ["requirements.txt"]  # a source file: `uv pip compile` takes no `-r`
    return inputs or None


def _pip_groups(data: dict[str, Any], names: list[str], every: bool, no_default: bool) -> list[str]:
    """The dependency groups the job's `uv pip install` gets, as the entrypoint's lk_pip_groups picks
    them (uv sync's meaning): the named ones; every group, or the default ones ([tool.uv]
    default-groups, else `dev`) unless no_default."""
    table = data.get("dependency-groups")
    if not isinstance(table, dict):
        return list(names)  # uv names a group that is missing
    picked = list(names)
    if every:
        picked += list(table)
    elif not no_default:
        uv_table = data.get("tool", {}).get("uv", {})
        default = uv_table.get("default-groups", ["dev"]) if isinstance(uv_table, dict) else ["dev"]
        picked += list(table) if default == "all" else [g for g in default if g in table]
    return list(dict.fromkeys(picked))


def _cache_then_index(app: Application, args: list[str], root: str, timeout: float) -> tuple[int, str] | None:
    """uv with `args` from its cache alone, then online if that cannot decide; None (said in one line)
    when the index cannot be reached."""
    code, out = _uv(args, offline=True, timeout=timeout, cwd=root)
    if code != 0 and OFFLINE_UNDECIDED in out:
        code, out = _uv(args, offline=False, timeout=timeout, cwd=root)
        if code != 0 and (code == -1 or any(e in out.lower() for e in NETWORK_ERRORS)):
            app.info(f"preflight skipped: the package index cannot be reached ({_last(out)})")
            return None
    return code, out


def preflight(
    app: Application, root: str, inputs: list[str], python: str | None, *, timeout: float = 30
) -> None:
    """Resolve the job's requirements for the node's platform; refuse (exit 3) with uv's explanation
    when they cannot be; one line and go on when the index cannot be reached."""
    args = [*inputs, "--python-platform", PLATFORM, *(["--python-version", python] if python else [])]
    # The target platform and version are given: this interpreter only runs builds of metadata, and
    # naming it spares uv a search for a local Python of the job's version (1 s through pyenv shims).
    args += ["--python", sys.executable]
    # Never `-o /dev/null`: uv writes its output by renaming a file over it (uv 0.5-0.10 replaced the
    # machine's /dev/null with a regular file).
    with tempfile.TemporaryDirectory(prefix="launchkit-preflight-") as tmp:
        out_file = os.path.join(tmp, "requirements.txt")
        done = _cache_then_index(
            app, ["pip", "compile", "--quiet", "--no-header", "-o", out_file, *args], root, timeout
        )
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
    timeout: float = 30,
) -> None:
    """The job's lock installed as a dry run for the node's platform and Python: a uv.lock exported
    (`uv export --frozen`, with the extras and groups the job's `uv sync --frozen` installs) to a
    pylock.toml, or the repository's pylock.toml; refuse (exit 3) with uv's explanation when a pin has
    no distribution for Linux x86_64, or the lock covers another platform or Python only."""
    extra_args = ["--all-extras"] if all_extras else [f"--extra={e}" for e in extras]
    if os.path.isfile(os.path.join(root, "uv.lock")) and os.path.isfile(os.path.join(root, "pyproject.toml")):
        group_args = ["--all-groups"] if all_groups else [f"--group={g}" for g in groups]
        group_args += ["--no-default-groups"] if no_default_groups else []
        with tempfile.TemporaryDirectory(prefix="launchkit-preflight-") as tmp:
            exported = os.path.join(tmp, "pylock.toml")
            # the workspace's own packages are built from the clone: only the pins are checked
            export = ["export", "--frozen", "--quiet", "--format", "pylock.toml", "--no-emit-workspace"]
            code, out = _uv(
                [*export, *extra_args, *group_args, "-o", exported], offline=True, timeout=timeout, cwd=root
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
            _dry_run_install(app, "uv.lock", root, exported, [], python, timeout, tmp)
    elif os.path.isfile(os.path.join(root, "pylock.toml")):
        with tempfile.TemporaryDirectory(prefix="launchkit-preflight-") as tmp:
            _dry_run_install(app, "pylock.toml", root, "pylock.toml", extra_args, python, timeout, tmp)


def _dry_run_install(
    app: Application,
    name: str,
    root: str,
    lock: str,
    args: list[str],
    python: str | None,
    timeout: float,
    tmp: str,
) -> None:
    import tomllib

    try:
        with open(os.path.join(root, lock), "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, RecursionError) as e:
        raise PreconditionError(f"{name} cannot be read: {e}", hint=LOCK_HINT) from None
    requires = data.get("requires-python")
    version = _lock_python(python, requires if isinstance(requires, str) else None)
    where = f"Linux x86_64{f', python {version}' if version else ''}"
    if version is None and python:
        raise PreconditionError(
            f"{name} cannot be installed for the job's Python {python}: it requires Python {requires}",
            hint=f"launch with a --python-version that {name} allows (or change .python-version); "
            "or pass --no-preflight to submit anyway",
        )
    cmd = ["pip", "install", "--dry-run", "--quiet", "--target", os.path.join(tmp, "target")]
    cmd += ["--python-platform", PLATFORM, "--python", sys.executable, "--preview-features", "pylock"]
    cmd += [*(["--python-version", version] if version else []), "-r", lock, *args]
    done = _cache_then_index(app, cmd, root, timeout)
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


def _lock_python(python: str | None, requires: str | None) -> str | None:
    """The Python version to check a lock for: the job's (None when `requires` excludes it); when it is
    not known at launch (no --python-version or .python-version), launchkit's own if `requires` allows
    it, else the oldest 3.x that it does."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        allowed = SpecifierSet(requires or "")
    except InvalidSpecifier:
        return python
    if python:
        try:
            # `3.12` is any 3.12.x: allowed when some release of it is
            candidates = [python] + ([f"{python}.99"] if python.count(".") == 1 else [])
            return python if any(Version(v) in allowed for v in candidates) else None
        except InvalidVersion:
            return python  # a request such as `pypy@3.10`: uv says what it makes of it
    own = f"{sys.version_info.major}.{sys.version_info.minor}"
    return next((v for v in [own, *(f"3.{n}" for n in range(8, 20))] if Version(v) in allowed), own)


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
