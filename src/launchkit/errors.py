"""Error types. Every expected failure is a LaunchkitError: the CLI prints one line and exits."""

from __future__ import annotations

import errno

# CLI exit codes (docs/beaker.md lists them; the entrypoint's setup codes are in docs/runtime.md).
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_PRECONDITION = 3  # dirty tree, unpushed commit, missing secret, ...
EXIT_NOT_FOUND = 4
EXIT_BACKEND = 5  # the backend (Beaker, local supervisor) failed or is unreachable
EXIT_INTERRUPTED = 130


# The `kind` of a failure in --json mode (`{"error": {"kind", ...}}`, docs/run.md#json): stable words.
KINDS = ("usage", "precondition", "not_found", "backend", "failed", "internal", "interrupted")


class LaunchkitError(Exception):
    """An expected error: printed as one line (`error: <message>`), no traceback."""

    exit_code = EXIT_JOB_FAILED
    kind = "failed"  # one of KINDS

    def __init__(
        self, message: str, *, hint: str | None = None, exit_code: int | None = None, kind: str | None = None
    ):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code
        if kind is not None:
            self.kind = kind

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(LaunchkitError):
    """The user's input is wrong. Exit code 2."""

    exit_code = EXIT_USAGE
    kind = "usage"


class PreconditionError(LaunchkitError):
    """The input is fine but the world is not ready (dirty tree, unpushed commit, ...)."""

    exit_code = EXIT_PRECONDITION
    kind = "precondition"


class NotFoundError(LaunchkitError):
    exit_code = EXIT_NOT_FOUND
    kind = "not_found"


class BackendError(LaunchkitError):
    exit_code = EXIT_BACKEND
    kind = "backend"


EXIT_INTERNAL = 70  # a launchkit bug (BSD's EX_SOFTWARE); the one line says how to see the traceback


def from_exception(e: BaseException) -> LaunchkitError:
    """An unexpected exception as one reportable line: a write or read error names the file and the
    fix (exit 3); anything else is a launchkit bug (exit 70)."""
    if isinstance(e, OSError):
        what = f"cannot write {e.filename}" if e.filename else "cannot write the output"
        hint = {
            errno.ENOSPC: "free some disk space, or write somewhere else",
            errno.ENOENT: "create the directory first, or give an existing path",
            errno.EACCES: "choose a path you may write to",
            errno.EPERM: "choose a path you may write to",
            errno.ENOTDIR: "a part of the path is a file, not a directory",
            errno.EROFS: "choose a path on a writable file system",
            errno.EISDIR: "give a file path, not a directory",
        }.get(e.errno or 0, "check the path and the disk")
        return PreconditionError(f"{what}: {e.strerror or e}", hint=hint)
    return LaunchkitError(
        f"internal error: {type(e).__name__}: {e}",
        hint="a launchkit bug; LAUNCHKIT_DEBUG=1 shows the traceback for a report",
        exit_code=EXIT_INTERNAL,
        kind="internal",
    )
