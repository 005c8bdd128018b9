"""How a command gets the `Application`: `main()` puts it on the click context as `obj`."""

from __future__ import annotations

import typer

from launchkit.application import Application


def get_app(ctx: typer.Context) -> Application:
    """The invocation's Application (a default one when a command is invoked without `main()`)."""
    return ctx.ensure_object(Application)
