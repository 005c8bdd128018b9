"""The job's Python environment, chosen by what the commit contains (docs/runtime.md "Python environment").

`install LOG VENV` (bash: section 6 of entrypoint.sh, in the checkout, with the venv activated) runs
build_env() under the interpreter it installs into and prints the kind of install for the timing line
(`uv.lock`, `project+pylock.toml`, ...). uv's output goes to LOG; a failure is a non-zero exit, which
the bash reports as the install step (exit 106). `conda-install LOG` is the same for an activated
conda environment (pip). The custom `--install` command stays in the bash: its exports must reach
the user's command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from . import bytecode, envstore, projectbuild
from .plan import PlanError, is_project, plan_for, read_text
from .settings import Settings
from .steplog import StepLog, child_environ

TYPE_CHECKING = False  # (typing costs a job's start-up ~10 ms: for the type checker only)
if TYPE_CHECKING:
    from typing import Mapping, Sequence


class InstallFailed(Exception):
    """A command of the install failed; its output is in the step's log."""


# ---- the install: what the commit contains decides it (plan.py, which the launch-time preflight reads)


def uv_cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """uv's cache directory: UV_CACHE_DIR when set (uv reads it as --cache-dir, above its config
    files), else `uv cache dir`; "" without one (UV_NO_CACHE: a temporary cache, gone after uv)."""
    environ = os.environ if environ is None else environ
    if environ.get("UV_NO_CACHE", "").lower() in ("1", "true", "yes", "on"):
        return ""
    if environ.get("UV_CACHE_DIR"):
        return os.path.abspath(environ["UV_CACHE_DIR"])
    try:
        r = subprocess.run(
            ["uv", "cache", "dir"],
            check=False,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=child_environ(),
        )
    except OSError:
        return ""
    return r.stdout.decode().strip() if r.returncode == 0 else ""


def _must(log: StepLog, argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    if log.run(argv, env):
        raise InstallFailed(argv[0])


def sync_locked(root: str, s: Settings, log: StepLog, cache: str | None = None, linked: bool = False) -> None:
    """A uv.lock: `uv sync --frozen`, from the cache alone first, with the project's stored build.
    `linked`: the venv is a thin venv over the env store's entry for this lock; when that entry holds
    every package but the project, the stored build is all there is to install (no uv at all)."""
    flags = s.extra_flags() + s.group_flags()
    if s.system:  # sync into the image's environment, keeping its packages
        env = dict(os.environ, UV_PROJECT_ENVIRONMENT=sys.prefix)
        _must(log, ["uv", "sync", "--frozen", "--inexact", *flags], env)
        return
    # Everything is pinned, so try the cache alone first: no index round-trips (build requirements
    # would otherwise be re-validated online); anything missing -> online.
    sync = ["uv", "sync", "--frozen", *flags]
    if s.python_version:
        sync.append("--python=" + s.python_version)
    if s.image_venv:
        sync.append("--inexact")  # keep what the image's venv already has
    cache = uv_cache_dir() if cache is None else cache
    stored = ""
    if cache and not s.local_run:
        key = projectbuild.project_key(root, s.venv, s)
        stored = os.path.join(cache, projectbuild.PROJECTS, key + ".tar") if key else ""
    use_stored = bool(stored) and os.path.isfile(stored) and os.path.getsize(stored) > 0
    first = sync + ["--no-install-project"] if use_stored else sync
    if use_stored and linked and _store_holds_the_rest(root):
        log.write("[launchkit] env store: it holds every locked package but the project (no uv sync)")
    elif cache and os.path.isdir(os.path.join(cache, "archive-v0")):
        if log.run(first + ["--offline"]):
            log.write("[launchkit] not all in the uv cache: syncing online")
            _must(log, first)
    else:
        _must(log, first)
    if use_stored:
        why = projectbuild.install_stored(stored, s.venv)
        if not why:
            name = os.path.basename(stored)
            log.write(f"[launchkit] project: installed its stored build {name} (packaging files unchanged)")
        else:
            log.write(f"[launchkit] project: the stored build is unreadable ({why}); building it")
            _must(log, sync)
    elif stored:
        projectbuild.store_project(root, s.venv, stored, log)


def _store_holds_the_rest(root: str) -> bool:
    return envstore.only_the_project_is_local(read_text(os.path.join(root, "uv.lock")))


def build_env(root: str, s: Settings, log: StepLog, cache: str | None = None, linked: bool = False) -> str:
    """Install what the checkout at `root` needs into `s.venv` (or the image's Python), as plan.plan_for
    decides (the table of docs/runtime.md); returns the kind of install. Raises InstallFailed (output in
    `log`). `cache`: uv's cache directory (default: `uv cache dir`; "" for none). `linked`: the venv was
    linked to the env store's entry for the checkout's lock."""
    try:
        p = plan_for(root, s.groups, s.all_groups, s.no_default_groups)
    except PlanError as e:
        log.write(f"[launchkit] error: {e}")
        raise InstallFailed("plan") from None
    for note in p.notes:
        log.write(note)
    if p.locked:
        sync_locked(root, s, log, cache, linked)
        return p.kind()
    target = s.target()
    groups = p.group_args()
    if p.groups or p.poetry_groups:
        log.write(
            "[launchkit] dependency groups: "
            + " ".join(p.groups + [g + " (poetry)" for g in p.poetry_groups])
        )
    # A lock uv pip can install (pylock.toml, PEP 751; a requirements.txt with hashes): its pins
    # first, then the project on top (uv keeps the pinned versions that satisfy it).
    if p.pins == "pylock.toml":
        pins = ["--preview-features", "pylock", "-r", p.pins, *s.extra_flags()]
        _must(log, ["uv", "pip", "install", *target, *pins])
    elif p.pins:
        # the project's own line (`-e .` from `uv export`) has no hash: uv still checks those given
        verify = ["--require-hashes"] if p.require_hashes else []
        _must(log, ["uv", "pip", "install", *target, *verify, "-r", p.pins])
    if p.project:
        if s.all_extras and os.path.isfile(os.path.join(root, "pyproject.toml")):
            _must(
                log, ["uv", "pip", "install", *target, "--all-extras", "-r", "pyproject.toml", ".", *groups]
            )
        else:
            spec = "." if s.all_extras or not s.extras else ".[{}]".format(",".join(s.extras))
            _must(log, ["uv", "pip", "install", *target, spec, *groups])
    elif p.requirements:
        _must(log, ["uv", "pip", "install", *target, "-r", "requirements.txt", *groups])
    elif groups:
        _must(log, ["uv", "pip", "install", *target, *groups])
    return p.kind()


def conda_install(root: str, log: StepLog, python: str | None = None) -> str:
    """pip into the active conda environment: the project, or requirements.txt."""
    py = python or sys.executable
    project = is_project(root)
    if not project and not os.path.isfile(os.path.join(root, "requirements.txt")):
        return "nothing to install"
    if log.quiet([py, "-m", "pip", "--version"]):
        _must(log, [py, "-m", "ensurepip", "--upgrade"])
    if project:
        _must(log, [py, "-m", "pip", "install", "--disable-pip-version-check", "."])
        return "project"
    _must(log, [py, "-m", "pip", "install", "--disable-pip-version-check", "-r", "requirements.txt"])
    return "requirements.txt"


def _record_freeze(log: StepLog, argv: list[str], text: str | None = None) -> None:
    """What got installed, to $RESULTS_DIR/.launchkit/requirements.txt: `text` when given, else what
    `argv` prints (in the background, off the critical path)."""
    results = os.environ.get("RESULTS_DIR", "/results")
    path = os.path.join(results, ".launchkit", "requirements.txt")
    if text is None:
        log.background(argv, path)
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        pass  # a record for the user: never a reason to fail the job


def freeze_text(venv: str) -> str | None:
    """What `uv pip freeze` prints for `venv`, read from its *.dist-info names (no process competing
    with the command's start): `name==version` sorted by normalised name, `-e URL` for an editable
    install. None when a package has a direct URL (uv prints those its own way) or a name is odd."""
    sps = projectbuild.site_packages_dirs(venv)
    if len(sps) != 1:
        return None
    rows = []
    for name in os.listdir(sps[0]):
        if not name.endswith(".dist-info"):
            continue
        dist, sep, version = name[: -len(".dist-info")].partition("-")
        if not sep or not dist or not version or "-" in version:
            return None
        key = dist.lower().replace("_", "-").replace(".", "-")
        line = f"{key}=={version}"
        url_file = os.path.join(sps[0], name, "direct_url.json")
        if os.path.exists(url_file):
            try:
                with open(url_file, encoding="utf-8") as f:
                    info = json.load(f)
            except (OSError, ValueError):
                return None
            editable = isinstance(info, dict) and (info.get("dir_info") or {}).get("editable")
            url = info.get("url") if isinstance(info, dict) else None
            if not editable or not isinstance(url, str) or not url.startswith("file://"):
                return None
            line = "-e " + url
        rows.append((key, line))
    return "".join(line + "\n" for _, line in sorted(rows))


def install(argv: list[str]) -> int:
    """`install LOG VENV [--bytecode BYTECODE_LOG CHECKOUT]`: build_env() for the checkout in the
    working directory; prints the kind. With --bytecode (no post-setup hook can change the venv in
    between), the bytecode step too, in this process: a second line `bytecode MS [TREE]` (the step's
    milliseconds and the tree to export as PYTHONPYCACHEPREFIX, if one is used)."""
    if len(argv) not in (2, 5) or (len(argv) == 5 and argv[2] != "--bytecode"):
        usage = "install LOG VENV [--bytecode BYTECODE_LOG CHECKOUT]"
        print("[launchkit] error: usage: " + usage, file=sys.stderr)
        return 100
    log = StepLog(argv[0], errors=True)
    s = Settings.from_environ(os.environ, argv[1])
    linked = False
    try:
        if not s.system and not s.image_venv:
            # env store: a fully locked package set is built once per shared uv cache and the venv
            # linked to it, so build_env finds it installed and adds what it leaves out (the project)
            linked = envstore.link_or_fall_back(
                os.getcwd(),
                s.venv,
                s.extra_flags() + s.group_flags(),
                dict(os.environ),
                log.write,
                sys.__stderr__,  # the job's stderr (StepLog took sys.stderr for the log)
            )
            if linked:
                log.write("[launchkit] env store: linked; installing what the store leaves out")
        kind = build_env(os.getcwd(), s, log, linked=linked)
    except InstallFailed:
        return 1
    print(kind)
    if len(argv) == 5:
        print(_bytecode_line(argv[3], s.venv, argv[4]))
    # the record read from the venv's metadata, not by a uv competing with the command's start (and
    # outliving a short command); uv only where the metadata cannot say it
    _record_freeze(log, ["uv", "pip", "freeze", *s.target()], freeze_text(s.venv))
    return 0


def _bytecode_line(log_path: str, venv: str, checkout: str) -> str:
    """The bytecode step (bytecode.py) after the install, as `bytecode MS [TREE]`; never fails."""
    t = time.monotonic()
    log = StepLog(log_path)
    try:
        tree = bytecode.choose(
            os.environ, venv, checkout, log, os.geteuid(), time.time(), bytecode.start_fill(log)
        )
    except Exception as e:  # noqa: BLE001 # a cache: never a reason to fail the job
        log.write(f"[launchkit] bytecode cache: not used ({type(e).__name__}: {e})")
        tree = ""
    ms = int((time.monotonic() - t) * 1000)
    return f"bytecode {ms} {tree}".rstrip()


def conda(argv: list[str]) -> int:
    """`conda-install LOG`: conda_install() into the active environment; prints the kind."""
    if len(argv) != 1:
        print("[launchkit] error: usage: conda-install LOG", file=sys.stderr)
        return 100
    log = StepLog(argv[0], errors=True)
    try:
        kind = conda_install(os.getcwd(), log)
    except InstallFailed:
        return 1
    print(kind)
    _record_freeze(log, [sys.executable, "-m", "pip", "freeze"])
    return 0


def freeze(argv: list[str]) -> int:
    """`freeze uv|pip`: only the record of what got installed (after a custom `--install`)."""
    log = StepLog(os.devnull)
    if argv[:1] == ["pip"]:
        _record_freeze(log, [sys.executable, "-m", "pip", "freeze"])
    else:
        _record_freeze(log, ["uv", "pip", "freeze", *Settings.from_environ(os.environ, "").target()])
    return 0
