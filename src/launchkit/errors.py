"""Error types. Every expected failure is a LaunchkitError: the CLI prints one line and exits."""

from __future__ import annotations

# CLI exit codes (docs/beaker.md lists them; the entrypoint's setup codes are in docs/runtime.md).
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_PRECONDITION = 3  # dirty tree, unpushed commit, missing secret, ...
EXIT_NOT_FOUND = 4
EXIT_BACKEND = 5  # the backend (Beaker, local supervisor) failed or is unreachable
EXIT_INTERRUPTED = 130


class LaunchkitError(Exception):
    """An expected error: printed as one line (`error: <message>`), no traceback."""

    exit_code = EXIT_JOB_FAILED

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(LaunchkitError):
    """The user's input is wrong. Exit code 2."""

    exit_code = EXIT_USAGE


class PreconditionError(LaunchkitError):
    """The input is fine but the world is not ready (dirty tree, unpushed commit, ...)."""

    exit_code = EXIT_PRECONDITION


class NotFoundError(LaunchkitError):
    exit_code = EXIT_NOT_FOUND


class BackendError(LaunchkitError):
    exit_code = EXIT_BACKEND
