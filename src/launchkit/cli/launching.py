"""`run` orchestration: options -> request -> git state -> spec -> dry-run output or a backend.

Steps:
  1. build_request: command line + LAUNCHKIT_* env + config files -> LaunchRequest (validated)
  2. read_git_state: the commit to launch (clean, pushed) and where a job can fetch it from
  3. build_spec: -> beaker-py BeakerExperimentSpec (pure, offline, deterministic)
  4. emit: --save-spec FILE and/or --dry-run (YAML on stdout)
  5. submit: the chosen backend's submit(), then optionally follow the run
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from launchkit.application import Application
from launchkit.errors import UsageError

if TYPE_CHECKING:
    from beaker.types import BeakerExperimentSpec

    from launchkit.backends import Backend
    from launchkit.core.gitstate import GitState
    from launchkit.core.request import LaunchRequest


@contextlib.contextmanager
def _no_pydantic_plugins() -> Iterator[None]:
    """pydantic's documented PYDANTIC_DISABLE_PLUGINS while launchkit's own models are built: otherwise
    the first model scans every installed package's entry points (~10-15 ms). launchkit uses no
    plugins. Only around pure code, so no child process (git, a local job) inherits the setting."""
    if "PYDANTIC_DISABLE_PLUGINS" in os.environ:
        yield
        return
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
    try:
        yield
    finally:
        del os.environ["PYDANTIC_DISABLE_PLUGINS"]


def launch(app: Application, given: dict[str, Any], *, extra: list[str], command: list[str] | None) -> None:
    with _no_pydantic_plugins():
        from launchkit.config import gantry_notice, load_config
        from launchkit.core.parse import build_request
        from launchkit.core.spec import build_spec, spec_to_yaml

        config = load_config()
        if notice := gantry_notice(config):
            app.info(notice)
        for layer in config.layers:
            app.debug(
                f"defaults from {layer.label}"
                + (f" ({layer.path})" if layer.path else "")
                + ": "
                + ", ".join(sorted(layer.values))
            )
        request = build_request({**given, "extra": extra}, command, config=config)
        if request.preemptible is not None:
            app.warn(
                "--preemptible/--not-preemptible is deprecated by Beaker: prefer --min-runtime "
                "(0 = preemptible any time) and --no-auto-resume"
            )

    from launchkit.cli.backend_choice import choose
    from launchkit.git import read_git_state

    backend = None if request.dry_run else choose(app, request.backend.value, False)
    require_pushed = request.backend.value != "local"
    if backend is not None:
        from launchkit.backends import Capability

        require_pushed = Capability.unpushed not in backend.capabilities
    git = read_git_state(
        remote=request.remote,
        ref=request.ref,
        branch=request.branch,
        allow_dirty=request.allow_dirty,
        require_pushed=require_pushed,
    )
    app.debug(f"git: {git.remote_url} {git.commit} branch={git.branch} root={git.repo_root}")
    if untracked := git.untracked_warning():
        app.warn(untracked)
    with _no_pydantic_plugins():
        spec = build_spec(request, git, user_profiles=config.get("profiles"))
        text = spec_to_yaml(spec)
    if request.save_spec:
        save_spec(app, request.save_spec, text)
    if backend is None:  # --dry-run
        sys.stdout.write(text)
        sys.stdout.flush()
        app.info(
            f"dry run: commit {git.commit[:12]}"
            + (f" ({git.branch})" if git.branch else "")
            + f" from {git.remote_url}; nothing submitted"
        )
        app.fast_exit = True
        return
    submit(app, backend, request, git, spec)


def save_spec(app: Application, path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"--save-spec {path!r}: {e.strerror}", hint="give a writable file path") from None
    app.info(f"spec saved to {path}")


def submit(
    app: Application, b: Backend, request: LaunchRequest, git: GitState, spec: BeakerExperimentSpec
) -> None:
    from launchkit.backends import Capability, Submission
    from launchkit.cli.following import Limits, follow_run

    if request.uploads and Capability.uploads not in b.capabilities:
        raise UsageError(
            f"--upload {request.uploads[0].local_path}:{request.uploads[0].mount_path}: uploading "
            f"local files to {b.name.capitalize()} is not supported yet",
            hint="commit the files, or mount an existing dataset with --dataset NAME:/PATH",
        )
    run = b.submit(
        Submission(
            name=request.name or f"launchkit-{git.commit[:8]}",
            spec=spec.to_json(),
            workspace=request.workspace,
            repo_root=git.repo_root,
            auto_secrets=request.auto_secrets,
        )
    )
    sys.stdout.write(run.id + "\n")  # for scripts: ID=$(launchkit run -q ...)
    sys.stdout.flush()
    app.info(f"launched {run.id}" + (f" -> {run.url}" if run.url else ""))
    if request.follow:
        limits = Limits(
            timeout=request.timeout,
            start=request.start_timeout,
            inactive=request.inactive_timeout,
            inactive_soft=request.inactive_soft_timeout,
        )
        sys.exit(follow_run(app, b, run, limits=limits, show_logs=request.show_logs))
