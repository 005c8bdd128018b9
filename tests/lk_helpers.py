"""Helpers for runtime and local-backend tests: wheels without a registry, entrypoint runs, run waits."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path

from conftest import run_cli
from launchkit.runtime.node.policy import ENV as POLICY_ENV
from launchkit.runtime.node.policy import Policy
from timescale import scaled

# A time since, in every form core/units.ago prints it (`4s ago`, `1m ago`, `2h ago`, `3d ago`): a busy
# machine turns a few seconds into a minute (tests/test_suite_at_load.py holds it to ago's forms).
AGO = r"\d+[smhd] ago"
# A duration in every form core/units.span prints it (`2.3s`, `41s`, `3m12s`, `9h`, `1d4h`).
SPAN = r"\d+\.\ds|\d+s|\d+[mhd](?:\d+[smh])?"

FAST_ENV = {
    "LAUNCHKIT_RETRY_DELAY": "0.05",
    "UV_OFFLINE": "1",
    "LAUNCHKIT_STOP_GRACE": "3",
    "LAUNCHKIT_LOCAL_RETRY_BACKOFF": "0",  # local retries start at once (tests/test_hostile_round4.py: the wait)
    # each test's venv is new: its bytecode tree would be filled in the background for nobody
    "LAUNCHKIT_BYTECODE_CACHE": "0",
}


def policy_env(**given: object) -> dict[str, str]:
    """The job environment's policy variable for `Policy(**given)`, as core/spec.py writes it."""
    return {POLICY_ENV: Policy(**given).encode() or ""}  # type: ignore[arg-type]


def make_wheel(
    folder: Path,
    name: str = "tinydep",
    version: str = "0.1.0",
    value: str = "42",
    data: dict[str, str] | None = None,
) -> Path:
    """A real, minimal wheel (so installs need no registry and no build backend). `data`: files it places
    outside site-packages (path in the environment, e.g. `etc/x.json` -> text)."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VALUE = {value!r}\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: launchkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        **{f"{name}-{version}.data/data/{path}": text for path, text in (data or {}).items()},
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


def uv_lock_project(repo, env: dict[str, str]) -> str:
    """Commit a virtual uv project with a uv.lock that depends on a local wheel; returns the SHA."""
    make_wheel(repo.path / "wheels")
    repo.commit(
        {
            "pyproject.toml": (
                '[project]\nname = "demo"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = ["tinydep"]\n'
                "[tool.uv]\npackage = false\n"
                '[tool.uv.sources]\ntinydep = { path = "wheels/tinydep-0.1.0-py3-none-any.whl" }\n'
            )
        },
        "project",
    )
    subprocess.run(["uv", "lock", "-q"], cwd=repo.path, check=True, timeout=120, env={**os.environ, **env})
    return repo.commit({}, "lock")


def entrypoint(
    tmp: Path,
    remote: str,
    commit: str,
    argv: list[str],
    env: Mapping[str, str | None] | None = None,
    timeout: float = 120,
    **kw,
) -> subprocess.CompletedProcess:
    """Run the runtime's entrypoint as a job's bootstrap does: bash <runtime files>/entrypoint.sh ARGV.
    A run that does not end within `timeout` (or whose output a leftover process holds open) fails
    naming what still runs (`left_running`), not with a bare timeout."""
    full = entrypoint_env(tmp, remote, commit, env)
    try:
        return subprocess.run(
            ["bash", entrypoint_path(), *argv],
            env=full,
            capture_output=True,
            text=True,
            timeout=timeout,
            **kw,
        )
    except subprocess.TimeoutExpired as e:
        left = left_running("RESULTS_DIR", full["RESULTS_DIR"])
        err = e.stderr.decode("utf-8", "replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        raise AssertionError(
            f"the entrypoint's output was still open after {e.timeout:g}s; its processes left running "
            f"(killed now):\n{left or '  none (bash itself hung)'}\n--- its stderr so far:\n{err[-3000:]}"
        ) from None


def left_running(variable: str, value: str) -> str:
    """The processes whose environment has `variable`=`value` (a job's), one line each (pid, parent,
    age, argv), parents first; each is killed."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "ppid", "environ", "cmdline", "create_time"]):
        if (p.info["environ"] or {}).get(variable) == value:
            found.append(p)
    lines = []
    for p in sorted(found, key=lambda p: p.info["create_time"]):
        age = time.time() - p.info["create_time"]
        lines.append(
            f"  pid {p.pid} (parent {p.info['ppid']}, {age:.0f}s old): {' '.join(p.info['cmdline'] or [])}"
        )
        try:
            p.kill()
        except psutil.Error:
            pass
    return "\n".join(lines)


def entrypoint_env(
    tmp: Path, remote: str, commit: str, env: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    """The environment `entrypoint` runs the job in (for a job started with Popen)."""
    full = {
        **os.environ,
        **FAST_ENV,
        "LAUNCHKIT_GIT_REMOTE": remote,
        "LAUNCHKIT_GIT_COMMIT": commit,
        "RESULTS_DIR": str(tmp / "results"),
        "LAUNCHKIT_RUNTIME_DIR": str(tmp / "runtime"),
        "LAUNCHKIT_TOOLS_DIR": str(tmp / "tools"),
        **(env or {}),
    }
    full = {k: v for k, v in full.items() if v is not None}  # None in `env`: unset it
    full.pop("VIRTUAL_ENV", None)
    if "PATH" not in (env or {}):  # like a job: not inside launchkit's venv, but with uv reachable
        from uv import find_uv_bin

        own = os.path.join(sys.prefix, "bin")
        full["PATH"] = os.pathsep.join(
            [p for p in full["PATH"].split(os.pathsep) if p != own] + [os.path.dirname(find_uv_bin())]
        )
    return full


@functools.lru_cache(maxsize=1)
def entrypoint_path() -> str:
    """The runtime's files as a job sees them (launchkit.runtime.materialise), once per process."""
    from launchkit.runtime import ENTRYPOINT_FILE, materialise

    return str(materialise(Path(tempfile.mkdtemp(prefix="lk-runtime-"))) / ENTRYPOINT_FILE)


def launched_id(stderr: str) -> str:
    m = re.search(r"launched (local-\S+)", stderr)
    assert m, stderr
    return m.group(1)


def wait_finished(run_id: str, env: dict[str, str], timeout: float = 120) -> dict:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        r = run_cli("list", "--local", "--json", "--limit", "100", env=env)
        runs = {x["id"]: x for x in json.loads(r.stdout)}
        if run_id in runs and runs[run_id]["status"] in ("succeeded", "failed", "canceled"):
            return runs[run_id]
        time.sleep(0.3)
    raise AssertionError(f"{run_id} did not finish in {timeout}s")


def supervisor_gone(rdir: Path, timeout: float = 60) -> None:
    """Until the supervisor of the local run in `rdir` has exited (it holds the run's lock until then;
    whatever it posts is posted by then). The timeout only ends a hang."""
    from launchkit.backends.local import record

    deadline = time.monotonic() + scaled(timeout)
    while record.supervisor_alive(rdir):
        assert time.monotonic() < deadline, f"the supervisor of {rdir.name} never exited"
        time.sleep(0.01)


def stop_local_run(run_id: str, env: dict[str, str]) -> None:
    """`launchkit stop` a local run (it must succeed), then wait until it is recorded finished and its
    supervisor has exited (whatever either posts is posted by then)."""
    from launchkit.backends.local.store import home

    assert run_cli("stop", run_id, "--yes", env=env, timeout=60).code == 0
    wait_finished(run_id, env)
    supervisor_gone(home() / "runs" / run_id)


def files_holding(root: Path, needle: bytes) -> list[str]:
    """The files below `root` whose bytes contain `needle`."""
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def fake_beaker_spec_env(state, exp) -> dict[str, str]:
    """The fake Beaker's experiment `exp`: its task's environment as Beaker gives it, its values and its
    secrets' values from the workspace."""
    ws = state.workspaces[exp.workspace_id]
    out = {}
    for var in exp.tasks[0].spec["envVars"]:
        out[var["name"]] = ws.secrets[var["secret"]].value.decode() if var.get("secret") else var["value"]
    return out


def processes_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line or local-run marker variable contains `marker`."""
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline", "environ", "status"]):
        if p.pid == os.getpid() or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmd = " ".join(p.info["cmdline"] or [])
        if marker in cmd or marker == (p.info["environ"] or {}).get("LAUNCHKIT_LOCAL_RUN"):
            found.append(p.pid)
    return found


def sigint_default() -> None:
    """`preexec_fn` of a process a test sends Ctrl-C: SIGINT as a terminal gives it, whatever the suite
    inherited (a shell's background job, `cmd &`, runs with SIGINT ignored, and so would its children)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_children(pid: int, names: list[str], timeout: float = 20) -> None:
    """Wait until process `pid`'s children are exactly `names` (in order): a test that looks for them must
    not race the fork. The timeout is a hang guard (scaled), not a bound."""
    import psutil

    deadline = time.monotonic() + scaled(timeout)
    seen: list[str] = []
    while time.monotonic() < deadline:
        try:
            seen = [c.name() for c in psutil.Process(pid).children()]
        except psutil.Error:
            seen = []
        if seen == names:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} has children {seen}, not {names}, after {scaled(timeout):.0f}s")


class LocalIndex:
    """A PEP 503 simple index of small local wheels, served by `python -m http.server` on 127.0.0.1.

    Every request lands in `log`, so tests and bench/ can count downloads (`downloads()`)."""

    def __init__(
        self,
        root: Path,
        names: list[str],
        version: str = "1.0.0",
        data: dict[str, dict[str, str]] | None = None,
    ):
        self.root, self.names = root, names
        files, simple = root / "files", root / "simple"
        for name in names:
            wheel = make_wheel(files, name=name, version=version, value=name, data=(data or {}).get(name))
            digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
            (simple / name).mkdir(parents=True, exist_ok=True)
            (simple / name / "index.html").write_text(
                f'<!DOCTYPE html><html><body><a href="../../files/{wheel.name}#sha256={digest}">'
                f"{wheel.name}</a></body></html>\n"
            )
        (simple / "index.html").write_text(
            "<!DOCTYPE html><html><body>"
            + "".join(f'<a href="{n}/">{n}</a>' for n in names)
            + "</body></html>\n"
        )
        self.log = root / "access.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> LocalIndex:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "0"],
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=self.log.open("w"),
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        m = re.search(r"port (\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"the index server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{m.group(1)}/simple"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def downloads(self) -> dict[str, int]:
        """Wheel file name -> how many times it was downloaded (200s; not 304 revalidations)."""
        counts: dict[str, int] = {}
        for m in re.finditer(r'"GET /files/(\S+\.whl) HTTP/[\d.]+" 200 ', self.log.read_text()):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
        return counts


_SILENT: list = []  # listening sockets that never answer, open until the test process ends


def _beaker_config_at(tmp_path: Path, port: int) -> Path:
    cfg = tmp_path / "config.yml"
    cfg.write_text(
        f"user_token: t\nagent_address: https://127.0.0.1:{port}\nrpc_address: 127.0.0.1:{port}\n"
        "default_workspace: ai2/x\n"
    )
    return cfg


def unreachable_beaker_config(tmp_path: Path) -> Path:
    """A Beaker config pointing at a loopback port that takes connections and never answers (a server
    that hangs: launchkit waits until --beaker-timeout)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    _SILENT.append(s)
    return _beaker_config_at(tmp_path, s.getsockname()[1])


def refused_beaker_config(tmp_path: Path) -> Path:
    """A Beaker config pointing at a loopback port nothing listens on (the connection is refused)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return _beaker_config_at(tmp_path, port)
