"""What launchkit knows about the user's repository: data only (reading it lives in launchkit.git)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class GitState(BaseModel):
    model_config = ConfigDict(frozen=True)

    remote_url: str  # exactly as configured (https, ssh, file://, local path)
    commit: str  # full 40-character SHA
    branch: str | None = None  # remote branch name, if known
    repo_root: str | None = None  # local checkout root (None with --remote outside a repo)
    remote_name: str | None = None
