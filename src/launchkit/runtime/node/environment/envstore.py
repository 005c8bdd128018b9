"""`envstore`: one environment per fully locked package set, built once per shared uv cache.

When the checkout's packages are fully determined (a `uv.lock`, a `pylock.toml`, a requirements file
with hashes), the job's venv need not receive a copy of them (the ai2-weka profile copies ~5,000
files a job). Instead, keyed by content (`env_key`: the lock's bytes, the extras and groups asked,
uv's settings, the interpreter, the platform), one environment per key is kept in the shared cache
at `$UV_CACHE_DIR/launchkit-envs-v1/u<uid>/KEY`, built once under a lock (copied from uv's cache, never
linked to it, its files made read-only) and published by a rename, so nobody ever sees half of one.
Each job's venv then becomes a thin venv over it (`link`): a `.pth` puts the store's site-packages on
sys.path, the packages' `*.dist-info` and what they place outside site-packages are copied in (checked
against what they were when the entry was built: an entry found damaged is built again), console
scripts rewritten for the job's interpreter. The usual install that follows finds every locked
package installed and adds only the project (editable) and local paths. A running job holds a lease
on its entry (a shared flock the command inherits: `take_lease`), and a prune leaves held entries.

Poisoning (docs/runtime.md, bytecode.sh's lk_private_tree): the store holds code that runs as the
job's user, on a file system other users can write. An entry is used only inside `u<uid>`, a real
directory owned by this uid with no access for group or others, itself owned by this uid, writable by
nobody else, and complete (its manifest names its key). Anything else: one line, and the job installs
as it always did.

    python -m launchkit_node envstore link VENV LOG [--extra=X|--all-extras|--group=G|...]
"""

from __future__ import annotations

import ast
import csv
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import time

from .. import switched_off

TYPE_CHECKING = False  # (typing, re and sysconfig cost a job's start-up ~20 ms: imported where needed)
if TYPE_CHECKING:
    from typing import Any, Callable, Dict

    Log = Callable[[str], None]
    Manifest = Dict[str, Any]

STORE = "launchkit-envs-v1"
MANIFEST = "launchkit-env.json"
PTH = "_launchkit_envstore.pth"
STAMPS = "launchkit-env.stamps"  # every file of the entry as built: size, change time, path (one a line)
# 2: the link plan in the manifest; 3: copied from uv's cache, read-only, with stamps; 4: every file's
# stamp (`tree`), checked before each link
FORMAT = 4
KEEP_DAYS = 30  # an entry no job used for this long is removed (a job touches its entry's manifest)
WAIT_SECONDS = 900  # for another job building the same entry; then this job installs for itself
LEASE_NOTE = ".launchkit-envstore-lease"  # in the job's venv: the lease file the entrypoint holds open
# uv settings that cannot change what gets installed (others, unknown ones included, go in the key)
_UV_IRRELEVANT = {
    "UV_CACHE_DIR", "UV_LINK_MODE", "UV_PROJECT_ENVIRONMENT", "UV_OFFLINE", "UV_NO_PROGRESS",
    "UV_HTTP_TIMEOUT", "UV_CONCURRENT_DOWNLOADS", "UV_CONCURRENT_BUILDS", "UV_CONCURRENT_INSTALLS",
    "UV_PYTHON_DOWNLOADS", "UV_NO_CACHE", "UV_FROZEN", "UV_LOCKED", "UV_COLOR", "UV_NATIVE_TLS",
    "UV_REQUEST_TIMEOUT", "UV_COMPILE_BYTECODE", "UV_NO_EDITABLE", "UV_NO_INSTALL_PROJECT",
    "UV_NO_INSTALL_WORKSPACE", "UV_NO_INSTALL_LOCAL",
}  # fmt: skip
# what of a package's *.dist-info each job gets (uv, pip and importlib.metadata read these; licenses
# and the like stay in the store: every file is a create on the job's disk)
METADATA_FILES = {"METADATA", "RECORD", "INSTALLER", "entry_points.txt", "top_level.txt", "direct_url.json"}
_SECRET_WORDS = ("PASSWORD", "TOKEN", "USERNAME", "CREDENTIAL", "SECRET", "KEY")


class Refused(Exception):
    """The store is not used; the message is one line saying why."""


class Damaged(Exception):
    """An entry does not hold what it held when it was built; the message says what differs."""


# ---- which lock


def locked_source(checkout: str) -> tuple[str, str] | None:
    """(kind, path) of the file that fully determines the packages, as the install step picks it."""
    lock, pyproject = os.path.join(checkout, "uv.lock"), os.path.join(checkout, "pyproject.toml")
    if os.path.isfile(lock) and os.path.isfile(pyproject):
        return "uv.lock", lock
    pylock = os.path.join(checkout, "pylock.toml")
    if os.path.isfile(pylock):
        return "pylock", pylock
    reqs = os.path.join(checkout, "requirements.txt")
    if os.path.isfile(reqs) and _hashed(_read_text(reqs)):
        return "requirements", reqs
    return None


_LOCAL_SOURCES = ("editable", "virtual", "directory", "path")


def only_the_project_is_local(lock_text: str) -> bool:
    """A uv.lock whose only local package is the project itself (`source = { editable|virtual = "." }`):
    a store entry for it (built `--no-install-local`) holds everything `uv sync --no-install-project`
    would install, so a job linked to it needs only the project. Workspace members, path
    dependencies, local wheels, or a `source` line not understood: False."""
    for line in lock_text.splitlines():
        if not line.startswith("source = "):
            continue
        kind, eq, value = line[len("source = ") :].strip().strip("{}").strip().partition(" = ")
        if not eq or not kind.isidentifier():
            return False  # not the one-key inline table uv writes
        if kind in _LOCAL_SOURCES and not (kind in ("editable", "virtual") and value.strip() == '"."'):
            return False
    return True


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


def _hashed(text: str) -> bool:
    for line in text.splitlines():
        body = line.split("#", 1)[0]
        if "--hash=" in body or "--hash " in body:
            return True
    return False


def _logical_lines(text: str) -> list[str]:
    """Requirements lines with `\\` continuations joined (comments kept out)."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        if cur.strip():
            out.append(" ".join(cur.split()))
        cur = ""
    if cur.strip():
        out.append(" ".join(cur.split()))
    return out


_LOCAL_PREFIXES = ("-e", "--editable", ".", "/", "file:", "~")


def pinned_requirements(text: str) -> tuple[str, bool]:
    """(the lines to build the store from, whether the file had a local line such as `-e .`).

    Local lines (the project, paths) are left to the job: they change with every commit. Includes of
    other files (-r, -c) are not in the key: refused."""
    keep, local = [], False
    for line in _logical_lines(text):
        word = line.split()[0]
        if word in ("-r", "--requirement", "-c", "--constraint") or word.startswith(("-r", "-c")):
            raise Refused(f"requirements.txt includes another file ({word})")
        if line.startswith(_LOCAL_PREFIXES) or " @ file:" in line:
            local = True
            continue
        keep.append(line)
    return "\n".join(keep) + "\n", local


def pinned_pylock(text: str) -> str:
    """pylock.toml without its local packages (a `directory`, or an archive or wheel by `path` alone)."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        s = line.strip()
        if s == "[[packages]]" or (s.startswith("[") and not s.lstrip("[").startswith("packages")):
            blocks.append([])
        blocks[-1].append(line)
    keep = []
    for block in blocks:
        body = "\n".join(block[1:])
        local = re.search(r"\bdirectory\s*=", body) or (
            re.search(r"\bpath\s*=", body) and not re.search(r"\burl\s*=", body)
        )
        if not (block and block[0].strip() == "[[packages]]" and local):
            keep.extend(block)
    return "\n".join(keep) + "\n"


# ---- the key


def _uv_tool_settings(pyproject: str) -> str:
    """The `[tool.uv*]` tables of pyproject.toml, as text (default groups, no-binary, sources, ...)."""
    out, inside = [], False
    for line in pyproject.splitlines():
        s = line.strip()
        if s.startswith("["):
            inside = s.lstrip("[").startswith("tool.uv")
        if inside:
            out.append(line)
    return "\n".join(out)


def python_facts() -> list[str]:
    """What makes one interpreter's environment unusable by another."""
    libc = ""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        pass
    return [
        sys.version,
        sys.implementation.cache_tag or "",
        getattr(sys, "abiflags", ""),
        sysconfig.get_platform(),
        str(sys.maxsize),
        libc,
    ]


def env_key(
    kind: str, lock_text: str, checkout: str, args: list[str], environ: dict[str, str], facts: list[str]
) -> str:
    """The store key: everything that changes what the lock installs, hashed."""
    h = hashlib.sha256()
    parts = [f"{STORE} format {FORMAT}", kind, lock_text]
    if kind == "uv.lock":
        parts.append(_uv_tool_settings(_read_text(os.path.join(checkout, "pyproject.toml"))))
        uvtoml = os.path.join(checkout, "uv.toml")
        parts.append(_read_text(uvtoml) if os.path.isfile(uvtoml) else "")
    parts.append(" ".join(sorted(args)))
    for name in sorted(environ):
        secret = any(w in name for w in _SECRET_WORDS)  # credentials change nothing installed
        if name.startswith("UV_") and name not in _UV_IRRELEVANT and not secret:
            parts.append(f"{name}={environ[name]}")
    parts.extend(facts)
    for part in parts:
        data = part.encode("utf-8", "surrogateescape")
        h.update(b"%d\n" % len(data) + data)
    return h.hexdigest()[:32]


# ---- trust


def untrusted(path: str, private: bool) -> str | None:
    """Why `path` may not be trusted (None: it may). `private`: as lk_private_tree (no access at all
    for group or others); else: owned by this user, writable by nobody else."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"{path}: {e.strerror}"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory (a symlink?)"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to uid {st.st_uid}, not this user ({os.geteuid()})"
    mask = 0o077 if private else 0o022
    if st.st_mode & mask:
        verb = "reach" if private else "write"
        return f"{path} has mode {stat.S_IMODE(st.st_mode):04o} (others can {verb} it)"
    return None


def user_tree(cache: str) -> str:
    """`launchkit-envs-v1/u<uid>` in the cache: created private, checked private."""
    base = os.path.join(cache, STORE)
    mine = os.path.join(base, f"u{os.geteuid()}")
    if not os.path.isdir(base):
        try:
            os.makedirs(base, exist_ok=True)
            os.chmod(base, 0o1777)  # shared and sticky, as /tmp: nobody moves another user's tree
        except OSError as e:
            raise Refused(f"cannot create {base}: {e.strerror}") from None
    if not os.path.lexists(mine):
        try:
            os.mkdir(mine, 0o700)
        except FileExistsError:
            pass
        except OSError as e:
            raise Refused(f"cannot create {mine}: {e.strerror}") from None
    why = untrusted(mine, private=True)
    if why:
        raise Refused(f"{why}: not this user's private directory")
    return mine


def verify(entry: str, key: str) -> Manifest:
    """The manifest of a complete entry this user built; Refused otherwise."""
    why = untrusted(entry, private=False)
    if why:
        raise Refused(why)
    try:
        with open(os.path.join(entry, MANIFEST), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        raise Refused(f"{entry} is incomplete (no manifest): half-built or not launchkit's") from None
    if not isinstance(manifest, dict) or manifest.get("key") != key:
        raise Refused(f"{entry}: its manifest is for another key")
    if manifest.get("format") != FORMAT:
        raise Refused(f"{entry} was built by another version of launchkit (format {manifest.get('format')})")
    meta = os.path.join(entry, "meta")
    sp = os.path.join(entry, str(manifest.get("site_packages", "")))
    dists = manifest.get("dists")
    try:
        listed = sorted(os.listdir(meta))
    except OSError:
        listed = None
    if not isinstance(dists, list) or not os.path.isdir(sp) or listed != sorted(dists):
        raise Refused(f"{entry} does not hold what its manifest lists")
    return manifest


# ---- build once, under a lock


def _lock(
    path: str,
    deadline: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    on_wait: Callable[[], None],
    shared: bool = False,
) -> int:
    """A POSIX lock on `path` (exclusive: building; shared: linking, which a prune waits for)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    waited = False
    while True:
        try:
            fcntl.lockf(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            return fd
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EAGAIN):
                os.close(fd)
                raise Refused(f"cannot lock {path}: {e.strerror}") from None
        if clock() >= deadline:
            os.close(fd)
            raise Refused("another job is still building this environment")
        if not waited:
            on_wait()
            waited = True
        sleep(0.2)


def ensure_entry(
    mine: str,
    key: str,
    build: Callable[[str], Manifest],
    log: Log,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    wait: float = WAIT_SECONDS,
    damaged: int | None = None,
    say: Log | None = None,
) -> tuple[str, Manifest, bool]:
    """(entry path, manifest, built by this call). `build(staging)` fills a fresh directory and returns
    its manifest fields; the entry is published by renaming it into place. `damaged`: the inode of
    the entry a job found damaged; built again unless another job did meanwhile. An entry that is
    not complete is built again, and `say` (the job's stderr) names it."""
    entry = os.path.join(mine, key)
    if os.path.lexists(entry) and damaged is None:
        try:
            return entry, verify(entry, key), False
        except Refused as e:
            log(f"env store: {e}")
            if untrusted(entry, private=False):
                raise
    fd = _lock(entry + ".lock", clock() + wait, clock, sleep, lambda: log(f"env store: waiting for {key}"))
    try:
        if os.path.lexists(entry):
            try:
                if os.lstat(entry).st_ino == damaged:
                    raise Refused("")  # (said by the caller)
                return entry, verify(entry, key), False
            except Refused as e:
                if str(e):
                    (say or log)(f"[launchkit] env store: {e}; building it again")
                # ours and in our private tree, but incomplete or damaged (a copy, a crash): set aside
                aside = os.path.join(mine, f".broken-{key}-{os.getpid()}")
                os.rename(entry, aside)
                shutil.rmtree(aside, ignore_errors=True)
        staging = os.path.join(mine, f".build-{key}-{os.getpid()}-{time.time_ns()}")
        os.mkdir(staging, 0o755)
        try:
            manifest = dict(build(staging), key=key, format=FORMAT)
            with open(os.path.join(staging, MANIFEST), "w", encoding="utf-8") as f:
                json.dump(manifest, f, indent=1)
            os.rename(staging, entry)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return entry, verify(entry, key), True
    finally:
        os.close(fd)


def _run(cmd: list[str], log: Log, env: dict[str, str], cwd: str) -> bool:
    log("$ " + " ".join(cmd))
    try:
        p = subprocess.run(
            cmd, check=False, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=3600
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log(f"env store: {e}")
        return False
    out = p.stdout.decode(errors="replace").rstrip()
    if out:
        log(out)
    return p.returncode == 0


def build_env(
    kind: str, checkout: str, lock_text: str, args: list[str], python: str, environ: dict[str, str], log: Log
) -> Callable[[str], Manifest]:
    """A `build(staging)` for ensure_entry: the locked packages, without the project or local paths."""

    def build(staging: str) -> Manifest:
        venv = os.path.join(staging, "venv")
        # Copied, never linked: a file shared with uv's cache would carry any change made through the
        # store to every later install from the cache (seal() checks it, and makes the files read-only).
        env = dict(environ, UV_LINK_MODE="copy")
        for name in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONHOME"):
            env.pop(name, None)
        cache = environ.get("UV_CACHE_DIR", "")
        tries = [["--offline"], []] if cache and os.path.isdir(os.path.join(cache, "archive-v0")) else [[]]
        if kind == "uv.lock":
            env["UV_PROJECT_ENVIRONMENT"] = venv
            cmd = ["uv", "sync", "--frozen", "--no-install-local", f"--python={python}", *args]
        else:
            if not _run(["uv", "venv", "-q", f"--python={python}", venv], log, env, checkout):
                raise Refused("uv venv failed")
            if kind == "pylock":
                pins = os.path.join(staging, "pylock.toml")
                with open(pins, "w", encoding="utf-8") as f:
                    f.write(pinned_pylock(lock_text))
                extras = [a for a in args if a.startswith(("--extra=", "--all-extras"))]  # as install does
                cmd = ["uv", "pip", "install", "--preview-features", "pylock", "-r", pins, *extras]
            else:
                text, local = pinned_requirements(lock_text)
                pins = os.path.join(staging, "requirements.txt")
                with open(pins, "w", encoding="utf-8") as f:
                    f.write(text)
                cmd = ["uv", "pip", "install", *([] if local else ["--require-hashes"]), "-r", pins]
            cmd[3:3] = [f"--python={os.path.join(venv, 'bin', 'python')}"]
        if not any(_run(cmd + extra, log, env, checkout) for extra in tries):
            raise Refused("building the environment failed (see the install log)")
        copied = seal(venv)
        if copied:
            log(f"env store: copied {copied} file(s) still linked elsewhere (uv's cache) or not ours alone")
        sps = _site_packages(venv)
        if len(sps) != 1:
            raise Refused(f"{venv}: expected one site-packages, found {len(sps)}")
        sp = sps[0]
        meta = os.path.join(staging, "meta")
        os.mkdir(meta)
        dists = sorted(n for n in os.listdir(sp) if n.endswith(".dist-info"))
        for name in dists:  # metadata lives in each job's venv, so it is seen once
            os.rename(os.path.join(sp, name), os.path.join(meta, name))
        site = os.path.relpath(sp, staging)
        manifest: Manifest = {"kind": kind, "site_packages": site, "built_at": venv, "dists": dists}
        manifest["links"] = link_plan(staging, manifest)
        return dict(manifest, **checks(staging, manifest))

    return build


def seal(top: str) -> int:
    """Every file under `top` becomes this user's own and read-only: one that shares its inode with
    another path (a hard link into uv's cache) or that someone else owns is replaced by a private copy
    first. Directories stay writable by their owner (Python's `__pycache__`, a prune). Returns how
    many files were copied."""
    me, copied = os.geteuid(), 0
    for d, _, files in os.walk(top):
        for name in files:
            path = os.path.join(d, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
                continue
            mode = stat.S_IMODE(st.st_mode) & ~0o222
            if st.st_nlink > 1 or st.st_uid != me:
                tmp = path + ".lk-own"
                shutil.copyfile(path, tmp)
                os.replace(tmp, path)
                copied += 1
            os.chmod(path, mode)
    return copied


def _site_packages(venv: str) -> list[str]:
    lib = os.path.join(venv, "lib")
    found = []
    for name in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
        sp = os.path.join(lib, name, "site-packages")
        if name.startswith(("python", "pypy")) and os.path.isdir(sp):
            found.append(sp)
    return found


# ---- the thin venv


def link(entry: str, manifest: Manifest, venv: str, check: bool = True) -> list[str]:
    """Make `venv` a thin venv over the store entry; returns what it added (for an undo). `check`:
    first, that every file of the entry is as built (check_tree; Damaged otherwise): its modules are
    imported in place, and read-only modes do not stop a job running as root. (False: built by this
    job a moment ago.)"""
    sps = _site_packages(venv)
    if len(sps) != 1:
        raise Refused(f"{venv}: expected one site-packages, found {len(sps)}")
    if check and "tree" in manifest:
        check_tree(entry, manifest)
    sp = sps[0]
    store_sp = os.path.join(entry, manifest["site_packages"])
    plan = manifest.get("links")  # built with this entry (else read from the metadata: older entries)
    if not isinstance(plan, dict):
        plan = link_plan(entry, manifest)
    stamps = manifest.get("stamps") or {}
    added: list[str] = []
    try:
        for inside in manifest.get("present") or []:  # each package's top-level names
            if not os.path.lexists(os.path.join(store_sp, inside)):
                raise Damaged(f"{inside} is missing")
        pth = os.path.join(sp, PTH)
        with open(pth, "w", encoding="utf-8") as f:  # `import` lines of a .pth run: the store's .pth too
            f.write(f"import site; site.addsitedir({store_sp!r})\n")
        added.append(pth)
        old_python = os.path.join(manifest["built_at"], "bin", "python").encode()
        new_python = os.path.join(venv, "bin", "python").encode()
        for name in manifest["dists"]:
            dst = os.path.join(sp, name)
            if os.path.lexists(dst):
                continue
            files, outside = plan.get(name) or ([], [])
            os.mkdir(dst)
            added.append(dst)
            for file in files:
                if file in METADATA_FILES:  # (names only: never a path)
                    rel = os.path.join("meta", name, file)
                    _copy_checked(entry, rel, os.path.join(dst, file), stamps.get(rel))
            added.extend(_link_outside(entry, venv, outside, old_python, new_python, stamps))
    except BaseException:
        unlink(added)
        raise
    return added


def link_plan(entry: str, manifest: Manifest) -> dict[str, list[list[str]]]:
    """Per package (its *.dist-info name): the metadata files a job gets, and the files it put
    outside site-packages (paths in the venv, from its RECORD). Kept in the manifest when built, so
    a job reads no RECORD."""
    built_sp = os.path.join(manifest["built_at"], os.path.relpath(manifest["site_packages"], "venv"))
    plan: dict[str, list[list[str]]] = {}
    for name in manifest["dists"]:
        meta = os.path.join(entry, "meta", name)
        files = sorted(METADATA_FILES.intersection(os.listdir(meta)))
        outside = [
            inside
            for inside in _outside(os.path.join(meta, "RECORD"), built_sp, manifest["built_at"])
            if os.path.isfile(os.path.join(entry, "venv", inside))
        ]
        plan[name] = [files, outside]
    return plan


def checks(entry: str, manifest: Manifest) -> Manifest:
    """What a job checks when it links the entry (Damaged otherwise), taken when it is built: each file
    the job copies, by its path in the entry, with its size and change time (`stamps`: any write
    changes the ctime, and nobody can set it back), and each package's top-level names in
    site-packages (`present`)."""
    stamps = {}
    for name, (files, outside) in manifest["links"].items():
        for rel in [os.path.join("meta", name, f) for f in files] + [
            os.path.join("venv", p) for p in outside
        ]:
            stamps[rel] = _stamp(os.stat(os.path.join(entry, rel)))
    store_sp = os.path.join(entry, manifest["site_packages"])
    present = set()
    for name in manifest["dists"]:
        for rel in _record_paths(os.path.join(entry, "meta", name, "RECORD")):
            top = rel.split("/", 1)[0]
            if top not in ("", "..") and not top.endswith(".dist-info"):
                present.add(top)
    return {
        "stamps": stamps,
        "present": sorted(p for p in present if os.path.lexists(os.path.join(store_sp, p))),
        "tree": write_tree_stamps(entry),
    }


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_ctime_ns]


# ---- every file of an entry, as built


def tree_stamps(entry: str) -> list[str]:
    """One line per file (and symlink) of the entry, in a fixed order: `size ctime_ns path`. Any write,
    truncation, chmod, rename or replacement changes a file's ctime, and nobody (root included) can set
    it back; a file removed or added changes the list. Left out: the manifest and this list (a job
    touches the manifest to say the entry is in use) and Python's own `__pycache__` directories."""
    lines: list[str] = []
    todo = [""]
    while todo:
        rel = todo.pop()
        with os.scandir(os.path.join(entry, rel) if rel else entry) as it:
            found = sorted(it, key=lambda e: e.name)
        subdirs = []
        for e in found:
            path = rel + "/" + e.name if rel else e.name
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    subdirs.append(path)
                continue
            if not rel and e.name in (MANIFEST, STAMPS):
                continue
            st = e.stat(follow_symlinks=False)
            lines.append(f"{st.st_size} {st.st_ctime_ns} {path}")
        todo.extend(reversed(subdirs))
    return lines


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogateescape")).hexdigest()


def write_tree_stamps(entry: str) -> Manifest:
    """Stamp every file of a just-built entry (after seal(): its chmods change ctimes): the list goes
    to STAMPS beside the manifest, its digest and length into the manifest (`tree`)."""
    lines = tree_stamps(entry)
    with open(os.path.join(entry, STAMPS), "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write("".join(line + "\n" for line in lines))
    os.chmod(os.path.join(entry, STAMPS), 0o444)
    return {"files": len(lines), "sha256": _digest(lines)}


def check_tree(entry: str, manifest: Manifest) -> None:
    """Damaged unless every file of the entry is as it was built: none changed (in place, emptied,
    chmod'ed back), removed or added (a module, a `.pth`, a `sitecustomize.py`). One stat per file;
    the list is read only to name what differs."""
    tree = manifest.get("tree")
    if not isinstance(tree, dict):
        raise Damaged("it has no record of its files")
    try:
        now = tree_stamps(entry)
    except OSError as e:
        raise Damaged(f"cannot read it ({e.strerror})") from None
    if len(now) == tree.get("files") and _digest(now) == tree.get("sha256"):
        return
    try:
        with open(os.path.join(entry, STAMPS), encoding="utf-8", errors="surrogateescape") as f:
            then = {line.split(" ", 2)[2]: line for line in f.read().splitlines() if line.count(" ") >= 2}
    except OSError:
        then = {}
    seen = {line.split(" ", 2)[2]: line for line in now}
    for path, line in then.items():
        if path not in seen:
            raise Damaged(f"{path} is missing")
        if seen[path] != line:
            raise Damaged(f"{path} changed since it was built")
    for path in seen:
        if path not in then:
            raise Damaged(f"{path} was added since it was built")
    raise Damaged("its record of its files changed")


def _copy_checked(
    entry: str, rel: str, dst: str, want: list[int] | None, rewrite: tuple[bytes, bytes] | None = None
) -> bool:
    """The entry's file `rel` becomes the job's own file `dst` (a copy: nothing the job writes reaches
    the store; `rewrite` applied to a script); Damaged when it is not as the entry was built. False
    when there is no such file (and none was recorded)."""
    src = os.path.join(entry, rel)
    try:
        st = os.stat(src)
    except FileNotFoundError:
        if want is not None:
            raise Damaged(f"{rel} is missing") from None
        return False
    if want is not None and _stamp(st) != want:
        raise Damaged(f"{rel} changed since it was built")
    with open(src, "rb") as f:
        data = f.read() if rewrite and f.read(2) == b"#!" else b""
    if data:
        with open(dst, "wb") as f:
            f.write(b"#!" + data.replace(*rewrite))  # type: ignore[misc]
    else:
        shutil.copyfile(src, dst)  # (in the kernel: binaries in bin/ can be tens of MB)
    os.chmod(dst, 0o755 if st.st_mode & 0o100 else 0o644)
    return True


def linked_site_packages(site_packages: str) -> list[str]:
    """The store's site-packages a thin venv's `site_packages` is linked to ([] for none), as link()
    wrote it in the venv's .pth."""
    head, tail = "import site; site.addsitedir(", ")"
    try:
        with open(os.path.join(site_packages, PTH), encoding="utf-8") as f:
            line = f.readline().strip()
    except OSError:
        return []
    if not (line.startswith(head) and line.endswith(tail)):
        return []
    try:
        path = ast.literal_eval(line[len(head) : -len(tail)])
    except (ValueError, SyntaxError):
        return []
    return [path] if isinstance(path, str) and os.path.isdir(path) else []


def _record_paths(record: str) -> list[str]:
    """The paths a RECORD lists (relative to site-packages); [] when it cannot be read."""
    try:
        with open(record, newline="", encoding="utf-8") as f:
            return [r[0] for r in csv.reader(f) if r]
    except OSError:
        return []


def _outside(record: str, built_sp: str, built_venv: str) -> list[str]:
    """The paths (in the venv) of the files a RECORD lists outside site-packages and inside the venv
    (console scripts in bin/, share/, ...)."""
    found = []
    for rel in _record_paths(record):
        if rel.startswith("../"):
            inside = os.path.relpath(os.path.normpath(os.path.join(built_sp, rel)), built_venv)
            if not inside.startswith(".."):  # outside the venv: not ours to follow
                found.append(inside)
    return found


def _link_outside(
    entry: str, venv: str, outside: list[str], old: bytes, new: bytes, stamps: dict[str, list[int]]
) -> list[str]:
    """The files a package put outside site-packages (console scripts, `etc/`, `share/`), copied into
    the job's venv: scripts rewritten for the job's interpreter."""
    added: list[str] = []
    for inside in outside:
        inside = os.path.normpath(inside)
        if os.path.isabs(inside) or inside.startswith(".."):
            continue  # (the manifest is this user's own; still: never outside the venv)
        rel, dst = os.path.join("venv", inside), os.path.join(venv, inside)
        if os.path.lexists(dst):
            continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        rewrite = (old, new) if inside.startswith("bin" + os.sep) else None
        if _copy_checked(entry, rel, dst, stamps.get(rel), rewrite):
            added.append(dst)
    return added


def unlink(added: list[str]) -> None:
    for path in reversed(added):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


# ---- leases and pruning


def take_lease(mine: str, key: str, now: float, holder: str = "") -> str:
    """A new lease file for entry `key` (the entrypoint holds it open with a shared flock until the
    command ends: prune() leaves an entry whose lease someone holds), saying who holds it. Leases
    nobody holds that are a day old are removed on the way."""
    leases = os.path.join(mine, key + ".leases")
    os.makedirs(leases, 0o700, exist_ok=True)
    for name in os.listdir(leases):
        path = os.path.join(leases, name)
        try:
            if now - os.lstat(path).st_mtime > 86400 and not _held(path):
                os.unlink(path)
        except OSError:
            pass

    path = os.path.join(leases, f"{socket.gethostname()}-{os.getpid()}-{os.urandom(4).hex()}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(holder)
    return path


def _held(path: str) -> bool:
    """Whether some process holds a flock on `path` (a running job's lease)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)  # (and with it the probe's own lock)


def in_use(mine: str, key: str) -> bool:
    """A running job holds a lease on entry `key`."""
    leases = os.path.join(mine, key + ".leases")
    try:
        names = os.listdir(leases)
    except OSError:
        return False
    return any(_held(os.path.join(leases, name)) for name in names)


def prune(mine: str, now: float, spawn: Callable[[str], None], days: float = KEEP_DAYS) -> list[str]:
    """Entries no job used for `days` (and builds abandoned for a day) are renamed away, then removed
    by `spawn` (in the background: an environment is thousands of files). An entry is left while
    anyone holds its lock (building, waiting, linking) or a lease on it (a job running on it, however
    old). Returns what was renamed."""

    def age(name: str) -> float:
        path = os.path.join(mine, name)
        stamp = path if name.startswith((".build-", ".broken-")) else os.path.join(path, MANIFEST)
        try:
            return now - os.stat(stamp).st_mtime
        except OSError:
            return now - os.stat(path).st_mtime

    gone = []
    for name in os.listdir(mine):
        path = os.path.join(mine, name)
        if (
            name.startswith(".trash-")
            or name.endswith(".leases")
            or not os.path.isdir(path)
            or os.path.islink(path)
        ):
            continue
        entry = not name.startswith(".")
        if age(name) < (days if entry else 1.0) * 86400:
            continue
        fd = -1
        if entry:
            try:
                fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                if fd >= 0:
                    os.close(fd)
                continue
        trash = os.path.join(mine, f".trash-{name}-{os.getpid()}")
        try:
            if entry and (age(name) < days * 86400 or in_use(mine, name)):  # (under the lock: as it is now)
                continue
            os.rename(path, trash)
            if entry and os.path.isdir(path + ".leases"):
                os.rename(path + ".leases", os.path.join(trash, ".leases"))
            gone.append(trash)
            spawn(trash)
        except OSError:
            pass
        finally:
            if fd >= 0:
                os.close(fd)
    return gone


def _remove_in_background(path: str) -> None:
    code = "import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)"
    quiet = subprocess.DEVNULL
    argv = [sys.executable, "-c", code, path]  # our own interpreter, a path in our own tree
    subprocess.Popen(argv, stdin=quiet, stdout=quiet, stderr=quiet, start_new_session=True)


# ---- the whole step


def use_store(
    checkout: str,
    venv: str,
    args: list[str],
    environ: dict[str, str],
    log: Log,
    say: Log | None = None,
    **kw: Any,
) -> str | None:
    """Make `venv` (a fresh venv of the job's interpreter) a thin venv over the store's environment for
    the lock in `checkout` (`args`: the extras and groups asked, as uv flags); returns `venv`, or None
    when the store does not apply. Refused (one line) when it applies but is not used. The install
    that follows (uv sync, uv pip install) finds the locked packages installed and adds the rest."""
    if switched_off(environ, "LAUNCHKIT_ENVSTORE") or environ.get("LAUNCHKIT_INSTALL_CMD"):
        return None
    cache = environ.get("UV_CACHE_DIR", "")
    if not cache or environ.get("LAUNCHKIT_UV_VENV") or environ.get("LAUNCHKIT_SYSTEM_PYTHON") == "1":
        return None  # no shared cache; or an environment of the image's
    source = locked_source(checkout)
    if source is None:
        return None
    kind, path = source
    lock_text = _read_text(path)
    if kind == "requirements":
        pinned_requirements(lock_text)  # refused early: includes
    mine = user_tree(cache)
    python = os.path.join(venv, "bin", "python")
    key = env_key(kind, lock_text, checkout, args, environ, python_facts())
    build = build_env(kind, checkout, lock_text, args, python, environ, log)
    t = time.monotonic()
    say = say or log
    damaged = None
    for _ in range(3):  # (a damaged entry built again; an entry pruned or replaced meanwhile)
        entry, manifest, built = ensure_entry(mine, key, build, log, damaged=damaged, say=say, **kw)
        # linked under a shared lock: a prune (which takes it exclusively) waits, then sees the lease
        fd = _lock(
            entry + ".lock",
            time.monotonic() + WAIT_SECONDS,
            time.monotonic,
            time.sleep,
            lambda: None,
            shared=True,
        )
        try:
            try:
                ino = os.lstat(entry).st_ino
            except OSError:
                continue  # pruned between the lookup and the lock
            try:
                checked = time.monotonic()
                if not built:  # (one it built a moment ago is as built)
                    check_tree(entry, manifest)
                checked = time.monotonic() - checked
                link(entry, manifest, venv, check=False)
            except Damaged as e:
                if built:
                    raise Refused(f"{entry} is damaged right after it was built ({e})") from None
                say(f"[launchkit] env store: {entry} is damaged ({e}); building it again")
                damaged = ino
                continue
            try:
                os.utime(os.path.join(entry, MANIFEST))  # in use (for pruning)
            except OSError:
                pass
            holder = environ.get("BEAKER_JOB_ID") or environ.get("LAUNCHKIT_RUN_ID") or ""
            lease = take_lease(mine, key, time.time(), holder)
            with open(os.path.join(venv, LEASE_NOTE), "w", encoding="utf-8") as f:
                f.write(lease + "\n")
        finally:
            os.close(fd)
        break
    else:
        raise Refused(f"{os.path.join(mine, key)} kept changing while this job linked it")
    try:
        prune(mine, time.time(), _remove_in_background)
    except OSError as e:
        log(f"env store: pruning {mine}: {e}")
    how = "built" if built else "reused"
    took = time.monotonic() - t
    files = (manifest.get("tree") or {}).get("files")
    check = "stamped" if built else "checked in %.0f ms" % (checked * 1000)
    packages = len(manifest["dists"])
    log(f"env store: {how} {entry} ({packages} packages, {took:.2f}s, its {files} files {check}); linked")
    return venv


def link_or_fall_back(
    checkout: str, venv: str, args: list[str], environ: dict[str, str], log: Log, stderr: Any = None
) -> bool:
    """use_store(), never failing the job: True when `venv` was linked; else False, and a store that
    applied but was not used is said in one line on `stderr` (the job's; the usual install follows), as
    is an entry found damaged."""

    def say(line: str) -> None:
        print(line, file=stderr or sys.stderr)
        log(line)

    try:
        return use_store(checkout, venv, args, environ, log, say) is not None
    except Refused as e:
        why = str(e)
    except Exception as e:  # noqa: BLE001 # never fails the job: the usual install follows
        why = f"{type(e).__name__}: {e}"
    print(f"[launchkit] env store not used: {why}; installing as usual", file=stderr or sys.stderr)
    log(f"env store not used: {why}")
    return False


def main(argv: list[str]) -> int:
    """`envstore link VENV LOG ARGS...`: 0 when the venv was linked, 1 when not (installed as usual)."""
    if len(argv) < 3 or argv[0] != "link":
        print("[launchkit] error: usage: envstore link VENV LOG [uv selection args...]", file=sys.stderr)
        return 100
    venv, log_path, args = argv[1], argv[2], argv[3:]

    def log(msg: str) -> None:
        with open(log_path, "a", encoding="utf-8", errors="replace") as f:
            f.write(msg + "\n")

    return 0 if link_or_fall_back(os.getcwd(), venv, args, dict(os.environ), log) else 1
