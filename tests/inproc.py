"""Run the CLI in-process (`launchkit.cli.app.main(argv)`): much faster than a subprocess."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

from conftest import Result


def _stream() -> io.TextIOWrapper:
    """A text stream with a `.buffer` (logs and follow write the job's raw bytes there)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    data = stream.buffer.getvalue()  # type: ignore[attr-defined]
    return data.decode("utf-8", "surrogateescape")


def run_main(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    from launchkit.cli.app import main

    out, err = _stream(), _stream()
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    code = 0
    try:
        if cwd is not None:
            os.chdir(cwd)
        os.environ.update(env or {})
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
    return Result(code, _text(out), _text(err))
