"""The project's own build, kept across jobs (docs/runtime.md "The project itself is built once").

The user's project (installed editable by `uv sync`) would be built by its build backend in every
job: uv's build cache keys on the ctime of pyproject.toml/setup.py/setup.cfg and the creation time of
src/, which are new in every fresh clone (and cannot be set). So launchkit keeps the project's
installed files itself (the files its dist-info's RECORD lists, as a tar), keyed on what uv's keys
stand for, by content: the packaging files' git blobs, the top-level (and src/) names, the Python
version and the paths (the same on every node). Stored in uv's cache directory, so a shared cache
shares them; writes are atomic renames.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import tarfile
import tempfile
from urllib.parse import unquote, urlsplit

from .plan import assigns, read_text, toml_lines
from .settings import Settings
from .steplog import StepLog, child_environ

TYPE_CHECKING = False  # (typing costs a job's start-up: for the type checker only)
if TYPE_CHECKING:
    from typing import Callable, Optional, Sequence

    Git = Callable[[Sequence[str]], Optional[str]]

PROJECTS = "launchkit-projects-v1"  # stored project builds, in uv's cache directory
PACKAGING = ("pyproject.toml", "setup.py", "setup.cfg")


def _git(root: str) -> Git:
    def run(args: Sequence[str]) -> str | None:  # stdout, or None when git fails
        r = subprocess.run(
            ["git", *args],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=child_environ(),
            check=False,
        )
        return r.stdout.decode("utf-8", "surrogateescape") if r.returncode == 0 else None

    return run


def venv_python_line(venv: str) -> str:
    """pyvenv.cfg's `version_info = 3.12.3` line (with its newline), or "" when there is none."""
    for line in read_text(os.path.join(venv, "pyvenv.cfg")).splitlines(True):
        if line.startswith("version_info"):
            return line if line.endswith("\n") else line + "\n"
    return ""


def project_key(root: str, venv: str, s: Settings, git: Git | None = None) -> str:
    """The key of the checkout's project build (32 hex digits), or "" when it is left to uv: no
    pyproject.toml, a workspace or `tool.uv.cache-keys`, UV_NO_EDITABLE & co, no venv Python."""
    pyproject = os.path.join(root, "pyproject.toml")
    if not os.path.isfile(pyproject) or s.uv_leaves_project:
        return ""
    lines = toml_lines(pyproject)
    if any(line.startswith("[tool.uv.workspace]") or assigns(line, "cache-keys") for line in lines):
        return ""
    py = venv_python_line(venv)
    if not py:
        return ""
    git = git or _git(root)
    commit = ""
    # dynamic metadata (a version from git, say) or a setup.py-only project: any commit may change it
    dynamic = any(assigns(line, "dynamic") for line in lines)
    if dynamic or not any(line.startswith("[project]") for line in read_text(pyproject).splitlines()):
        commit = (git(["rev-parse", "HEAD"]) or "").strip()
        if not commit:
            return ""
    listed = _top_and_src(git)
    if listed is None:
        return ""
    entries, below = listed
    packaging = "".join(meta + "\t" + name + "\n" for meta, name in entries if name in PACKAGING)
    names = "".join(name + "\n" for _, name in entries)
    text = f"launchkit-project-v1\n{root}\n{venv}\n{py}{commit}\n{packaging}{names}{below}"

    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _top_and_src(git: Git) -> tuple[list[list[str]], str] | None:
    """HEAD's top-level entries ([meta, name], "MODE TYPE OID" and name, in git's order) and the names
    in its src/ tree (lines), or None without a commit. One `git ls-tree HEAD -- . src/` (the top,
    with src/ listed as its contents) when no name needs quoting; else the top and src/ apart."""
    both = git(["ls-tree", "HEAD", "--", ".", "src/"])
    if both is None:
        return None
    lines = both.splitlines()
    if not any(line.partition("\t")[2].startswith('"') for line in lines):
        entries: list[list[str]] = []
        below = ""
        for line in lines:
            meta, _, name = line.partition("\t")
            if not name.startswith("src/"):
                entries.append([meta, name])
                continue
            if not below:  # src itself, where its contents are (git sorts a tree as "src/")
                entries.append(["040000 tree -", "src"])
            below += name[len("src/") :] + "\n"
        return entries, below
    top = git(["ls-tree", "HEAD"])  # "MODE TYPE OID\tNAME" lines, in git's order
    if top is None:
        return None
    entries = [line.split("\t", 1) for line in top.splitlines() if "\t" in line]
    src = [meta.split()[2] for meta, name in entries if name == "src" and meta.split()[1] == "tree"]
    return entries, (git(["ls-tree", "--name-only", src[0]]) or "") if src else ""


def site_packages_dirs(venv: str) -> list[str]:
    lib = os.path.join(venv, "lib")
    try:
        found = sorted(d for d in os.listdir(lib) if d.startswith("python"))
    except OSError:
        return []
    return [p for p in (os.path.join(lib, d, "site-packages") for d in found) if os.path.isdir(p)]


def _file_url_path(url: str) -> str:
    parts = urlsplit(url)
    return unquote(parts.path) if parts.scheme == "file" and parts.netloc in ("", "localhost") else ""


def editable_dist(root: str, venv: str) -> str:
    """The one *.dist-info of an editable install of `root` in `venv` ("" for none or several)."""
    found = []
    for sp in site_packages_dirs(venv):
        for name in sorted(os.listdir(sp)):
            if not name.endswith(".dist-info"):
                continue
            try:
                with open(os.path.join(sp, name, "direct_url.json"), encoding="utf-8") as f:
                    info = json.load(f)
            except (OSError, ValueError):
                continue
            if not isinstance(info, dict) or not (info.get("dir_info") or {}).get("editable"):
                continue
            if _file_url_path(str(info.get("url", ""))) == root:
                found.append(os.path.join(sp, name))
    return found[0] if len(found) == 1 else ""  # more than one: not ours to guess


def record_files(dist: str, venv: str) -> list[str]:
    """The files a dist-info's RECORD lists, relative to the venv ([] when one lies outside it).
    uv's `uv_cache.json` (its ctime record of this clone) is left out: uv rechecks it."""
    site = os.path.dirname(dist)
    files = []
    try:
        with open(os.path.join(dist, "RECORD"), newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except (OSError, ValueError, csv.Error):
        return []
    for row in rows:
        if not row or not row[0]:
            continue
        name = row[0]
        if name.endswith("/uv_cache.json"):
            continue
        rel = os.path.relpath(os.path.normpath(os.path.join(site, name)), venv)
        if os.path.isabs(name) or rel == ".." or rel.startswith("../"):
            return []  # not ours to store
        files.append(rel)
    return files


def store_project(root: str, venv: str, stored: str, log: StepLog) -> bool:
    """Keep the editable install of the project at `root` as the tar `stored` (atomically)."""
    dist = editable_dist(root, venv)
    if not dist or not os.path.isfile(os.path.join(dist, "RECORD")):
        return False  # a virtual project: nothing was built
    files = record_files(dist, venv)
    if not files:
        return False
    folder = os.path.dirname(stored)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(stored) + ".", dir=folder)  # unique among nodes
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as out, tarfile.open(
            fileobj=out, mode="w", format=tarfile.GNU_FORMAT
        ) as tar:
            for rel in files:
                tar.add(os.path.join(venv, rel), arcname=rel, recursive=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, stored)
    except (OSError, tarfile.TarError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    log.write("[launchkit] project: stored its build as " + os.path.basename(stored))
    return True


def _inside(base: str, path: str) -> bool:
    return os.path.commonpath([base, path]) == base


def safe_members(tar: tarfile.TarFile, dest: str) -> list[tarfile.TarInfo]:
    """The members, or ValueError if one would land (or link) outside `dest`, or is not a plain
    file, directory or link: a stored build is in a cache other jobs write too."""
    dest = os.path.abspath(dest)
    members = tar.getmembers()
    for m in members:
        path = os.path.normpath(os.path.join(dest, m.name))
        if os.path.isabs(m.name) or not _inside(dest, path):
            raise ValueError(f"{m.name}: outside the environment")
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise ValueError(f"{m.name}: not a file")
        if m.issym() or m.islnk():
            base = os.path.dirname(path) if m.issym() else dest
            target = os.path.normpath(os.path.join(base, m.linkname))
            if os.path.isabs(m.linkname) or not _inside(dest, target):
                raise ValueError(f"{m.name}: links outside the environment")
    return members


def install_stored(stored: str, venv: str) -> str:
    """Unpack a stored build into the venv: "" when done, else why not."""
    try:
        with tarfile.open(stored, "r:") as tar:
            members = safe_members(tar, venv)
            if hasattr(tarfile, "data_filter"):  # 3.12+, and security updates of older ones
                tar.extractall(venv, members=members, filter="data")
            else:
                tar.extractall(venv, members=members)
    except (OSError, tarfile.TarError, ValueError) as e:
        return str(e) or type(e).__name__
    return ""
