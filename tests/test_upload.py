"""`--upload` on Beaker against the fake: a content-addressed dataset, uploaded once, reused, mounted.

The directory has an empty __init__.py (beaker-py's directory upload skips zero-byte files; gantry's
--upload fails on it), a 100 MB sparse file and 1,000 small files.
"""

from __future__ import annotations

import threading
import time

import pytest

from conftest import run_cli
from timescale import scaled

pytestmark = pytest.mark.slow  # end-to-end: real processes, uv, git (the fast tier is -m 'not slow')

WS = "ai2/launchkit"
BIG = 100 * 1000 * 1000


@pytest.fixture
def data_dir(tmp_path):
    d = tmp_path / "data"
    (d / "pkg").mkdir(parents=True)
    (d / "pkg" / "__init__.py").write_bytes(b"")
    with open(d / "big.bin", "wb") as f:  # sparse: instant to create, 100 MB to hash and upload
        f.truncate(BIG)
    small = d / "small"
    small.mkdir()
    for i in range(1000):
        (small / f"f{i:04d}.txt").write_text(f"file {i}\n")
    return d


def _launch(repo, data, name: str, *extra: str):
    return run_cli(
        "run",
        "--workspace",
        WS,
        "--name",
        name,
        "--upload",
        f"{data}:/data",
        *extra,
        "--",
        "python",
        "t.py",
        cwd=repo.path,
        timeout=300,
    )


def _mount(fake, name: str) -> dict:
    exp = next(e for e in fake.state.experiments.values() if e.name == name)
    return next(m for m in exp.spec["tasks"][0]["datasets"] if m["mountPath"] == "/data")


def _upload_calls(fake) -> int:
    return sum(n for k, n in fake.calls.items() if "Dataset" in k or k in ("StartUpload", "UploadChunk"))


def test_dry_run_creates_no_dataset(repo, fake_beaker, tmp_path):
    """A dry run asks Beaker read-only (prepare): the upload is left to submit, and it says so."""
    data = tmp_path / "small-data"
    data.mkdir()
    (data / "x.txt").write_text("x\n")
    r = _launch(repo, data, "dry", "--dry-run")
    assert r.code == 0, r.stderr
    assert "decided at submit: dataset ids of 1 --upload(s)" in r.stderr
    assert "beaker: launchkit-upload-" in r.stdout  # the placeholder, resolved only at submit
    # only launchkit's runtime dataset (made once, so the dry run shows the id run submits)
    assert all(d.name.startswith("launchkit-runtime-") for d in fake_beaker.state.datasets.values())
    assert fake_beaker.calls["CreateDataset"] <= 1 and not fake_beaker.state.experiments


def test_upload_once_reuse_and_mount(repo, fake_beaker, data_dir):
    t0 = time.monotonic()
    r = _launch(repo, data_dir, "up1")
    first = time.monotonic() - t0
    assert r.code == 0, r.stderr
    datasets = [d for d in fake_beaker.state.datasets.values() if d.name.startswith("launchkit-upload-")]
    assert len(datasets) == 1
    ds = datasets[0]
    assert ds.committed is not None
    assert ds.files["pkg/__init__.py"] == b""  # the empty file is there
    assert len(ds.files) == 1002 and len(ds.files["big.bin"]) == BIG
    assert _mount(fake_beaker, "up1")["source"] == {"beaker": ds.id}
    calls_first = _upload_calls(fake_beaker)
    total_first = fake_beaker.total_calls

    fake_beaker.reset_calls()
    t0 = time.monotonic()
    r = _launch(repo, data_dir, "up2")
    second = time.monotonic() - t0
    assert r.code == 0, r.stderr
    assert "reusing dataset" in r.stderr
    assert [d.id for d in fake_beaker.state.datasets.values() if d.name.startswith("launchkit-upload-")] == [
        ds.id
    ]
    assert fake_beaker.calls["UploadDatasetFile"] == 0 and fake_beaker.calls["CreateDataset"] == 0
    assert _mount(fake_beaker, "up2")["source"] == {"beaker": ds.id}
    print(
        f"\nupload: first launch {first:.1f}s ({calls_first} dataset calls, {total_first} in all); "
        f"second launch {second:.1f}s ({_upload_calls(fake_beaker)} dataset calls, "
        f"{fake_beaker.total_calls} in all)"
    )

    # changed content -> a new dataset
    (data_dir / "small" / "f0000.txt").write_text("changed\n")
    r = _launch(repo, data_dir, "up3")
    assert r.code == 0, r.stderr
    assert (
        len([d for d in fake_beaker.state.datasets.values() if d.name.startswith("launchkit-upload-")]) == 2
    )


@pytest.mark.parametrize("clash", ["409", "400"])
def test_concurrent_uploads_make_one_dataset(repo, make_fake_beaker, tmp_path, clash):
    """Two launches race to create the same content: one dataset, both experiments mount it. Beaker
    answers a name clash with 409 or with 400 "already in use" (fact sheet, faithful fake item 8)."""
    fake = make_fake_beaker(options={"name_conflict": clash})
    fake.faults.latency(0.3, "CreateDataset")  # both get past the lookup before either creates
    d = tmp_path / "d"
    d.mkdir()
    (d / "__init__.py").write_bytes(b"")
    for i in range(20):
        (d / f"{i}.txt").write_text(str(i))
    results = {}

    def go(name):
        results[name] = _launch(repo, d, name)

    threads = [threading.Thread(target=go, args=(n,)) for n in ("race-a", "race-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name, r in results.items():
        assert r.code == 0, (name, r.stderr)
    datasets = [x for x in fake.state.datasets.values() if x.name.startswith("launchkit-upload-")]
    assert len(datasets) == 1 and datasets[0].committed is not None and len(datasets[0].files) == 21
    assert _mount(fake, "race-a") == _mount(fake, "race-b")


@pytest.mark.parametrize("clash", ["409", "400"])
def test_create_race_adopts_the_winners_dataset(make_fake_beaker, tmp_path, monkeypatch, clash):
    """Deterministic race: both uploaders look the name up (miss) before either creates; the loser
    of the create gets 409 or 400 "already in use", adopts the winner's dataset, and both end with
    the same committed, complete dataset."""
    from launchkit.application import Application
    from launchkit.backends.beaker.client import Connection
    from launchkit.backends.beaker.upload import Uploader, scan

    fake = make_fake_beaker(options={"name_conflict": clash})
    d = tmp_path / "d"
    d.mkdir()
    (d / "__init__.py").write_bytes(b"")
    for i in range(30):
        (d / f"{i}.txt").write_text(str(i))
    tree = scan(str(d))
    both_missed = threading.Barrier(2, timeout=scaled(20))
    first = threading.local()
    find = Uploader.find

    def racing_find(self, name):
        found = find(self, name)
        if not getattr(first, "done", False):
            first.done = True
            both_missed.wait()
        return found

    ids, errors = [], []

    def upload():
        try:
            conn = Connection(60)
            ws = conn.beaker.workspace.get(WS)
            ids.append(Uploader(conn, Application(verbosity=-1), ws).ensure(tree))
        except BaseException as e:  # reported by the assertion below
            errors.append(e)

    monkeypatch.setattr(Uploader, "find", racing_find)
    threads = [threading.Thread(target=upload) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(scaled(60))
    assert not errors, errors
    datasets = [x for x in fake.state.datasets.values() if x.name == tree.name]
    assert len(datasets) == 1 and ids == [datasets[0].id] * 2
    assert datasets[0].committed is not None and len(datasets[0].files) == 31
    assert fake.calls["CreateDataset"] == 2  # both tried; one adopted


def test_incomplete_committed_dataset_is_refused(repo, fake_beaker, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.txt").write_text("a")
    (d / "b.txt").write_text("b")
    r = _launch(repo, d, "ok")
    assert r.code == 0, r.stderr
    ds = next(x for x in fake_beaker.state.datasets.values() if x.name.startswith("launchkit-upload-"))
    del ds.files["b.txt"]
    r = _launch(repo, d, "broken")
    assert r.code != 0
    assert "incomplete" in r.stderr and "b.txt" in r.stderr and "Traceback" not in r.stderr
    assert not [e for e in fake_beaker.state.experiments.values() if e.name == "broken"]


def test_progress_bar_on_a_terminal_and_a_single_file(repo, fake_beaker, tmp_path):
    from ptyrun import run_in_pty

    f = tmp_path / "config.yaml"
    f.write_bytes(b"lr: 3e-4\n" * 300_000)
    code, screen = run_in_pty(
        "run", "--workspace", WS, "--name", "tty", "--upload", f"{f}:/config", "--", "x",
        cwd=repo.path, timeout=120,
    )  # fmt: skip
    assert code == 0, screen
    assert "uploading config.yaml (1 file)" in screen and "MB" in screen and "━" in screen  # rich's bar
    ds = next(d for d in fake_beaker.state.datasets.values() if d.name.startswith("launchkit-upload-"))
    assert list(ds.files) == ["config.yaml"]  # a single file lands under its name: /config/config.yaml
