"""The launch request's runtime options as entrypoint environment variables (docs/runtime.md).

Pure (no I/O): `launchkit.core.spec` puts these into the task's env.
"""

from __future__ import annotations

from typing import Any


def runtime_env(request: Any) -> dict[str, str]:
    """Env vars for the entrypoint's setup options; unset options are left out."""
    env: dict[str, str | None] = {
        "LAUNCHKIT_PRE_SETUP": request.pre_setup,
        "LAUNCHKIT_POST_SETUP": request.post_setup,
        "LAUNCHKIT_INSTALL_CMD": request.install,
        "LAUNCHKIT_NO_PYTHON": "1" if request.no_python else None,
        "LAUNCHKIT_SYSTEM_PYTHON": "1" if request.system_python else None,
        "LAUNCHKIT_PYTHON_VERSION": request.python_version,
        "LAUNCHKIT_UV_EXTRAS": " ".join(request.uv_extras) or None,
        "LAUNCHKIT_UV_ALL_EXTRAS": "1" if request.uv_all_extras else None,
        "UV_TORCH_BACKEND": request.torch_backend,
        "UV_CACHE_DIR": request.uv_cache_dir,
    }
    return {k: v for k, v in env.items() if v is not None}


def git_token_env_name(remote_url: str) -> str:
    """GITHUB_TOKEN for GitHub remotes, LAUNCHKIT_GIT_TOKEN for any other host."""
    return "GITHUB_TOKEN" if "github.com" in remote_url else "LAUNCHKIT_GIT_TOKEN"
