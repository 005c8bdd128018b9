"""`python -m launchkit_node SUBCOMMAND ARGS...`: one entry per subcommand, imported only when called."""

from __future__ import annotations

import importlib
import os
import sys

# subcommand -> "module:function"; the function takes the remaining argv and returns an exit code.
SUBCOMMANDS = {
    "ping": "selfcheck:ping",
    "launch": "launch.launchers:main",  # the entrypoint's last step with a launcher (launchers.sh: lk_exec)
    "envstore": "environment.envstore:main",  # the env store by hand (pyenv.install links it itself)
    # the job's Python environment (pyenv.py) and the bytecode shared between jobs (bytecode.py)
    "install": "environment.pyenv:install",
    "conda-install": "environment.pyenv:conda",
    "freeze": "environment.pyenv:freeze",
    "bytecode": "environment.bytecode:bytecode",
    "bytecode-fill": "environment.bytecode:fill",
    "progress": "environment.progress:progress",  # the install step's progress lines (entrypoint.sh)
}


def main(argv: list[str] | None = None) -> int:
    """An older Python than 3.8 never gets here: boot.py refuses it first (bash starts the package so)."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in SUBCOMMANDS:
        known = ", ".join(sorted(SUBCOMMANDS))
        print(f"[launchkit] error: runtime subcommand {args[:1]} unknown (known: {known})", file=sys.stderr)
        return 100
    module, func = SUBCOMMANDS[args[0]].split(":")
    package = __package__ or "launchkit_node"
    handler = getattr(importlib.import_module("." + module, package), func)
    return int(handler(args[1:]) or 0)


if __name__ == "__main__":
    # `-m` puts the working directory (the user's checkout) first on sys.path: its csv.py or
    # subprocess.py must not stand in for the standard library's in the runtime
    if sys.path and sys.path[0] and os.path.abspath(sys.path[0]) == os.getcwd():
        del sys.path[0]
    sys.exit(main())
