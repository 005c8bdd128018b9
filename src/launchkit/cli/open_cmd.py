"""`launchkit open [TARGET]`: open an experiment, workspace or cluster page (or print its URL)."""

from __future__ import annotations

import sys

import typer

from launchkit.cli.context import get_app


def open_page(
    ctx: typer.Context,
    target: str | None = typer.Argument(
        None,
        help="Experiment (id or user/name), workspace (org/name) or cluster; default: the workspace.",
    ),
    latest: bool = typer.Option(False, "--latest", "-l", help="Your newest experiment."),
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="Beaker workspace (org/name)."),
    print_only: bool = typer.Option(False, "--print", "-p", help="Only print the URL."),
) -> None:
    """Open a Beaker page in the browser; the URL is printed when there is no browser or no TTY."""
    from launchkit.backends.beaker import BeakerBackend
    from launchkit.errors import NotFoundError, UsageError

    if latest and target:
        raise UsageError("give a TARGET or --latest, not both")
    backend = BeakerBackend(get_app(ctx), workspace=workspace)
    if latest:
        run = backend.latest()
        if run is None:
            raise NotFoundError("you have no experiments yet", hint="launch one with `launchkit run`")
        url = run.url or ""
    else:
        url = backend.url_for(target)
    from launchkit.core.redact import redact_url

    url = redact_url(url)  # printed below: never a credential from a URL
    opened = False
    if not print_only and sys.stdout.isatty():
        import webbrowser

        try:
            opened = webbrowser.open(url)
        except Exception:  # noqa: BLE001 - no browser: print instead
            from launchkit.core.redact import redact_url

    url = redact_url(url)  # printed below: never a credential from a URL
    opened = False
    if not opened or not sys.stdout.isatty():
        sys.stdout.write(url + "\n")
