"""Record what open-instruct's real, unmodified `mason.py` does with each line of `lines.jsonl`.

    uv run python tests/data/mason/record.py --open-instruct /path/to/open-instruct [--python PY]
        [--only ID ...] [--out DIR]

For every line (tests/mason_reference.py: `MasonLine`) this runs `PY OPEN_INSTRUCT/mason.py ARGV...`
twice, with the open-instruct checkout as the working directory (as its scripts do):

1. **As an Ai2 user**, against an in-process fake Beaker (tests/fakebeaker) that knows every cluster,
   workspace, budget, image, secret and dataset of the corpus (`build_fake_state`), as user
   `mason_reference.WHOAMI`. The experiment mason creates is read back from the fake's state (the JSON
   spec it POSTed) and written to `OUT/specs/ID.yaml` as `{recorded: {workspace, author}, spec: ...}`.
   `stdin` of the line is typed at mason's y/n prompt; without it stdin is empty (the prompt fails).
2. **As an external user** (no `~/.beaker/config.yml`, no `BEAKER_TOKEN`): mason prints the commands
   it would run and exits; those commands are kept.

`OUT/results.jsonl` gets one row per line: `id`, `exit_code`, `accepted` (a spec was created),
`prompted` (mason asked the interconnect y/n question), `workspace`, `cache_commands` (see below),
`error` and `output_tail` when mason refused the line, and `external` (`exit_code`, `commands`).

What is stubbed, in a scratch directory put first on PYTHONPATH/PATH (mason.py itself is never edited):
- `transformers` (only `transformers.utils.hub`, imported by `open_instruct/launch_utils.py` for GCP
  model staging, which mason.py at this commit never calls): functions that raise if called.
- `backoff`, only when PY cannot import the real one (open-instruct's own dependency): a pass-through
  `on_exception`. It only retries `requests.exceptions.Timeout`, which the fake never causes.
- `python` on PATH: mason's automatic dataset cache runs `python <training script> ... --cache_dataset_only`
  on the launching machine (it needs open-instruct's whole environment, models and datasets). The stub
  records the command and exits 0 printing nothing, which is what mason sees when there is nothing to
  report; mason goes on exactly as after a successful cache run. The recorded argv (without the leading
  `python`) is `cache_commands`; lines with `--no_auto_dataset_cache` have none.

The launching directory and the launching PATH, which mason copies into non-pure-docker specs
(`cd DIR && ...`, env PATH), are replaced by `{LAUNCH_DIR}` and `{LAUNCH_PATH}`. WANDB_* and RUN_NAME
are removed from the launching environment unless a line's `launch_env` sets them. HTTP(S) proxies point
at a closed loopback port, so beaker-py's PyPI version check fails at once and nothing leaves the machine.

PY defaults to this interpreter; it needs beaker-py (2.8.1 here; open-instruct asks >=2.5.7), requests
and rich. The open-instruct commit is read with git when OPEN_INSTRUCT is a git checkout, and written
to `OUT/recording.json` with the interpreter's beaker-py version and the stubs used.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import yaml

import mason_reference as mr

_TRANSFORMERS_HUB = '''"""Stub for recording mason.py: launch_utils imports this for GCP model staging only."""


def try_to_load_from_cache(*args, **kwargs):
    raise NotImplementedError("transformers is stubbed for recording mason.py")


def extract_commit_hash(*args, **kwargs):
    raise NotImplementedError("transformers is stubbed for recording mason.py")
'''

_BACKOFF = '''"""Stub for recording mason.py: a pass-through on_exception (the fake never times out)."""


def expo(*args, **kwargs):
    yield 0


def on_exception(*args, **kwargs):
    return lambda fn: fn
'''

_PYTHON = """#!/bin/sh
# Stub for recording mason.py: its automatic dataset cache step runs `python ... --cache_dataset_only`.
exec "$MASON_REF_REAL_PYTHON" -c 'import json, os, sys
with open(os.environ["MASON_REF_CACHE_LOG"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")' "$@"
"""

PROXY = "http://127.0.0.1:9"
_LOG_TIME = re.compile(r"^\[\d{2}:\d{2}:\d{2}\] ?")


def make_stubs(scratch: Path, python: str) -> list[str]:
    stubs = ["transformers.utils.hub", "python (dataset cache command)"]
    hub = scratch / "pylib" / "transformers" / "utils"
    hub.mkdir(parents=True)
    (hub.parent / "__init__.py").write_text("")
    (hub / "__init__.py").write_text("")
    (hub / "hub.py").write_text(_TRANSFORMERS_HUB)
    probe = subprocess.run([python, "-c", "import backoff"], capture_output=True, timeout=60, check=False)
    if probe.returncode != 0:
        (scratch / "pylib" / "backoff.py").write_text(_BACKOFF)
        stubs.append("backoff")
    bin_dir = scratch / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(_PYTHON)
    (bin_dir / "python").chmod(0o755)
    return stubs


def base_env(scratch: Path, python: str, line: mr.MasonLine, home: Path) -> dict[str, str]:
    env = {
        "PATH": f"{scratch / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "PYTHONPATH": str(scratch / "pylib"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "LC_ALL": "C.UTF-8",
        "COLUMNS": "120",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "HTTP_PROXY": PROXY,
        "HTTPS_PROXY": PROXY,
        "http_proxy": PROXY,
        "https_proxy": PROXY,
        "MASON_REF_REAL_PYTHON": python,
        "MASON_REF_CACHE_LOG": str(scratch / f"cache-{line.id}.jsonl"),
    }
    env.update(line.launch_env)
    return env


def normalise(text: str, launch_dir: str, launch_path: str) -> str:
    return text.replace(launch_path, mr.LAUNCH_PATH).replace(launch_dir, mr.LAUNCH_DIR)


def printed_commands(stdout: str) -> list[str]:
    """The commands mason prints: each `print(full_command)` follows its "Full command" log line."""
    lines = stdout.splitlines()
    return [lines[i + 1] for i, t in enumerate(lines[:-1]) if "Full command" in t]


def run_mason(
    oi: Path, python: str, line: mr.MasonLine, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [python, str(oi / "mason.py"), *line.argv],
        cwd=oi,
        env=env,
        input=line.stdin or "",
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def record_line(
    fake, oi: Path, python: str, scratch: Path, line: mr.MasonLine, timeout: float
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    home = scratch / f"home-{line.id}"
    home.mkdir()
    env = base_env(scratch, python, line, home)
    launch_dir, launch_path = str(oi), env["PATH"]
    norm = lambda s: normalise(s, launch_dir, launch_path)
    cache_log = Path(env["MASON_REF_CACHE_LOG"])

    before = set(fake.state.experiments)
    internal_env = {**env, **fake.env_for(mr.WHOAMI, workspace=mr.DEFAULT_WORKSPACE)}
    r = run_mason(oi, python, line, internal_env, timeout)
    new = [e for k, e in fake.state.experiments.items() if k not in before]
    cache = [json.loads(t) for t in cache_log.read_text().splitlines()] if cache_log.exists() else []
    cache_log.unlink(missing_ok=True)
    result: dict[str, Any] = {
        "id": line.id,
        "exit_code": r.returncode,
        "accepted": bool(new),
        "prompted": "Interconnect clusters are required for multi-node jobs" in r.stdout + r.stderr,
        "cache_commands": [[norm(a) for a in c] for c in cache],
    }
    spec_doc = None
    if new:
        exp = new[0]
        ws = fake.state.workspaces[exp.workspace_id]
        result["workspace"] = fake.state.workspace_full_name(ws)
        spec = json.loads(norm(json.dumps(exp.spec)))
        spec_doc = {
            "recorded": {"workspace": result["workspace"], "author": fake.state.users[exp.author_id].name},
            "spec": spec,
        }
    else:
        err = [t for t in r.stderr.splitlines() if t.strip()]
        result["error"] = norm(err[-1]) if err else ""
        out = [_LOG_TIME.sub("", norm(t)).rstrip() for t in r.stdout.splitlines() if t.strip()]
        result["output_tail"] = out[-8:]

    ext_env = dict(env)  # no BEAKER_TOKEN, no ~/.beaker/config.yml: mason's external-user path
    x = run_mason(oi, python, line, ext_env, timeout)
    cache_log.unlink(missing_ok=True)
    result["external"] = {
        "exit_code": x.returncode,
        "commands": [norm(c) for c in printed_commands(x.stdout)],
    }
    if x.returncode != 0:
        err = [t for t in x.stderr.splitlines() if t.strip()]
        result["external"]["error"] = norm(err[-1]) if err else ""
    return result, spec_doc


def git_commit(oi: Path) -> str | None:
    r = subprocess.run(
        ["git", "-C", str(oi), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30, check=False
    )
    return r.stdout.strip() if r.returncode == 0 else None


def record(
    oi: Path,
    out: Path,
    *,
    python: str = sys.executable,
    only: list[str] | None = None,
    timeout: float = 120,
    commit: str | None = None,
) -> list[dict[str, Any]]:
    """Record `only` (default: all) lines into `out` (results.jsonl, specs/, recording.json)."""
    from fakebeaker import FakeBeaker

    lines = mr.load_lines()
    chosen = [ln for ln in lines if not only or ln.id in only]
    if only and len(chosen) != len(set(only)):
        raise SystemExit(f"unknown line ids: {sorted(set(only) - {ln.id for ln in chosen})}")
    (out / "specs").mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="mason-record-") as tmp:
        scratch = Path(tmp)
        stubs = make_stubs(scratch, python)
        state = mr.build_fake_state(lines)
        with FakeBeaker(state, default_user=mr.WHOAMI, default_workspace=mr.DEFAULT_WORKSPACE) as fake:
            for line in chosen:
                result, spec_doc = record_line(fake, oi, python, scratch, line, timeout)
                results.append(result)
                spec_file = out / "specs" / f"{line.id}.yaml"
                if spec_doc is not None:
                    spec_file.write_text(
                        yaml.safe_dump(spec_doc, sort_keys=False, width=100000, allow_unicode=True)
                    )
                else:
                    spec_file.unlink(missing_ok=True)
                print(
                    f"{line.id}: exit {result['exit_code']}, "
                    + ("spec recorded" if result["accepted"] else f"refused: {result['error'][:100]}"),
                    file=sys.stderr,
                )
        version = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('beaker-py'))"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout.strip()
    if only is None:
        (out / "results.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in results))
        meta = {
            "open_instruct_commit": commit or git_commit(oi),
            "beaker_py": version,
            "stubs": stubs,
            "user": mr.WHOAMI,
            "default_workspace": mr.DEFAULT_WORKSPACE,
            "lines": len(results),
            "accepted": sum(r["accepted"] for r in results),
        }
        (out / "recording.json").write_text(json.dumps(meta, indent=2) + "\n")
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--open-instruct", required=True, type=Path, help="an open-instruct checkout")
    p.add_argument("--python", default=sys.executable, help="interpreter with beaker-py, requests, rich")
    p.add_argument("--only", nargs="+", help="record these line ids only (results.jsonl is not rewritten)")
    p.add_argument("--out", type=Path, default=HERE, help="output directory (default: next to this file)")
    p.add_argument("--commit", help="open-instruct commit, when the checkout is not a git repository")
    p.add_argument("--timeout", type=float, default=120)
    a = p.parse_args()
    oi = a.open_instruct.resolve()
    if not (oi / "mason.py").is_file():
        raise SystemExit(f"--open-instruct {oi}: no mason.py there; give an open-instruct checkout")
    record(oi, a.out, python=a.python, only=a.only, timeout=a.timeout, commit=a.commit)


if __name__ == "__main__":
    main()
