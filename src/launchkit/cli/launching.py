"""`run` orchestration: options -> request -> git state -> spec -> dry-run output or a backend.

Steps:
  1. build_request: command line + LAUNCHKIT_* env + config files -> LaunchRequest (validated)
  2. read_git_state: the commit to launch (clean, pushed) and where a job can fetch it from
  3. build_spec: -> beaker-py BeakerExperimentSpec (pure, offline, deterministic)
  4. prepare: the backend resolves it read-only into exactly what it will send (Beaker: clusters,
     image, secrets, budget); skipped with --dry-run --offline or without Beaker credentials
  5. emit: --save-spec FILE and/or --dry-run (YAML on stdout): the prepared spec
  6. submit: the chosen backend's submit() of that spec, then optionally follow the run
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from launchkit.application import Application
from launchkit.cli.context import get_app
from launchkit.errors import PreconditionError, UsageError

if TYPE_CHECKING:
    from launchkit.backends import Backend, RunInfo, Submission
    from launchkit.core.gitstate import GitState
    from launchkit.core.request import LaunchRequest


def run(ctx: typer.Context, extra: list[str], **given: Any) -> None:
    """`launchkit run` (cli/run_cmd.py declares its options)."""
    app = get_app(ctx)
    launch(app, given, extra=extra, command=app.user_command)


def launch(app: Application, given: dict[str, Any], *, extra: list[str], command: list[str] | None) -> None:
    from launchkit.backends import Capability
    from launchkit.cli.backend_choice import choose, has, registered, request_backend
    from launchkit.config import gantry_notice
    from launchkit.core.parse import build_request

    config = app.config
    if notice := gantry_notice(config):
        app.info(notice)
    for layer in config.layers:
        app.debug(
            f"defaults from {layer.label}"
            + (f" ({layer.path})" if layer.path else "")
            + ": "
            + ", ".join(sorted(layer.values))
        )
    request = build_request({**given, "extra": extra}, command, config=config, backends=registered())
    name = request_backend(app, request)
    from launchkit.core.run_options import RUN_OPTIONS

    for opt in RUN_OPTIONS:
        if opt.deprecated and given.get(opt.name):
            app.warn(f"{opt.flag} is deprecated (gantry removed it before 3.7): {opt.deprecated}")
    if given.get("start_timeout") and not request.follow:
        app.warn(
            "--start-timeout has no effect: run does not wait for the job (add --follow, or --timeout N)"
        )
    if request.groups and not has(name, Capability.workspaces):
        how = Capability.this_machine.value if has(name, Capability.this_machine) else f"--backend {name}"
        app.warn(
            f"--group has no effect with {how}: it names a Beaker group "
            "(for a dependency group of the project use --uv-group NAME)"
        )
    if request.preemptible is not None:
        app.warn(
            "--preemptible/--not-preemptible is deprecated by Beaker: prefer --min-runtime "
            "(0 = preemptible any time) and --no-auto-resume"
        )

    why_offline = offline_reason(request, name)
    nothing_to_resolve = request.dry_run and not has(name, Capability.service)
    backend = None if why_offline or nothing_to_resolve else choose(app, name, False)
    launch_request(app, request, config, backend=backend, why_offline=why_offline, name=name)


def read_state(
    app: Application, request: LaunchRequest, backend: Backend | None, name: str | None = None
) -> GitState:
    """The commit to launch: clean and pushed unless the backend runs unpushed commits. `name`: the
    backend's, when `backend` is None (a dry run that asks no service); default: the request's."""
    from launchkit.backends import Capability
    from launchkit.cli.backend_choice import has, request_backend
    from launchkit.git import read_git_state

    if backend is not None:
        require_pushed = Capability.unpushed not in backend.capabilities
    else:
        require_pushed = not has(name or request_backend(app, request), Capability.unpushed)
    git = read_git_state(
        remote=request.remote,
        ref=request.ref,
        branch=request.branch,
        allow_dirty=request.allow_dirty,
        require_pushed=require_pushed,
    )
    app.debug(f"git: {git.remote_url} {git.commit} branch={git.branch} root={git.repo_root}")
    for line in (git.dirty_warning(), git.untracked_warning()):
        if line:
            app.warn(line)
    return git


def launch_request(
    app: Application,
    request: LaunchRequest,
    config: Any,
    *,
    backend: Backend | None,
    why_offline: str | None,
    git: GitState | None = None,
    name: str | None = None,
) -> None:
    """Steps 2-6 for a built request (`run`, `mason`): git state (unless given), spec, prepare, emit
    or submit. `backend` is None for an offline dry run (`why_offline` says why); `name` is the
    backend's (default: the request's)."""
    from launchkit.cli.backend_choice import request_backend
    from launchkit.core.spec import build_spec, spec_json_to_yaml

    name = backend.name if backend is not None else (name or request_backend(app, request))
    if git is None:
        git = read_state(app, request, backend, name)
    check_job_start(app, request, git, backend, name)
    if git.repo_root and git.version_tag is None and not git.tag_read:
        from launchkit.pyenv import version_tag

        if tag := version_tag(git.repo_root, git.commit):
            git = git.model_copy(update={"version_tag": tag})
            app.debug(f"version tag: {tag[0]} ({tag[2]} commit(s) before {git.commit[:12]})")
    request = check_python_files(app, request, git)
    request = local_torch_backend(app, request, git, backend, name=name)
    check_environment(app, request, git, backend, name)
    from launchkit.backends import Submission
    from launchkit.core.multinode import added_line
    from launchkit.core.spec import upload_dataset_name

    submission = Submission(
        name=request.name or default_name(git.commit),
        spec=build_spec(request, git, user_profiles=config.get("profiles")).to_json(),
        workspace=request.workspace,
        repo_root=git.repo_root,
        auto_secrets=request.auto_secrets,
        uploads={upload_dataset_name(u.local_path): u.local_path for u in request.uploads},
    )
    if backend is not None and (placed := placement(backend, request, submission)):
        # the profile follows the clusters the backend resolved, not the names given
        request = request.model_copy(update={"placed_clusters": placed})
        spec = build_spec(request, git, user_profiles=config.get("profiles"))
        submission = submission.model_copy(update={"spec": spec.to_json()})
    if added := added_line(request, config.get("profiles")):
        app.info(added)
    if backend is not None:
        submission, why_offline = prepare(app, backend, submission, dry_run=request.dry_run)
    if why_offline:  # what this machine remembers of the service (the runtime dataset's id)
        from launchkit.backends import registry

        submission = registry.info(name).offline_spec(submission)
    if request.sweep_experiments and request.follow:
        raise UsageError(
            "--sweep-experiments cannot be combined with --follow",
            hint="follow each experiment with `launchkit follow ID`, or drop --sweep-experiments",
        )
    printed = backend is None or request.dry_run
    text = spec_json_to_yaml(submission.spec) if printed or request.save_spec else ""  # not for a launch
    if request.save_spec:
        save_spec(app, request.save_spec, text)
    if backend is None or request.dry_run:
        sys.stdout.write(text)
        sys.stdout.flush()
        if why_offline:
            from launchkit.core.spec import decided_at_submit

            parts = decided_at_submit(request, git, submission.spec)
            app.info(
                f"offline spec ({why_offline}): "
                + ("decided at submit: " + "; ".join(parts) if parts else "complete")
            )
            from launchkit.core.profiles import assumed_line

            app.info(assumed_line(request, config.get("profiles")))
        elif backend is not None:
            from launchkit.core.spec import runtime_note, upload_note

            if parts := upload_note(request) + runtime_note(submission.spec):
                app.info("decided at submit: " + "; ".join(parts))
        app.info(
            f"dry run: commit {git.commit[:12]}"
            + (f" ({git.branch})" if git.branch else "")
            + f" from {git.remote_url}; nothing submitted"
        )
        app.fast_exit = True
        return
    submit(app, backend, request, submission)


def placement(b: Backend, request: LaunchRequest, submission: Submission) -> list[str] | None:
    """The clusters the backend resolves the request's constraints to (Capability.placement), when the
    profile should follow them (core.profiles.wants_placement); None otherwise."""
    from launchkit.backends import Capability, NoCredentials, placement_of
    from launchkit.core.profiles import wants_placement

    if Capability.placement not in b.capabilities or not wants_placement(request):
        return None
    try:
        return placement_of(b).placement(submission)
    except NoCredentials:
        if not request.dry_run:
            raise
        return None  # prepare() says the dry run is offline


def default_name(commit: str) -> str:
    """`launchkit-<commit>-<4 hex>`: free up front, so relaunching a commit is not refused (issue 25)."""
    return f"launchkit-{commit[:8]}-{os.urandom(2).hex()}"  # secrets.token_hex(2), without its imports


def offline_reason(request: LaunchRequest, name: str) -> str | None:
    """Why a dry run on backend `name` prints the offline spec, or None when it asks the backend's
    service: --offline, or no credentials configured (the registry checks without loading the
    service's client)."""
    from launchkit.backends import Capability, registry

    if not request.dry_run or Capability.service not in registry.info(name).capabilities:
        return None
    if request.offline:
        return "--offline"
    return registry.info(name).missing_credentials()


def prepare(
    app: Application, b: Backend, submission: Submission, *, dry_run: bool
) -> tuple[Submission, str | None]:
    """The submission as the backend will send it; for a dry run without credentials, the offline
    spec and the reason (said on stderr)."""
    from launchkit.backends import NoCredentials, registry

    try:
        return b.prepare(submission.model_copy(update={"launching": not dry_run})), None
    except NoCredentials:
        if not dry_run:
            raise
        return submission, f"no {registry.info(b.name).title} credentials"


def runs_here(request: LaunchRequest, backend: Backend | None, name: str | None = None) -> bool:
    """Whether the job runs on this machine, cloning this checkout (Capability.this_machine). `name`:
    the backend's when `backend` is None (default: the request's, without reading config for it)."""
    from launchkit.backends import Capability, registry

    if backend is not None:
        return Capability.this_machine in backend.capabilities
    if name is None:
        name = registry.here_name() if request.local else (request.backend or registry.default_name())
    return Capability.this_machine in registry.info(name).capabilities


def check_job_start(
    app: Application,
    request: LaunchRequest,
    git: GitState,
    backend: Backend | None,
    name: str | None = None,
) -> None:
    """What would fail only in the job, refused now (launchkit.jobchecks): a path relative to the
    subdirectory run was started from, one command word with spaces, a remote nodes cannot clone."""
    from launchkit.jobchecks import beaker_address, check_command, check_remote_reachable

    if git.repo_root:
        commands = request.commands or [request.command]
        check_command(
            commands,
            exec_method=request.exec_method.value,
            root=git.repo_root,
            commit=git.commit,
            cwd=os.getcwd(),
        )
    if runs_here(request, backend, name):
        return
    try:
        check_remote_reachable(git.remote_url, beaker_addr=beaker_address())
    except PreconditionError as e:
        if not request.dry_run:
            raise
        app.debug(f"{e}; submitting it would be refused ({e.hint})")  # the dry run's last line names it


def local_torch_backend(
    app: Application,
    request: LaunchRequest,
    git: GitState,
    backend: Backend | None,
    *,
    gpu: bool | None = None,
    name: str | None = None,
) -> LaunchRequest:
    """A local run on a machine without a GPU installs torch from the CPU index (UV_TORCH_BACKEND=cpu:
    uv pip, not several GB of CUDA wheels), unless a torch backend is chosen. A uv.lock fixes the
    build: said in one line. `gpu`: whether this machine has one (default: launchkit.jobchecks)."""
    from launchkit.core.request import PythonManager
    from launchkit.jobchecks import has_gpu, lock_pins_torch

    if (
        not runs_here(request, backend, name)
        or request.no_python
        or request.install
        or request.python_manager is not PythonManager.uv
    ):
        return request
    if request.torch_backend or any(e.name == "UV_TORCH_BACKEND" for e in request.env):
        return request
    if has_gpu() if gpu is None else gpu:
        return request
    if git.repo_root and lock_pins_torch(git.repo_root):
        app.info(
            "no GPU here, but uv.lock fixes which torch build is installed (a lock is not re-resolved "
            "per machine): for CPU torch, lock it from the pytorch-cpu index ([tool.uv.sources])"
        )
        return request
    app.debug("no GPU here: torch from the CPU index (UV_TORCH_BACKEND=cpu; --torch-backend to choose)")
    return request.model_copy(update={"torch_backend": "cpu"})


def check_python_files(app: Application, request: LaunchRequest, git: GitState) -> LaunchRequest:
    """--conda-file as a repo path; a stale uv.lock refused; a poetry/pdm lock, or a root with nothing to
    install but packages below it, named (launchkit.pyenv)."""
    from launchkit.core.request import PythonManager
    from launchkit.pyenv import check_uv_lock, foreign_lock_line, nothing_to_install_line, repo_relative

    if not git.repo_root or request.no_python:
        return request
    if request.conda_file:
        rel = repo_relative("--conda-file", request.conda_file, git.repo_root)
        request = request.model_copy(update={"conda_file": rel})
    if request.python_manager is PythonManager.uv and not request.install:
        if request.ref or request.branch:  # the working tree is not the launched commit
            app.debug("uv.lock check skipped: --ref/--branch launches another commit than the checkout")
        else:
            check_uv_lock(app, git.repo_root, git.commit, network=not request.dry_run)
            empty = nothing_to_install_line(
                git.repo_root,
                groups=request.uv_groups,
                all_groups=request.uv_all_groups,
                no_default_groups=request.uv_no_default_groups,
            )
            for line in (foreign_lock_line(git.repo_root), empty):
                if line:
                    app.warn(line)
    return request


def check_environment(
    app: Application, request: LaunchRequest, git: GitState, backend: Backend | None, name: str | None = None
) -> None:
    """Preflight before a Beaker submit (launchkit.pyenv.check_job_environment): what the job installs,
    resolved for the node's platform. Not for dry runs, local runs, --no-preflight, --install, conda,
    --no-python."""
    from launchkit.core.request import PythonManager
    from launchkit.pyenv import check_job_environment

    uv_python = request.python_manager is PythonManager.uv and not (
        request.no_python or request.install or request.system_python or request.uv_venv
    )
    if uv_python and not request.python_version and git.repo_root and not (request.ref or request.branch):
        _refuse_old_python(git.repo_root)
    if (
        request.dry_run
        or request.no_preflight
        or runs_here(request, backend, name)
        or not git.repo_root
        or request.no_python
        or request.install
        or request.python_manager is not PythonManager.uv
        or request.ref
        or request.branch
    ):
        return
    python = request.python_version
    if not python and os.path.isfile(pv := os.path.join(git.repo_root, ".python-version")):
        python = next(iter(Path(pv).read_text(encoding="utf-8").split()), None)
    check_job_environment(
        app,
        git.repo_root,
        python,
        extras=request.uv_extras,
        all_extras=request.uv_all_extras,
        groups=request.uv_groups,
        all_groups=request.uv_all_groups,
        no_default_groups=request.uv_no_default_groups,
        job_env={
            **{e.name: e.value for e in request.env},
            **({"UV_TORCH_BACKEND": request.torch_backend} if request.torch_backend else {}),
        },
    )


def _refuse_old_python(repo_root: str) -> None:
    """The checkout's .python-version picks the job's Python: one the runtime can't run is refused here,
    not after the job has waited for its GPUs."""
    from launchkit.core.parse import too_old_python

    try:
        words = Path(repo_root, ".python-version").read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        return
    if words and too_old_python(words[0].removeprefix("cpython-").removeprefix("python")):
        raise PreconditionError(
            f".python-version asks for Python {words[0]!r}, older than launchkit's runtime supports (3.8)",
            hint="name Python 3.8 or newer there, or pass --python-version 3.12",
        )


def save_spec(app: Application, path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"--save-spec {path!r}: {e.strerror}", hint="give a writable file path") from None
    app.info(f"spec saved to {path}")


def _launched(app: Application, b: Backend, run: RunInfo) -> None:
    from launchkit.cli.backend_choice import remember_last_run

    remember_last_run(b.name, run.id)
    sys.stdout.write(run.id + "\n")  # for scripts: ID=$(launchkit -q run ...)
    sys.stdout.flush()
    app.info(f"launched {run.id}" + (f" -> {run.url}" if run.url else ""))


def _submit_sweep(app: Application, b: Backend, whole: Submission, subs: list[Submission]) -> RunInfo:
    """One run per combination. A launch that fails midway says what it created and what not, and
    the same command again creates only the missing ones (cli/sweeps.py)."""
    from launchkit.cli.sweeps import SweepRecord
    from launchkit.errors import LaunchkitError, NotFoundError

    record = SweepRecord(b.name, whole.spec)
    created: dict[str, str] = {}
    for name, run_id in record.load().items():
        try:
            created[name] = b.get(run_id).id  # still there (not deleted meanwhile)
        except NotFoundError:
            pass
    run: RunInfo | None = None
    for sub in subs:
        if sub.name in created:
            app.info(f"{sub.name}: launched before as {created[sub.name]} (a launch that failed midway)")
            continue
        try:
            run = b.submit(sub)
        except LaunchkitError as e:
            if not created:
                raise
            missing = [s.name for s in subs if s.name not in created]
            kept = record.save(created)
            done = ", ".join(f"{n} ({i})" for n, i in created.items())
            e.message += f"; created {len(created)} of {len(subs)} experiments: {done}"
            e.message += f"; not created: {', '.join(missing)}"
            e.hint = (
                "run the same command again: it creates only the missing ones"
                if kept
                else "launch the missing ones again (the record of this launch could not be written)"
            )
            raise
        created[sub.name] = run.id
        _launched(app, b, run)
    record.clear()
    return run if run is not None else b.get(created[subs[-1].name])


def submit(app: Application, b: Backend, request: LaunchRequest, submission: Submission) -> None:
    from launchkit.backends import Capability, registry

    if request.uploads and Capability.uploads not in b.capabilities:
        raise UsageError(
            f"--upload {request.uploads[0].local_path}:{request.uploads[0].mount_path}: uploading "
            f"local files to {registry.info(b.name).title} is not supported yet",
            hint="commit the files, or mount an existing dataset with --dataset NAME:/PATH",
        )
    tasks = submission.spec.get("tasks") or []
    if len(tasks) > 1 and not request.sweep_experiments and Capability.several_tasks not in b.capabilities:
        raise UsageError(
            f"{len(tasks)} tasks in one run: {b.name} runs have one task",
            hint="with --sweep add --sweep-experiments (one run each), or launch on Beaker",
        )
    from launchkit.core.spec import split_experiments

    # --sweep-experiments: one experiment per --sweep combination, named after its task
    subs = (
        [submission.model_copy(update={"name": n, "spec": s}) for n, s in split_experiments(submission)]
        if request.sweep_experiments
        else [submission]
    )
    run: RunInfo | None = None
    try:
        if request.sweep_experiments:
            run = _submit_sweep(app, b, submission, subs)
        for sub in [] if request.sweep_experiments else subs:
            run = b.submit(sub)
            _launched(app, b, run)
        assert run is not None  # subs has one submission at least
        _after_launch(app, b, request, run)
    except KeyboardInterrupt:  # once a run exists, Ctrl-C is follow's detach, told (before follow's own)
        if run is None:
            raise
        from launchkit.errors import EXIT_INTERRUPTED

        app.info(f"detached from {run.id}; it keeps running. Resume with: launchkit follow {run.id}")
        raise SystemExit(EXIT_INTERRUPTED) from None


def _after_launch(app: Application, b: Backend, request: LaunchRequest, run: RunInfo) -> None:
    """Slack notifications and --follow, once the run is launched."""
    from launchkit.cli.following import Limits, follow_run

    notifier = None
    if request.slack_webhook_url is not None:
        from launchkit.notify import SlackNotifier

        if request.follow:
            notifier = SlackNotifier(app, request.slack_webhook_url.get_secret_value())
        else:
            app.warn(
                f"Slack notifications are sent while a run is followed: add --follow, "
                f"or run `launchkit follow {run.id}` with LAUNCHKIT_SLACK_WEBHOOK_URL set"
            )
    if request.follow:
        import typer

        limits = Limits(
            timeout=request.timeout,
            start=request.start_timeout,
        )  # --inactive-timeout and --stall-timeout: the job's runtime checks them (runtime/node/watchdog.py)
        code = follow_run(app, b, run, limits=limits, show_logs=request.show_logs, notifier=notifier)
        app.fast_exit = True  # the job runs detached: nothing to tear down (saves ~50 ms)
        raise typer.Exit(code)
