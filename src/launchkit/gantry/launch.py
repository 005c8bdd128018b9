"""gantry 3.7.0's `launch_experiment` and `follow_workload` (gantry.launch), on launchkit.

`launch_experiment` takes gantry's keyword arguments, turns them into `launchkit run`'s options (the
table docs/from-gantry.md gives flag by flag) and launches through launchkit's Python API (`_submit`);
what follows the submit (callbacks, following, the result) is gantry's loop on beaker-py.
"""

from __future__ import annotations

import codecs
import inspect
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from queue import Empty, Queue
from threading import Event, Thread
from typing import TYPE_CHECKING, Any, Literal

from beaker import beaker_pb2 as pb2
from google.protobuf.json_format import MessageToDict

from launchkit import api
from launchkit.backends.beaker.runview import job_state, record
from launchkit.core.contract import DEFAULT_RESULTS_DIR, DEFAULT_RUNTIME_DIR
from launchkit.core.run_options import RUN_OPTIONS
from launchkit.core.status import Cause, RunStatus
from launchkit.gantry import _submit
from launchkit.gantry.callbacks import Callback
from launchkit.gantry.exceptions import (
    BeakerJobTimeoutError,
    ConfigurationError,
    DirtyRepoError,
    ExperimentFailedError,
    GantryInterruptWorkload,
    TermInterrupt,
)
from launchkit.gantry.git_utils import GitRepoState
from launchkit.masking import masked

if TYPE_CHECKING:
    from beaker import Beaker, BeakerJob, BeakerTask, BeakerWorkload

__all__ = ["GITHUB_TOKEN_SECRET", "RESULTS_DIR", "RUNTIME_DIR", "follow_workload", "launch_experiment"]

GITHUB_TOKEN_SECRET = "GITHUB_TOKEN"  # gantry's default --gh-token-secret
SIBLING_TASK_FAILED = pb2.CancelationCode.CANCELATION_CODE_SIBLING_TASK_FAILED
# gantry's constants: where the job's runtime files go (the job sees it as LAUNCHKIT_RUNTIME_DIR and
# runs there), and the results directory, each overridable by the same variable as in gantry
RUNTIME_DIR = os.environ.get("GANTRY_RUNTIME_DIR", "/gantry-runtime")
RESULTS_DIR = os.environ.get("RESULTS_DIR", DEFAULT_RESULTS_DIR)

# `run`'s option names whose gantry keyword is spelled differently (the others are the same)
_KEYWORDS = {
    "group": "group_names",
    "cluster": "clusters",
    "gpu_type": "gpu_types",
    "tag": "tags",
    "hostname": "hostnames",
    "dataset": "datasets",
    "env": "env_vars",
    "env_secret": "env_secrets",
    "dataset_secret": "dataset_secrets",
    "mount": "mounts",
    "upload": "uploads",
    "git_token_secret": "gh_token_secret",
    "no_auto_resume": "auto_resume",
    "python_version": "default_python_version",
    "uv_extra": "uv_extras",
    "uv_no_extras": "uv_all_extras",
    "torch_backend": "uv_torch_backend",
}
_FLAGS = {
    part: opt.name
    for opt in RUN_OPTIONS
    for flag in (*opt.flags, *opt.aliases)
    for part in flag.split("/")
    if part.startswith("--")
}


def python_wording(text: str) -> str:
    """A launchkit message for a Python caller: each `run` flag named as gantry's keyword, quoted as
    gantry's API quotes it (`--gpu-type` -> `'gpu_types'`); flags with no keyword are left as they are."""

    def keyword(m: re.Match[str]) -> str:
        name = _FLAGS.get(m.group(0))
        if name is None:
            return m.group(0)
        kw = _KEYWORDS.get(name, name)
        return f"'{kw}'" if kw in inspect.signature(launch_experiment).parameters else m.group(0)

    return re.sub(r"--[a-z][a-z0-9-]*", keyword, text)


def _pairs(values: Sequence[str | tuple[str, str]] | None, sep: str) -> list[str] | None:
    """gantry's `NAME=VALUE` / `SOURCE:TARGET` strings or (name, value) tuples as `run`'s strings."""
    if not values:
        return None
    return [v if isinstance(v, str) else f"{v[0]}{sep}{v[1]}" for v in values]


def _list(values: Sequence[str] | None) -> list[str] | None:
    if isinstance(values, str):
        raise ConfigurationError(f"expected a list of strings, got the string {values!r}")
    return list(values) if values else None


def run_options(kw: dict[str, Any]) -> dict[str, Any]:
    """gantry's launch_experiment keywords as `launchkit run` options (core/run_options.py names)."""
    if kw.get("auto_resume") is True:
        raise ConfigurationError(
            "auto_resume=True: launchkit sets only auto_resume=False (--no-auto-resume); "
            "leave it None for Beaker's default"
        )
    uv_all = kw.get("uv_all_extras")
    return {
        "name": kw.get("name"),
        "description": kw.get("description"),
        "workspace": kw.get("workspace"),
        "budget": kw.get("budget"),
        "group": _list(kw.get("group_names")),
        "yes": bool(kw.get("yes")),
        "save_spec": None if kw.get("save_spec") is None else os.fspath(kw["save_spec"]),
        "cluster": _list(kw.get("clusters")),
        "gpu_type": _list(kw.get("gpu_types")),
        "interconnect": kw.get("interconnect"),
        "tag": _list(kw.get("tags")),
        "hostname": _list(kw.get("hostnames")),
        "cpus": kw.get("cpus"),
        "gpus": kw.get("gpus"),
        "memory": kw.get("memory"),
        "shared_memory": kw.get("shared_memory"),
        "beaker_image": kw.get("beaker_image"),
        "docker_image": kw.get("docker_image"),
        "dataset": _list(kw.get("datasets")),
        "env": _pairs(kw.get("env_vars"), "="),
        "env_secret": _pairs(kw.get("env_secrets"), "="),
        "dataset_secret": _pairs(kw.get("dataset_secrets"), ":"),
        "mount": _pairs(kw.get("mounts"), ":"),
        "weka": _pairs(kw.get("weka"), ":"),
        "upload": _pairs(kw.get("uploads"), ":"),
        "aws_config_secret": kw.get("aws_config_secret"),
        "aws_credentials_secret": kw.get("aws_credentials_secret"),
        "google_credentials_secret": kw.get("google_credentials_secret"),
        "results": None
        if kw.get("results", RESULTS_DIR) == DEFAULT_RESULTS_DIR
        else kw.get("results", RESULTS_DIR),
        "task_name": None if kw.get("task_name", "main") == "main" else kw["task_name"],
        "priority": kw.get("priority"),
        "task_timeout": kw.get("task_timeout"),
        "preemptible": kw.get("preemptible"),
        "min_runtime": kw.get("min_runtime"),
        "no_auto_resume": kw.get("auto_resume") is False,
        "retries": kw.get("retries"),
        "replicas": None if kw.get("replicas") == 1 else kw.get("replicas"),  # gantry: 1 is none
        "leader_selection": kw.get("leader_selection"),
        "host_networking": kw.get("host_networking"),
        "propagate_failure": kw.get("propagate_failure"),
        "propagate_preemption": kw.get("propagate_preemption"),
        "synchronized_start_timeout": kw.get("synchronized_start_timeout"),
        "skip_nccl_setup": bool(kw.get("skip_nccl_setup") or kw.get("skip_tcpxo_setup")),
        "runtime_dir": None
        if kw.get("runtime_dir", RUNTIME_DIR) == DEFAULT_RUNTIME_DIR
        else kw.get("runtime_dir", RUNTIME_DIR),
        "exec_method": None if kw.get("exec_method", "exec") == "exec" else kw["exec_method"],
        "torchrun": bool(kw.get("torchrun")),
        "pre_setup": kw.get("pre_setup"),
        "post_setup": kw.get("post_setup"),
        "python_manager": kw.get("python_manager"),
        "python_version": kw.get("default_python_version"),
        "system_python": bool(kw.get("system_python")),
        "install": kw.get("install"),
        "no_python": bool(kw.get("no_python")),
        "uv_venv": kw.get("uv_venv"),
        "uv_extra": _list(kw.get("uv_extras")),
        "uv_all_extras": uv_all is True,
        "uv_no_extras": uv_all is False,
        "torch_backend": kw.get("uv_torch_backend"),
        "uv_cache_dir": kw.get("uv_cache_dir"),
        "conda_file": None if kw.get("conda_file") is None else os.fspath(kw["conda_file"]),
        "conda_env": kw.get("conda_env"),
    }


def launch_experiment(
    args: Sequence[str],
    name: str | None = None,
    description: str | None = None,
    task_name: str = "main",
    workspace: str | None = None,
    group_names: Sequence[str] | None = None,
    clusters: Sequence[str] | None = None,
    gpu_types: Sequence[str] | None = None,
    interconnect: Literal["ib", "tcpxo"] | None = None,
    tags: Sequence[str] | None = None,
    hostnames: Sequence[str] | None = None,
    beaker_image: str | None = None,
    docker_image: str | None = None,
    cpus: float | None = None,
    gpus: int | None = None,
    memory: str | None = None,
    shared_memory: str | None = None,
    datasets: Sequence[str] | None = None,
    gh_token_secret: str = GITHUB_TOKEN_SECRET,
    conda_file: str | os.PathLike[str] | None = None,
    conda_env: str | None = None,
    python_manager: Literal["uv", "conda"] | None = None,
    system_python: bool = False,
    uv_venv: str | None = None,
    uv_extras: Sequence[str] | None = None,
    uv_all_extras: bool | None = None,
    uv_torch_backend: str | None = None,
    uv_cache_dir: str | None = None,
    env_vars: Sequence[str | tuple[str, str]] | None = None,
    env_secrets: Sequence[str | tuple[str, str]] | None = None,
    dataset_secrets: Sequence[str | tuple[str, str]] | None = None,
    mounts: Sequence[str | tuple[str, str]] | None = None,
    weka: Sequence[str | tuple[str, str]] | None = None,
    uploads: Sequence[str | tuple[str, str]] | None = None,
    timeout: int | None = None,
    task_timeout: str | None = None,
    start_timeout: int | None = None,
    inactive_timeout: int | None = None,
    inactive_soft_timeout: int | None = None,
    show_logs: bool | None = None,
    allow_dirty: bool = False,
    dry_run: bool = False,
    yes: bool | None = None,
    save_spec: str | os.PathLike[str] | None = None,
    priority: str | None = None,
    install: str | None = None,
    no_python: bool = False,
    replicas: int | None = None,
    leader_selection: bool | None = None,
    host_networking: bool | None = None,
    propagate_failure: bool | None = None,
    propagate_preemption: bool | None = None,
    synchronized_start_timeout: str | None = None,
    budget: str | None = None,
    preemptible: bool | None = None,
    min_runtime: str | None = None,
    auto_resume: bool | None = None,
    retries: int | None = None,
    results: str = RESULTS_DIR,
    runtime_dir: str = RUNTIME_DIR,
    exec_method: Literal["exec", "bash"] = "exec",
    torchrun: bool = False,
    skip_tcpxo_setup: bool = False,
    skip_nccl_setup: bool = False,
    default_python_version: str | None = None,
    pre_setup: str | None = None,
    post_setup: str | None = None,
    aws_config_secret: str | None = None,
    aws_credentials_secret: str | None = None,
    google_credentials_secret: str | None = None,
    callbacks: Sequence[Callback] | None = None,
    ref: str | None = None,
    branch: str | None = None,
    remote: str | None = None,
    git_repo: GitRepoState | None = None,
    auto_cancel: bool = False,
    client: Beaker | None = None,
) -> BeakerWorkload | None:
    """Launch an experiment on Beaker, as `gantry run` (and `launchkit run`) does. The other keywords are
    gantry's `run` options (see Recipe). Returns the workload; None for a dry run, which submits nothing.
    With logs shown (or a timeout), follows it to the end: ExperimentFailedError if the job failed."""
    kw = dict(locals())  # gantry's keywords, as given
    if not args:
        raise ConfigurationError("'args' are required!")
    if isinstance(args, str):
        raise ConfigurationError("args must be a sequence of strings, not a single string")
    if torchrun and not gpus:
        raise ConfigurationError("'torchrun' mode requires 'gpus' to be set to a positive integer.")
    if replicas is not None and replicas <= 0:
        raise ConfigurationError(f"'replicas' must be a positive integer (got {replicas})")
    if timeout is None:
        timeout = -1 if show_logs else 0
    if show_logs is None:
        show_logs = timeout != 0
    if timeout == 0 and show_logs:
        raise ConfigurationError("Cannot use 'show_logs' with 'timeout=0'!")

    if git_repo is None:
        if remote is not None:
            git_repo = GitRepoState.from_remote(remote, ref=ref, branch=branch)
        else:
            git_repo = GitRepoState.from_env(ref=ref, branch=branch)
    if ref is None and not allow_dirty and git_repo.is_dirty:
        raise DirtyRepoError("You have uncommitted changes! Use 'allow_dirty' to force.")
    state = git_repo._git_state()
    given = run_options(kw)
    given.update(
        name=name,
        dry_run=dry_run,
        follow=False,  # followed below, with gantry's callbacks
        allow_dirty=True,  # decided above, as gantry decides it
        ref=None,  # the state above is launched, as read
        branch=None,
        remote=None,
    )
    _gantry_env(given, git_repo, gh_token_secret, via_github=state.github_repo is not None)
    if client is not None and not given.get("workspace") and client.config.default_workspace:
        given["workspace"] = client.config.default_workspace
    planned, run_id = _submit.launch(given, list(args), git=state, wording=python_wording)
    if run_id is None:
        return None

    with ExitStack() as stack:
        if client is None:
            from beaker import Beaker

            client = stack.enter_context(Beaker.from_env(check_for_upgrades=False))
        beaker = client
        workload = beaker.workload.get(run_id)
        info_header = _info_header(beaker, workload, git_repo)
        print(f"Experiment: {beaker.user_name}/{workload.experiment.name} → {beaker.workload.url(workload)}")
        print(info_header, flush=True)
        callbacks = list(callbacks or [])
        spec = beaker.experiment.get_spec(workload.experiment) if callbacks else None
        for callback in callbacks:
            callback.attach(beaker=beaker, git_repo=git_repo, spec=spec, workload=workload)  # type: ignore[arg-type]
        if timeout == 0:
            return workload
        try:
            job = follow_workload(
                beaker,
                workload,
                timeout=timeout if timeout > 0 else None,
                start_timeout=start_timeout,
                inactive_timeout=inactive_timeout,
                inactive_soft_timeout=inactive_soft_timeout,
                show_logs=show_logs,
                auto_cancel=auto_cancel,
                callbacks=callbacks,
            )
            _results(beaker, workload, job, callbacks, info_header=info_header if show_logs else None)
        finally:
            for callback in callbacks:
                callback.detach()
        return workload


def _gantry_env(
    given: dict[str, Any], git_repo: GitRepoState, token_secret: str, *, via_github: bool
) -> None:
    """What gantry's job has that `run`'s options do not give: `GITHUB_REPO`, `GIT_REF` and `GIT_BRANCH`
    (gantry sets them for user code; a name the caller set is left to the caller), and a custom
    `gh_token_secret` as `GITHUB_TOKEN` when the repository is not public (gantry adds its default one
    the same way; launchkit finds that one itself, backends/beaker/prepare.py)."""
    env = list(given.get("env") or [])
    secrets = list(given.get("env_secret") or [])
    taken = {e.split("=", 1)[0] for e in env + secrets}
    ours = (("GITHUB_REPO", git_repo.repo), ("GIT_REF", git_repo.ref), ("GIT_BRANCH", git_repo.branch))
    for name, value in ours:
        if value is not None and name not in taken:
            env.append(f"{name}={value}")
    given["env"] = env or None
    if token_secret != GITHUB_TOKEN_SECRET and "GITHUB_TOKEN" not in taken:
        if not via_github:  # gantry clones only GitHub; another host's token is launchkit's variable
            given["git_token_secret"] = token_secret
        elif not git_repo.is_public:
            given["env_secret"] = [*secrets, f"GITHUB_TOKEN={token_secret}"]


def _info_header(beaker: Beaker, workload: BeakerWorkload, git_repo: GitRepoState) -> str:
    """gantry's lines naming a launched experiment's workspace, commit and branch."""
    ws = beaker.workspace.get(workload.experiment.workspace_id)
    message = git_repo.short_commit_message() or ""
    return (
        f"Workspace: {ws.name} → {beaker.workspace.url(ws)}\n"
        f"Commit: {git_repo.short_ref} {message} → {git_repo.ref_url}\n"
        f"Branch: {git_repo.branch}" + (f" → {git_repo.branch_url}" if git_repo.branch_url else "")
    )


def _results(
    beaker: Beaker,
    workload: BeakerWorkload,
    job: BeakerJob,
    callbacks: Sequence[Callback],
    *,
    info_header: str | None = None,
) -> None:
    """gantry's end of a followed launch (its `display_results`): the summary, then on_success, or the
    task list (several tasks), on_failure and ExperimentFailedError."""
    metrics: dict[str, Any] | None = None
    if job.HasField("metrics") and job.metrics.fields:
        metrics = MessageToDict(job.metrics)
    results_ds = None
    if job.assignment_details.result_dataset_id:
        results_ds = beaker.dataset.get(job.assignment_details.result_dataset_id)
    state = job_state(job)
    if state is RunStatus.succeeded:
        name = f"{beaker.user_name}/{workload.experiment.name}"
        print(f"✓ {name} ({workload.experiment.id}) completed successfully.\n")
    if info_header:
        print(info_header)
    if results_ds is not None:
        print(f"Results: {beaker.dataset.url(results_ds)}")
    if job.status.HasField("started") and job.status.HasField("exited"):
        runtime = job.status.exited.ToDatetime() - job.status.started.ToDatetime()
        print(f"Runtime: {_timedelta(runtime.total_seconds())}")
    if metrics:
        print(f"Metrics: {metrics}")
    sys.stdout.flush()
    if state is RunStatus.succeeded:
        for callback in callbacks:
            callback.on_success(job, metrics=metrics, results_ds=results_ds)
        return
    print()
    if len(workload.experiment.tasks) > 1:
        _show_all_jobs(beaker, workload)
        print()
    for callback in callbacks:
        callback.on_failure(job, metrics=metrics, results_ds=results_ds)
    raise ExperimentFailedError(f"Job {job_status(job)}, see {beaker.workload.url(workload)} for details")


def job_status(job: BeakerJob) -> str:
    """How gantry names a finished job's status ("failed with exit code 3", "canceled due to sibling task
    failure", ...)."""
    state = job_state(job)
    if state is RunStatus.canceled:
        if job.status.canceled_code == SIBLING_TASK_FAILED:
            return "canceled due to sibling task failure"
        return "canceled"
    if state is RunStatus.failed:
        if job.status.HasField("exit_code") and job.status.exit_code != 0:
            return f"failed with exit code {job.status.exit_code}"
        return "failed"
    return str(state.value)


def _show_all_jobs(beaker: Beaker, workload: BeakerWorkload) -> None:
    """gantry's task list after a failure: each task's newest job and its status."""
    print("Tasks:")
    task_name = None
    for task in workload.experiment.tasks:
        task_name = task.name
        job = beaker.workload.get_latest_job(workload, task=task)
        if job is not None:
            print(f"❯ '{task_name}' {job_status(job)} - see {beaker.job.url(job)}")
    print(
        "\nYou can show the logs for a particular task by running:\n"
        f"launchkit logs {workload.experiment.id} --tail=1000 --task={task_name}",
        flush=True,
    )


def _timedelta(seconds: float) -> str:
    """gantry's `format_timedelta`: "1 hour, 2 minutes, 3 seconds"."""
    rest = int(seconds)
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        value, rest = divmod(rest, size)
        if value:
            parts.append(f"{value} {unit}" + ("" if value == 1 else "s"))
    return ", ".join(parts) or "under 1 second"


class _Text:
    """A text stream as the bytes stream launchkit's masking writes to (UTF-8, decoded incrementally)."""

    def __init__(self, out: Any) -> None:
        self.out, self._decoder = out, codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write(self, data: bytes) -> int:
        self.out.write(self._decoder.decode(data))
        return len(data)

    def flush(self) -> None:
        self.out.flush()


def _masked_stdout(workload: BeakerWorkload) -> Any:
    """stdout with the values of the run's secrets masked as `***`, as `launchkit follow` shows logs
    (launchkit.masking; the values are read at the first line)."""
    run = api.get_run(workload.experiment.id)  # the backend from the id: Beaker
    return masked(run.app, run.backend, run.info, _Text(sys.stdout))  # type: ignore[arg-type]


def _was_preempted(task: BeakerTask, job: BeakerJob) -> bool:
    r = record(task, job)
    return r.state is RunStatus.canceled and r.stop is Cause.preempted


def follow_workload(
    beaker: Beaker,
    workload: BeakerWorkload,
    *,
    job: BeakerJob | None = None,
    task: BeakerTask | None = None,
    timeout: int | None = None,
    start_timeout: int | None = None,
    inactive_timeout: int | None = None,
    inactive_soft_timeout: int | None = None,
    tail: bool = False,
    show_logs: bool = True,
    auto_cancel: bool = False,
    callbacks: Sequence[Callback] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> BeakerJob:
    """Follow a workload until its job finishes, streaming the logs to stdout (gantry's meaning; the
    values of the job's secrets masked as `***`, as launchkit shows logs).

    :param task: the task to follow (default: the first). `job` is ignored, as in gantry.
    :param timeout: seconds to wait for the job to finish; `start_timeout`: to start;
        `inactive_timeout`: for a new log line (each raises BeakerJobTimeoutError);
        `inactive_soft_timeout`: a warning and `on_inactive_soft_timeout`, at most once per
        max(soft, 1 h).
    :param tail: start with the last 10 lines of a running job.
    :param auto_cancel: cancel the workload on a timeout (a callback's interrupt always cancels it).
    :param clock: seconds, monotonic (tests give their own).
    :returns: the finished job of the task (a preempted job is followed by its replacement).
    """
    from beaker import BeakerSortOrder

    del job
    task = task or workload.experiment.tasks[0]
    callbacks = list(callbacks or [])
    start_time = clock()
    preempted: set[str] = set()
    started_called: set[str] = set()
    cancel_on: tuple[type[BaseException], ...] = (GantryInterruptWorkload,)
    if auto_cancel:
        cancel_on += (TermInterrupt, BeakerJobTimeoutError)
    sentinel = object()
    current: BeakerJob | None = None
    shown: Any = None  # stdout, masked (made at the first line)

    def started(j: BeakerJob) -> bool:
        return bool(j.status.HasField("started"))

    def finalized(j: BeakerJob) -> bool:
        return bool(j.status.HasField("finalized"))

    def latest() -> BeakerJob | None:
        j = beaker.workload.get_latest_job(workload, task=task)
        return j if j is not None and j.id not in preempted else None

    def past(limit: int | None) -> bool:
        return limit is not None and clock() - start_time > limit

    def fill(j: BeakerJob, queue: Queue[Any], stop: Event, tail_now: bool) -> None:
        try:
            for line in beaker.job.logs(j, tail_lines=10 if tail_now else None, follow=True):
                if stop.is_set():
                    return
                queue.put(line)
        except Exception as e:  # noqa: BLE001 (any stream error is raised in the following thread)
            queue.put(e)
        finally:
            queue.put(sentinel)

    while True:
        stop: Event | None = None
        try:
            current = latest()
            while current is None:
                if past(timeout) or past(start_timeout):
                    raise BeakerJobTimeoutError("Timed out while waiting for job to be created")
                time.sleep(1.0)
                current = latest()
            seen: set[tuple[int, str]] = set()
            while not (finalized(current) or (started(current) and show_logs)):
                for event in beaker.job.list_summarized_events(
                    current, sort_order=BeakerSortOrder.ascending, sort_field="latest_occurrence"
                ):
                    key = (event.latest_occurrence.ToSeconds(), event.latest_message)
                    if key not in seen:
                        seen.add(key)
                        print(f"✓ {event.latest_message}", flush=True)
                if past(timeout):
                    for callback in callbacks:
                        callback.on_timeout(current)
                    what = "finish" if started(current) else "start"
                    raise BeakerJobTimeoutError(f"Timed out while waiting for job '{current.id}' to {what}")
                if not started(current) and past(start_timeout):
                    for callback in callbacks:
                        callback.on_start_timeout(current)
                    raise BeakerJobTimeoutError(f"Timed out while waiting for job '{current.id}' to start")
                time.sleep(0.5)
                current = beaker.job.get(current.id)

            if current.id not in started_called:
                for callback in callbacks:
                    callback.on_start(current)
                started_called.add(current.id)

            if show_logs and started(current):
                queue: Queue[Any] = Queue()
                stop = Event()
                Thread(target=fill, args=(current, queue, stop, tail), daemon=True).start()
                last_line = clock()
                last_warning = 0.0
                while True:
                    try:
                        item = queue.get(timeout=1.0)
                    except Empty:
                        now = clock()
                        if inactive_timeout is not None and now - last_line > inactive_timeout:
                            for callback in callbacks:
                                callback.on_inactive_timeout(current)
                            raise BeakerJobTimeoutError(
                                f"Timed out while waiting for job '{current.id}' to produce more logs"
                            ) from None
                        if (
                            inactive_soft_timeout is not None
                            and now - last_line > inactive_soft_timeout
                            and now - last_warning > max(inactive_soft_timeout, 3600)
                        ):
                            last_warning = now
                            print(
                                f"warning: job appears inactive: no new logs for {int(now - last_line)}s",
                                file=sys.stderr,
                                flush=True,
                            )
                            for callback in callbacks:
                                callback.on_inactive_soft_timeout(current)
                        else:
                            for callback in callbacks:
                                callback.on_no_new_logs(current)
                    else:
                        last_line = clock()
                        if item is sentinel:
                            break
                        if isinstance(item, Exception):
                            raise item
                        text = item.message.decode(errors="replace")
                        shown = shown or _masked_stdout(workload)
                        shown.write((text if text.endswith("\n") else text + "\n").encode())
                        shown.flush()
                        for callback in callbacks:
                            callback.on_log(
                                current, text, item.timestamp.seconds + item.timestamp.nanos / 1e9
                            )
                    if past(timeout):
                        for callback in callbacks:
                            callback.on_timeout(current)
                        raise BeakerJobTimeoutError(
                            f"Timed out while waiting for job '{current.id}' to finish"
                        )

            while not finalized(current):
                time.sleep(0.5)
                current = beaker.job.get(current.id)

            if _was_preempted(task, current):
                print(f"Job '{current.id}' preempted.", flush=True)
                preempted.add(current.id)
                for callback in callbacks:
                    callback.on_preemption(current)
                tail = True
                continue
            return current
        except cancel_on as exc:
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            beaker.workload.cancel(workload)
            print("Experiment cancelled.", file=sys.stderr, flush=True)
            for callback in callbacks:
                callback.on_cancellation(current)
            raise
        except KeyboardInterrupt:
            if auto_cancel:
                beaker.workload.cancel(workload)
                for callback in callbacks:
                    callback.on_cancellation(current)
            raise
        finally:
            tail = True
            if stop is not None:
                stop.set()
            if shown is not None:
                shown.end()
