"""`launchkit profiles`'s body (cli/profiles_cmd.py declares it): which cluster profile a job would
get, what it adds, and why."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from launchkit.cli.context import get_app
from launchkit.cli.table import wrap
from launchkit.core.multinode import added_line
from launchkit.core.parse import build_request
from launchkit.core.presets import PRESETS
from launchkit.core.profiles import load_profiles, resolve_profiles

if TYPE_CHECKING:  # pydantic models: imported lazily at runtime to keep `--help` fast
    from launchkit.core.profiles import Profile, ProfileSelection
    from launchkit.core.request import LaunchRequest


def profiles(
    ctx: typer.Context,
    clusters: list[str] | None,
    tag: list[str] | None,
    interconnect: str | None,
    hostname: list[str] | None,
    replicas: int,
    profile: str | None,
    no_profile: bool,
    skip_nccl_setup: bool,
    preset: list[str] | None,
    list_all: bool,
    as_json: bool,
) -> None:
    """`launchkit profiles` (cli/profiles_cmd.py declares its options)."""
    config = get_app(ctx).config  # defaults (clusters, profile, ...) and [tool.launchkit.profiles]
    table = config.get("profiles") or {}
    given = {
        "cluster": clusters,
        "tag": tag,
        "interconnect": interconnect,
        "hostname": hostname,
        "replicas": replicas,
        "profile": profile,
        "no_profile": no_profile,
        "skip_nccl_setup": skip_nccl_setup,
        "preset": preset,
    }
    request = build_request(given, ["true"], config=config)
    out: list[str] = []
    if as_json:
        if list_all:
            data: object = [
                {**p.model_dump(mode="json"), "from_config": p.name in table}
                for p in load_profiles(table).values()
            ]
        else:
            sel = resolve_profiles(request, table)
            data = {
                "applied": sel.applied,
                "forced": sel.forced,
                "candidates": list(sel.candidates),
                "reasons": list(sel.reasons),
                "skipped": list(sel.skipped),
                "presets": {n: p.model_dump(mode="json") for n, p in sel.preset_parts.items()},
                "added": added_line(request, table),
            }
        typer.echo(json.dumps(data, indent=2))
        return
    if list_all:
        for p in load_profiles(table).values():
            out += _describe_profile(p, user=p.name in table)
        for pr in PRESETS.values():
            out.append(f"preset {pr.name}: {pr.description}")
            out += [f"  {item}" for item in pr.part_for(None).items()]
            for name, part in pr.by_profile.items():
                out += [f"  with profile {name}: {item}" for item in part.items()]
            out.append("")
        typer.echo(wrap(out, always=True))  # a listing to read: at the terminal's width even when piped
        return
    selection = resolve_profiles(request, table)
    out += _describe_selection(selection, request)
    out.append(added_line(request, table) or "launchkit added: nothing")
    typer.echo(wrap(out))


def _describe_profile(p: Profile, *, user: bool) -> list[str]:
    lines = [f"{p.name}{' (from pyproject.toml)' if user else ''}: {p.description or '-'}"]
    for label, values in (
        ("clusters", p.clusters),
        ("tags", p.tags),
        ("node hostnames", p.hostnames),
        ("node paths", p.detect_paths),
    ):
        if values:
            lines.append(f"  {label}: {' '.join(values)}")
    lines += _parts(p, multi=True)
    return lines + [""]


def _parts(p: Profile, *, multi: bool, spec: bool = True) -> list[str]:
    lines = []
    if spec:
        lines += [f"  env {k}={v}" for k, v in p.env.items()]
        lines += [f"  mount host {m.host_path} -> {m.mount_path}" for m in p.mounts]
        lines += [f"  mount weka {w.bucket} -> {w.mount_path}" for w in p.weka]
    lines += [f"  setup: {d}" for s in p.setup for d in s.lines(for_people=True)]
    if multi:
        lines += [
            f"  multi-node GPU setup: {d}" for s in p.multi_node_setup for d in s.lines(for_people=True)
        ]
    return lines


def _describe_selection(sel: ProfileSelection, request: LaunchRequest) -> list[str]:
    targets = [f"cluster {c}" for c in request.clusters] + [f"hostname {h}" for h in request.hostnames]
    targets += [f"tag {t}" for t in request.tags] + (
        [f"interconnect {request.interconnect}"] if request.interconnect else []
    )
    lines = [f"job: {', '.join(targets) or 'no cluster constraint'}; {request.replicas} replica(s)"]
    if sel.applied:
        lines.append(f"profile: {sel.applied}" + (" (forced)" if sel.forced else ""))
    elif sel.candidates:
        lines.append(f"profile: decided on each node among {', '.join(sel.candidates)}")
    else:
        lines.append("profile: none")
    lines += [f"  because {r}" for r in sel.reasons]
    multi = request.replicas > 1 and not request.skip_nccl_setup
    if sel.applied:
        p = sel.profiles[sel.applied]
        spec_lines = _parts(p, multi=False)
        lines += ["spec parts (in the Beaker spec):"] + (
            [ln for ln in spec_lines if not ln.startswith("  setup")] or ["  (none)"]
        )
    for name, part in sel.preset_parts.items():
        lines += [f"preset {name}:"] + ([f"  {item}" for item in part.items()] or ["  (nothing here)"])
    for name in sel.candidates:
        p = sel.profiles[name]
        if sel.forced or not p.detectable:
            when = "always"
        else:
            when = "on nodes matching " + " or ".join(
                [f"host {g}" for g in p.hostnames] + [f"{d} present" for d in p.detect_paths]
            )
        lines.append(f"in-container setup for {name} ({when}):")
        lines += _parts(p, multi=multi, spec=False) or ["  (none)"]
    lines += [f"left out: {s}" for s in sel.skipped]
    return lines
