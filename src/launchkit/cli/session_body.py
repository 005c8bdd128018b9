"""`launchkit session`'s body (cli/session_cmd.py declares it): an interactive Beaker session with
run's resources.

No Beaker API creates sessions (fact sheet 8.1), so this builds the same spec as `run` (resources,
cluster profile env, mounts, uploads, secrets; `core.spec.build_spec`), lets the Beaker backend resolve
it (clusters, image, secrets, `--upload` datasets), turns it into `beaker session create` flags
(`core.session.session_argv`) and hands over to the `beaker` CLI. A session clones nothing: bring code
with `--upload .:/code` or a mount.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import sys
from typing import Any

import typer

from launchkit.backends import Capability, Submission, registry, session_host
from launchkit.cli.backend_choice import backend_with, registered
from launchkit.cli.context import get_app
from launchkit.core.gitstate import GitState
from launchkit.core.parse import build_request
from launchkit.core.profiles import wants_placement
from launchkit.core.run_options import BY_NAME
from launchkit.core.session import session_argv
from launchkit.core.spec import build_spec, upload_dataset_name
from launchkit.core.specview import SpecView
from launchkit.errors import PreconditionError, UsageError


def install_hint() -> str:
    """How to get the `beaker` CLI here: Beaker's release endpoint, as AI2 images install it."""
    system = "darwin" if sys.platform == "darwin" else "linux"
    arch = "arm64" if platform.machine().lower() in ("arm64", "aarch64") else "amd64"
    return (
        f"install it with `curl -s 'https://beaker.org/api/v3/release/cli?os={system}&arch={arch}' "
        "| tar -zx -C ~/.local/bin ./beaker`, then `beaker account login`"
    )


# run's options a session cannot honour: following, waiting and posting, and what launchkit's runtime
# does in a job (a session runs the image's shell, not the runtime): accepted, they would do nothing
RUN_ONLY = (
    "follow", "json_output", "timeout", "start_timeout", "callback_module", "callback",
    "slack_webhook_url", "slack_webhook_secret", "notify_url", "notify_secret",
    "stall_timeout", "stall_grace", "progress_pattern", "inactive_timeout", "inactive_soft_timeout",
    "retries", "retry_on", "require_resume", "sweep_experiments",
)  # fmt: skip


def session(
    ctx: typer.Context,
    extra: list[str] | None = None,
    *,
    port: list[int] | None = None,
    detach: bool = False,
    bare: bool = False,
    **given: Any,
) -> None:
    """`launchkit session` (cli/session_cmd.py declares its options)."""
    app = get_app(ctx)
    host = registry.with_capability(Capability.sessions)
    chosen = registry.resolve_name(given.get("backend"), bool(given.get("local")))
    if chosen is not None and Capability.sessions not in registry.info(chosen).capabilities:
        raise UsageError(
            f"sessions run on {host.title} only", hint="drop --local (locally, just open a shell)"
        )
    for opt in RUN_ONLY:
        if given.get(opt):
            raise UsageError(f"{BY_NAME[opt].flag} is for `launchkit run`", hint="drop it for sessions")
    command = list(app.user_command or [])

    config = app.config
    request = build_request(
        {**given, "extra": extra or []}, command or ["bash"], config=config, backends=registered()
    )
    # A session clones nothing: the spec builder's git inputs are placeholders, dropped again by
    # session_argv.
    git = GitState(remote_url="-", commit="0" * 40)
    spec = SpecView(build_spec(request, git, user_profiles=config.get("profiles")).to_json())

    def to_argv(spec: SpecView, workspace: str | None) -> list[str]:
        return session_argv(
            spec,
            workspace=workspace,
            name=request.name,
            ports=list(port or []),
            detach=detach,
            bare=bare,
            command=command,
        )

    if request.dry_run:
        argv = to_argv(spec, request.workspace)
        sys.stdout.write(shlex.join(argv) + "\n")
        sys.stdout.flush()
        app.info("dry run: names are resolved and uploads made only for a real session")
        return
    beaker_cli = shutil.which("beaker")
    if beaker_cli is None:
        raise PreconditionError(
            "`launchkit session` needs the `beaker` CLI, which is not on PATH", hint=install_hint()
        )

    backend = session_host(backend_with(app, Capability.sessions))
    submission = Submission(
        name=request.name or "session",
        spec=spec,
        workspace=request.workspace,
        auto_secrets=request.auto_secrets,
        uploads={upload_dataset_name(u.local_path): u.local_path for u in request.uploads},
    )
    if wants_placement(request) and (placed := backend.session_placement(submission)):
        # the profile follows the clusters Beaker resolved, as for run
        request = request.model_copy(update={"placed_clusters": placed})
        spec = SpecView(build_spec(request, git, user_profiles=config.get("profiles")).to_json())
        submission = submission.model_copy(update={"spec": spec})
    workspace, resolved = backend.session_spec(submission)
    backend.close()
    argv = to_argv(resolved, workspace)
    app.info("starting: " + shlex.join(argv))
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(beaker_cli, argv)  # the session is interactive: beaker gets the terminal and signals
    except OSError as e:
        raise PreconditionError(f"cannot run {beaker_cli}: {e.strerror}", hint=install_hint()) from None
