"""Issue 21 item 4: `--upload` reads exactly the directory named, on Beaker (the fake) and locally.
Symlinks out of it and special files are refused before anything is created; any file name uploads;
a dataset is committed only once every file is verified; local read errors name the file (exit 3)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from inproc import run_main

WS = "ai2/launchkit"
ODD_NAMES = [
    "a#b.txt",
    "q?x=1.txt",
    "pct%41.txt",
    "pct%zz.txt",
    "sp ace.txt",
    "ünï cödé.txt",
    "+plus&amp;.txt",
]


def launch(repo, data: Path, name: str, *extra: str):
    return run_main(
        "run", "--workspace", WS, "--name", name, "--upload", f"{data}:/data", *extra,
        "--", "python", "t.py", cwd=repo.path,
    )  # fmt: skip


def datasets(fake) -> list:
    return [d for d in fake.state.datasets.values() if d.name.startswith("launchkit-upload-")]


def nothing_created(fake) -> bool:
    runtime = sum(d.name.startswith("launchkit-runtime-") for d in fake.state.datasets.values())
    return not datasets(fake) and fake.calls["CreateDataset"] == runtime and not fake.state.experiments


def one_line(stderr: str) -> bool:
    """One error line (the fake's workspace may add an info line before it), no traceback."""
    return len([x for x in stderr.splitlines() if x.startswith("error:")]) == 1 and "Traceback" not in stderr


@pytest.mark.slow  # an end-to-end launch against the fake
def test_fault_a_symlinked_credential_never_crosses(repo, fake_beaker, tmp_path):
    """The planted attack: data/creds -> ~/.aws/credentials. Refused in one line naming the link and
    its target; nothing of it reaches the fake (no dataset, no file, no experiment)."""
    secret = tmp_path / "home" / ".aws" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text("aws_secret_access_key = lk-planted-s3cr3t\n")
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "train.txt").write_text("x\n")
    (data / "sub" / "creds").symlink_to(secret)
    r = launch(repo, data, "planted")
    assert r.code == 3 and one_line(r.stderr), r.stderr
    assert f"{data / 'sub' / 'creds'}" in r.stderr and str(secret) in r.stderr
    assert nothing_created(fake_beaker)
    assert not any(
        b"lk-planted" in body for d in fake_beaker.state.datasets.values() for body in d.files.values()
    )


@pytest.mark.slow  # an end-to-end launch against the fake
def test_a_link_to_a_directory_outside_is_refused_too(repo, fake_beaker, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_rsa").write_text("key\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a\n")
    (data / "ssh").symlink_to(outside)
    r = launch(repo, data, "dirlink")
    assert r.code == 3 and one_line(r.stderr) and str(outside) in r.stderr, r.stderr
    assert nothing_created(fake_beaker)


@pytest.mark.slow  # an end-to-end launch against the fake
def test_links_inside_are_uploaded_as_what_they_point_to(repo, fake_beaker, tmp_path):
    data = tmp_path / "data"
    (data / "real").mkdir(parents=True)
    (data / "real" / "x.txt").write_text("x\n")
    (data / "alias.txt").symlink_to("real/x.txt")
    (data / "mirror").symlink_to("real")
    r = launch(repo, data, "inside")
    assert r.code == 0, r.stderr
    [ds] = datasets(fake_beaker)
    assert ds.files == {"real/x.txt": b"x\n", "alias.txt": b"x\n", "mirror/x.txt": b"x\n"}


@pytest.mark.slow  # an end-to-end launch against the fake
def test_a_link_loop_is_refused(repo, fake_beaker, tmp_path):
    data = tmp_path / "data"
    (data / "d").mkdir(parents=True)
    (data / "d" / "f.txt").write_text("f\n")
    (data / "d" / "up").symlink_to("..")
    r = launch(repo, data, "loop")
    assert r.code == 3 and one_line(r.stderr) and "loop" in r.stderr, r.stderr
    assert nothing_created(fake_beaker)


@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_special_files_are_refused_not_skipped(repo, fake_beaker, tmp_path, kind):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a\n")
    special = data / "special"
    if kind == "fifo":
        os.mkfifo(special)
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(special))
        s.close()
    r = launch(repo, data, kind)
    assert r.code == 3 and one_line(r.stderr) and str(special) in r.stderr and kind in r.stderr, r.stderr
    assert nothing_created(fake_beaker)


@pytest.mark.slow  # an end-to-end launch against the fake
def test_any_file_name_uploads_and_is_verified(repo, fake_beaker, tmp_path):
    data = tmp_path / "data"
    (data / "dir #1").mkdir(parents=True)
    for i, name in enumerate(ODD_NAMES):
        (data / name).write_text(f"{i}\n")
        (data / "dir #1" / name).write_text(f"nested {i}\n")
    r = launch(repo, data, "names")
    assert r.code == 0, r.stderr
    [ds] = datasets(fake_beaker)
    assert ds.committed is not None
    want = {name: f"{i}\n".encode() for i, name in enumerate(ODD_NAMES)}
    want |= {f"dir #1/{name}": f"nested {i}\n".encode() for i, name in enumerate(ODD_NAMES)}
    assert ds.files == want
    r = launch(repo, data, "names-again")  # the same content: found and reused, not uploaded again
    assert r.code == 0 and "reusing dataset" in r.stderr, r.stderr


def test_a_dataset_is_committed_only_after_every_file_is_verified(repo, fake_beaker, tmp_path, monkeypatch):
    """A file the server stores under another name (what `#` did before) leaves the dataset
    uncommitted: a later launch of the same content finishes it instead of failing forever."""
    from launchkit.backends.beaker import upload

    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a\n")
    (data / "b.txt").write_text("b\n")
    tree = upload.scan(str(data))
    lost = next(f for f in tree.files if f.target == "b.txt")
    monkeypatch.setattr(upload, "VERIFY_ATTEMPTS", 1)
    original = upload.Uploader._upload_missing

    def drop_b(self, ds, tree, **kw):
        original(self, ds, tree, **kw)
        del fake_beaker.state.datasets[ds.id].files[lost.target]

    from launchkit.application import Application
    from launchkit.backends.beaker.client import Connection
    from launchkit.errors import BackendError

    conn = Connection(60)
    ws = conn.beaker.workspace.get(WS)
    monkeypatch.setattr(upload.Uploader, "_upload_missing", drop_b)
    with pytest.raises(BackendError, match=r"b\.txt"):
        upload.Uploader(conn, Application(verbosity=-1), ws).ensure(tree)
    [ds] = datasets(fake_beaker)
    assert ds.committed is None
    monkeypatch.setattr(upload.Uploader, "_upload_missing", original)
    ds_id = upload.Uploader(conn, Application(verbosity=-1), ws).ensure(tree)
    assert ds_id == ds.id and ds.committed is not None and set(ds.files) == {"a.txt", "b.txt"}


def without_dac(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`launchkit ARGS` where file permissions apply even to root (DAC override capabilities dropped)."""
    drop = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: permissions would not stop reads")
        caps = "-dac_override,-dac_read_search"
        drop = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]
    return subprocess.run(
        [*drop, sys.executable, "-m", "launchkit", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=dict(os.environ), stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.mark.slow  # an end-to-end launch against the fake
def test_an_unreadable_file_is_named_with_exit_3(repo, fake_beaker, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a\n")
    locked = data / "locked.bin"
    locked.write_text("secret\n")
    locked.chmod(0)
    r = without_dac("run", "--workspace", WS, "--upload", f"{data}:/data", "--", "true", cwd=repo.path)
    assert r.returncode == 3 and one_line(r.stderr) and str(locked) in r.stderr, r.stderr
    assert "cannot reach Beaker" not in r.stderr
    assert nothing_created(fake_beaker)


@pytest.mark.slow  # an end-to-end launch against the fake
def test_a_non_utf8_file_name_is_named_with_exit_3(repo, fake_beaker, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("a\n")
    bad = os.fsencode(str(data)) + b"/caf\xe9.txt"
    with open(bad, "wb") as f:
        f.write(b"x")
    r = launch(repo, data, "latin1")
    assert r.code == 3 and one_line(r.stderr) and "UTF-8" in r.stderr and "caf" in r.stderr, r.stderr
    assert nothing_created(fake_beaker)


@pytest.mark.slow
def test_local_runs_refuse_the_same_uploads(repo, tmp_path):
    secret = tmp_path / "credentials"
    secret.write_text("s3cr3t\n")
    data = tmp_path / "data"
    data.mkdir()
    (data / "creds").symlink_to(secret)
    env = {"LAUNCHKIT_LOCAL_HOME": str(tmp_path / "state")}
    mount = tmp_path / "mnt" / "data"
    r = run_cli(
        "run", "--local", "--no-python", "--upload", f"{data}:{mount}", "--", "true", cwd=repo.path, env=env
    )
    assert r.code == 3 and one_line(r.stderr) and str(secret) in r.stderr, r.stderr
    assert not mount.exists() and not mount.is_symlink()
