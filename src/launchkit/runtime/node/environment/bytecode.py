"""Bytecode shared between jobs (docs/runtime.md "Bytecode cache").

Every job starts with a fresh venv without .pyc files, so Python compiles everything the command
imports again (0.4 s for numpy and pydantic, seconds for torch). With a uv cache directory the first
job of a set of installed packages compiles them, with the standard library, into a tree in that
cache, in the background; later jobs point PYTHONPYCACHEPREFIX at the tree. Its .pyc files are
hash-checked: valid whatever the files' times (copy mode gives new ones every job) and ignored, then
rewritten, for any file whose content differs. The checkout is checked before the command starts:
two commits may put different files of the same size at the same path in the same second, which a
time-checked .pyc cannot tell apart.

Shared caches are writable by many users, and a .pyc runs as whoever imports it: each user has a tree
of their own (launchkit-bytecode-v1/u<uid>/KEY), used only when private_tree() trusts it.

`bytecode LOG VENV CHECKOUT` (bash: after the post-setup hook) prints the tree to export as
PYTHONPYCACHEPREFIX when one is used, nothing otherwise; it never fails the job. `bytecode-fill`
is the background part it starts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
import shutil
import stat
import subprocess
import sys
import sysconfig
import time

from .. import switched_off
from .envstore import linked_site_packages
from .steplog import StepLog

TYPE_CHECKING = False  # (typing costs a job's start-up ~10 ms: for the type checker only)
if TYPE_CHECKING:
    from typing import Callable, Iterable, Mapping

BASE = "launchkit-bytecode-v1"
KEEP_SECONDS = 14 * 86400  # trees no job used for this long are removed
SEED_DELAY = 20.0  # LAUNCHKIT_BYTECODE_SEED_DELAY: the command's own start-up first
LIBRARY_SKIP = {"site-packages", "dist-packages", "test", "tests", "idlelib"}  # not imported by programs


def private_tree(path: str, uid: int) -> bool:
    """`path` may be trusted as a cache only `uid` can have written: a real directory (not a symlink)
    owned by `uid` with no access at all for group or others, so nobody else can reach anything below
    it, whatever the modes of the files in it. (The check for any shared tree.)"""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and st.st_mode & 0o077 == 0


def site_packages(venv: str) -> str:
    """The venv's one lib/python3*/site-packages, or ""."""
    lib = os.path.join(venv, "lib")
    try:
        found = [os.path.join(lib, d, "site-packages") for d in os.listdir(lib) if d.startswith("python3")]
    except OSError:
        return ""
    found = [p for p in found if os.path.isdir(p)]
    return found[0] if len(found) == 1 else ""


def tree_key(venv: str, sp: str) -> str:
    """What the tree's .pyc files depend on: the venv path, the Python version and the installed
    distributions (their *.dist-info names). 32 hex digits."""
    text = BASE + "\n" + venv + "\n"
    try:
        with open(os.path.join(venv, "pyvenv.cfg")) as f:
            text += next((line for line in f if line.startswith("version_info")), "")
    except OSError:
        pass
    text += "".join(name + "\n" for name in sorted(os.listdir(sp)) if name.endswith(".dist-info"))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def off_reason(environ: Mapping[str, str], venv: str) -> str:
    """Why the cache cannot help or was turned off ("" when it may be used)."""
    if switched_off(environ, "LAUNCHKIT_BYTECODE_CACHE") or not environ.get("UV_CACHE_DIR"):
        return "off (LAUNCHKIT_BYTECODE_CACHE=0, or no uv cache directory)"
    if environ.get("PYTHONPYCACHEPREFIX") or environ.get("PYTHONDONTWRITEBYTECODE"):
        return "off (PYTHONPYCACHEPREFIX or PYTHONDONTWRITEBYTECODE given)"  # the user's own choice
    if environ.get("LAUNCHKIT_LOCAL_RUN"):
        return "off (a local run: its venv path is new every run)"
    # only a venv made here: an image's venv or system Python has its .pyc files already
    if environ.get("LAUNCHKIT_UV_VENV") or environ.get("LAUNCHKIT_SYSTEM_PYTHON") == "1":
        return "off (not a venv of this job)"
    if not os.access(os.path.join(venv, "bin", "python"), os.X_OK):
        return "off (no venv)"
    return ""


def user_tree(cache: str, uid: int) -> tuple[str, str]:
    """This user's tree under the shared cache, made if absent: (path, "") or ("", why not used).
    launchkit-bytecode-v1 is shared (sticky, like /tmp: nobody moves another user's tree); under it,
    this user's private tree, made 0700 before anything goes in."""
    base = os.path.join(cache, BASE)
    mine = os.path.join(base, f"u{uid}")
    try:
        if not os.path.isdir(base):
            os.makedirs(base, exist_ok=True)
            os.chmod(base, 0o1777)
        if not os.path.lexists(mine):
            os.mkdir(mine, 0o700)
            os.chmod(mine, 0o700)  # whatever the umask said
    except FileExistsError:
        pass  # another job of this user made it meanwhile: checked below
    except OSError as e:
        return "", f"{mine} cannot be made ({e}); not used"
    if not private_tree(mine, uid):
        return "", f"{mine} is not this user's private directory (owner {uid}, mode 0700); not used"
    return mine, ""


def stale_trees(mine: str, now: float, keep: float = KEEP_SECONDS) -> list[str]:
    """The trees under `mine` no job used (touched) for `keep` seconds before `now`."""
    found = []
    try:
        names = os.listdir(mine)
    except OSError:
        return []
    for name in names:
        path = os.path.join(mine, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and now - st.st_mtime > keep:
            found.append(path)
    return found


def seed(tops: Iterable[str], prefix: str) -> int:
    """Hash-checked .pyc files, under `prefix` (as PYTHONPYCACHEPREFIX lays them out), for every .py
    below each top (`stdlib`: this Python's standard library) whose cached one is missing,
    time-checked or stale. Returns how many were compiled."""
    saved, sys.pycache_prefix = sys.pycache_prefix, prefix
    compiled = 0
    try:
        for top in tops:
            compiled += _seed_tree(
                sysconfig.get_path("stdlib") if top == "stdlib" else top, library=top == "stdlib"
            )
    finally:
        sys.pycache_prefix = saved
    return compiled


def _seed_tree(top: str, library: bool) -> int:
    skip = {".git", ".venv", "__pycache__"}
    if library or top.endswith("-packages"):  # a library: its tests are not imported
        skip |= LIBRARY_SKIP
    mode = py_compile.PycInvalidationMode.CHECKED_HASH
    compiled = 0
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if x not in skip]
        for f in files:
            if not f.endswith(".py"):
                continue
            src = os.path.join(d, f)
            try:
                with open(src, "rb") as h:
                    want = importlib.util.MAGIC_NUMBER + b"\3\0\0\0" + importlib.util.source_hash(h.read())
                with open(importlib.util.cache_from_source(src), "rb") as h:
                    if h.read(16) == want:
                        continue
            except (OSError, ValueError):
                pass
            try:
                py_compile.compile(src, invalidation_mode=mode, quiet=2)
                compiled += 1
            except OSError:
                pass
    return compiled


def choose(
    environ: Mapping[str, str],
    venv: str,
    checkout: str,
    log: StepLog,
    uid: int,
    now: float,
    start: Callable[[list[str]], None] | None = None,
) -> str:
    """After the install: the tree to use (PYTHONPYCACHEPREFIX) when it is complete, after checking
    the checkout into it; else "" (and the tree is filled in the background for later jobs, by
    `start(argv of bytecode-fill)`). Trees unused for 14 days are pruned in the background too."""
    if off_reason(environ, venv):
        return ""
    sp = site_packages(venv)
    if not sp:
        return ""
    mine, why = user_tree(environ["UV_CACHE_DIR"], uid)
    if not mine:
        log.write("[launchkit] bytecode cache: " + why)
        return ""
    tree = os.path.join(mine, tree_key(venv, sp))
    try:
        os.makedirs(tree, exist_ok=True)
        os.utime(tree)  # touched: in use (pruning)
    except OSError:
        return ""
    stale = [p for p in stale_trees(mine, now) if p != tree]
    fill = []  # bytecode-fill arguments
    used = ""
    if os.path.exists(os.path.join(tree, ".seeded")):
        seed([checkout], tree)
        used = tree
        log.write("[launchkit] bytecode cache: " + tree)
    else:
        # Off the critical path, and nothing waits for it: after the command's own start-up (which
        # compiles what it imports meanwhile), niced. A job that ends first leaves it to the next.
        log.write(f"[launchkit] bytecode cache: filling {tree} for later jobs")
        delay = environ.get("LAUNCHKIT_BYTECODE_SEED_DELAY", "") or str(SEED_DELAY)
        nice = [] if environ.get("LAUNCHKIT_BYTECODE_SEED_NICE") == "0" else ["--nice"]
        fill = ["--seed", tree, "--delay", delay, *nice, "--", "stdlib", sp, *linked_site_packages(sp)]
    if (fill or stale) and start is not None:
        start([*(a for p in stale for a in ("--prune", p)), *fill])
    return used


def start_fill(log: StepLog) -> Callable[[list[str]], None]:
    """Starts `python -S -m <this package> bytecode-fill ARGS` in the background, output to the log."""

    def start(args: list[str]) -> None:
        here = __package__ or "launchkit_node.environment"
        package = here.rpartition(".")[0]  # the node package, whose __main__ runs subcommands
        root = os.path.dirname(os.path.abspath(__file__))
        for _ in here.split("."):
            root = os.path.dirname(root)
        env = dict(os.environ, PYTHONPATH=root)  # (this package only: not the user's path)
        try:
            with open(log.path, "ab") as out:
                subprocess.Popen(
                    [sys.executable, "-S", "-m", package, "bytecode-fill", *args],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                )
        except OSError as e:
            log.write(f"[launchkit] bytecode cache: cannot start filling it ({e})")

    return start


def bytecode(argv: list[str]) -> int:
    """`bytecode LOG VENV CHECKOUT`: print the tree to use as PYTHONPYCACHEPREFIX, or nothing."""
    if len(argv) != 3:
        print("[launchkit] error: usage: bytecode LOG VENV CHECKOUT", file=sys.stderr)
        return 100
    log = StepLog(argv[0], errors=True)
    used = choose(os.environ, argv[1], argv[2], log, os.geteuid(), time.time(), start_fill(log))
    if used:
        print(used)
    return 0


def fill(argv: list[str]) -> int:
    """`bytecode-fill [--prune TREE]... [--seed TREE --delay SECONDS [--nice] -- TOP...]`: the
    background part: remove unused trees, then wait, and compile TOPs into TREE (niced), marking it
    complete."""
    prune: list[str] = []
    tree, delay, nice, tops = "", 0.0, False, []
    i = 0
    while i < len(argv):
        if argv[i] == "--":
            tops = argv[i + 1 :]
            break
        if argv[i] == "--nice":
            nice, i = True, i + 1
            continue
        if argv[i] == "--prune":
            prune.append(argv[i + 1])
        elif argv[i] == "--seed":
            tree = argv[i + 1]
        elif argv[i] == "--delay":
            delay = float(argv[i + 1])
        i += 2

    for p in prune:  # (a job whose tree goes meanwhile just compiles again)
        shutil.rmtree(p, ignore_errors=True)
    if not tree:
        return 0
    time.sleep(delay)
    if nice:
        try:
            os.nice(19)
        except OSError:
            pass
    seed(tops, tree)
    with open(os.path.join(tree, ".seeded"), "a"):
        pass
    return 0
