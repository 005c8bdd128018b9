"""Cluster profiles: named bundles of env vars, mounts and in-container setup steps, chosen per job.

Profiles are data (`BUILTIN_PROFILES`, plus the user's `[tool.launchkit.profiles.NAME]` tables), and
`resolve_profiles(request, user_profiles)` decides which apply and why. Pure: no I/O.

Two kinds of parts:
- spec parts (`env`, `mounts`, `weka`) go into the Beaker spec. They are applied only when every
  cluster the job can land on belongs to the same profile (or with `--profile NAME`).
- runtime parts (`setup`, `multi_node_setup`) run inside the container (runtime/nccl.sh). They are
  carried for every candidate profile and guarded by node detection (`hostnames`, `detect_paths`),
  so a job that can land on clusters of different families picks the right setup on each node.
  `multi_node_setup` runs only for multi-node GPU jobs (and not with `--skip-nccl-setup`).
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from launchkit.core.presets import (
    ENV_NAME,
    Model,
    PresetPart,
    SpecParts,
    apply_presets,
    refuse_reserved,
    refuse_secret,
)
from launchkit.core.request import HostMount, LaunchRequest, WekaMount
from launchkit.errors import UsageError

# Spec -> entrypoint contract (docs/profiles.md, runtime/nccl.sh).
ENV_PROFILE = "LAUNCHKIT_PROFILE_APPLIED"  # the profile whose spec parts were applied at launch
ENV_PROFILES = "LAUNCHKIT_PROFILES"  # space-separated candidates for the runtime setup, in match order
ENV_PROFILE_SETUP = "LAUNCHKIT_PROFILE_SETUP"  # the runtime program, one step per line (not built-ins')
STORED_SETUP_FILE = "profiles.txt"  # in the runtime's files: the built-ins' programs (stored_setup())

TCPXO_DIR = "/var/lib/tcpxo/lib64"  # runtime override: LAUNCHKIT_TCPXO_DIR
IB_SYSFS = "/sys/class/infiniband"  # runtime override: LAUNCHKIT_IB_SYSFS

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _single_line(value: str, what: str) -> str:
    if "\n" in value or "\r" in value:
        raise ValueError(f"{what} {value!r} must be a single line")
    return value


class Step(Model):
    """One in-container setup step. Exactly one of the fields is set; steps run in order."""

    export: dict[str, str] | None = None  # NAME = VALUE, exported as-is (no expansion)
    prepend: dict[str, str] | None = None  # NAME = PATH: PATH goes in front of $NAME (':'-joined)
    source: str | None = None  # a host/image script sourced in the entrypoint shell

    @model_validator(mode="after")
    def _one(self) -> Step:
        given = [k for k in ("export", "prepend", "source") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("a setup step needs exactly one of export, prepend or source")
        for table in (self.export, self.prepend):
            for name, value in (table or {}).items():
                if not ENV_NAME.match(name):
                    raise ValueError(f"{name!r} is not a valid environment variable name")
                refuse_reserved(name)
                refuse_secret(name, value)
                _single_line(value, name)
        if self.source is not None:
            _single_line(self.source, "source")
        return self

    def lines(self, *, for_people: bool = False) -> list[str]:
        """The step in the runtime program's syntax (runtime/nccl.sh), or worded for `launchkit profiles`."""
        if self.export is not None:
            return [f"export {k}={v}" for k, v in self.export.items()]
        if self.prepend is not None:
            return [
                f"prepend {v} to ${k}" if for_people else f"prepend {k} {v}" for k, v in self.prepend.items()
            ]
        return [f"source {self.source}"]


class Profile(SpecParts):
    """A named cluster profile (built in, or from `[tool.launchkit.profiles.NAME]`)."""

    name: str
    description: str = ""
    # selection at launch time
    clusters: list[str] = []  # cluster names, aliases or globs ("ai2/jupiter", "ai2/jupiter-*")
    tags: list[str] = []  # cluster tags that imply this profile ("interconnect:ib", "storage:weka")
    # node detection at runtime (also matched against --hostname at launch time)
    hostnames: list[str] = []  # node hostname globs ("jupiter*")
    detect_paths: list[str] = []  # a node belongs if one exists (and is not an empty directory)
    # spec parts: env, mounts, weka (SpecParts); runtime parts:
    setup: list[Step] = []
    multi_node_setup: list[Step] = []
    runtime_summary: str = ""  # the runtime parts in a few words (the `launchkit added:` line)
    presets: list[str] = []  # presets (core/presets.py) this profile turns on: user tables only
    disabled: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"profile name {v!r} may only use letters, digits, '.', '_' and '-'")
        return v

    @field_validator("hostnames", "detect_paths", "clusters", "tags")
    @classmethod
    def _words(cls, v: list[str]) -> list[str]:
        for item in v:
            if not item or any(c.isspace() for c in item):
                raise ValueError(f"{item!r} must be a non-empty word without spaces")
        return v

    @property
    def has_runtime_parts(self) -> bool:
        return bool(self.setup or self.multi_node_setup)

    @property
    def detectable(self) -> bool:
        return bool(self.hostnames or self.detect_paths)


_WEKA_CLUSTERS = ("jupiter", "titan", "ceres", "holmes", "saturn", "neptune", "triton", "rhea", "prometheus")

BUILTIN_PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="ai2-weka",
            description="AI2 Weka clusters; InfiniBand NCCL settings for multi-node GPU jobs "
            "(team caches and buckets: --preset ai2-oe)",
            clusters=[f"ai2/{c}*" for c in _WEKA_CLUSTERS],
            tags=["storage:weka", "interconnect:ib"],
            hostnames=[f"{c}*" for c in ("jupiter", "titan", "ceres", "holmes")],
            detect_paths=[IB_SYSFS],
            runtime_summary="NCCL InfiniBand setup for multi-node",
            multi_node_setup=[Step(export={"NCCL_SOCKET_IFNAME": "ib", "NCCL_IB_HCA": "^=mlx5_bond_0"})],
        ),
        # GPUDirect-TCPXO on GCP (A3 Mega). Keyed by the cluster tag and by the host's TCPXO directory,
        # not by a cluster name: ai2/augusta, the first such cluster, was decommissioned in March 2026.
        # No spec parts: caches and mounts differ per GCP cluster (a user table can add them).
        Profile(
            name="gcp-tcpxo",
            description="GCP clusters with GPUDirect-TCPXO (tag interconnect:tcpxo); host NCCL profile",
            tags=["interconnect:tcpxo"],
            detect_paths=[TCPXO_DIR],
            runtime_summary="GPUDirect-TCPXO NCCL setup for multi-node",
            multi_node_setup=[
                Step(export={"NCCL_LIB_DIR": TCPXO_DIR}),
                Step(prepend={"LD_LIBRARY_PATH": TCPXO_DIR}),
                Step(source=f"{TCPXO_DIR}/nccl-env-profile.sh"),
                Step(
                    export={  # LL128 overrides, after the host profile
                        "NCCL_PROTO": "Simple,LL128",
                        "NCCL_TUNER_CONFIG_PATH": f"{TCPXO_DIR}/a3plus_tuner_config_ll128.textproto",
                        "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": (
                            f"{TCPXO_DIR}/a3plus_guest_config_ll128.textproto"
                        ),
                    }
                ),
            ],
        ),
        Profile(name="generic", description="Any other cluster: nothing cluster-specific"),
    )
}


def load_profiles(user_profiles: dict[str, Any] | None) -> dict[str, Profile]:
    """Built-ins overlaid with the user's `[tool.launchkit.profiles]` table.

    A user table with a built-in's name overrides only the fields it sets; `disabled = true` turns a
    profile off. Raises UsageError naming the bad field.
    """
    profiles = dict(BUILTIN_PROFILES)
    for name, table in (user_profiles or {}).items():
        where = f"[tool.launchkit.profiles.{name}]"
        if not isinstance(table, dict):
            raise UsageError(f"{where} must be a table", hint='e.g. env = {HF_HOME = "/data/hf"}')
        base = profiles[name].model_dump(exclude_unset=True) if name in profiles else {}
        try:
            profiles[name] = Profile(**{**base, **table, "name": name})
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"])
            raise UsageError(
                f"{where} {loc}: {err['msg'].removeprefix('Value error, ')}".replace(" :", ":"),
                hint="see docs/profiles.md",
            ) from None
    return {n: p for n, p in profiles.items() if not p.disabled}


class ProfileSelection(Model):
    """What `resolve_profiles` decided, with the reasons (shown by `launchkit profiles`)."""

    applied: str | None = None  # the profile whose spec parts are in the spec
    candidates: list[str] = []  # profiles whose runtime parts ride along (node detection picks one)
    forced: bool = False  # --profile: runtime parts apply without node detection
    reasons: list[str] = []
    skipped: list[str] = []  # parts left out, and why
    env: dict[str, str] = {}
    mounts: list[HostMount] = []
    weka: list[WekaMount] = []
    setup_program: str = ""  # the runtime program for the candidates
    stored: bool = False  # setup_program is what the node rebuilds from stored_setup() (not in the spec)
    presets: list[str] = []  # the applied profile's presets, then --preset/config ones
    preset_parts: dict[str, PresetPart] = {}  # preset name -> what it adds to this job
    profiles: dict[str, Profile] = Field(default_factory=dict, exclude=True)

    @property
    def preset(self) -> PresetPart:
        """Everything the presets add, merged in order (a later preset wins)."""
        out = PresetPart()
        for part in self.preset_parts.values():
            out = out.plus(part)
        return out

    @property
    def preset_env(self) -> dict[str, str]:
        return self.preset.env

    def spec_env(self) -> list[tuple[str, str]]:
        """Env vars for the spec: the applied profile's env, the presets' env, then the runtime contract."""
        merged = {**self.env, **self.preset.env}
        out = list(merged.items())
        if self.applied:
            out.append((ENV_PROFILE, self.applied))
        if self.setup_program:
            out.append((ENV_PROFILES, " ".join(self.candidates)))
            if not self.stored:  # built-ins' programs travel once, in the runtime's files
                out.append((ENV_PROFILE_SETUP, self.setup_program))
        return out

    def job_parts(self) -> dict[str, Any]:
        """What the selection puts into the job, without the reasons: equal parts, equal specs."""
        return self.model_dump(exclude={"reasons", "skipped"})

    def runtime_summary(self) -> str:
        """The runtime setup that rides along, in a few words ('' when none)."""
        if not self.setup_program:
            return ""
        words = [self.profiles[n].runtime_summary or "in-container setup" for n in self.candidates]
        return " or ".join(dict.fromkeys(words))


def _cluster_matches(requested: str, pattern: str) -> bool:
    """`requested` (name, alias or glob; bare names ignore the org) vs a profile's cluster pattern."""
    r, p = requested.lower(), pattern.lower()
    if "/" not in r:
        p = p.split("/", 1)[-1]
    return fnmatchcase(r, p) or fnmatchcase(p, r)


def _host_matches(hostname: str, profile: Profile) -> bool:
    return any(fnmatchcase(hostname.lower(), g.lower()) for g in profile.hostnames)


def job_tags(request: LaunchRequest) -> list[str]:
    """The cluster tags the request asks for: --tag plus the --interconnect tag."""
    return list(request.tags) + ([f"interconnect:{request.interconnect}"] if request.interconnect else [])


def setup_program(profiles: list[Profile], *, forced: bool, multi_node: bool) -> str:
    """The runtime program read by `lk_cluster_setup` (runtime/nccl.sh), one directive per line:

        profile NAME
        match always | match host GLOB | match path PATH   (any match selects the profile)
        always export NAME=VALUE | always prepend NAME PATH | always source PATH
        multi  export ...        (multi-node GPU jobs only; skipped by --skip-nccl-setup)

    `match always` is used with --profile, or when the profile has no detection rules. Multi-node
    steps are left out of single-replica jobs.
    """
    lines: list[str] = []
    for p in profiles:
        phases = [("always", p.setup)] + ([("multi", p.multi_node_setup)] if multi_node else [])
        if not any(steps for _, steps in phases):
            continue
        lines.append(f"profile {p.name}")
        if forced or not p.detectable:
            lines.append("match always")
        else:
            lines += [f"match host {g}" for g in p.hostnames] + [f"match path {d}" for d in p.detect_paths]
        for phase, steps in phases:
            lines += [f"{phase} {line}" for step in steps for line in step.lines()]
    return "\n".join(lines)


def stored_setup() -> str:
    """The built-in profiles' runtime programs, every phase, as the runtime's files carry them
    (STORED_SETUP_FILE): a task names its candidates (LAUNCHKIT_PROFILES) and the node takes their
    blocks from here (runtime/nccl.sh), when that gives exactly the task's program (`_stored`)."""
    return setup_program(
        [p for p in BUILTIN_PROFILES.values() if p.has_runtime_parts], forced=False, multi_node=True
    )


def _stored(candidates: list[Profile], *, forced: bool, multi_node: bool) -> bool:
    """Whether the candidates' program is their blocks of `stored_setup()`: built-ins whose runtime
    parts a user table left as they are, detected on the node (not --profile's `match always`), and
    none of their steps left out (`multi` ones on a single replica)."""
    if forced or not candidates:
        return False
    for p in candidates:
        builtin = BUILTIN_PROFILES.get(p.name)
        block = setup_program([builtin], forced=False, multi_node=True) if builtin else ""
        if not block or setup_program([p], forced=False, multi_node=multi_node) != block:
            return False
    return True


def resolve_profiles(request: LaunchRequest, user_profiles: dict[str, Any] | None = None) -> ProfileSelection:
    """Decide which profile parts a job gets, from the clusters/tags/hostnames it targets, plus the
    presets asked for (`--preset`, config, a command) or turned on by the applied profile's table."""
    selection = _select_profiles(request, user_profiles)
    asked: list[tuple[str, str]] = []
    if selection.applied:
        where = f"profile {selection.applied}: preset"
        asked = [
            (n, where) for n in selection.profiles[selection.applied].presets if n not in request.presets
        ]
    asked += [(n, "--preset") for n in request.presets]  # --preset wins over the profile's
    if not asked:
        return selection
    applied = apply_presets(asked, selection.applied)
    names = [n for n, _ in asked]
    return selection.model_copy(
        update={
            "presets": names,
            "preset_parts": applied.parts,
            "skipped": [*selection.skipped, *applied.skipped],
            "reasons": [*selection.reasons, "presets: " + ", ".join(names)],
        }
    )


def _select_profiles(request: LaunchRequest, user_profiles: dict[str, Any] | None) -> ProfileSelection:
    profiles = load_profiles(user_profiles)
    if request.no_profile:
        return ProfileSelection(reasons=["--no-profile: no cluster profile"], profiles=profiles)
    if request.profile:
        if request.profile not in profiles:
            raise UsageError(
                f"unknown profile {request.profile!r}",
                hint="known: " + ", ".join(sorted(profiles)) + "; see `launchkit profiles --list`",
            )
        return _full(
            profiles[request.profile], [f"--profile {request.profile}"], profiles, request, forced=True
        )

    named = [p for p in profiles.values() if p.clusters or p.tags or p.detectable]
    by_tag = [p for p in named if set(p.tags) & set(job_tags(request))]
    targets: dict[str, list[Profile]] = {}
    for c in request.placed_clusters or request.clusters:  # what the backend resolved, when it did
        targets[f"cluster {c}"] = [p for p in named if any(_cluster_matches(c, pat) for pat in p.clusters)]
    for h in request.hostnames:
        targets[f"hostname {h}"] = [p for p in named if _host_matches(h, p)]
    if by_tag and targets:  # tags narrow where the job can land
        narrowed = {t: [p for p in ps if p in by_tag] for t, ps in targets.items()}
        targets = {t: ps for t, ps in narrowed.items() if ps}
    tag_reason = [
        f"tag {t} -> {', '.join(p.name for p in by_tag if t in p.tags)}"
        for t in job_tags(request)
        if any(t in p.tags for p in by_tag)
    ]
    if not targets and by_tag:
        if len(by_tag) == 1:
            return _full(by_tag[0], tag_reason, profiles, request)
        return _mixed(by_tag, tag_reason + ["tags select several profiles"], profiles, request)
    if not targets:
        detectable = [p for p in named if p.detectable and p.has_runtime_parts]
        return _mixed(
            detectable,
            [
                "no cluster constraint: the node decides at runtime ("
                + ", ".join(_detect_text(p) for p in detectable)
                + ")"
            ],
            profiles,
            request,
        )
    reasons = [f"{t} -> {', '.join(p.name for p in ps) or 'generic'}" for t, ps in targets.items()]
    families = {tuple(p.name for p in ps) for ps in targets.values()}
    if len(families) == 1 and len(next(iter(families))) == 1:
        return _full(next(iter(targets.values()))[0], tag_reason + reasons, profiles, request)
    seen: dict[str, Profile] = {}
    for ps in targets.values():
        for p in ps:
            seen.setdefault(p.name, p)
    why = ["targets span several families"] if len(seen) > 1 else []
    if any(not ps for ps in targets.values()):
        # A cluster no profile names (say a new GCP cluster): profiles keyed only by tags and node
        # detection (gcp-tcpxo) ride along, and the node decides at runtime.
        node_decides = [p for p in named if not p.clusters and p.detectable and p.has_runtime_parts]
        for p in node_decides:
            seen.setdefault(p.name, p)
        if node_decides:
            why.append(
                "the node decides for other clusters (" + ", ".join(map(_detect_text, node_decides)) + ")"
            )
    return _mixed(list(seen.values()), tag_reason + reasons + why, profiles, request)


def wants_placement(request: LaunchRequest) -> bool:
    """Whether the profile follows where the backend places the job: cluster constraints to resolve,
    and neither --profile, --no-profile nor --hostname deciding it."""
    constrained = request.clusters or request.gpu_types or job_tags(request)
    return bool(constrained) and not (request.profile or request.no_profile or request.hostnames)


def assumed_line(
    request: LaunchRequest,
    user_profiles: dict[str, Any] | None = None,
    selection: ProfileSelection | None = None,
) -> str:
    """For a spec built without the backend (offline): the profile it assumed, in one line."""
    sel = selection or resolve_profiles(request, user_profiles)
    name = sel.applied or (
        f"none (chosen on the node among {', '.join(sel.candidates)})" if sel.candidates else "none"
    )
    line = f"profile assumed: {name}"
    if wants_placement(request):
        asked = [f"--cluster {c}" for c in request.clusters] + [f"--gpu-type {g}" for g in request.gpu_types]
        asked += [f"tag {t}" for t in job_tags(request)]
        line += f" (from {', '.join(asked)}; at submit it follows the clusters these resolve to)"
    elif sel.reasons:
        line += f" ({sel.reasons[0]})"
    return line


def _detect_text(p: Profile) -> str:
    return f"{p.name}: " + " or ".join(
        [f"host {g}" for g in p.hostnames] + [f"{d} present" for d in p.detect_paths]
    )


def _full(
    p: Profile,
    reasons: list[str],
    profiles: dict[str, Profile],
    request: LaunchRequest,
    *,
    forced: bool = False,
) -> ProfileSelection:
    program = setup_program([p], forced=forced, multi_node=request.replicas > 1)
    return ProfileSelection(
        applied=p.name,
        candidates=[p.name] if program else [],
        forced=forced,
        reasons=reasons,
        env=dict(p.env),
        mounts=list(p.mounts),
        weka=list(p.weka),
        setup_program=program,
        stored=bool(program) and _stored([p], forced=forced, multi_node=request.replicas > 1),
        skipped=_skipped_multi([p], request),
        profiles=profiles,
    )


def _mixed(
    candidates: list[Profile], reasons: list[str], profiles: dict[str, Profile], request: LaunchRequest
) -> ProfileSelection:
    multi = request.replicas > 1
    runtime = [p for p in candidates if p.setup or (multi and p.multi_node_setup)]
    skipped = [
        f"{p.name}: env and mounts not applied (the job may land on another family)"
        for p in candidates
        if p.env or p.mounts or p.weka
    ]
    return ProfileSelection(
        candidates=[p.name for p in runtime],
        reasons=reasons,
        skipped=skipped + _skipped_multi(candidates, request),
        setup_program=setup_program(runtime, forced=False, multi_node=multi),
        stored=_stored(runtime, forced=False, multi_node=multi),
        profiles=profiles,
    )


def _skipped_multi(candidates: list[Profile], request: LaunchRequest) -> list[str]:
    if request.replicas > 1:
        return [
            f"{p.name}: multi-node setup skipped (--skip-nccl-setup)"
            for p in candidates
            if p.multi_node_setup and request.skip_nccl_setup
        ]
    return [f"{p.name}: multi-node setup not needed (1 replica)" for p in candidates if p.multi_node_setup]
