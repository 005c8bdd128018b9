"""The job's Python environment (docs/runtime.md "Python environment"): what to install from the
checkout (plan.py, which the launch-time preflight reads too), installing it (pyenv.py) and its caches
in uv's cache directory: the env store (envstore.py), the project's stored build (projectbuild.py) and
the bytecode shared between jobs (bytecode.py); each step's log (steplog.py)."""
