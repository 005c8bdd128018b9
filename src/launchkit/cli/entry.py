"""The console script and `python -m launchkit`: the CLI's start-up with Python's cyclic GC paused.

Importing Typer and building a command allocate tens of thousands of objects that live until exit;
the collections they trigger find almost nothing to free. The pause ends once the command line is
parsed (`resume_gc`, from the root callback), so a command that then runs for hours (`follow`, a
local job's supervisor) collects as usual. In-process callers of `launchkit.cli.app.main` never pause.
"""

from __future__ import annotations

import gc

_paused = False


def main() -> None:
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True
    try:
        from launchkit.cli.app import main as cli_main
    except KeyboardInterrupt:  # Ctrl-C while starting: nothing has begun, nothing to say
        raise SystemExit(130) from None
    cli_main()


def resume_gc() -> None:
    """End the start-up pause (a no-op when `main` did not pause)."""
    global _paused
    if _paused:
        _paused = False
        gc.enable()
