"""Prints which environment the job runs in (a conda env: CONDA_PREFIX is set and is sys.prefix)."""

import os
import sys

print(f"python {sys.version.split()[0]} at {sys.prefix}")
print(f"CONDA_PREFIX={os.environ.get('CONDA_PREFIX', '(not set)')}")
