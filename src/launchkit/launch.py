"""`run` orchestration: options -> request -> git state -> spec -> dry-run output or a backend."""

from __future__ import annotations

import sys
from typing import Any

from launchkit.cli.state import console
from launchkit.errors import UsageError


def launch(given: dict[str, Any], *, extra: list[str], command: list[str] | None) -> None:
    if extra:
        raise UsageError(
            "found extra arguments before `--`: " + " ".join(repr(x) for x in extra),
            hint="flags take no value (write --allow-dirty, not --allow-dirty false); the command goes after --",
        )
    from launchkit.core.parse import build_request
    from launchkit.core.spec import build_spec, spec_to_yaml
    from launchkit.git import read_git_state

    request = build_request(given, command)
    git = read_git_state(remote=request.remote, ref=request.ref, branch=request.branch,
                         allow_dirty=request.allow_dirty)
    spec = build_spec(request, git)
    text = spec_to_yaml(spec)
    if request.save_spec:
        with open(request.save_spec, "w") as f:
            f.write(text)
        console().info(f"spec saved to {request.save_spec}")
    if request.dry_run:
        sys.stdout.write(text)
        return
    from launchkit.backends import Submission, get_backend

    backend = get_backend(request.backend.value)
    run = backend.submit(Submission(name=request.name or f"launchkit-{git.commit[:8]}", spec=spec.to_json(),
                                    workspace=request.workspace, repo_root=git.repo_root,
                                    auto_secrets=request.auto_secrets))
    console().info(f"launched {run.id}" + (f" -> {run.url}" if run.url else ""))
    if request.follow:
        raise SystemExit(backend.follow(run, sys.stdout.buffer))
