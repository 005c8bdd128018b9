"""The spec exactly as it will be submitted: `resolve` (workspace, budget, image, clusters, secrets,
groups, marker), then the workspace's budget written out, the GitHub token secret, and beaker-py's own
JSON form. Read-only: `run --dry-run` prints this, `run --save-spec` writes it, `run` sends it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import grpc
from beaker import beaker_pb2 as pb2
from beaker import exceptions as bx

from launchkit.application import Application
from launchkit.backends.beaker import resolve as rs
from launchkit.backends.beaker import unwrapped
from launchkit.backends.beaker.client import Connection
from launchkit.backends.beaker.github import Visibility, visibility
from launchkit.backends.beaker.scheduling import check_fit, room_warning, start_now
from launchkit.backends.beaker.submit import parsed_spec, with_token
from launchkit.core.contract import ENV_GIT_REMOTE, ENV_GIT_TOKEN
from launchkit.core.remoteurl import github_repo
from launchkit.core.specview import EnvVar, SpecView
from launchkit.errors import PreconditionError

GITHUB_TOKEN = "GITHUB_TOKEN"  # env var and default secret name (runtime/lib.sh reads it for github.com)
SECRETS_ADDED = "secrets added: "  # resolve's note, which the GitHub token joins


@dataclass
class Prepared:
    workspace: Any  # pb2.Workspace
    workspace_name: str
    spec: SpecView  # byte for byte what create() sends
    notes: list[str] = field(default_factory=list)
    start_now: tuple[str, ...] | None = None  # the plan's (scheduling.start_now)


def prepare(
    conn: Connection,
    spec: SpecView,
    *,
    workspace: str | None,
    auto_secrets: bool,
    app: Application,
    session: bool = False,
    clock: Callable[[], float] = time.time,
) -> Prepared:
    """`session`: for `launchkit session` (sessions-only clusters allowed); `clock`: seconds since the
    epoch (the wait a queueing job's warning implies)."""
    name = rs.workspace_name(conn, workspace)
    images = [task.beaker_image for task in spec.tasks if task.beaker_image]
    ask_ahead(conn, name, images=images, budget=spec.budget)
    if repo := _unauthenticated_github_repo(spec):
        conn.soon(*_visibility_question(repo))
    resolved = rs.resolve(
        conn,
        spec,
        workspace=name,
        gpu_types=spec.env_list(rs.ENV_GPU_TYPES),
        tags=spec.env_list(rs.ENV_TAGS),
        auto_secrets=auto_secrets,
        session=session,
    )
    out = resolved.spec
    ws = resolved.workspace
    notes = list(resolved.notes)

    warnings = check_fit(conn, out, ws)  # refuses a request no node could ever take (exit 3)
    now = start_now(conn, out, ws)  # the plan's: from what check_fit read (no call)
    for warning in warnings or [w for w in [room_warning(out, now, conn, int(clock() * 1e9))] if w]:
        app.warn(warning)
    if not out.budget:
        rs.remember_budget_id(conn, ws)  # the next launch asks for it beside the workspace
    if not out.budget and ws.budget_id:
        budget = conn.answer(*_default_budget_question(conn, ws.budget_id))
        if budget:
            out.budget = budget
    if added := github_token(conn, out, ws, _label(ws, name), auto_secrets=auto_secrets, app=app):
        i = next((i for i, n in enumerate(notes) if n.startswith(SECRETS_ADDED)), None)
        if i is None:
            notes.append(SECRETS_ADDED + added)
        else:
            notes[i] += ", " + added
    # A nonce per prepared launch (create_once finds its own experiment by it), in the spec the dry
    # run prints and --save-spec writes, so what they show is what is submitted.
    out = with_token(out, secrets.token_hex(8))
    # What create() sends is beaker-py's JSON of the parsed spec: normalise to exactly that.
    return Prepared(ws, name, SpecView(parsed_spec(out).to_json()), notes, now)


def ask_ahead(conn: Connection, name: str, *, images: Iterable[str], budget: str | None) -> None:
    """Send the look-ups of a launch into workspace `name` that do not depend on each other at once,
    before `resolve` and the checks below take their answers one after another (bench/bench_submit.py
    counts the calls in series): the workspace, each image and a named budget; beside them, by the ids
    an earlier launch from this machine remembered, the workspace's secrets and its default budget
    (else as soon as the workspace answers; a remembered id its answer contradicts is asked again by
    the right one). Each is a question `prepare` asks anyway (the same key and question,
    Connection.soon), so its answer and its error are the same. Asked once more by prepare() (no new
    call), and first by BeakerBackend.ask_ahead, before git is read and the spec built."""
    conn.soon(("workspace", name), partial(rs.fetch_workspace, conn, name))
    for image in dict.fromkeys(images):
        conn.soon(*rs.image_question(conn, image))
    if budget:
        conn.soon(*rs.budget_question(conn, budget))
    if known := rs.remembered_workspace_id(conn, name):
        conn.soon(*rs.secrets_question(conn, pb2.Workspace(id=known)))
        if not budget and (budget_id := rs.remembered_budget_id(conn, known)):
            conn.soon(*_default_budget_question(conn, budget_id))

    def after_the_workspace() -> None:
        ws = rs.get_workspace(conn, name)
        conn.soon(*rs.secrets_question(conn, ws))
        if not budget and ws.budget_id:
            conn.soon(*_default_budget_question(conn, ws.budget_id))

    conn.soon(("after the workspace", name), after_the_workspace)


def _default_budget_question(conn: Connection, budget_id: str) -> tuple[Any, Callable[[], str | None]]:
    return ("budget of", budget_id), partial(workspace_budget, conn, budget_id)


def _visibility_question(repo: str) -> tuple[Any, Callable[[], Visibility]]:
    return ("visibility", repo), partial(visibility, repo)


def _unauthenticated_github_repo(view: SpecView) -> str | None:
    """The GitHub repository whose visibility decides the job's token, unless the user gave one."""
    repo = github_repo(view.env_value(ENV_GIT_REMOTE) or "")
    if repo is None or view.has_env(GITHUB_TOKEN) or view.has_env(ENV_GIT_TOKEN):
        return None  # not GitHub, or the user passed a token (--env-secret / --git-token-secret)
    return repo


def _label(ws: Any, name: str) -> str:
    return f"{ws.owner_org.name}/{ws.name}" if ws.owner_org.name and "/" not in ws.name else name


def workspace_budget(conn: Connection, budget_id: str) -> str | None:
    """`org/name` of the workspace's default budget (what Beaker charges when the spec names none).
    beaker-py 2.8.1 has no budget getter: GetBudget goes through its client (unwrapped.py), with its
    credentials, retries and error mapping."""
    try:
        request = pb2.GetBudgetRequest(budget_id=budget_id)
        budget = unwrapped.rpc(conn.beaker.workspace, "GetBudget", pb2.GetBudgetResponse, request).budget
    except (grpc.RpcError, bx.BeakerError):
        return None  # the spec then names no budget and Beaker uses the workspace's
    full: str = budget.full_name or (f"{budget.organization_name}/{budget.name}" if budget.name else "")
    return full or None


def github_token(
    conn: Connection, view: SpecView, ws: Any, ws_label: str, *, auto_secrets: bool, app: Application
) -> str | None:
    """For a GitHub remote that is private (or whose visibility GitHub would not tell), add env
    GITHUB_TOKEN from the workspace secret `<user>_GITHUB_TOKEN` or `GITHUB_TOKEN`, as gantry does: a
    public repository's job gets no token. Without one, a private repository is refused (the job could
    not clone it); when GitHub cannot be asked and there is no token, warn and go on. Returns what was
    added, or None."""
    repo = _unauthenticated_github_repo(view)
    if repo is None:
        return None
    seen = conn.answer(*_visibility_question(repo))
    if seen.private is False:
        return None
    user = conn.me().name
    available = rs.secret_names(conn, ws)
    source = next((s for s in (f"{user}_{GITHUB_TOKEN}", GITHUB_TOKEN) if s in available), None)
    if source and auto_secrets:
        for task in view.tasks:
            task.add_env(EnvVar(GITHUB_TOKEN, secret=source))
        return GITHUB_TOKEN if source == GITHUB_TOKEN else f"{GITHUB_TOKEN} (from {source})"
    if seen.private is None:
        app.warn(
            f"could not check whether GitHub repository {repo} is private ({seen.why}); "
            "launching without a token"
        )
        return None
    if not seen.private:
        return None
    fix = (
        f"drop --no-auto-secrets or pass --git-token-secret {source}"
        if source
        else f"store a GitHub token once: `launchkit secret set {GITHUB_TOKEN} --workspace {ws_label}` "
        "(reads it from stdin)"
    )
    raise PreconditionError(
        f"GitHub repository {repo} is private (or missing) and the job gets no token to clone it", hint=fix
    )
