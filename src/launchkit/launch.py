"""`run` orchestration: options -> request -> git state -> spec -> dry-run output or a backend.

Steps:
  1. build_request: command line + LAUNCHKIT_* env + config files -> LaunchRequest (validated)
  2. read_git_state: the commit to launch (clean, pushed) and where a job can fetch it from
  3. build_spec: -> beaker-py BeakerExperimentSpec (pure, offline, deterministic)
  4. emit: --save-spec FILE and/or --dry-run (YAML on stdout)
  5. submit: get_backend(request.backend).submit(...)
"""

from __future__ import annotations

import sys
from typing import Any

from launchkit.cli import state
from launchkit.cli.state import console
from launchkit.errors import UsageError


def launch(given: dict[str, Any], *, extra: list[str], command: list[str] | None) -> None:
    from launchkit.config import load_config
    from launchkit.core.parse import build_request

    config = load_config()
    for layer in config.layers:
        console().debug(
            f"defaults from {layer.label}"
            + (f" ({layer.path})" if layer.path else "")
            + ": "
            + ", ".join(sorted(layer.values))
        )
    request = build_request({**given, "extra": extra}, command, config=config)
    if request.preemptible is not None:
        console().warn(
            "--preemptible/--not-preemptible is deprecated by Beaker: prefer --min-runtime "
            "(0 = preemptible any time) and --no-auto-resume"
        )

    from launchkit.core.spec import build_spec, spec_to_yaml
    from launchkit.git import read_git_state

    git = read_git_state(
        remote=request.remote,
        ref=request.ref,
        branch=request.branch,
        allow_dirty=request.allow_dirty,
        require_pushed=request.backend.value != "local",
    )
    console().debug(f"git: {git.remote_url} {git.commit} branch={git.branch} root={git.repo_root}")
    spec = build_spec(request, git, user_profiles=config.get("profiles"))
    text = spec_to_yaml(spec)
    if request.save_spec:
        save_spec(request.save_spec, text)
    if request.dry_run:
        sys.stdout.write(text)
        sys.stdout.flush()
        console().info(
            f"dry run: commit {git.commit[:12]}"
            + (f" ({git.branch})" if git.branch else "")
            + f" from {git.remote_url}; nothing submitted"
        )
        state.fast_exit = True
        return
    import gc

    gc.enable()  # disabled for start-up by launchkit.cli.app
    submit(request, git, spec)


def save_spec(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"--save-spec {path!r}: {e.strerror}", hint="give a writable file path") from None
    console().info(f"spec saved to {path}")


def submit(request: Any, git: Any, spec: Any) -> None:
    from launchkit.backends import Submission
    from launchkit.cli.backend_choice import choose

    if request.uploads and request.backend.value == "beaker":
        raise UsageError(
            f"--upload {request.uploads[0].local_path}:{request.uploads[0].mount_path}: uploading "
            "local files to Beaker is not supported yet",
            hint="commit the files, or mount an existing dataset with --dataset NAME:/PATH",
        )
    backend = choose(request.backend.value, False)
    run = backend.submit(
        Submission(
            name=request.name or f"launchkit-{git.commit[:8]}",
            spec=spec.to_json(),
            workspace=request.workspace,
            repo_root=git.repo_root,
            auto_secrets=request.auto_secrets,
        )
    )
    from launchkit.cli.backend_choice import remember_last_run

    remember_last_run(backend.name, run.id)
    console().info(f"launched {run.id}" + (f" -> {run.url}" if run.url else ""))
    if request.follow:
        import typer

        from launchkit.cli.follow_cmd import follow_run

        code = follow_run(backend, run)
        state.fast_exit = True  # the job runs detached: nothing to tear down (saves ~50 ms)
        raise typer.Exit(code)
