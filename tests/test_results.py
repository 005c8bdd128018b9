"""`launchkit results` (Beaker result datasets per replica; local results dirs), the line `follow` ends
with, and `--upload` on a real local run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import run_cli
from fakebeaker.state import AutoRun
from lk_helpers import FAST_ENV, launched_id, wait_finished

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

WS = "ai2/launchkit"
PY = sys.executable


def _finished_experiment(fake, repo, name: str, *extra: str):
    fake.state.set_auto(AutoRun(start_after=0.05, run_for=0.1, lines=["x"]))
    r = run_cli(
        "run", "--workspace", WS, "--name", name, "--follow", *extra, "--", "x", cwd=repo.path, timeout=90
    )
    assert r.code == 0, r.stderr
    exp = next(e for e in fake.state.experiments.values() if e.name == name)
    return exp, r


def test_beaker_results_per_replica_with_follow_hint(repo, fake_beaker, tmp_path):
    exp, r = _finished_experiment(fake_beaker, repo, "res", "--replicas", "2")
    assert f"launchkit results {exp.id}" in r.stderr.strip().splitlines()[-1]
    for rank, task in enumerate(exp.tasks):
        ds = fake_beaker.state.datasets[task.jobs[-1].result_dataset_id]
        ds.files["metrics.json"] = f'{{"rank": {rank}}}'.encode()
        ds.files["ckpt/model.bin"] = bytes(range(256)) * 4000
        ds.files["empty.txt"] = b""
    out = tmp_path / "out"
    r = run_cli("results", exp.id, "-o", str(out), cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    assert r.stdout.split() == [str(out / "replica-0"), str(out / "replica-1")]
    texts = sorted((out / f"replica-{k}" / "metrics.json").read_text() for k in (0, 1))
    assert texts == ['{"rank": 0}', '{"rank": 1}']
    assert (out / "replica-0" / "ckpt" / "model.bin").read_bytes() == bytes(range(256)) * 4000
    assert (out / "replica-1" / "empty.txt").read_bytes() == b""
    assert not list(out.rglob("*.part"))


def test_beaker_results_default_dir_single_replica(repo, fake_beaker):
    exp, _ = _finished_experiment(fake_beaker, repo, "one")
    fake_beaker.state.datasets[exp.tasks[0].jobs[-1].result_dataset_id].files["a.txt"] = b"A"
    r = run_cli("results", "one", cwd=repo.path, timeout=90)
    assert r.code == 0, r.stderr
    assert (repo.path / "results" / exp.id / "a.txt").read_text() == "A"


def test_unknown_run_is_one_line(repo, fake_beaker):
    r = run_cli("results", "nope", cwd=repo.path, timeout=60)
    assert r.code != 0 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.fixture
def upload_dir(tmp_path) -> Path:
    d = tmp_path / "data"
    (d / "pkg").mkdir(parents=True)
    (d / "pkg" / "__init__.py").write_bytes(b"")
    (d / "value.txt").write_text("42\n")
    return d


def test_local_upload_results_and_follow_line(repo, upload_dir, tmp_path):
    mount = tmp_path / "mnt" / "data"
    script = f"import os; print(open('{mount}/value.txt').read().strip()); " + (
        "open(os.environ['RESULTS_DIR'] + '/out.txt', 'w').write('done')"
    )
    r = run_cli(
        "run", "--local", "--no-python", "--follow", "--upload", f"{upload_dir}:{mount}", "--", PY, "-c", script,
        cwd=repo.path, env=FAST_ENV,
    )  # fmt: skip
    assert r.code == 0, r.stderr
    assert "42" in r.stdout
    run_id = launched_id(r.stderr)
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("results: ") and run_id in last
    wait_finished(run_id, FAST_ENV)
    assert not mount.exists() and not mount.is_symlink()  # the link is gone with the run
    r = run_cli("results", run_id, "--local", cwd=repo.path, env=FAST_ENV)
    assert r.code == 0, r.stderr
    assert (Path(r.stdout.strip()) / "out.txt").read_text() == "done"
    r = run_cli("results", run_id, "--local", "-o", str(tmp_path / "copy"), cwd=repo.path, env=FAST_ENV)
    assert r.code == 0 and (tmp_path / "copy" / "out.txt").read_text() == "done"


def test_local_upload_refuses_an_occupied_path(repo, upload_dir, tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    r = run_cli("run", "--local", "--no-python", "--upload", f"{upload_dir}:{taken}", "--", "true",
                cwd=repo.path, env=FAST_ENV)  # fmt: skip
    assert r.code == 3 and "--upload" in r.stderr and "writable path" in r.stderr
