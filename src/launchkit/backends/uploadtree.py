"""What `--upload LOCAL:/PATH` reads, for every backend: exactly the files under LOCAL.

- A symlink pointing out of LOCAL is refused (one line naming the link and its target): it could
  carry `~/.aws/credentials` into a dataset. A symlink inside is uploaded as what it points to (a
  dataset has no links): a file's content, or a directory's files under the link's path; a link
  that loops back to a directory it is in is refused.
- FIFOs, sockets and devices are refused, never skipped (the job would miss them silently).
- A name that is not UTF-8, or holds a control character, is refused: Beaker paths are UTF-8 text.
- A file or directory that cannot be read is named, with the reason.
Every refusal is a PreconditionError (exit 3), raised before anything is created.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from launchkit.errors import PreconditionError, UsageError

SPECIAL = (
    (stat.S_ISFIFO, "fifo"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


def _refuse(source: str, what: str, hint: str) -> PreconditionError:
    return PreconditionError(f"--upload {source}: {what}", hint=hint)


def _unreadable(source: str, path: str, err: OSError) -> PreconditionError:
    return _refuse(source, f"cannot read {path}: {err.strerror or err}", "fix its permissions or move it out")


def _special(mode: int) -> str | None:
    return next((name for test, name in SPECIAL if test(mode)), None)


def _check_name(source: str, path: str, name: str) -> None:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise _refuse(
            source, f"{shown}: the file name is not UTF-8", "rename it (Beaker paths are UTF-8)"
        ) from None
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise _refuse(source, f"{path!r}: the file name holds a control character", "rename it")


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def files(local_path: str) -> list[tuple[Path, str]]:
    """(file to read, path in the dataset) for every file under `local_path` (a file: that one file,
    under its name), sorted by dataset path."""
    source = local_path
    try:
        st = os.stat(local_path)
    except FileNotFoundError:
        raise UsageError(
            f"--upload {local_path!r} does not exist", hint="give an existing file or directory"
        ) from None
    except OSError as e:
        raise _unreadable(source, local_path, e) from None
    if stat.S_ISREG(st.st_mode):
        return [(Path(local_path), Path(local_path).name)]
    if not stat.S_ISDIR(st.st_mode):
        kind = _special(st.st_mode) or "special file"
        raise _refuse(source, f"{local_path} is a {kind}", "upload a regular file or a directory")
    root = os.path.realpath(local_path)
    out: list[tuple[Path, str]] = []
    _walk(source, root, local_path, "", [root], out)
    if not out:
        raise UsageError(
            f"--upload {local_path!r} holds no files", hint="upload a directory with files in it"
        )
    return sorted(out, key=lambda pair: pair[1])


def _walk(
    source: str, root: str, folder: str, rel: str, above: list[str], out: list[tuple[Path, str]]
) -> None:
    """Add the files under `folder` (whose real path is above[-1]; `above`: the real paths of the
    directories we are in, for loops) to `out`."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as e:
        raise _unreadable(source, folder, e) from None
    for entry in entries:
        _check_name(source, entry.path, entry.name)
        target = f"{rel}/{entry.name}" if rel else entry.name
        try:
            if entry.is_symlink():
                real = os.path.realpath(entry.path)
                if not _inside(real, root):
                    link = os.readlink(entry.path)
                    to = real if link == real else f"{link} ({real})"
                    raise _refuse(
                        source,
                        f"{entry.path} is a symlink to {to}, outside the directory",
                        "copy what it points to into the directory, or remove the link",
                    )
                try:
                    st = os.stat(real)
                except FileNotFoundError:
                    raise _refuse(
                        source, f"{entry.path} is a broken symlink", "remove it or fix its target"
                    ) from None
            else:
                real = os.path.join(above[-1], entry.name)
                st = entry.stat(follow_symlinks=False)
        except PreconditionError:
            raise
        except OSError as e:
            raise _unreadable(source, entry.path, e) from None
        if stat.S_ISDIR(st.st_mode):
            if real in above:
                raise _refuse(
                    source,
                    f"{entry.path} links back to {real}: a loop",
                    "remove the link, or point it elsewhere",
                )
            _walk(source, root, entry.path, target, [*above, real], out)
        elif stat.S_ISREG(st.st_mode):
            if not os.access(real, os.R_OK):
                raise _unreadable(source, entry.path, PermissionError(13, "Permission denied"))
            out.append((Path(real) if entry.is_symlink() else Path(entry.path), target))
        else:
            kind = _special(st.st_mode) or "special file"
            raise _refuse(
                source, f"{entry.path} is a {kind}", "move it out of the directory (only files upload)"
            )
