"""`launchkit profiles [CLUSTER...]`: which cluster profile a job would get, what it adds, and why.

The declaration (cli/declared.py); the body is cli/profiles_body.py."""

from __future__ import annotations

import typer


def profiles(
    ctx: typer.Context,
    clusters: list[str] | None = typer.Argument(
        None, help="Cluster names, aliases or globs the job targets."
    ),
    tag: list[str] | None = typer.Option(None, "--tag", help="Required cluster tag (e.g. storage:weka)."),
    interconnect: str | None = typer.Option(None, "--interconnect", help="ib or tcpxo."),
    hostname: list[str] | None = typer.Option(None, "--hostname", help="Node hostname the job targets."),
    replicas: int = typer.Option(1, "--replicas", help="Replicas (multi-node parts apply when > 1)."),
    profile: str | None = typer.Option(None, "--profile", help="Force this profile."),
    no_profile: bool = typer.Option(False, "--no-profile", help="No profile at all."),
    skip_nccl_setup: bool = typer.Option(False, "--skip-nccl-setup", help="Leave out the NCCL setup."),
    preset: list[str] | None = typer.Option(
        None, "--preset", help="Preset to turn on (repeatable), e.g. ai2-oe or vllm."
    ),
    list_all: bool = typer.Option(False, "--list", "-l", help="List every known profile and its parts."),
    as_json: bool = typer.Option(
        False, "--json", help="JSON output: the profiles (with --list) or the selection."
    ),
) -> None:
    """Show which cluster profile a job on the given clusters gets, what it adds and why."""
