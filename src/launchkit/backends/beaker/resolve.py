"""Before submitting: resolve and check workspace, budget, image, clusters, secrets and groups.

Each check names the bad value and how to fix it. A copy of the spec is rewritten with resolved values.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from beaker import beaker_pb2 as pb2
from beaker import exceptions as bx

from launchkit.backends import beaker_remembered as memory
from launchkit.backends.beaker.client import Connection
from launchkit.core.contract import DESCRIPTION_MARKER, ENV_CONSTRAINT_GPU_TYPES, ENV_CONSTRAINT_TAGS
from launchkit.core.presets import ENV_PRESET_SECRETS, decode_secrets
from launchkit.core.specview import EnvVar, SpecView
from launchkit.errors import NotFoundError, PreconditionError, UsageError

MARKER = DESCRIPTION_MARKER  # in the description of every experiment launchkit creates (list recognises it)
# Cluster filters the spec carries as env vars, applied here when resolving clusters.
ENV_GPU_TYPES, ENV_TAGS = ENV_CONSTRAINT_GPU_TYPES, ENV_CONSTRAINT_TAGS


@dataclass
class Resolved:
    workspace: Any  # pb2.Workspace
    spec: SpecView
    notes: list[str] = field(default_factory=list)


def workspace_name(conn: Connection, given: str | None) -> str:
    name = given or conn.beaker.config.default_workspace
    if not name:
        raise UsageError(
            "no Beaker workspace given",
            hint="pass --workspace org/name or run `beaker config set default_workspace org/name`",
        )
    return name


def remembered_workspace_id(conn: Connection, name: str) -> str | None:
    """The id of workspace `name`, as an earlier launch from this machine found it (None: none)."""
    known = memory.load(memory.cache_dir() / memory.CACHE_FILE).get(memory.workspace_key(conn.address, name))
    return known if known and "/" not in known else None


def remembered_budget_id(conn: Connection, workspace_id: str) -> str | None:
    """The id of the workspace's default budget, as an earlier launch from this machine used it."""
    path = memory.cache_dir() / memory.CACHE_FILE
    return memory.load(path).get(memory.budget_key(conn.address, workspace_id))


def remember_budget_id(conn: Connection, ws: Any) -> None:
    """Remember `ws`'s default budget id (the next launch asks for it beside the workspace)."""
    key = memory.budget_key(conn.address, str(ws.id))
    path = memory.cache_dir() / memory.CACHE_FILE
    if memory.load(path).get(key) != (ws.budget_id or None):
        memory.save(path, {key: ws.budget_id or None})


def fetch_workspace(conn: Connection, name: str) -> Any:
    """Workspace `name`: by the id an earlier launch from this machine remembered (one GetWorkspace),
    when it still has that name; else by name (ResolveWorkspaceName, then GetWorkspace)."""
    known = remembered_workspace_id(conn, name)
    if known:
        try:
            ws = conn.beaker.workspace.get(known)
            if full_name(ws).lower() == name.lower():
                return ws
        except bx.BeakerWorkspaceNotFound:
            pass
    return conn.beaker.workspace.get(name)


def full_name(ws: Any) -> str:
    """`org/name` of a pb2.Workspace."""
    return f"{ws.owner_org.name}/{ws.name}" if ws.owner_org.name and "/" not in ws.name else str(ws.name)


def get_workspace(conn: Connection, name: str) -> Any:
    try:
        ws = conn.answer(("workspace", name), partial(fetch_workspace, conn, name))
    except bx.BeakerWorkspaceNotFound:
        raise NotFoundError(
            f"workspace {name!r} not found", hint="names are org/workspace; check --workspace"
        ) from None
    if ws.archived:
        raise PreconditionError(
            f"workspace {name!r} is archived", hint="unarchive it or pick another --workspace"
        )
    return ws


def image_id(conn: Connection, image: str) -> str:
    """The id of Beaker image `image`, asked once per launch."""
    return str(conn.answer(*image_question(conn, image)))


def image_question(conn: Connection, image: str) -> tuple[Any, Callable[[], str]]:
    """(key, question) of `image`'s id: a name's is one ResolveImageName, an id is checked with GetImage."""
    if "/" in image:
        return ("image", image), partial(conn.beaker.image.resolve_image_id, image)
    return ("image", image), lambda: str(conn.beaker.image.get(image).id)


def budget_id(conn: Connection, budget: str) -> str:
    """The id of budget `budget` (org/name), asked once per launch."""
    return str(conn.answer(*budget_question(conn, budget)))


def budget_question(conn: Connection, budget: str) -> tuple[Any, Callable[[], str]]:
    return ("budget", budget), partial(conn.beaker.workspace.resolve_budget_id, budget)


def secret_names(conn: Connection, ws: Any) -> frozenset[str]:
    """The names of workspace `ws`'s secrets, listed once per launch."""
    return frozenset(conn.answer(*secrets_question(conn, ws)))


def secrets_question(conn: Connection, ws: Any) -> tuple[Any, Callable[[], frozenset[str]]]:
    return ("secrets", ws.id), lambda: frozenset(s.name for s in conn.beaker.secret.list(workspace=ws))


def gpu_type_name(value: int) -> str:
    name = pb2.GpuType.Name(value) if value in pb2.GpuType.values() else "GPU_TYPE_UNSPECIFIED"
    return "" if name == "GPU_TYPE_UNSPECIFIED" else name.removeprefix("GPU_TYPE_").replace("_", " ")


def takes_batch_jobs(cluster: Any) -> bool:
    """Clusters whose max task timeout is explicitly 0 take no batch jobs (sessions only)."""
    return not (cluster.HasField("max_task_timeout") and cluster.max_task_timeout.ToNanoseconds() == 0)


def cluster_full_name(cluster: Any) -> str:
    return cluster.name if "/" in cluster.name else f"{cluster.organization_name}/{cluster.name}"


def node_gpu_types(conn: Connection, clusters: list[Any]) -> dict[str, list[str]]:
    """GPU types of ALL nodes of each cluster (cluster id -> sorted types), looked up concurrently."""
    if not clusters:
        return {}
    org = pb2.Organization(id=clusters[0].organization_id) if clusters[0].organization_id else None

    def one(c: Any) -> tuple[str, list[Any]]:
        return c.id, list(conn.beaker.node.list(org=org, cluster=c))

    missing = [c for c in clusters if c.id not in conn.nodes]
    if missing:
        with ThreadPoolExecutor(max_workers=min(32, len(missing))) as pool:
            conn.nodes.update(pool.map(one, missing))
    types = {c.id: {gpu_type_name(n.node_resources.gpu_type) for n in conn.nodes[c.id]} for c in clusters}
    return {cid: sorted(t for t in ts if t) for cid, ts in types.items()}


def org_clusters(conn: Connection) -> list[Any]:
    """The organization's clusters (one ListClusters per connection), with their occupancy."""
    if conn.clusters is None:
        # with each node's free GPUs (the same one call): the plan's `start_now` (scheduling.start_now)
        conn.clusters = list(conn.beaker.cluster.list(org=conn.org(), include_cluster_occupancy=True))
    return conn.clusters


def cluster_names(cluster: Any) -> list[str]:
    """Every spelling that names the cluster: org/name, org/alias, bare name, bare alias (lower case).
    Aliases are bare on Beaker (the old long names such as jupiter-cirrascale-2, fact sheet 1.2-1.4)."""
    org = cluster.organization_name
    bare = [cluster.name.split("/")[-1], *cluster.aliases]
    return [n.lower() for n in (*bare, *(f"{org}/{n}" for n in bare if org))]


def matches(cluster: Any, pattern: str, default_org: str | None) -> bool:
    """`pattern` (org/name, org/alias, name, alias, or a glob of any of them) names this cluster.
    A pattern without an org matches the default org's clusters only (as gantry does)."""
    pat = pattern.lower()
    if (
        "/" not in pat
        and default_org
        and cluster.organization_name
        and (cluster.organization_name.lower() != default_org.lower())
    ):
        return False
    return pat == cluster.id.lower() or any(fnmatch.fnmatchcase(n, pat) for n in cluster_names(cluster))


def resolve_clusters(
    conn: Connection, patterns: list[str], gpu_types: list[str], tags: list[str], *, session: bool = False
) -> list[str]:
    """Canonical `org/name` of the clusters that take batch jobs and match (a cluster whose
    max_task_timeout is 0 runs sessions only and is skipped, fact 1.7, unless for a `session`).
    Asked once per connection: `placement` then prepare() share the answer."""
    key = (tuple(patterns), tuple(gpu_types), tuple(tags), session)
    if key not in conn.placements:
        conn.placements[key] = _resolve_clusters(conn, patterns, gpu_types, tags, session=session)
    return list(conn.placements[key])


def placement(conn: Connection, view: SpecView, *, session: bool = False) -> list[str] | None:
    """The clusters the spec's tasks can land on (every task's, in order), or None without constraints."""
    gpu_types, tags = view.env_list(ENV_GPU_TYPES), view.env_list(ENV_TAGS)
    found: list[str] = []
    for task in view.tasks:
        if task.clusters or gpu_types or tags:
            found += resolve_clusters(conn, task.clusters, gpu_types, tags, session=session)
    return list(dict.fromkeys(found)) if found else None


def _resolve_clusters(
    conn: Connection, patterns: list[str], gpu_types: list[str], tags: list[str], *, session: bool
) -> list[str]:
    every = org_clusters(conn)
    clusters = [c for c in every if session or takes_batch_jobs(c)]
    default_org = conn.beaker.config.default_org
    chosen = clusters
    if patterns:
        chosen = []
        for pat in patterns:
            hits = [c for c in clusters if matches(c, pat, default_org)]
            if not hits:
                batchless = [cluster_full_name(c) for c in every if matches(c, pat, default_org)]
                if batchless:
                    raise UsageError(
                        f"--cluster {pat!r}: {', '.join(batchless)} takes no batch jobs (sessions only)",
                        hint="pick another --cluster; see `launchkit find-gpus --all`",
                    )
                known = ", ".join(sorted(cluster_full_name(c) for c in clusters)[:12]) or "none"
                raise NotFoundError(
                    f"no cluster that takes batch jobs matches {pat!r}",
                    hint=f"available: {known}; see `launchkit find-gpus --all`",
                )
            chosen += [c for c in hits if c not in chosen]
    if tags:
        chosen = [c for c in chosen if set(tags) <= set(c.tags)]
        if not chosen:
            raise PreconditionError(
                f"no matching cluster has all tags {', '.join(tags)}", hint="drop a --tag or widen --cluster"
            )
    if gpu_types:
        types = node_gpu_types(conn, chosen)
        wanted = [g.lower() for g in gpu_types]
        given = chosen
        chosen = [c for c in chosen if any(w in t.lower() for w in wanted for t in types[c.id])]
        if not chosen:  # name what the chosen ones have, and the clusters that have the type
            have = sorted({t for c in given for t in types[c.id]})
            all_types = node_gpu_types(conn, clusters)
            takers = [
                cluster_full_name(c)
                for c in clusters
                if any(w in t.lower() for w in wanted for t in all_types[c.id])
            ]
            raise PreconditionError(
                f"no matching cluster has GPU type {' or '.join(gpu_types)} "
                f"(they have {', '.join(have) or 'none'})",
                hint=f"{', '.join(sorted(takers)[:6])} would take it: pass it as --cluster"
                if takers
                else "see `launchkit find-gpus --all` for the GPU types of each cluster",
            )
    return sorted(cluster_full_name(c) for c in chosen)


def resolve(
    conn: Connection,
    spec: SpecView,
    *,
    workspace: str | None,
    gpu_types: list[str],
    tags: list[str],
    auto_secrets: bool,
    session: bool = False,
) -> Resolved:
    view = spec.copy()
    ws = get_workspace(conn, workspace_name(conn, workspace))
    out = Resolved(ws, view)
    ws_label = full_name(ws)

    # Budget: given, or the workspace's own.
    if view.budget:
        try:
            budget_id(conn, view.budget)
        except bx.BeakerBudgetNotFound:
            raise NotFoundError(
                f"budget {view.budget!r} not found", hint="names are org/budget; check --budget"
            ) from None
    elif not ws.budget_id:
        raise UsageError(
            f"no budget: workspace {ws_label} has none and --budget was not given",
            hint="pass --budget org/name",
        )

    # Images (Beaker image names -> ids, so a later re-tag cannot change what runs); once a name
    # and once a cluster filter: a 1,000-task sweep is not 1,000 lookups.
    image_ids: dict[str, str] = {}
    for task in view.tasks:
        if image := task.beaker_image:
            try:
                if image not in image_ids:
                    image_ids[image] = image_id(conn, image)
                task.beaker_image = image_ids[image]
            except bx.BeakerImageNotFound:
                raise NotFoundError(
                    f"Beaker image {image!r} not found",
                    hint="check --beaker-image (user/name or an image id)",
                ) from None

    # Clusters: names, aliases and globs (plus GPU type and tags) -> full names.
    clusters: dict[tuple[str, ...], list[str]] = {}
    for task in view.tasks:
        if task.clusters or gpu_types or tags:
            key = tuple(task.clusters)
            if key not in clusters:
                clusters[key] = resolve_clusters(conn, task.clusters, gpu_types, tags, session=session)
                out.notes.append("clusters: " + ", ".join(clusters[key]))
            task.clusters = list(clusters[key])

    # Secrets: every referenced one must exist; the presets' ones are added when present.
    available = secret_names(conn, ws)
    # Beaker resolves a spec's secret names case-insensitively (fact sheet 2; gRPC GetSecret does not)
    folded = {n.lower() for n in available}
    missing = sorted({n for n in view.secrets() if n.lower() not in folded})
    if missing:
        raise PreconditionError(
            f"secret{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found in workspace {ws_label}",
            hint=f"create {'them' if len(missing) > 1 else 'it'} with `launchkit secret set NAME --workspace "
            f"{ws_label}` (reads the value from stdin)",
        )
    wanted = decode_secrets(view.env_list(ENV_PRESET_SECRETS))
    for task in view.tasks:  # a request to this backend, answered here: not for the job
        task.remove_env(ENV_PRESET_SECRETS)
    if auto_secrets and wanted:
        user = conn.me().name
        added = []
        for task in view.tasks:
            have = {e.name for e in task.env}
            for name, secret in wanted:
                if name in have:
                    continue
                source = next((s for s in (f"{user}_{secret}", secret) if s in available), None)
                if source:
                    task.add_env(EnvVar(name, secret=source))
                    added.append(name if source == name else f"{name} (from {source})")
        if added:
            out.notes.append("secrets added: " + ", ".join(dict.fromkeys(added)))

    # Groups: names (or ids) -> ids; a missing one of yours is created at submit (as gantry, no prompt)
    if view.groups:
        view.groups = [_group_id(conn, ws, g, out.notes) for g in view.groups]

    if MARKER not in view.description:
        view.description = f"{view.description} {MARKER}".strip()
    return out


def _find_group(conn: Connection, ws: Any, ref: str) -> Any | None:
    name = ref.split("/", 1)[-1]
    for g in conn.beaker.group.list(workspace=ws, name_or_description=name):
        if ref in (g.id, g.name, g.full_name):
            return g
    try:
        return conn.beaker.group.get(ref)
    except (bx.BeakerGroupNotFound, ValueError):
        return None


def _group_id(conn: Connection, ws: Any, ref: str, notes: list[str]) -> str:
    """The group's id; a group that does not exist stays a name, to be created at submit
    (`create_groups`). Another user's `owner/NAME` that does not exist is an error, as in gantry."""
    g = _find_group(conn, ws, ref)
    if g is not None:
        return str(g.id)
    if "/" in ref and not ref.startswith(f"{conn.me().name}/"):
        raise NotFoundError(
            f"group {ref!r} not found in workspace {ws.name}", hint="check the name, or give one of yours"
        )
    notes.append(f"group {ref.split('/', 1)[-1]!r} does not exist: it will be created at submit")
    return ref


def create_groups(conn: Connection, ws: Any, spec: SpecView) -> None:
    """At submit: create the groups `resolve` left as names (in the job's workspace), ids in the spec
    (changed in place)."""
    ids = []
    for ref in spec.groups:
        g = _find_group(conn, ws, ref)
        if g is None:
            g = conn.beaker.group.create(ref.split("/", 1)[-1], workspace=ws)
        ids.append(str(g.id))
    if ids:
        spec.groups = ids
