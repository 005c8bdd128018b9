"""`launchkit session [OPTIONS] [-- COMMAND...]`: an interactive Beaker session with run's resources.

`run`'s options and three of its own, declared from the same table (cli/run_cmd.py); the body is
cli/session_body.py, imported when it runs (cli/declared.py).
"""

from __future__ import annotations

from launchkit.cli.declared import BodyCommand
from launchkit.cli.params import PlainOption
from launchkit.cli.run_cmd import run_command
from launchkit.core.run_options import Kind

SESSION_HELP = (
    "Start an interactive Beaker session with the resources, env, mounts and secrets `run` would use.\n\n"
    "Calls the `beaker` CLI (`beaker session create`); with --dry-run, prints that command instead.\n"
    "Everything after `--` is the session's command (default: the image's shell).\n"
)


def session_command() -> BodyCommand:
    own = (
        PlainOption(
            "--port",
            kind=Kind.LIST,
            item=int,
            metavar="PORT",
            panel="Session",
            help="Expose this port (repeatable).",
        ),
        PlainOption("--detach", kind=Kind.FLAG, panel="Session", help="Start it and return."),
        PlainOption("--bare", kind=Kind.FLAG, panel="Session", help="No default home/mounts from Beaker."),
    )
    return run_command(
        "launchkit.cli.session_body:session", SESSION_HELP, own, name="session", dry_run_handler=None
    )
