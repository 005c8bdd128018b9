"""Which backend a command talks to: --backend/--local, else the run id's prefix, else the default.

The default is `backend` from the config layers (`LAUNCHKIT_BACKEND`, `[tool.launchkit]`, the user
config file; see launchkit.config), else the registry's first (launchkit.backends.registry). No backend
is named here: the registry knows them. Commands' bodies import this module (it loads the backend
protocol); the options it reads are declared in cli/options.py.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from launchkit.application import Application
from launchkit.backends import Capability, backend_for_run_id, get_backend, registry, require
from launchkit.config import user_state_dir
from launchkit.core.run_options import BackendChoice
from launchkit.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from launchkit.backends import Backend, RunInfo


def registered() -> BackendChoice:
    """The registry's backends, for the parser (launchkit.core.parse.build_request)."""
    return BackendChoice(known=tuple(registry.names()), here=registry.here_name())


def default_backend(app: Application) -> str:
    """`backend` from the config layers (checked, naming the variable or file it came from), else the
    registry's default."""
    return registry.configured_name(app.config)


def has(name: str, capability: Capability) -> bool:
    """Whether the registered backend `name` has `capability` (without loading it)."""
    return capability in registry.info(name).capabilities


def _last_run_file() -> Any:
    return user_state_dir() / "last-run.json"


def remember_last_run(backend: str, run_id: str) -> None:
    """Written at submit, so that `--latest` goes to the backend of your most recent run."""
    try:
        path = _last_run_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"backend": backend, "id": run_id}))
    except OSError:
        pass  # a convenience: --latest then falls back to the configured backend


def last_run_backend() -> str | None:

    try:
        name = json.loads(_last_run_file().read_text()).get("backend")
    except (OSError, ValueError, AttributeError):
        return None
    return name if name in registry.names() else None


def backend_name(
    app: Application, backend: str | None, local: bool, run_id: str | None = None, latest: bool = False
) -> str:
    """--local/--backend, else the run id's prefix, else (for --latest) your last run's, else config."""
    if run_id and not run_id.isascii():
        _check_run_id(run_id)
    if name := registry.resolve_name(backend, local):
        return name
    if run_id:
        return backend_for_run_id(run_id)
    return (latest and last_run_backend()) or default_backend(app)


def _check_run_id(run_id: str) -> None:
    """Run ids are text: bytes from argv that are not UTF-8 name no run (and no backend can look them up)."""
    try:
        run_id.encode("utf-8")
    except UnicodeEncodeError:
        shown = run_id.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise UsageError(
            f"'{shown}' is not a run id: it is not UTF-8 text", hint="copy the id from `launchkit list`"
        ) from None


def choose(
    app: Application,
    backend: str | None,
    local: bool,
    run_id: str | None = None,
    latest: bool = False,
    *,
    workspace: str | None = None,
) -> Backend:
    """The Backend instance for these options (and run id). `workspace` (-w) needs
    Capability.workspaces; without it the backend looks in the configured workspace."""
    name = backend_name(app, backend, local, run_id, latest)
    return _load(app, name, workspace)


def choose_listing(app: Application, backend: str | None, local: bool, workspace: str | None) -> Backend:
    """`choose` for a command that lists runs: when no backend was named (--backend, --local, -w) and
    the configured one cannot be asked (no credentials), the runs of this machine's backend, said so."""
    name = backend_name(app, backend, local)
    why = None if (backend or local or workspace) else registry.info(name).missing_credentials()
    if why:
        here = registry.info(registry.here_name())
        app.info(
            f"{why}: these are the {here.title} runs ({here.summary}); "
            f"`--backend {name}` once you have credentials"
        )
        name = here.name
    return _load(app, name, workspace)


def _load(app: Application, name: str, workspace: str | None = None) -> Backend:
    b = get_backend(name, app, workspace=workspace or app.config.get("workspace"))
    require(b, Capability.workspaces, workspace=workspace)
    return b


def backend_with(app: Application, capability: Capability, workspace: str | None = None) -> Backend:
    """The backend for a command that needs `capability` (`secret`, `session`, `open`, `prune`, ...):
    the configured default when it has it, else the first registered backend that does."""
    name = default_backend(app)
    if capability not in registry.info(name).capabilities:
        name = registry.with_capability(capability).name
    return _load(app, name, workspace)


def resolve_run(
    app: Application,
    backend: str | None,
    local: bool,
    run_id: str | None,
    latest: bool,
    author: str | None = None,
    workspace: str | None = None,
    full: bool = False,
) -> tuple[Backend, RunInfo]:
    """(backend, RunInfo) for `ID` or `--latest`. `full`: the run as `get` reads it for --latest too (a
    backend's `latest` may answer from a listing, without its jobs: `why` tells the same either way)."""
    if run_id and latest:
        raise UsageError("give a run ID or --latest, not both", hint="drop one of them")
    if not run_id and not latest:
        raise UsageError("which run? give a run ID or --latest", hint="list runs with `launchkit list`")
    if workspace and run_id:
        raise UsageError("--workspace only applies with --latest", hint="drop it, or use --latest")
    b = choose(app, backend, local, run_id, latest, workspace=workspace)
    if run_id:
        return b, b.get(run_id)
    run = b.latest(author=author) if author else b.latest()
    if run is None:
        raise NotFoundError(f"there are no {b.name} runs yet", hint="start one with `launchkit run`")
    return b, (b.get(run.id) if full else run)
