"""`ping`: proves the hand-over from bash works (the interpreter and where the runtime was unpacked)."""

from __future__ import annotations

import os
import sys


def ping(argv: list[str]) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    print(f"launchkit_node {sys.version_info[0]}.{sys.version_info[1]} {here} {' '.join(argv)}".rstrip())
    return 0
