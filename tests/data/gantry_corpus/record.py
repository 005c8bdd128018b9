"""Re-record gantry 3.7.0's answer for every usable line of lines.jsonl.

    uv run python tests/data/gantry_corpus/record.py [--gantry PATH] [--only ID ...] [--jobs 2]

Each line runs as `gantry run ARGV --dry-run --save-spec FILE --yes` (the user's flags kept; their own
--save-spec replaced) in a real git repository (origin https://github.com/allenai/corpus-proj.git, with
the files the lines refer to) against one fake Beaker that knows every workspace, budget, cluster, image,
secret, dataset and group the corpus names (`gantry_corpus.build_state`); github.com answers through the
fake's proxy, HOME is fresh, GANTRY_CHECK_FOR_UPGRADES=0. Writes gantry.jsonl (exit code, workspace,
the last stderr lines when gantry refuses) and gantry/ID.yaml (the saved spec). gantry: --gantry,
$FAKEBEAKER_GANTRY, or /tmp/gantry-venv/bin/gantry (install: bash .ci/install-gantry).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))

import gantry_corpus as gc

DEFAULT_GANTRY = os.environ.get("FAKEBEAKER_GANTRY", "/tmp/gantry-venv/bin/gantry")


def gantry_env(fake: Any, home: Path) -> dict[str, str]:
    env = {
        **os.environ,
        **fake.env,
        "HTTPS_PROXY": fake.github_proxy,  # github.com answers from the fake (gantry's is_public check)
        "HOME": str(home),
        "GANTRY_CHECK_FOR_UPGRADES": "0",
        "COLUMNS": "250",
        "NO_COLOR": "1",
        "TERM": "dumb",
    }
    for k in ("GITHUB_TOKEN", "BEAKER_WORKSPACE", "GANTRY_GITHUB_TESTING"):
        env.pop(k, None)
    return env


def by_name(text: str, maps: dict[str, dict[str, str]]) -> str:
    """Beaker IDs in a saved spec replaced by names (the fake's IDs differ from run to run)."""
    for table in ("datasets", "images"):
        for id_, name in maps[table].items():
            if re.fullmatch(r"[0-9A-Z]{26}", id_):  # Beaker IDs only, never a word of the command
                text = re.sub(rf"\b{id_}\b", name, text)
    return re.sub(r"(gantry-v[\d.]+)-[0-9A-Z]{26}-[0-9a-f]+", r"\1-ENTRYPOINT", text)  # per workspace


def run_gantry(
    gantry: str, line: gc.Line, repo: Path, env: dict[str, str], out: Path, state: Any
) -> dict[str, Any]:
    """One line through gantry; the spec lands in out/ID.yaml, with dataset and image IDs as names."""
    spec = out / f"{line['id']}.yaml"
    spec.unlink(missing_ok=True)
    try:
        r = subprocess.run(
            [gantry, "run", *gc.dry_run_argv(line["argv"], str(spec))],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        code, stdout, stderr = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired:
        code, stdout, stderr = -1, "", "timed out after 120 s"
    rec: dict[str, Any] = {"id": line["id"], "exit": code}
    m = re.search(r"Workspace:\s*(\S+)", stdout)
    if m:
        rec["workspace"] = m.group(1)
    if code != 0 or not spec.exists():
        rec["exit"] = code or 1
        lines = [ln.rstrip() for ln in (stderr or stdout).strip().splitlines() if ln.strip()]
        rec["stderr_tail"] = lines[-3:]
        spec.unlink(missing_ok=True)
    else:
        spec.write_text(by_name(spec.read_text(), gc.state_maps(state)))  # after: uploads add datasets
    return rec


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gantry", default=DEFAULT_GANTRY)
    p.add_argument("--only", nargs="*", help="re-record these IDs only (others are kept)")
    p.add_argument("--jobs", type=int, default=2)
    a = p.parse_args()
    if not Path(a.gantry).exists():
        print(f"gantry not found at {a.gantry}: bash .ci/install-gantry", file=sys.stderr)
        return 3
    from fakebeaker import FakeBeaker

    lines = gc.load_lines()
    todo = [ln for ln in lines if "argv" in ln and (not a.only or ln["id"] in a.only)]
    records = gc.load_records() if a.only else {}
    gc.SPECS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        repo = gc.make_repo(Path(tmp) / "repo", gc.corpus_files(lines))
        home = Path(tmp) / "home"
        home.mkdir()
        with FakeBeaker(gc.build_state(lines), directory=Path(tmp) / "fb") as fake:
            env = gantry_env(fake, home)
            with ThreadPoolExecutor(max_workers=a.jobs) as pool:
                for rec in pool.map(
                    lambda ln: run_gantry(a.gantry, ln, repo, env, gc.SPECS, fake.state), todo
                ):
                    records[rec["id"]] = rec
                    print(rec["id"], rec["exit"], (rec.get("stderr_tail") or [""])[-1][:100], flush=True)
    order = {ln["id"]: i for i, ln in enumerate(lines)}
    with gc.RECORDS.open("w") as f:
        for rec in sorted(records.values(), key=lambda r: order.get(r["id"], 1 << 30)):
            f.write(json.dumps(rec) + "\n")
    ok = sum(r["exit"] == 0 for r in records.values())
    print(f"{len(records)} lines: gantry accepts {ok}, refuses {len(records) - ok}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
