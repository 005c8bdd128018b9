"""The backend registry: the one place that names the backends, what each can do, and where it lives.

A new backend is one `BackendInfo` row in `BACKENDS` plus its package (`backends/<name>/`). Nothing
outside `launchkit.backends` names a backend: the CLI asks this module for the default, for the one
`--local` means (Capability.this_machine), for the one a run id belongs to, or for one with a feature
(`with_capability`). Light on purpose (no pydantic, no backend module): `--help` and completion read it.
"""

from __future__ import annotations

import importlib
import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launchkit.errors import BackendError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from types import ModuleType

    from launchkit.application import Application
    from launchkit.backends.protocol import Backend


class Capability(str, Enum):
    """Features beyond the common protocol; the value says which options need it (for messages)."""

    all_replicas = "--all-replicas"  # follow several replicas at once, lines prefixed [N]
    tasks = "--task/--all"  # runs with several tasks (logs of one task, or of all)
    others_runs = "--all/--mine/--author"  # runs of other people, and not launched by launchkit
    gpu_filters = "--gpu-type/--all/--gpus/--replicas"  # find-gpus filters
    uploads = "--upload"  # run: upload local files and mount them
    unpushed = "unpushed commits"  # run: launch a commit that is not on a remote
    several_tasks = "--multi/--sweep"  # run: several tasks in one run
    workspaces = "--workspace/--group"  # runs scoped to a workspace or a group
    # -- what a backend is (asked instead of its name)
    this_machine = "--local"  # jobs run on this machine, cloning this checkout
    service = "a service"  # prepare() asks a remote service (a dry run without credentials is offline);
    # LooksAhead (protocol.py): its look-ups sent while git is read and the spec built
    service_statuses = "--status NAME"  # list: also takes the service's own status names
    placement = "--cluster/--gpu-type/--tag"  # resolves cluster constraints (Backend.placement)
    # -- optional typed interfaces (protocol.py: SecretStore, SessionHost, PageLinks, Accounts, Pruning)
    secrets = "`secret`"  # workspace secrets by name
    sessions = "`session`"  # interactive sessions
    pages = "`open`"  # web pages of runs and other objects
    accounts = "an account"  # the user's name on the service
    pruning = "`prune`"  # removing old runs kept on this machine


class BackendInfo:
    """One registered backend. A plain class: a dataclass would cost `--help` a few ms to build."""

    __slots__ = (
        "capabilities",
        "credentials",
        "name",
        "name_limit",
        "offline",
        "resume_checked",
        "retry_causes",
        "run_ids",
        "run_prefix",
        "summary",
        "takes_workspace",
        "target",
        "title",
    )

    def __init__(
        self,
        name: str,
        title: str,  # in messages ("only for Beaker runs")
        summary: str,  # a few words for help texts
        target: str,  # "module:Class", imported on first use (the class takes the Application)
        capabilities: frozenset[Capability],
        run_prefix: str = "",  # ids of its runs start with this ('': any other id)
        takes_workspace: bool = False,  # its constructor takes `workspace=` (Capability.workspaces)
        credentials: Callable[[], str | None] | None = None,  # why it has none configured, or None
        # "module:function" (a light module): fills in what this machine remembers of the service in
        # a spec made without asking it (the offline dry run), Submission -> Submission
        offline: str = "",
        # the `--retry-on` causes it honours, given the run's policy module (runtime/node/policy.py,
        # loaded only when a launch asks: `--help` reads this table): a cause -> the causes it must be
        # named with (one mechanism retries them alike); checked by `honours` before anything is written
        retry_causes: Callable[[ModuleType], Mapping[str, tuple[str, ...]]] | None = None,
        # "module:function": the ids of its recent runs starting with a prefix, for TAB completion,
        # read where the backend keeps them (only a backend that keeps them on this machine)
        run_ids: str = "",
        # the causes after whose retry it can check that the attempt resumed (--require-resume), given
        # the policy module; None: after every retry
        resume_checked: Callable[[ModuleType], tuple[str, ...]] | None = None,
        # the longest run name it takes (None: any), checked with the spec's other usage checks, so a
        # dry run (offline too) refuses what the launch would
        name_limit: int | None = None,
    ) -> None:
        self.name, self.title, self.summary, self.target = name, title, summary, target
        self.capabilities, self.run_prefix = capabilities, run_prefix
        self.takes_workspace, self.credentials, self.offline = takes_workspace, credentials, offline
        self.retry_causes = retry_causes
        self.run_ids = run_ids
        self.resume_checked = resume_checked
        self.name_limit = name_limit

    def __repr__(self) -> str:
        return f"BackendInfo({self.name!r})"

    def offline_spec(self, submission: Any) -> Any:
        """`submission` with what this machine remembers filled in (unchanged without an `offline` hook)."""
        if not self.offline:
            return submission
        module, _, func = self.offline.partition(":")
        return getattr(importlib.import_module(module), func)(submission)

    def check_retries(self, policy: Any) -> None:
        """A usage error, in one line, when the run's policy (runtime/node/policy.Policy) names a retry
        cause this backend cannot honour (its `retry_causes`)."""
        from launchkit.runtime.node import policy as P  # the job's runtime: not for `--help`

        checked = self.resume_checked(P) if self.resume_checked is not None else None
        if policy.resume_unchecked(checked):
            raise UsageError(
                f"--require-resume cannot be honoured on {self.title} for its own retries: a new job of the"
                " task cannot see how far the one before got; the job's runtime checks only its in-place"
                " restarts",
                hint=f"use --retry-on {P.STALLED} (restarts in place), or launch on {_resume_checkers()}",
            )
        honours = self.retry_causes(P) if self.retry_causes is not None else {}
        found = policy.unhonoured(honours)
        if found is None:
            return
        cause, needed = found
        if not needed:
            able = titles_honouring(cause)
            raise UsageError(
                f"--retry-on {cause} cannot be honoured on {self.title}",
                hint=f"launch on {able}" if able != "no" else "drop it from --retry-on",
            )
        raise UsageError(
            f"--retry-on {cause} cannot be honoured on {self.title} without {', '.join(needed)}: one"
            f" mechanism retries them alike",
            hint=f"use --retry-on {','.join((cause, *needed))} (retries both), or launch on"
            f" {titles_honouring(cause, alone=True)}",
        )

    def missing_credentials(self) -> str | None:
        """Why the service cannot be asked (no credentials configured), without loading its client."""
        return self.credentials() if self.credentials else None


def _beaker_credentials() -> str | None:
    """Without BEAKER_TOKEN, BEAKER_CONFIG or ~/.beaker/config.yml (where beaker-py's Config.from_env
    looks) there can be no credentials, and a dry run stays offline without loading its gRPC client."""
    if "BEAKER_TOKEN" in os.environ:
        return None
    if named := os.environ.get("BEAKER_CONFIG"):
        missing = f"no Beaker credentials: BEAKER_CONFIG={named} names no file"
        return None if Path(named).is_file() else missing
    return None if (Path.home() / ".beaker" / "config.yml").is_file() else "no Beaker credentials"


BEAKER_NAME_LIMIT = 128  # Beaker refuses longer experiment names (HTTP 400)
_COMMON_BEAKER = frozenset(Capability) - {Capability.unpushed, Capability.this_machine, Capability.pruning}

# The default backend first.
BACKENDS: tuple[BackendInfo, ...] = (
    BackendInfo(
        name="beaker",
        title="Beaker",
        summary="AI2's Beaker clusters",
        target="launchkit.backends.beaker:BeakerBackend",
        capabilities=_COMMON_BEAKER,
        takes_workspace=True,
        credentials=_beaker_credentials,
        offline="launchkit.backends.beaker_remembered:offline_spec",
        name_limit=BEAKER_NAME_LIMIT,
        # autoResume; task retries (cause-blind: never-started only beside failure); the runtime's restart
        retry_causes=lambda P: {
            P.PREEMPTION: (),
            P.FAILURE: (),
            P.NEVER_STARTED: (P.FAILURE,),
            P.STALLED: (),
            P.EXIT: (),
        },
        resume_checked=lambda P: P.IN_PLACE,  # only the runtime's restarts in place see the start before
    ),
    BackendInfo(
        name="local",
        title="local",
        summary="this machine",
        target="launchkit.backends.local:LocalBackend",
        capabilities=frozenset(
            {Capability.uploads, Capability.unpushed, Capability.this_machine, Capability.pruning}
        ),
        run_prefix="local-",
        # the supervisor tells the causes apart; the runtime's restart
        retry_causes=lambda P: {
            P.PREEMPTION: (),
            P.FAILURE: (),
            P.NEVER_STARTED: (),
            P.STALLED: (),
            P.EXIT: (),
        },
        run_ids="launchkit.backends.local.store:recent_run_ids",
    ),
)
BY_NAME = {b.name: b for b in BACKENDS}


def names() -> list[str]:
    return [b.name for b in BACKENDS]


def default_name() -> str:
    return BACKENDS[0].name


def here_name() -> str:
    """The backend `--local` means: the one that runs jobs on this machine."""
    return with_capability(Capability.this_machine).name


def info(name: str, *, where: str = "--backend") -> BackendInfo:
    """The registered backend `name` (case-insensitive); a usage error naming `where` it came from."""
    found = BY_NAME.get(str(name).lower())
    if found is None:
        raise UsageError(f"{where} {name!r}: unknown backend", hint="use " + " or ".join(names()))
    return found


def titles(capability: Capability) -> str:
    """The backends that have `capability`, for messages ("Beaker", "Beaker or local")."""
    return " or ".join(b.title for b in BACKENDS if capability in b.capabilities) or "no"


def recent_run_ids(incomplete: str) -> list[str]:
    """TAB completion: recent run ids starting with `incomplete`, from every row with a `run_ids` hook."""
    found: list[str] = []
    for b in BACKENDS:
        if b.run_ids:
            module, _, func = b.run_ids.partition(":")
            found += getattr(importlib.import_module(module), func)(incomplete)
    return found


def _resume_checkers() -> str:
    """The backends that check --require-resume after every retry, for messages."""
    return " or ".join(b.title for b in BACKENDS if b.resume_checked is None) or "no backend"


def titles_honouring(cause: str, *, alone: bool = False) -> str:
    """The backends that honour retry cause `cause` (`alone`: without naming another), for messages."""
    from launchkit.runtime.node import policy as P  # the job's runtime: not for `--help`

    found = []
    for b in BACKENDS:
        honours = b.retry_causes(P) if b.retry_causes is not None else {}
        if cause in honours and not (alone and honours[cause]):
            found.append(b.title)
    return " or ".join(found) or "no"


def with_capability(capability: Capability) -> BackendInfo:
    """The first registered backend (the default first) that has `capability`."""
    found = next((b for b in BACKENDS if capability in b.capabilities), None)
    if found is None:
        raise UsageError(f"no backend supports {capability.value}")
    return found


def for_run_id(run_id: str) -> BackendInfo:
    """The backend whose run ids look like `run_id` (a prefix), else the default."""
    return next((b for b in BACKENDS if b.run_prefix and run_id.startswith(b.run_prefix)), BACKENDS[0])


def resolve_name(backend: str | None, local: bool, *, where: str = "--backend") -> str | None:
    """--backend NAME and/or --local -> a registered name (None when neither is given)."""
    here = here_name()
    if local and backend is not None and info(backend, where=where).name != here:
        raise UsageError(f"--local cannot be combined with {where} {backend!r}", hint="keep one")
    if local:
        return here
    return info(backend, where=where).name if backend is not None else None


def configured_name(config: Any) -> str:
    """`backend` from the config layers (checked, naming the variable or file it came from), else the
    default."""
    name = config.get("backend")
    if name is None:
        return default_name()
    return info(name, where=config.values["backend"][1].where("backend")).name


def load(name: str, app: Application, *, workspace: str | None = None) -> Backend:
    """An instance of backend `name` for this invocation. `workspace`: where lists and --latest look."""
    entry = info(name)
    module, _, cls = entry.target.partition(":")
    try:
        backend_cls: Any = getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError as e:
        if not (e.name or "").startswith("launchkit.backends"):
            raise
        raise BackendError(
            f"the {name} backend could not be loaded ({e.name} is missing)",
            hint="reinstall launchkit with its dependencies",
        ) from None
    if entry.takes_workspace:
        return backend_cls(app, workspace=workspace)  # type: ignore[no-any-return]
    return backend_cls(app)  # type: ignore[no-any-return]
