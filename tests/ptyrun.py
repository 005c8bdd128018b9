"""Run `python -m launchkit` under a pseudo-terminal, the way a person at a terminal sees it."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from timescale import scaled


def run_in_pty(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
    timeout: float = 60,
) -> tuple[int, str]:
    """stdin, stdout and stderr are one terminal; returns (exit code, everything the terminal showed)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "launchkit", *args],
        cwd=cwd,
        env={k: v for k, v in {**os.environ, "COLUMNS": "100", **(env or {})}.items() if k not in unset},
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + scaled(timeout)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.1)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # EIO: the terminal's other side closed
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        proc.kill()
        os.close(leader)
    return code, b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
