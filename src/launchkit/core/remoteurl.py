"""Remote URLs as a job sees them: credentials removed, SSH of the big hosts turned into https. No I/O.

Jobs have no SSH keys, so `git@github.com:org/repo.git` cannot be cloned on a node; the same
repository over https can (public, or with a token from a secret). Other SSH hosts cannot be
converted safely (their https path may differ), so the caller refuses them with a fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from launchkit.core.redact import redact_url

# SSH host -> the https host serving the same paths (incl. the SSH-over-443 endpoints).
HTTPS_FOR_SSH_HOST = {
    "github.com": "github.com",
    "ssh.github.com": "github.com",
    "gitlab.com": "gitlab.com",
    "altssh.gitlab.com": "gitlab.com",
    "bitbucket.org": "bitbucket.org",
    "altssh.bitbucket.org": "bitbucket.org",
}
SSH_SCHEMES = ("ssh", "git+ssh", "ssh+git")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# git's scp-like syntax `[user@]host:path`, recognised only with no slash before the first colon
_SCP_LIKE = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^@/:]+):(?P<path>.*)$")


@dataclass(frozen=True)
class JobRemote:
    url: str  # what a job clones from: no credentials; https for SSH remotes of the hosts above
    github_repo: str | None = None  # "org/repo" when `url` is a GitHub repository
    ssh_host: str | None = None  # an SSH remote on a host a job cannot reach (url left as SSH)
    https_guess: str | None = None  # for an unconverted SSH remote: the likely https URL (for hints)


def is_url(remote: str) -> bool:
    """A URL or scp-like address (as opposed to the name of a configured remote)."""
    return bool(_SCHEME.match(remote) or _SCP_LIKE.match(remote) or remote.startswith("/"))


def strip_credentials(url: str) -> str:
    """`url` without a password, without any user-info at all for http(s) (a token as user), and
    without credential query parameters (`?access_token=`)."""
    if not _SCHEME.match(url):
        return url
    return redact_url(url, mask=None)


def _ssh_host_and_path(url: str) -> tuple[str, str] | None:
    """(host, path) of an SSH remote (`ssh://[user@]host[:port]/path` or `[user@]host:path`)."""
    m = _SCHEME.match(url)
    if m:
        if m.group(1).lower() not in SSH_SCHEMES:
            return None
        parts = urlsplit(url)
        return (parts.hostname or ""), parts.path.lstrip("/")
    m = _SCP_LIKE.match(url)
    if m:
        return m.group("host").lower(), m.group("path").lstrip("/")
    return None


def github_repo(url: str) -> str | None:
    """`org/repo` of an https GitHub URL (`.git` and a trailing slash dropped), else None."""
    if not url.lower().startswith("https://"):
        return None
    parts = urlsplit(url)
    if parts.hostname not in ("github.com", "www.github.com") or parts.query or parts.fragment:
        return None
    path = parts.path.strip("/")
    path = path.removesuffix(".git")
    org, _, repo = path.partition("/")
    if not org or not repo or "/" in repo:
        return None
    return f"{org}/{repo}"


def job_remote(url: str) -> JobRemote:
    """Where a job clones `url` from (see the module docstring)."""
    ssh = _ssh_host_and_path(url)
    if ssh is not None:
        host, path = ssh
        https_host = HTTPS_FOR_SSH_HOST.get(host)
        if https_host is None:
            return JobRemote(strip_credentials(url), ssh_host=host, https_guess=f"https://{host}/{path}")
        converted = f"https://{https_host}/{path}"
        return JobRemote(converted, github_repo=github_repo(converted))
    clean = strip_credentials(url)
    return JobRemote(clean, github_repo=github_repo(clean))
