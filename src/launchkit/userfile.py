"""A file the user names, read whole (`--env-file`, `secret set --from-file`, config files): a regular
file only, up to a size limit, never blocking.

The file is opened with O_NONBLOCK and checked with fstat on the open descriptor, so a FIFO cannot
block the open or the read (opening a FIFO for reading without a writer returns at once), a device such
as /dev/zero or /dev/urandom is refused before a byte is read, and a file swapped between a check and
the open is still the file checked. The read stops one byte past the limit: a file growing while it is
read is refused like a big one.
"""

from __future__ import annotations

import os
import stat

from launchkit.errors import UsageError

ENV_FILE_LIMIT = 1 << 20  # 1 MiB: its values travel in the spec (as --env values do)
SECRET_FILE_LIMIT = 1 << 20  # 1 MiB: a secret's value is text (a key, a token, a small JSON)
CONFIG_FILE_LIMIT = 4 << 20  # 4 MiB: a pyproject.toml or a user's config.toml
LOCK_FILE_LIMIT = 64 << 20  # 64 MiB: a repository's uv.lock or pylock.toml (big ones are a few MiB)

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def size_text(n: int) -> str:
    """1048576 -> '1 MiB'; 1536 -> '1.5 KiB'."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


def read_user_file(path: str, where: str, *, limit: int, hint: str) -> bytes:
    """The bytes of the regular file at `path`; anything else is one UsageError starting with `where`
    (e.g. "--env-file 'x'") and ending with `hint` where the fix is a different file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise UsageError(f"{where}: cannot be read ({e.strerror or e})", hint=hint) from None
    try:
        st = os.fstat(fd)
        for test, kind in _KINDS:
            if test(st.st_mode):
                raise UsageError(f"{where}: is {kind}, not a regular file", hint=hint)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{where}: is not a regular file", hint=hint)
        if st.st_size > limit:
            raise _too_big(where, limit)
        chunks, size = [], 0
        while size <= limit:
            try:
                chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
            except OSError as e:
                raise UsageError(f"{where}: cannot be read ({e.strerror or e})", hint=hint) from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise _too_big(where, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _too_big(where: str, limit: int) -> UsageError:
    return UsageError(
        f"{where}: is larger than launchkit reads ({size_text(limit)} at most)",
        hint="give a smaller file (put large data in a dataset or the repository instead)",
    )
