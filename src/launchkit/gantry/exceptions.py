"""gantry 3.7.0's exceptions (`gantry.exceptions`): the same names and hierarchy, so `except
ExperimentFailedError` and `except GantryError` in code written for gantry catch what launchkit raises.
launchkit's own errors (launchkit.errors) reach this API's callers as these classes (`from_launchkit`)."""

from __future__ import annotations

from collections.abc import Callable

from launchkit import errors

__all__ = [
    "BeakerJobTimeoutError",
    "ConfigurationError",
    "DirtyRepoError",
    "EntrypointChecksumError",
    "ExperimentFailedError",
    "GantryError",
    "GantryInterruptWorkload",
    "GitError",
    "GitHubTokenSecretNotFound",
    "InvalidRemoteError",
    "InvalidSecretError",
    "NotFoundError",
    "TermInterrupt",
    "UnpushedChangesError",
]


class GantryError(Exception):
    """Base exception for all error types that Gantry might raise."""


class GitError(GantryError):
    pass


class DirtyRepoError(GitError):
    pass


class UnpushedChangesError(GitError):
    pass


class InvalidRemoteError(GitError):
    pass


class InvalidSecretError(GantryError):
    pass


class ConfigurationError(GantryError):
    pass


class ExperimentFailedError(GantryError):
    pass


class EntrypointChecksumError(GantryError):
    pass


class GitHubTokenSecretNotFound(GantryError):
    pass


class TermInterrupt(GantryError):
    pass


class NotFoundError(GantryError):
    pass


class BeakerJobTimeoutError(GantryError, TimeoutError):
    pass


class GantryInterruptWorkload(GantryError):
    """Raised by callbacks to forcefully interrupt a workload."""


def from_launchkit(e: Exception, wording: Callable[[str], str] = str) -> GantryError:
    """The gantry class for a launchkit error, its one-line message kept (through `wording`: the caller's
    names for `run`'s flags): a usage error is gantry's ConfigurationError, not found NotFoundError,
    anything else GantryError. (A dirty tree and an unpushed commit are found by GitRepoState first, as
    in gantry, and raised as its git errors.)"""
    text = wording(e.one_line() if isinstance(e, errors.LaunchkitError) else str(e))
    if isinstance(e, errors.UsageError):
        return ConfigurationError(text)
    if isinstance(e, errors.NotFoundError):
        return NotFoundError(text)
    return GantryError(text)
