"""The request `launchkit run`'s options give: config defaults applied, each deprecated or ineffective
option named once by its flag. The CLI's `run` (and its dry run) builds its request here, and so does
`launchkit.api.request_from_options` (the Python API's `Request` wraps it): one place decides what
the options mean. Light by design: a dry run imports this, not `launchkit.api` (whose `Run` and events
machinery it does not use; tests/test_startup.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from launchkit.application import Application
from launchkit.backends import registry
from launchkit.backends.registry import Capability
from launchkit.config import gantry_notice
from launchkit.core.parse import build_request
from launchkit.core.request import LaunchRequest
from launchkit.core.run_options import RUN_OPTIONS, BackendChoice, Kind
from launchkit.launch import backend_name


def request_from_options(
    app: Application,
    given: dict[str, Any],
    command: list[str] | None,
    extra: Sequence[str] = (),
    *,
    python: bool = False,
) -> LaunchRequest:
    """The request `run`'s command line gives (`given`: option name -> value, absent ones left out or
    None/False). Config defaults apply and each deprecated or ineffective option is named once, by its
    flag; `python`: for a Python caller (gantry's API), which names no flags, so none of those lines."""
    config = app.config
    if notice := gantry_notice(config):
        app.info(notice)
    for layer in config.layers:
        app.debug(
            f"defaults from {layer.label}"
            + (f" ({layer.path})" if layer.path else "")
            + ": "
            + ", ".join(sorted(layer.values))
        )
    given = {o.name: False if o.kind is Kind.FLAG else None for o in RUN_OPTIONS} | given
    choice = BackendChoice(known=tuple(registry.names()), here=registry.here_name())
    req = build_request({**given, "extra": list(extra)}, command, config=config, backends=choice)
    if python:
        return req
    name = backend_name(app, req)
    for opt in RUN_OPTIONS:
        if opt.deprecated and given.get(opt.name):
            app.warn(f"{opt.flag} is deprecated (gantry removed it before 3.7): {opt.deprecated}")
    if given.get("start_timeout") and not req.follow:
        app.warn(
            "--start-timeout has no effect: run does not wait for the job (add --follow, or --timeout N)"
        )
    capabilities = registry.info(name).capabilities
    if req.groups and Capability.workspaces not in capabilities:
        how = (
            Capability.this_machine.value if Capability.this_machine in capabilities else f"--backend {name}"
        )
        app.warn(
            f"--group has no effect with {how}: it names a Beaker group "
            "(for a dependency group of the project use --uv-group NAME)"
        )
    if req.preemptible is not None:
        app.warn(
            "--preemptible/--not-preemptible is deprecated by Beaker: prefer --min-runtime "
            "(0 = preemptible any time) and --no-auto-resume"
        )
    return req
