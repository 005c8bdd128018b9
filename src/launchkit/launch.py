"""The launch path, once: a request resolved into a `Launch` (backend, git state, profiles, spec, notes),
then submitted. `launchkit.api` and the CLI's `run`/`mason` go through here; the CLI only prints.

Steps of `plan()`:
  1. the backend: the request's row (--local, --backend, config, default), loaded unless a dry run
     asks no service (--offline, no credentials, a backend without one). A service's look-ups that
     need no spec go out now (LooksAhead): it answers while steps 2-4 run here
  2. git state: the commit to launch (clean and pushed unless the backend runs unpushed commits)
  3. launch-time checks: what would fail only in the job, the repository's Python files, the preflight
  4. profiles resolved once; the spec built once with them. When the backend places the job
     (Capability.placement) on clusters whose profile differs, the profile follows and the spec is
     built with it (the only second build)
  5. prepare: the backend resolves the spec read-only into exactly what it sends (nothing is created
     before the plan line: `ready()` does that, then); offline: what this machine remembers.
     `Launch.notes`: what a dry run says beside the spec; `Launch.plan`: what it asks for, in one
     line (core/plan.py), from that spec and what prepare learnt (`start_now`)
`submit()` sends it (one run, or one per --sweep-experiments combination).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from shutil import which
from typing import TYPE_CHECKING, Any

from launchkit.application import Application
from launchkit.backends import registry
from launchkit.backends.handover import NoCredentials, Submission, looks_ahead, placement_of
from launchkit.backends.registry import Capability
from launchkit.core import retrying
from launchkit.core.gitstate import GitState
from launchkit.core.multinode import added_line
from launchkit.core.parse import too_old_python
from launchkit.core.plan import Plan, make_plan
from launchkit.core.profiles import ProfileSelection, assumed_line, resolve_profiles, wants_placement
from launchkit.core.request import LaunchRequest, PythonManager
from launchkit.core.spec import (
    beaker_image,
    build_spec,
    decided_at_submit,
    runtime_note,
    spec_json_to_yaml,
    split_experiments,
    upload_dataset_name,
    upload_note,
)
from launchkit.core.specview import SpecView
from launchkit.errors import LaunchkitError, NotFoundError, PreconditionError, UsageError
from launchkit.git import read_git_state
from launchkit.jobchecks import (
    beaker_address,
    check_command,
    check_remote_reachable,
    has_gpu,
    lock_pins_torch,
)
from launchkit.pyenv import (
    PYTHON_VERSION_FILE,
    RUNTIME_FLOOR,
    check_groups,
    check_job_environment,
    check_uv_lock,
    committed_files,
    foreign_lock_line,
    nothing_to_install_line,
    python_obtainable,
    python_request_in,
    released_python_allows,
    repo_relative,
    requires_python_in,
    requires_python_request,
    version_tag,
)
from launchkit.sweeps import SweepRecord
from launchkit.userfile import read_user_file

if TYPE_CHECKING:
    from launchkit.backends import Backend, RunInfo


@dataclass
class Launch:
    """One launch, resolved once. `backend` is None for a dry run that asks no service
    (`why_offline` says why, when it is the service's)."""

    request: LaunchRequest
    backend_name: str
    backend: Backend | None
    why_offline: str | None
    git: GitState
    submission: Submission
    selection: ProfileSelection
    notes: list[str] = field(default_factory=list)  # a dry run's lines after the spec (stderr)
    made: bool = False  # `ready()` ran: what the spec needs exists (a launch, after its plan line)

    @property
    def plan(self) -> Plan:
        """What it asks for, said before anything is created (core/plan.py: the `plan:` line)."""
        here = Capability.this_machine in registry.info(self.backend_name).capabilities
        return make_plan(
            self.submission.spec,
            backend=self.backend_name,
            here=here,
            start_now=self.submission.start_now,
            experiments=self.request.sweep_experiments,
        )

    @property
    def spec_yaml(self) -> str:
        """The spec as `run --dry-run` prints it and `--save-spec` writes it."""
        return spec_json_to_yaml(self.submission.spec)

    @property
    def printed(self) -> bool:
        """A dry run: the spec is printed, nothing submitted."""
        return self.backend is None or self.request.dry_run


def backend_name(app: Application, request: LaunchRequest) -> str:
    """The backend a request names: --local, --backend, config, else the registry's default."""
    if request.local:
        return registry.here_name()
    return registry.info(request.backend).name if request.backend else registry.configured_name(app.config)


def offline_reason(request: LaunchRequest, name: str) -> str | None:
    """Why a dry run on backend `name` prints the offline spec, or None when it asks the backend's
    service: --offline, or no credentials configured (the registry checks without loading the
    service's client)."""
    if not request.dry_run or Capability.service not in registry.info(name).capabilities:
        return None
    if request.offline:
        return "--offline"
    return registry.info(name).missing_credentials()


def resolve_backend(app: Application, request: LaunchRequest) -> tuple[str, Backend | None, str | None]:
    """(name, the loaded backend or None, why the dry run is offline): step 1, once per launch."""
    name = backend_name(app, request)
    why_offline = offline_reason(request, name)
    asks_nothing = request.dry_run and Capability.service not in registry.info(name).capabilities
    if why_offline or asks_nothing:
        return name, None, why_offline
    return name, registry.load(name, app, workspace=app.config.get("workspace")), None


def plan(
    app: Application,
    request: LaunchRequest,
    *,
    backend: tuple[str, Backend | None, str | None] | None = None,
    git: GitState | None = None,
) -> Launch:
    """Steps 1-5 for a built request. `backend`: resolve_backend's answer, when the caller has it
    (`mason` asks the account first); `git`: the state, when read already."""
    name, b, why_offline = backend or resolve_backend(app, request)
    check_usage(request, name)  # every usage check before anything is written (or asked)
    ahead = looks_ahead(b)
    if ahead is None:
        return _plan(app, request, name, b, why_offline, git)
    image = beaker_image(request)  # the service answers while git is read and the spec built:
    ahead.ask_ahead(request.workspace, images=[image] if image else [], budget=request.budget)
    try:
        return _plan(app, request, name, b, why_offline, git)
    except BaseException:
        ahead.drop_ahead()  # a refused launch does not wait for the look-ups still in flight
        raise


def _plan(
    app: Application,
    request: LaunchRequest,
    name: str,
    b: Backend | None,
    why_offline: str | None,
    git: GitState | None,
) -> Launch:
    here = Capability.this_machine in registry.info(name).capabilities
    profiles = app.config.get("profiles")
    if git is None:
        git = read_state(app, request, unpushed=Capability.unpushed in registry.info(name).capabilities)
    check_job_start(app, request, git, here=here)
    if git.repo_root and git.version_tag is None and not git.tag_read:
        if tag := version_tag(git.repo_root, git.commit):
            git = git.model_copy(update={"version_tag": tag})
            app.debug(f"version tag: {tag[0]} ({tag[2]} commit(s) before {git.commit[:12]})")
    request = check_python_files(app, request, git)
    request = choose_job_python(app, request, git, here=here)
    request = local_torch_backend(app, request, git, here=here)
    check_environment(app, request, git, here=here)
    if here and not request.profile:  # a cluster profile is for a cluster's nodes, not this machine
        request = request.model_copy(update={"no_profile": True})
    selection = resolve_profiles(request, profiles)
    submission = Submission(
        name=request.name or default_name(git.commit),
        spec=SpecView(build_spec(request, git, user_profiles=profiles, selection=selection).to_json()),
        workspace=request.workspace,
        repo_root=git.repo_root,
        auto_secrets=request.auto_secrets,
        uploads={upload_dataset_name(u.local_path): u.local_path for u in request.uploads},
        slack_webhook_url=request.slack_webhook_url,
    )
    if b is not None and (placed := placement(b, request, submission)):
        # the profile follows the clusters the backend resolved, not the names given
        request = request.model_copy(update={"placed_clusters": placed})
        named, selection = selection, resolve_profiles(request, profiles)
        if selection.job_parts() != named.job_parts():
            spec = build_spec(request, git, user_profiles=profiles, selection=selection)
            submission = submission.model_copy(update={"spec": SpecView(spec.to_json())})
    if added := added_line(request, profiles, selection):
        app.info(added)
    check_spec_usage(request, name, submission)
    if b is not None:
        try:
            submission = b.prepare(submission)  # read-only: `ready` creates, after the plan line
        except NoCredentials:
            if not request.dry_run:
                raise
            b, why_offline = None, f"no {registry.info(name).title} credentials"
    if why_offline:  # what this machine remembers of the service (the runtime dataset's id)
        submission = registry.info(name).offline_spec(submission)
    launch = Launch(request, name, b, why_offline, git, submission, selection)
    launch.notes = _dry_run_notes(launch, profiles) if launch.printed else []
    return launch


def check_usage(request: LaunchRequest, name: str) -> None:
    """The usage checks of a request on backend `name` that need no spec: one line each, before
    anything is read, asked or written (a refused launch creates nothing)."""
    if request.sweep_experiments and request.follow:
        raise UsageError(
            "--sweep-experiments cannot be combined with --follow",
            hint="follow each experiment with `launchkit follow ID`, or drop --sweep-experiments",
        )
    registry.info(name).check_retries(retrying.policy(request))  # the causes the backend honours


def check_spec_usage(request: LaunchRequest, name: str, submission: Submission) -> None:
    """The usage checks that need the built spec (its tasks), before the backend prepares it (a
    launch's prepare creates the runtime dataset)."""
    row = registry.info(name)
    if row.name_limit is not None and len(submission.name) > row.name_limit:
        raise UsageError(
            f"--name is {len(submission.name)} characters; {row.title} allows at most {row.name_limit}",
            hint=f"shorten it (e.g. {submission.name[: row.name_limit - 8]!r}...)",
        )
    if request.uploads and Capability.uploads not in row.capabilities:
        raise UsageError(
            f"--upload {request.uploads[0].local_path}:{request.uploads[0].mount_path}: uploading "
            f"local files to {row.title} is not supported yet",
            hint="commit the files, or mount an existing dataset with --dataset NAME:/PATH",
        )
    tasks = submission.spec.tasks
    if len(tasks) > 1 and not request.sweep_experiments and Capability.several_tasks not in row.capabilities:
        raise UsageError(
            f"{len(tasks)} tasks in one run: {row.name} runs have one task",
            hint="with --sweep add --sweep-experiments (one run each), or launch on Beaker",
        )


def _dry_run_notes(launch: Launch, profiles: dict[str, Any] | None) -> list[str]:
    request, git = launch.request, launch.git
    notes = []
    if launch.why_offline:
        parts = decided_at_submit(request, git, launch.submission.spec)
        notes.append(
            f"offline spec ({launch.why_offline}): "
            + ("decided at submit: " + "; ".join(parts) if parts else "complete")
        )
        notes.append(assumed_line(request, profiles, launch.selection))
    elif launch.backend is not None:
        if parts := upload_note(request) + runtime_note(launch.submission.spec):
            notes.append("decided at submit: " + "; ".join(parts))
    notes.append(
        f"dry run: commit {git.commit[:12]}"
        + (f" ({git.branch})" if git.branch else "")
        + f" from {git.remote_url}; nothing submitted"
    )
    return notes


def ready(launch: Launch) -> None:
    """After the plan line, before --save-spec writes the spec and submit() sends it: the backend
    creates what the spec needs (`Backend.prepare` with `launching`; Beaker: the runtime dataset, on a
    workspace's first launch), so the spec saved is the one sent. Once; a dry run creates nothing."""
    if launch.printed or launch.backend is None or launch.made:
        return
    launch.submission = launch.backend.prepare(launch.submission.model_copy(update={"launching": True}))
    launch.made = True


def submit(
    app: Application, launch: Launch, launched: Callable[[RunInfo], None] = lambda run: None
) -> RunInfo:
    """Send the launch: one run, or one per --sweep-experiments combination (`launched` is told of
    each as it is created); returns the (last) run."""
    b, request = launch.backend, launch.request
    if b is None or request.dry_run:
        raise UsageError("a dry run submits nothing", hint="drop --dry-run/--offline to launch")
    check_spec_usage(request, b.name, launch.submission)  # (plan checked it: a Launch made otherwise too)
    ready(launch)  # (the CLI made it already, after its plan line)
    submission = launch.submission
    if not request.sweep_experiments:
        run = b.submit(submission)
        launched(run)
        return run
    # --sweep-experiments: one experiment per --sweep combination, named after its task. A launch that
    # fails midway says what it created and what not, and the same launch again creates only the missing.
    subs = [submission.model_copy(update={"name": n, "spec": s}) for n, s in split_experiments(submission)]
    record = SweepRecord(b.name, submission.spec)
    created: dict[str, str] = {}
    for name, run_id in record.load().items():
        try:
            created[name] = b.get(run_id).id  # still there (not deleted meanwhile)
        except NotFoundError:
            pass
    last: RunInfo | None = None
    for sub in subs:
        if sub.name in created:
            app.info(f"{sub.name}: launched before as {created[sub.name]} (a launch that failed midway)")
            continue
        try:
            last = b.submit(sub)
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
        created[sub.name] = last.id
        launched(last)
    record.clear()
    return last if last is not None else b.get(created[subs[-1].name])


def read_state(app: Application, request: LaunchRequest, *, unpushed: bool) -> GitState:
    """The commit to launch: clean and pushed unless the backend runs unpushed commits (`unpushed`)."""
    git = read_git_state(
        remote=request.remote,
        ref=request.ref,
        branch=request.branch,
        allow_dirty=request.allow_dirty,
        require_pushed=not unpushed,
    )
    app.debug(f"git: {git.remote_url} {git.commit} branch={git.branch} root={git.repo_root}")
    for line in (git.dirty_warning(), git.untracked_warning()):
        if line:
            app.warn(line)
    return git


def placement(b: Backend, request: LaunchRequest, submission: Submission) -> list[str] | None:
    """The clusters the backend resolves the request's constraints to (Capability.placement), when the
    profile should follow them (core.profiles.wants_placement); None otherwise."""
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


def check_job_start(app: Application, request: LaunchRequest, git: GitState, *, here: bool) -> None:
    """What would fail only in the job, refused now (launchkit.jobchecks): a path relative to the
    subdirectory run was started from, one command word with spaces, a remote nodes cannot clone.
    `here`: the job runs on this machine, cloning this checkout (Capability.this_machine)."""
    if git.repo_root:
        commands = request.commands or [request.command]
        check_command(
            commands,
            exec_method=request.exec_method.value,
            root=git.repo_root,
            commit=git.commit,
            cwd=os.getcwd(),
        )
    if here:
        return
    try:
        check_remote_reachable(git.remote_url, beaker_addr=beaker_address())
    except PreconditionError as e:
        if not request.dry_run:
            raise
        app.debug(f"{e}; submitting it would be refused ({e.hint})")  # the dry run's last line names it


def local_torch_backend(
    app: Application, request: LaunchRequest, git: GitState, *, here: bool, gpu: bool | None = None
) -> LaunchRequest:
    """A local run on a machine without a GPU installs torch from the CPU index (UV_TORCH_BACKEND=cpu:
    uv pip, not several GB of CUDA wheels), unless a torch backend is chosen. A uv.lock fixes the
    build: said in one line. `gpu`: whether this machine has one (default: launchkit.jobchecks)."""
    if not here or request.no_python or request.install or request.python_manager is not PythonManager.uv:
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
    if not git.repo_root or request.no_python:
        return request
    if request.conda_file:
        rel = repo_relative("--conda-file", request.conda_file, git.repo_root)
        request = request.model_copy(update={"conda_file": rel})
    if request.python_manager is PythonManager.uv and not request.install:
        if request.ref or request.branch:  # the working tree is not the launched commit
            app.debug("uv.lock check skipped: --ref/--branch launches another commit than the checkout")
        else:
            check_groups(git.repo_root, request.uv_groups)
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


def choose_job_python(
    app: Application, request: LaunchRequest, git: GitState, *, here: bool = False
) -> LaunchRequest:
    """One interpreter per job, chosen here once: --python-version, else the commit's .python-version,
    else the commit's requires-python (pyproject.toml), else the image's. A version uv can neither find
    nor download is refused now, naming where it came from. One from .python-version or requires-python
    is said and set as --python-version would be, so every step in the job uses it: the venv, the env
    store and `uv sync` (which would otherwise read .python-version itself, or find the venv's Python
    outside requires-python and make another: a second interpreter). `here`: a run on this machine."""
    uses_uv = request.python_manager is PythonManager.uv and not (
        request.no_python or request.install or request.system_python or request.uv_venv
    )
    if not uses_uv:
        return request
    asked, source = request.python_version, "--python-version"
    if not asked and git.repo_root:  # both files by one git process
        files = committed_files(git.repo_root, git.commit, [PYTHON_VERSION_FILE, "pyproject.toml"])
        asked, source = python_request_in(files[PYTHON_VERSION_FILE]), PYTHON_VERSION_FILE
        if not asked and (requires := requires_python_in(files["pyproject.toml"])):
            return _requires_python(app, request, requires, here=here)
    if not asked:
        app.debug(
            "Python: the image's (no --python-version, no committed .python-version, no requires-python)"
        )
        return request
    if too_old_python(asked.removeprefix("cpython-").removeprefix("python")):
        return request  # (refused by check_environment, which names the runtime's floor)
    if python_obtainable(asked) is False:
        fix = "pass a released one (e.g. 3.12)" if source.startswith("--") else "name a released one there"
        raise PreconditionError(
            f"{source} asks for Python {asked}, which uv can neither find here nor download",
            hint=f"{fix}; `uv python list --all-versions` shows what uv can install",
        )
    if source == PYTHON_VERSION_FILE:
        app.info(f"Python {asked} (from {PYTHON_VERSION_FILE}): the job's interpreter for every step")
        request = request.model_copy(update={"python_version": asked})
    return request


def _requires_python(app: Application, request: LaunchRequest, requires: str, *, here: bool) -> LaunchRequest:
    """The job's Python from the commit's requires-python alone: the range is the request of every step
    (pyenv.requires_python_request), said here. Which Python
    the image has is not known at launch (the default image's is no documented fact), and this machine's
    would cost a search of its interpreters on every local launch: the job's first step finds it, as
    uv would for `uv sync`. A range no Python uv can find or download satisfies is refused (exit 3)."""
    where = f"requires-python {requires} in pyproject.toml"
    try:
        job = requires_python_request(requires)
    except ValueError:
        raise PreconditionError(
            f"requires-python {requires!r} in pyproject.toml is not a version range (uv and pip refuse it)",
            hint="write it as PEP 440 does (e.g. >=3.10), commit and push",
        ) from None
    if job is None:
        app.debug(f"Python: the image's ({where} allows any)")
        return request
    # (asking uv costs ~0.1 s a launch: only for a range no CPython release launchkit knows satisfies)
    if not released_python_allows(job) and python_obtainable(job) is False:
        floor = (
            f" (launchkit's runtime needs {RUNTIME_FLOOR} or newer)" if job.endswith(RUNTIME_FLOOR) else ""
        )
        raise PreconditionError(
            f"{where} allows no Python uv can find here or download{floor}",
            hint="fix requires-python (e.g. >=3.10), commit and push; or pass --python-version 3.12",
        )
    machine = "this machine's" if here else "the image's"
    given = "" if job == requires else f" {requires}"
    app.info(
        f"Python {job} (from requires-python{given} in pyproject.toml): {machine} if it is one, "
        + "else the newest CPython uv downloads for it; the job's interpreter for every step"
    )
    return request.model_copy(update={"python_version": job})


def check_environment(app: Application, request: LaunchRequest, git: GitState, *, here: bool) -> None:
    """Preflight before a Beaker submit (launchkit.pyenv.check_job_environment): what the job installs,
    resolved for the node's platform. Not for dry runs, local runs, --no-preflight, --install, conda,
    --no-python. A local run with conda needs this machine's conda."""
    conda = request.python_manager is PythonManager.conda and not (request.no_python or request.dry_run)
    if here and conda and not which("conda"):  # said of this machine, not of an image
        given = (("--conda-file", request.conda_file), ("--conda-env", request.conda_env))
        asked = next((flag for flag, value in given if value), "--python-manager conda")
        raise PreconditionError(
            f"{asked}: this machine has no conda on PATH (a local run uses this machine's)",
            hint="install conda here (e.g. miniforge) or put it on PATH, or let uv set up Python instead",
        )
    uv_python = request.python_manager is PythonManager.uv and not (
        request.no_python or request.install or request.system_python or request.uv_venv
    )
    if uv_python and not request.python_version and git.repo_root and not (request.ref or request.branch):
        _refuse_old_python(git.repo_root)
    if (
        request.dry_run
        or request.no_preflight
        or here
        or not git.repo_root
        or request.no_python
        or request.install
        or request.python_manager is not PythonManager.uv
        or request.ref
        or request.branch
    ):
        return
    python = request.python_version
    if not python:
        python = next(iter(_python_version_words(git.repo_root)), None)
    if python and python[:1] in "<>=!~":  # requires-python's range (choose_job_python): the preflight's pick
        python = None
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


def _python_version_words(repo_root: str) -> list[str]:
    """The words of the checkout's .python-version; none when it is missing, not a regular file (a
    link to /dev/zero, a FIFO: never read), larger than a version file is, or not UTF-8 text."""
    try:
        data = read_user_file(
            os.path.join(repo_root, ".python-version"), ".python-version", limit=4096, hint=""
        )
        return data.decode("utf-8").split()
    except (UsageError, UnicodeDecodeError):
        return []


def _refuse_old_python(repo_root: str) -> None:
    """The checkout's .python-version picks the job's Python: one the runtime can't run is refused here,
    not after the job has waited for its GPUs."""
    words = _python_version_words(repo_root)
    if words and too_old_python(words[0].removeprefix("cpython-").removeprefix("python")):
        raise PreconditionError(
            f".python-version asks for Python {words[0]!r}, older than launchkit's runtime supports (3.8)",
            hint="name Python 3.8 or newer there, or pass --python-version 3.12",
        )
