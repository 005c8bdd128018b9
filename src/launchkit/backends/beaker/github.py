"""Is a GitHub repository private? One unauthenticated GET of the GitHub REST API.

gantry asks github.com the same question before submitting (200 public, 404 private). Jobs clone
over https, so a private repository needs a token secret. The answer is advisory: when GitHub cannot
be asked (no network, rate limit), the caller warns and launches anyway (fail open).
`LAUNCHKIT_GITHUB_API` replaces the API base URL (tests point it at a server on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass

API_URL = "https://api.github.com"
ENV_API_URL = "LAUNCHKIT_GITHUB_API"
TIMEOUT = 5.0  # seconds; launching must not hang on GitHub


@dataclass(frozen=True)
class Visibility:
    private: bool | None  # None: unknown (see `why`)
    why: str = ""


def visibility(repo: str, *, timeout: float = TIMEOUT) -> Visibility:
    """Whether `org/repo` is private: GitHub answers 404 for a private (or missing) repository when
    asked without a token, and 200 with `"private": false` for a public one."""
    base = (os.environ.get(ENV_API_URL) or API_URL).rstrip("/")
    request = urllib.request.Request(
        f"{base}/repos/{repo}",
        headers={"Accept": "application/vnd.github+json", "User-Agent": "launchkit"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return Visibility(True)
        return Visibility(None, f"GitHub answered HTTP {e.code}")
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        return Visibility(None, f"cannot reach {base}: {reason}")
    if not isinstance(body, dict):
        return Visibility(None, "GitHub's answer was not a JSON object")
    return Visibility(bool(body.get("private")))
