# How bash starts the runtime (lib.sh: lk_node): `python -s launchkit_node/boot.py SUBCOMMAND ARGS...`.
# In syntax every Python reads, 2.7 included (no f-strings, annotations or __future__ import, nothing
# else imported first): a Python older than the package's syntax (3.8; core/parse.py MIN_JOB_PYTHON) is
# refused here in one line before the package is imported (on 3.6 its first line is a SyntaxError, with a
# traceback). Then the package runs as `python -m launchkit_node` would run it.
import sys

if sys.version_info[:2] < (3, 8):  # noqa: UP036 - the check is the point: any Python runs this
    sys.stderr.write(
        "[launchkit] error: the job's Python is %s (%s); launchkit's runtime needs 3.8 or newer:"  # noqa: UP031
        " pass --python-version 3.12, or use an image with a newer Python\n"
        % (".".join(str(n) for n in sys.version_info[:3]), sys.executable)
    )
    sys.exit(106)
# A script's own folder (this package's) is first on sys.path: nothing is imported from there, nor from
# the working directory (the checkout), which `-c` or `-m` would have put there.
del sys.path[0]

import runpy  # noqa: E402 - after the version check, as everything the package needs

runpy.run_module("launchkit_node", run_name="__main__", alter_sys=True)
