"""The console script and `python -m launchkit`: the CLI, with Ctrl-C while it is still being imported
ending quietly (exit 130, nothing has begun) instead of with a traceback."""

from __future__ import annotations


def main() -> None:
    try:
        from launchkit.cli.app import main as cli_main
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    cli_main()
