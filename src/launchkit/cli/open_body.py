"""`launchkit open`'s body (cli/open_cmd.py declares it): open Beaker pages (experiment, workspace,
cluster, image, dataset, group), or print their URLs."""

from __future__ import annotations

import sys
import webbrowser

import typer

from launchkit.application import Application
from launchkit.backends import Capability, page_links, registry
from launchkit.cli.backend_choice import backend_with, choose, has, last_run_backend
from launchkit.cli.context import get_app
from launchkit.core.redact import redact_url
from launchkit.errors import NotFoundError, PreconditionError, UsageError


def open_page(
    ctx: typer.Context,
    targets: list[str] | None,
    latest: bool,
    workspace: str | None,
    print_only: bool,
) -> None:
    """`launchkit open` (cli/open_cmd.py declares its options)."""
    if latest and targets:
        raise UsageError("give TARGETs or --latest, not both")
    app = get_app(ctx)
    if latest and not workspace and (name := last_run_backend()) and not has(name, Capability.pages):
        _no_page(app, name)  # your latest run is of a backend without pages: said without asking Beaker
    backend = page_links(backend_with(app, Capability.pages, workspace))
    if latest:
        run = backend.latest()
        if run is None:
            raise NotFoundError("you have no experiments yet", hint="launch one with `launchkit run`")
        urls = [run.url or ""]
    else:
        wanted: list[str | None] = list(targets) if targets else [None]  # None: the workspace
        urls = [backend.url_for(t) for t in wanted]  # all resolved before any opens
    for url in urls:
        _open(url, print_only)


def _no_page(app: Application, name: str) -> None:
    info = registry.info(name)
    run = choose(app, name, False, latest=True).latest()
    if run is not None:
        raise PreconditionError(
            f"your latest run, {run.id}, is a {info.title} run ({info.summary}): it has no web page",
            hint=f"`launchkit logs {run.id}` prints its output, `launchkit results {run.id} -o DIR` copies "
            "its results; `launchkit open` without --latest opens your Beaker workspace",
        )


def _open(url: str, print_only: bool) -> None:
    url = redact_url(url)  # printed below: never a credential from a URL
    opened = False
    if not print_only and sys.stdout.isatty():
        try:
            opened = webbrowser.open(url)
        except Exception:  # noqa: BLE001 - no browser: print instead
            opened = False
    if not opened or not sys.stdout.isatty():
        sys.stdout.write(url + "\n")
