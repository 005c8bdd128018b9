"""The env store (runtime/node/environment/envstore.py): keying, publish and lookup, two processes at once, the
poisoning refusals, and a thin venv over an entry. The end-to-end tests (slow) run real bash and uv: two jobs on one shared cache, what one
job writes in its venv never reaching the next, a damaged entry built again, a running job's lease."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from launchkit.runtime.node.environment import envstore as es
from timescale import scaled

SRC = str(Path(es.__file__).resolve().parents[3])  # .../src, for the child processes

LOCK = 'version = 1\n[[package]]\nname = "six"\nversion = "1.17.0"\n'
PYPROJECT = '[project]\nname = "demo"\nversion = "0.1.0"\n\n[tool.ruff]\nline-length = 100\n'
FACTS = ["3.11.7 (main)", "cpython-311", "", "linux-x86_64", "9223372036854775807", "glibc 2.36"]


def checkout(tmp_path: Path, pyproject: str = PYPROJECT, lock: str = LOCK) -> Path:
    d = tmp_path / "checkout"
    d.mkdir(exist_ok=True)
    (d / "pyproject.toml").write_text(pyproject)
    (d / "uv.lock").write_text(lock)
    return d


def key(tmp_path: Path, args=(), environ=None, facts=FACTS, **files) -> str:
    d = checkout(tmp_path, **files)
    return es.env_key("uv.lock", (d / "uv.lock").read_text(), str(d), list(args), environ or {}, list(facts))


# ---- keying


def test_key_is_stable_and_ignores_what_installs_the_same(tmp_path):
    base = key(tmp_path, ["--extra=a", "--extra=b"])
    assert base == key(tmp_path, ["--extra=b", "--extra=a"])  # order of the flags
    # the link mode, the cache's place, credentials and tool settings of other tools change nothing
    environ = {"UV_LINK_MODE": "copy", "UV_CACHE_DIR": "/x", "UV_INDEX_PRIVATE_PASSWORD": "hunter2"}
    assert base == key(tmp_path, ["--extra=a", "--extra=b"], environ)
    assert base == key(tmp_path, ["--extra=a", "--extra=b"], pyproject=PYPROJECT.replace("100", "120"))
    assert len(base) == 32 and int(base, 16) >= 0


@pytest.mark.parametrize(
    "change",
    [
        {"lock": LOCK.replace("1.17.0", "1.16.0")},
        {"args": ["--extra=a"]},
        {"args": ["--extra=a", "--extra=b", "--no-default-groups"]},
        {"environ": {"UV_TORCH_BACKEND": "cu128"}},
        {"environ": {"UV_NO_BINARY": "1"}},
        {"facts": ["3.12.1 (main)", *FACTS[1:]]},
        {"facts": [*FACTS[:3], "linux-aarch64", *FACTS[4:]]},
        {"pyproject": PYPROJECT + '[tool.uv]\ndefault-groups = ["test"]\n'},
    ],
)
def test_key_changes_with_what_changes_the_result(tmp_path, change):
    base = key(tmp_path, ["--extra=a", "--extra=b"])
    kw = {"args": ["--extra=a", "--extra=b"], **change}
    assert key(tmp_path, **kw) != base


def test_uv_toml_in_the_checkout_is_in_the_key(tmp_path):
    base = key(tmp_path)
    (tmp_path / "checkout" / "uv.toml").write_text("no-binary = true\n")
    assert key(tmp_path) != base


def test_which_lock_and_what_is_left_to_the_job(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    assert es.locked_source(str(d)) is None
    (d / "requirements.txt").write_text("six==1.17.0\n")
    assert es.locked_source(str(d)) is None  # not hashed: not fully determined
    (d / "requirements.txt").write_text("-e .\nsix==1.17.0 \\\n    --hash=sha256:ab\n")
    assert es.locked_source(str(d)) == ("requirements", str(d / "requirements.txt"))
    assert es.pinned_requirements((d / "requirements.txt").read_text()) == (
        "six==1.17.0 --hash=sha256:ab\n",
        True,
    )
    with pytest.raises(es.Refused, match="includes another file"):
        es.pinned_requirements("-r base.txt\nsix==1 --hash=sha256:ab\n")
    (d / "pylock.toml").write_text("")
    assert es.locked_source(str(d))[0] == "pylock"
    (d / "pyproject.toml").write_text(PYPROJECT)
    (d / "uv.lock").write_text(LOCK)
    assert es.locked_source(str(d))[0] == "uv.lock"


def test_pylock_keeps_registry_packages_and_leaves_local_ones(tmp_path):
    pylock = textwrap.dedent(
        """\
        lock-version = "1.0"
        created-by = "uv"

        [[packages]]
        name = "six"
        version = "1.17.0"
        wheels = [{ url = "https://files.example/six-1.17.0-py2.py3-none-any.whl", hashes = { sha256 = "ab" } }]

        [[packages]]
        name = "demo"
        directory = { path = ".", editable = true }

        [[packages]]
        name = "vendored"
        archive = { path = "wheels/vendored-1.0.tar.gz", hashes = { sha256 = "cd" } }
        """
    )
    kept = es.pinned_pylock(pylock)
    assert 'name = "six"' in kept and 'lock-version = "1.0"' in kept
    assert "demo" not in kept and "vendored" not in kept


# ---- publish, lookup, trust


def fake_build(calls: list[str]):
    """A build that makes what uv would: a venv's site-packages with one package and its metadata."""

    def build(staging: str) -> dict:
        calls.append(staging)
        venv = Path(staging) / "venv"
        sp = venv / "lib/python3.11/site-packages"
        (sp / "fakepkg").mkdir(parents=True)
        (sp / "fakepkg/__init__.py").write_text("VALUE = 'from the store'\n")
        meta = Path(staging) / "meta/fakepkg-1.0.dist-info"
        meta.mkdir(parents=True)
        (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: fakepkg\nVersion: 1.0\n")
        (meta / "entry_points.txt").write_text("[console_scripts]\nfaketool = fakepkg:main\n")
        (meta / "RECORD").write_text(
            "fakepkg/__init__.py,,\nfakepkg-1.0.dist-info/METADATA,,\n../../../bin/faketool,,\n"
            "../../../share/fakepkg/data.txt,,\n"
        )
        (venv / "bin").mkdir()
        script = venv / "bin/faketool"
        script.write_text(f"#!{venv}/bin/python\nimport fakepkg\nprint('tool', fakepkg.VALUE)\n")
        script.chmod(0o755)
        (venv / "share/fakepkg").mkdir(parents=True)
        (venv / "share/fakepkg/data.txt").write_text("data\n")
        return {
            "kind": "uv.lock",
            "site_packages": "venv/lib/python3.11/site-packages",
            "built_at": str(venv),
            "dists": ["fakepkg-1.0.dist-info"],
        }

    return build


K = "0123456789abcdef0123456789abcdef"


@contextlib.contextmanager
def lock_held_elsewhere(path: str):
    """Another process holds the POSIX lock on `path` meanwhile (as another job would)."""
    code = "import fcntl, sys, time; f = open(sys.argv[1], 'w'); fcntl.lockf(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(600)"  # killed after
    holder = subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_built_once_then_reused(tmp_path):
    mine = es.user_tree(str(tmp_path / "cache"))
    assert os.stat(mine).st_mode & 0o777 == 0o700
    assert os.stat(tmp_path / "cache" / es.STORE).st_mode & 0o7777 == 0o1777
    calls: list[str] = []
    lines: list[str] = []
    inodes: list[int] = []

    def build(staging: str) -> dict:
        assert not os.path.exists(os.path.join(mine, K))  # nothing at the entry's name meanwhile
        inodes.append(os.stat(staging).st_ino)
        return fake_build(calls)(staging)

    entry, manifest, built = es.ensure_entry(mine, K, build, lines.append)
    assert built and len(calls) == 1 and manifest["key"] == K
    # built aside and published by a rename: the very directory, never a copy being filled
    assert os.path.basename(calls[0]).startswith(".build-") and os.path.dirname(calls[0]) == mine
    assert os.stat(entry).st_ino == inodes[0]
    assert entry == os.path.join(mine, K) and not any(n.startswith(".build-") for n in os.listdir(mine))
    entry2, _, built2 = es.ensure_entry(mine, K, fake_build(calls), lines.append)
    assert (entry2, built2, len(calls)) == (entry, False, 1)


def test_a_failed_build_leaves_nothing_behind(tmp_path):
    mine = es.user_tree(str(tmp_path / "cache"))

    def broken(staging: str) -> dict:
        (Path(staging) / "half").write_text("x")
        raise es.Refused("building the environment failed")

    with pytest.raises(es.Refused, match="failed"):
        es.ensure_entry(mine, K, broken, print)
    assert sorted(os.listdir(mine)) == [f"{K}.lock"]


def test_waits_for_another_builder_then_gives_up_with_one_line(tmp_path):
    """The lock held by another process: this one waits (on its clock) and then refuses."""
    mine = es.user_tree(str(tmp_path / "cache"))
    with lock_held_elsewhere(os.path.join(mine, f"{K}.lock")):
        now = [0.0]
        lines: list[str] = []
        with pytest.raises(es.Refused, match="another job is still building"):
            es.ensure_entry(
                mine, K, fake_build([]), lines.append, clock=lambda: now[0],
                sleep=lambda s: now.__setitem__(0, now[0] + s), wait=1.0,
            )  # fmt: skip
        assert lines == [f"env store: waiting for {K}"] and now[0] >= 1.0


CONCURRENT = """
import json, os, sys, time
sys.path.insert(0, {src!r})
from launchkit.runtime.node.environment import envstore as es
mine, counter, arrived = sys.argv[1:4]
def build(staging):
    with open(counter, "a") as f:
        f.write("build\\n")
    deadline = time.monotonic() + {wait}
    while not os.path.exists(arrived) and time.monotonic() < deadline:
        time.sleep(0.01)  # until the other process waits for this build
    m = {fake!r}
    os.makedirs(os.path.join(staging, m["site_packages"]))
    os.makedirs(os.path.join(staging, "meta", "fakepkg-1.0.dist-info"))
    return dict(m, built_at=os.path.join(staging, "venv"))
def said(line):
    with open(arrived, "a") as f:
        f.write(line + "\\n")
entry, manifest, built = es.ensure_entry(mine, {key!r}, build, said)
print(json.dumps([entry, built, sorted(os.listdir(entry))]))
"""


def test_two_processes_build_once_and_neither_sees_half(tmp_path):
    mine = es.user_tree(str(tmp_path / "cache"))
    counter = tmp_path / "builds"
    fake = {
        "kind": "uv.lock",
        "site_packages": "venv/lib/python3.11/site-packages",
        "dists": ["fakepkg-1.0.dist-info"],
    }
    code = CONCURRENT.format(src=SRC, fake=fake, key=K, wait=scaled(60))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, mine, str(counter), str(tmp_path / "arrived")],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert counter.read_text().splitlines() == ["build"]
    assert (tmp_path / "arrived").read_text() == f"env store: waiting for {K}\n"  # it came meanwhile
    assert sorted(r[1] for r in results) == [False, True]
    for entry, _, listing in results:
        assert entry == os.path.join(mine, K) and listing == [es.MANIFEST, "meta", "venv"]


def test_refuses_a_tree_or_entry_others_can_write(tmp_path):
    cache = str(tmp_path / "cache")
    mine = es.user_tree(cache)
    es.ensure_entry(mine, K, fake_build([]), print)
    entry = os.path.join(mine, K)
    os.chmod(entry, 0o775)  # group-writable entry
    with pytest.raises(es.Refused, match="others can write"):
        es.ensure_entry(mine, K, fake_build([]), print)
    os.chmod(entry, 0o757)  # world-writable entry
    with pytest.raises(es.Refused, match="others can write"):
        es.verify(entry, K)
    os.chmod(entry, 0o755)
    es.verify(entry, K)
    os.chmod(mine, 0o750)  # the user's tree reachable by the group
    with pytest.raises(es.Refused, match="not this user's private directory"):
        es.user_tree(cache)
    os.chmod(mine, 0o700)
    es.user_tree(cache)


def test_refuses_another_users_tree_and_a_symlinked_one(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    mine = es.user_tree(str(cache))
    es.ensure_entry(mine, K, fake_build([]), print)
    real = os.geteuid()
    monkeypatch.setattr(es.os, "geteuid", lambda: real + 4242)  # as another user sees them
    other = cache / es.STORE / f"u{real + 4242}"
    other.symlink_to(mine)  # planted: a link to someone's tree
    with pytest.raises(es.Refused, match="not a directory"):
        es.user_tree(str(cache))
    other.unlink()
    other.mkdir(mode=0o700)
    os.chown(other, real, -1)  # (a no-op: the point is the owner differs from the "user")
    with pytest.raises(es.Refused, match=f"belongs to uid {real}, not this user"):
        es.user_tree(str(cache))
    with pytest.raises(es.Refused, match="belongs to uid"):
        es.verify(os.path.join(mine, K), K)


def test_a_half_built_entry_is_never_used(tmp_path):
    mine = es.user_tree(str(tmp_path / "cache"))
    entry = Path(mine) / K
    (entry / "venv").mkdir(parents=True)  # a copy, a crash: no manifest
    with pytest.raises(es.Refused, match="incomplete"):
        es.verify(str(entry), K)
    calls: list[str] = []
    lines: list[str] = []
    _, manifest, built = es.ensure_entry(mine, K, fake_build(calls), lines.append)
    assert built and len(calls) == 1 and manifest["dists"] == ["fakepkg-1.0.dist-info"]
    assert "incomplete" in lines[0]
    # a manifest for another key, or one listing what is not there: not used either
    m = json.loads((entry / es.MANIFEST).read_text())
    (entry / es.MANIFEST).write_text(json.dumps(dict(m, key="f" * 32)))
    with pytest.raises(es.Refused, match="another key"):
        es.verify(str(entry), K)
    (entry / es.MANIFEST).write_text(json.dumps(dict(m, dists=["other-1.0.dist-info"])))
    with pytest.raises(es.Refused, match="does not hold"):
        es.verify(str(entry), K)
    (entry / es.MANIFEST).write_text(json.dumps(m))
    shutil.rmtree(entry / "meta")
    with pytest.raises(es.Refused, match="does not hold"):
        es.verify(str(entry), K)
    # found so by a job: named on its stderr (`say`) and built again
    said: list[str] = []
    _, _, built = es.ensure_entry(mine, K, fake_build(calls), lines.append, say=said.append)
    assert built and said == [
        f"[launchkit] env store: {entry} does not hold what its manifest lists; building it again"
    ]
    (entry / es.MANIFEST).write_text(json.dumps(dict(m, format=es.FORMAT - 1)))
    with pytest.raises(
        es.Refused, match=f"built by another version of launchkit \\(format {es.FORMAT - 1}\\)"
    ):
        es.verify(str(entry), K)


# ---- the thin venv


def planned(build):
    """As the real build does: the link plan kept in the manifest (a job reads no RECORD)."""

    def with_plan(staging: str) -> dict:
        manifest = build(staging)
        return dict(manifest, links=es.link_plan(staging, manifest))

    return with_plan


@pytest.mark.parametrize("plan", [False, True], ids=["read-from-metadata", "planned-in-manifest"])
def test_thin_venv_imports_from_the_store_and_runs_its_scripts(tmp_path, plan, monkeypatch):
    mine = es.user_tree(str(tmp_path / "cache"))
    build = planned(fake_build([])) if plan else fake_build([])
    entry, manifest, _ = es.ensure_entry(mine, K, build, print)
    assert ("links" in manifest) is plan
    if plan:
        assert manifest["links"] == {
            "fakepkg-1.0.dist-info": [
                ["METADATA", "RECORD", "entry_points.txt"],
                ["bin/faketool", "share/fakepkg/data.txt"],
            ]
        }

        def no_record_read(*a):
            raise AssertionError("a planned entry is linked without reading a RECORD")

        monkeypatch.setattr(es, "_outside", no_record_read)
    venv = tmp_path / "venv"
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=60)
    sp = next(venv.glob("lib/python*/site-packages"))
    before = sorted(p.name for p in sp.iterdir())
    added = es.link(entry, manifest, str(venv))
    py = str(venv / "bin/python")
    probe = (
        "import fakepkg, importlib.metadata as m; "
        "print(fakepkg.VALUE, m.version('fakepkg'), len([d for d in m.distributions() if d.name == 'fakepkg']))"
    )
    out = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "from the store 1.0 1", out.stderr  # metadata seen once
    tool = subprocess.run([str(venv / "bin/faketool")], capture_output=True, text=True, timeout=60)
    assert tool.stdout.strip() == "tool from the store", tool.stderr
    assert (venv / "bin/faketool").read_text().startswith(f"#!{venv}/bin/python\n")
    assert (venv / "share/fakepkg/data.txt").read_text() == "data\n"
    # the job's own install shadows the store and never writes into it
    (sp / "fakepkg").mkdir()
    (sp / "fakepkg/__init__.py").write_text("VALUE = 'the job'\n")
    out = subprocess.run(
        [py, "-c", "import fakepkg; print(fakepkg.VALUE)"], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "the job"
    es.unlink(added)  # what link() added, and only that, goes
    assert sorted(p.name for p in sp.iterdir()) == sorted([*before, "fakepkg"])
    assert not (venv / "bin/faketool").exists() and not (venv / "share/fakepkg/data.txt").exists()


def test_main_falls_back_with_one_line(tmp_path, monkeypatch, capsys):
    d = checkout(tmp_path)
    cache = tmp_path / "cache"
    (cache / es.STORE / f"u{os.geteuid()}").mkdir(parents=True, mode=0o777)
    os.chmod(cache / es.STORE / f"u{os.geteuid()}", 0o777)
    monkeypatch.chdir(d)
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    for name in (
        "LAUNCHKIT_UV_VENV",
        "LAUNCHKIT_SYSTEM_PYTHON",
        "LAUNCHKIT_INSTALL_CMD",
        "LAUNCHKIT_ENVSTORE",
    ):
        monkeypatch.delenv(name, raising=False)
    log = tmp_path / "install.log"
    assert es.main(["link", str(tmp_path / "venv"), str(log)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("[launchkit] env store not used: ")
    assert "not this user's private directory" in err[0] and err[0].endswith("; installing as usual")
    assert "env store not used" in log.read_text()


def test_off_when_it_does_not_apply(tmp_path):
    d = str(checkout(tmp_path))
    cache = str(tmp_path / "cache")
    for environ in (
        {},  # no shared cache
        {"UV_CACHE_DIR": cache, "LAUNCHKIT_ENVSTORE": "0"},
        {"UV_CACHE_DIR": cache, "LAUNCHKIT_UV_VENV": "/opt/venv"},
        {"UV_CACHE_DIR": cache, "LAUNCHKIT_SYSTEM_PYTHON": "1"},
        {"UV_CACHE_DIR": cache, "LAUNCHKIT_INSTALL_CMD": "make install"},
    ):
        assert es.use_store(d, str(tmp_path / "venv"), [], environ, print) is None
    assert not os.path.exists(cache)
    os.remove(os.path.join(d, "uv.lock"))
    assert es.use_store(d, str(tmp_path / "venv"), [], {"UV_CACHE_DIR": cache}, print) is None


# ---- end to end: two local-backend jobs on one shared cache, copy mode


@pytest.mark.slow
def test_second_local_job_reuses_the_environment(repo, tmp_path):
    import re
    import time

    from conftest import run_cli
    from lk_helpers import FAST_ENV, LocalIndex
    from test_uv_cache import commit_locked, project_files

    names = [f"dep{i:02d}" for i in range(12)]
    with LocalIndex(tmp_path / "index", names) as index:
        lock_env = {"UV_CACHE_DIR": str(tmp_path / "lock-cache"), "LK_TEST_BUILDS": str(tmp_path / "builds")}
        commit_locked(
            repo, project_files(deps=names, index=index.url), "project", {**lock_env, "UV_OFFLINE": "0"}
        )
        shared = tmp_path / "shared"
        env = {**FAST_ENV, "UV_OFFLINE": "0", "LK_TEST_BUILDS": str(tmp_path / "builds")}
        probe = "import dep00, dep11, demo; print('PROBE', dep00.__file__, demo.VALUE)"

        def job(*extra: str) -> tuple[str, float, float]:
            args = ["run", "--local", "--follow", "--uv-cache-dir", str(shared), "--env", "UV_LINK_MODE=copy"]
            args += extra
            t = time.monotonic()
            r = run_cli(*args, "--", "python", "-c", probe, cwd=repo.path, env=env, timeout=300)
            wall = time.monotonic() - t
            assert r.code == 0, r.stdout + r.stderr
            assert "env store not used" not in r.stdout + r.stderr
            install = float(re.search(r"install\[uv\.lock\] ([\d.]+)s", r.stdout).group(1))
            return next(x for x in r.stdout.splitlines() if x.startswith("PROBE")), install, wall

        first, first_install, first_wall = job()
        second, second_install, second_wall = job()
        # today's path on the same (now warm) cache, for the record
        _, today_install, today_wall = job("--pre-setup", "export LAUNCHKIT_ENVSTORE=0")

    entries = _entries(shared / es.STORE / f"u{os.geteuid()}")
    assert len(entries) == 1, entries  # built once, by the first job
    manifest = json.loads((entries[0] / es.MANIFEST).read_text())
    assert set(manifest["links"]) == set(manifest["dists"])  # linked by plan: no RECORD read in a job
    assert first == second and first.split()[1].startswith(str(entries[0])) and first.endswith(" 1")
    assert today_install > 0
    print(f"install: first {first_install}s, second {second_install}s, store off {today_install}s")
    print(f"wall: first {first_wall:.2f}s, second {second_wall:.2f}s, store off {today_wall:.2f}s")
    # (no timed assertion: a local run builds the project in every job, so the two installs differ by
    # the store's build alone, ~0.1 s here, within the noise of a loaded machine; bench_envstore times
    # it. That the second job linked the one entry is checked above: its import came from the store.)


@pytest.mark.slow
def test_concurrent_jobs_build_one_entry_and_all_use_it(repo, tmp_path):
    """6 jobs at once on an empty shared cache: one builds, the others wait for it; all run correctly
    from the one entry, and each wheel is downloaded once."""
    from concurrent.futures import ThreadPoolExecutor

    from lk_helpers import LocalIndex, entrypoint
    from test_uv_cache import commit_locked, project_files

    names = [f"dep{i:02d}" for i in range(8)]
    counter = tmp_path / "builds"
    with LocalIndex(tmp_path / "index", names) as index:
        lock_env = {"UV_CACHE_DIR": str(tmp_path / "lock-cache"), "LK_TEST_BUILDS": str(counter)}
        sha = commit_locked(
            repo, project_files(deps=names, index=index.url), "project", {**lock_env, "UV_OFFLINE": "0"}
        )
        index.log.write_text("")
        shared = tmp_path / "shared"
        env = {
            "UV_CACHE_DIR": str(shared),
            "UV_LINK_MODE": "copy",
            "UV_OFFLINE": "0",
            "LK_TEST_BUILDS": str(counter),
        }
        check = ["python", "-c", "import dep00, dep07, demo; print(dep00.__file__, demo.VALUE)"]

        def job(i: int):
            return entrypoint(tmp_path / f"job{i}", str(repo.remote), sha, check, env, timeout=300)

        sysconfig.get_config_vars()  # filled once here: its lazy start is not thread-safe (uv's find_uv_bin)
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(job, range(6)))
        downloads = index.downloads()
    entries = _entries(shared / es.STORE / f"u{os.geteuid()}")
    assert len(entries) == 1, entries
    for r in results:
        assert r.returncode == 0, r.stderr
        assert "env store not used" not in r.stderr
        path, value = r.stdout.split()
        assert path.startswith(str(entries[0])) and value == "1"
    assert downloads == {f"{n}-1.0.0-py3-none-any.whl": 1 for n in names}
    logs = [
        next((tmp_path / f"job{i}/results/.launchkit/logs").glob("*_install.log")).read_text()
        for i in range(6)
    ]
    assert sum("env store: built" in log for log in logs) == 1
    assert sum("env store: reused" in log for log in logs) == 5


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pylock", "requirements", "requirements+project"])
def test_pip_locks_are_stored_and_reused(repo, tmp_path, kind):
    """A pylock.toml or a hashed requirements.txt: the pins are built into the store once; the project
    (and a `-e .` line) goes into each job's venv on top; a wrong hash still fails the job."""
    import hashlib

    from lk_helpers import LocalIndex, entrypoint
    from test_envdef_groups import BACKEND
    from test_envdef_locks import PROJECT

    with LocalIndex(tmp_path / "index", ["tinydep"]) as index:
        wheel = index.root / "files/tinydep-1.0.0-py3-none-any.whl"
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        url = index.url.rsplit("/simple", 1)[0] + "/files/" + wheel.name
        project = {"pyproject.toml": PROJECT, "_build/lkbackend.py": BACKEND}
        if kind == "pylock":
            files = {
                **project,
                "pylock.toml": 'lock-version = "1.0"\ncreated-by = "test"\nrequires-python = ">=3.11"\n\n'
                f'[[packages]]\nname = "tinydep"\nversion = "1.0.0"\n'
                f'wheels = [{{ url = "{url}", hashes = {{ sha256 = "{digest}" }} }}]\n',
            }
        else:
            pins = f"tinydep==1.0.0 \\\n    --hash=sha256:{digest}\n"
            files = (
                {**project, "requirements.txt": "-e .\n" + pins}
                if kind.endswith("project")
                else {"requirements.txt": pins}
            )
        sha = repo.commit(files, kind)
        env = {
            "UV_CACHE_DIR": str(tmp_path / "shared"),
            "UV_LINK_MODE": "copy",
            "UV_OFFLINE": "0",
            "UV_INDEX": index.url,
        }
        probe = ["python", "-c", "import tinydep; print(tinydep.__file__, tinydep.VALUE)"]
        if kind != "requirements":
            probe[-1] += "; import importlib.metadata as m; m.version('demo')"  # the project, on top
        for i in (1, 2):
            r = entrypoint(tmp_path / f"j{i}", str(repo.remote), sha, probe, env, timeout=240)
            assert r.returncode == 0, r.stderr
            assert "env store not used" not in r.stderr
            log = next((tmp_path / f"j{i}/results/.launchkit/logs").glob("*_install.log")).read_text()
            assert ("env store: built" if i == 1 else "env store: reused") in log, log
            path, value = r.stdout.split()
            assert f"/{es.STORE}/u{os.geteuid()}/" in path and value == "tinydep"
        # a hash that does not match: the store is not built, and the job fails as it always did
        if kind != "pylock":
            bad = "tinydep==1.0.0 --hash=sha256:" + "0" * 64 + "\n"
            sha = repo.commit({"requirements.txt": bad}, "bad hash")
            r = entrypoint(tmp_path / "bad", str(repo.remote), sha, probe, env, timeout=240)
            assert r.returncode == 106 and "hash" in r.stderr.lower(), r.stderr
            assert "env store not used: building the environment failed" in r.stderr


def test_entries_nobody_used_for_a_month_are_pruned(tmp_path):
    mine = es.user_tree(str(tmp_path / "cache"))
    old, new = "a" * 32, "b" * 32
    for k in (old, new):
        es.ensure_entry(mine, k, fake_build([]), print)
    abandoned = Path(mine) / ".build-x-1-2"
    abandoned.mkdir()
    now = os.stat(Path(mine) / new / es.MANIFEST).st_mtime
    month = now - 31 * 86400
    os.utime(Path(mine) / old / es.MANIFEST, (month, month))
    os.utime(abandoned, (now - 2 * 86400, now - 2 * 86400))
    removed: list[str] = []
    gone = es.prune(mine, now, removed.append)
    assert sorted(os.path.basename(p).rsplit("-", 1)[0] for p in gone) == [
        ".trash-.build-x-1-2",
        f".trash-{old}",
    ]
    assert removed == gone and all(os.path.isdir(p) for p in gone)  # renamed away, removal left to spawn
    assert os.path.isdir(Path(mine) / new) and not os.path.exists(Path(mine) / old)
    # an entry whose lock someone holds (building, or waiting for it) is left alone
    os.utime(Path(mine) / new / es.MANIFEST, (month, month))
    with lock_held_elsewhere(os.path.join(mine, f"{new}.lock")):
        assert es.prune(mine, now, removed.append) == []
    # an entry a running job holds a lease on is left, however old; its lease goes with it after
    lease = es.take_lease(mine, new, now)
    held = os.open(lease, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_SH)  # as the entrypoint holds it, for the command's whole life
    assert es.prune(mine, now, removed.append) == []
    os.close(held)
    (gone,) = es.prune(mine, now, removed.append)
    assert os.listdir(os.path.join(gone, ".leases")) == [os.path.basename(lease)]
    assert not {new, f"{new}.leases"} & set(os.listdir(mine))


def test_the_store_is_sealed_and_linked_to_nothing(tmp_path, monkeypatch):
    """The store is built in copy mode; any file still sharing its inode with another path (a hard
    link into uv's cache), or that someone else owns, becomes a private copy, and every file is made
    read-only, so that no write through the store reaches uv's cache, nor anyone else's."""
    cache_file = tmp_path / "cache-entry.py"
    cache_file.write_text("X = 1\n")
    tree = tmp_path / "venv/lib/python3.11/site-packages/pkg"
    tree.mkdir(parents=True)
    linked, mine = tree / "linked.py", tree / "mine.py"
    os.link(cache_file, linked)
    mine.write_text("Y = 1\n")
    os.chmod(mine, 0o664)
    (tree / "link-to-elsewhere").symlink_to(cache_file)
    assert es.seal(str(tmp_path / "venv")) == 1
    assert not os.path.samefile(linked, cache_file) and linked.read_text() == "X = 1\n"
    assert cache_file.stat().st_mode & 0o777 == 0o644  # (the cache's file is left as it was)
    assert {p.stat().st_mode & 0o777 for p in (linked, mine)} == {0o444}
    assert tree.stat().st_mode & 0o200  # directories stay the owner's to write (__pycache__, pruning)
    ino = mine.stat().st_ino
    # as another user sees them: every file of ours is someone else's (symlinks are left as they are)
    real = os.geteuid()
    monkeypatch.setattr(es.os, "geteuid", lambda: real + 4242)
    assert es.seal(str(tmp_path / "venv")) == 2
    assert mine.stat().st_ino != ino and mine.read_text() == "Y = 1\n"
    assert (tree / "link-to-elsewhere").is_symlink()


# ---- a hit that needs no uv: only the project is local


REGISTRY = 'source = { registry = "https://pypi.org/simple" }\n'


@pytest.mark.parametrize(
    ("sources", "only_project"),
    [
        ([REGISTRY, 'source = { editable = "." }\n'], True),
        ([REGISTRY, 'source = { virtual = "." }\n'], True),
        ([REGISTRY, 'source = { git = "https://github.com/a/b?rev=v1#0123abcd" }\n'], True),
        ([REGISTRY], True),
        (['source = { editable = "." }\n', 'source = { editable = "packages/lib" }\n'], False),  # workspace
        (['source = { editable = "." }\n', 'source = { directory = "../shared" }\n'], False),
        (['source = { editable = "." }\n', 'source = { path = "wheels/x-1.0-py3-none-any.whl" }\n'], False),
        (['source = { virtual = "tools" }\n'], False),
        (["source = something uv never writes\n"], False),  # not understood: not trusted to be complete
    ],
)
def test_only_the_project_is_local(sources, only_project):
    lock = "version = 1\n" + "".join(f'[[package]]\nname = "p{i}"\n{s}' for i, s in enumerate(sources))
    # dependency lines mention sources too, indented: never read as a package's own
    lock += (
        '[[package]]\nname = "x"\n'
        + REGISTRY
        + 'dependencies = [\n    { name = "y", source = { path = "y" } },\n]\n'
    )
    assert es.only_the_project_is_local(lock) is only_project


def test_linked_site_packages_reads_what_link_wrote(tmp_path):
    mine = es.user_tree(str(tmp_path / "cache"))
    entry, manifest, _ = es.ensure_entry(mine, K, fake_build([]), print)
    sp = tmp_path / "venv/lib/python3.12/site-packages"
    sp.mkdir(parents=True)
    assert es.linked_site_packages(str(sp)) == []  # not linked
    es.link(entry, manifest, str(tmp_path / "venv"))
    assert es.linked_site_packages(str(sp)) == [os.path.join(entry, manifest["site_packages"])]
    (sp / es.PTH).write_text("import os; os.system('x')\n")  # not link()'s line: nothing
    assert es.linked_site_packages(str(sp)) == []


def test_what_a_job_gets_are_copies_checked_against_the_build(tmp_path):
    """Metadata, data files and scripts in a job's venv are the job's own files (a write there never
    reaches the store), each checked against the digest taken when the entry was built."""
    mine = es.user_tree(str(tmp_path / "cache"))

    def checked(staging: str) -> dict:
        manifest = planned(fake_build([]))(staging)
        return dict(manifest, **es.checks(staging, manifest))

    entry, manifest, _ = es.ensure_entry(mine, K, checked, print)
    assert manifest["present"] == ["fakepkg"]
    venv = tmp_path / "venv"
    sp = venv / "lib/python3.11/site-packages"
    sp.mkdir(parents=True)
    es.link(entry, manifest, str(venv))
    store = _files(Path(entry))
    assert not _files(venv).keys() & store.keys()
    (venv / "share/fakepkg/data.txt").write_text("x\n")
    assert (Path(entry) / "venv/share/fakepkg/data.txt").read_text() == "data\n"
    # what differs from the build is named, and nothing of the link is left in the venv
    (Path(entry) / "meta/fakepkg-1.0.dist-info/METADATA").write_text("changed\n")
    venv2 = tmp_path / "venv2"
    (venv2 / "lib/python3.11/site-packages").mkdir(parents=True)
    for check in (True, False):  # the whole entry first; then each copy as it is made
        with pytest.raises(
            es.Damaged, match=r"meta/fakepkg-1\.0\.dist-info/METADATA changed since it was built"
        ):
            es.link(entry, manifest, str(venv2), check=check)
        assert list((venv2 / "lib/python3.11/site-packages").iterdir()) == []
    shutil.rmtree(Path(entry) / manifest["site_packages"] / "fakepkg")
    with pytest.raises(es.Damaged, match="fakepkg is missing"):
        es.link(entry, manifest, str(venv2), check=False)


def _as_root(path: Path, change) -> None:
    """Change a store file as a job running as root does (read-only modes do not stop root): made
    writable, changed, and its read-only mode put back."""
    mode = path.stat().st_mode if path.exists() else None
    for p in (path, path.parent):
        if p.exists():
            p.chmod(p.stat().st_mode | 0o200)
    change(path)
    if mode is not None and path.exists():
        path.chmod(mode)


MODULE = "venv/lib/python3.11/site-packages/fakepkg/__init__.py"
SITE = "venv/lib/python3.11/site-packages"


@pytest.mark.parametrize(
    ("rel", "change", "said"),
    [
        (MODULE, lambda p: p.write_text("VALUE = 'spoiled'\n"), f"{MODULE} changed since it was built"),
        (
            MODULE,
            lambda p: p.write_text("VALUE = 'from the STORE'\n"),
            f"{MODULE} changed since",
        ),  # same size
        (MODULE, lambda p: p.write_bytes(b""), f"{MODULE} changed since it was built"),
        (MODULE, lambda p: p.unlink(), f"{MODULE} is missing"),
        (MODULE, lambda p: os.replace(p.with_name("copy"), p), f"{MODULE} changed since"),  # same bytes
        (f"{SITE}/sitecustomize.py", lambda p: p.write_text("import os\n"), "sitecustomize.py was added"),
        (f"{SITE}/zz.pth", lambda p: p.write_text("import os\n"), "zz.pth was added since it was built"),
        (f"{SITE}/fakepkg/__pycache__/x.pyc", lambda p: None, None),  # Python's own: not looked at
    ],
    ids=["rewritten", "same-size", "emptied", "deleted", "replaced", "sitecustomize", "pth", "pycache"],
)
def test_a_store_module_a_root_job_changed_is_found_before_it_is_imported(tmp_path, rel, change, said):
    """Store modules are imported in place: before a job links an entry, every file of it is checked
    against the stamps taken when it was built (size and ctime, which no one can set back)."""
    mine = es.user_tree(str(tmp_path / "cache"))

    def built(staging: str) -> dict:
        manifest = planned(fake_build([]))(staging)
        es.seal(os.path.join(staging, "venv"))
        return dict(manifest, **es.checks(staging, manifest))

    entry, manifest, _ = es.ensure_entry(mine, K, built, print)
    assert manifest["tree"]["files"] == len((Path(entry) / es.STAMPS).read_text().splitlines()) > 4
    target = Path(entry) / rel
    if rel.endswith(".pyc"):
        target.parent.mkdir()
        target.write_bytes(b"python's own")
    if rel == MODULE:  # (a same-bytes copy to replace it with, gone again before the next job)
        shutil.copy2(target, target.with_name("copy"))
    _as_root(target, change)
    target.with_name("copy").unlink(missing_ok=True)
    venv = tmp_path / "venv"
    (venv / "lib/python3.11/site-packages").mkdir(parents=True)
    if said is None:
        es.link(entry, manifest, str(venv))
        return
    with pytest.raises(es.Damaged, match=re.escape(said)):
        es.link(entry, manifest, str(venv))
    assert list((venv / "lib/python3.11/site-packages").iterdir()) == []  # nothing linked


def test_the_record_of_a_linked_venv_is_what_uv_pip_freeze_prints(tmp_path):
    """install() writes $RESULTS_DIR/.launchkit/requirements.txt of a linked venv from its metadata
    (no uv process beside the command's start): the same text as `uv pip freeze`."""
    from launchkit.runtime.node.environment import pyenv

    mine = es.user_tree(str(tmp_path / "cache"))
    entry, manifest, _ = es.ensure_entry(mine, K, fake_build([]), print)
    venv = tmp_path / "venv"
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=60)
    es.link(entry, manifest, str(venv))
    sp = next(venv.glob("lib/python*/site-packages"))
    for dist, name in [("Zope.Interface-6.0", "zope.interface"), ("typing_extensions-4.16.0", "x")]:
        (sp / f"{dist}.dist-info").mkdir()
        (sp / f"{dist}.dist-info/METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n")
    project = sp / "demo-0.1.0.dist-info"
    project.mkdir()
    (project / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 0.1.0\n")
    url = {"url": (tmp_path / "checkout").as_uri(), "dir_info": {"editable": True}}
    (project / "direct_url.json").write_text(json.dumps(url))
    uv = subprocess.run(
        ["uv", "pip", "freeze", "--python", str(venv / "bin/python")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert uv.returncode == 0, uv.stderr
    assert pyenv.freeze_text(str(venv)) == uv.stdout
    (sp / "fakepkg-1.0.dist-info/direct_url.json").write_text(
        '{"url": "https://x/y.whl", "archive_info": {}}'
    )
    assert pyenv.freeze_text(str(venv)) is None  # a direct URL: left to uv


# ---- what one job does cannot reach another (real bash and uv)

DATA = {"etc/tinydata.json": '{"from": "the wheel"}\n'}
POISON = (
    'echo x > "$VIRTUAL_ENV/etc/tinydata.json"; '
    'for f in "$VIRTUAL_ENV"/lib/python*/site-packages/tinydata-1.0.0.dist-info/*; do echo x > "$f"; done'
)
READ = [
    "python",
    "-c",
    "import os, tinydata, importlib.metadata as m; "
    "print(open(os.environ['VIRTUAL_ENV'] + '/etc/tinydata.json').read().strip(), m.version('tinydata'))",
]
GOOD = '{"from": "the wheel"} 1.0.0'


def _files(top: Path) -> dict[tuple[int, int], str]:
    """(device, inode) -> path of every file under `top`, symlinks followed (what a write reaches) as
    long as they stay under `top` (not the interpreter a venv's bin/python names)."""
    found = {}
    for d, _, names in os.walk(top):
        for name in names:
            path = os.path.join(d, name)
            if not os.path.realpath(path).startswith(os.path.realpath(top) + os.sep):
                continue
            st = os.stat(path)
            found[(st.st_dev, st.st_ino)] = path
    return found


def _entries(mine: Path) -> list[Path]:
    return [p for p in mine.iterdir() if len(p.name) == 32 and p.is_dir()]


@contextlib.contextmanager
def data_package(repo, tmp_path: Path):
    """A hashed requirements.txt of one package that places a data file outside site-packages
    (`etc/tinydata.json`), and the environment of jobs that share one uv cache."""
    import hashlib

    from lk_helpers import LocalIndex

    with LocalIndex(tmp_path / "index", ["tinydata"], data={"tinydata": DATA}) as index:
        wheel = index.root / "files/tinydata-1.0.0-py3-none-any.whl"
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        sha = repo.commit({"requirements.txt": f"tinydata==1.0.0 --hash=sha256:{digest}\n"}, "data package")
        env = {"UV_CACHE_DIR": str(tmp_path / "shared"), "UV_OFFLINE": "0", "UV_INDEX": index.url}
        yield sha, env


def _job(repo, tmp_path: Path, sha: str, name: str, argv: list[str], env: dict[str, str]):
    from lk_helpers import entrypoint

    r = entrypoint(tmp_path / name, str(repo.remote), sha, argv, env, timeout=240)
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.slow
def test_a_job_cannot_change_what_later_jobs_read(repo, tmp_path):
    """`echo x > $VIRTUAL_ENV/etc/<pkg>.json` (and into its *.dist-info) in one job: the next job reads
    the package's own file, and so does a later install from uv's cache with the store off. Nothing in
    a linked venv shares an inode with the store or uv's cache."""
    with data_package(repo, tmp_path) as (sha, env):
        _job(repo, tmp_path, sha, "j1", ["bash", "-c", POISON], env)
        shared = _files(tmp_path / "shared")
        store = shared.keys() & _files(tmp_path / "shared" / es.STORE).keys()
        assert store and all(os.stat(shared[i]).st_nlink == 1 for i in store)  # not linked from the cache
        venv = _files(tmp_path / "j1/runtime/.venv")
        assert not venv.keys() & shared.keys(), sorted(venv[i] for i in venv.keys() & shared.keys())
        r = _job(repo, tmp_path, sha, "j2", READ, env)
        log = next((tmp_path / "j2/results/.launchkit/logs").glob("*_install.log")).read_text()
        assert "env store: reused" in log and r.stdout.strip() == GOOD, r.stdout
        r = _job(repo, tmp_path, sha, "j3", READ, {**env, "LAUNCHKIT_ENVSTORE": "0", "UV_LINK_MODE": "copy"})
        assert r.stdout.strip() == GOOD, r.stdout


@pytest.mark.slow
def test_a_damaged_entry_is_named_and_built_again(repo, tmp_path):
    with data_package(repo, tmp_path) as (sha, env):
        _job(repo, tmp_path, sha, "j1", READ, env)
        (entry,) = _entries(tmp_path / "shared" / es.STORE / f"u{os.geteuid()}")
        data = entry / "venv/etc/tinydata.json"
        data.chmod(0o644)  # (as whoever can write the store despite its modes: root, its owner)
        data.write_text("x\n")
        r = _job(repo, tmp_path, sha, "j2", READ, env)
        assert r.stdout.strip() == GOOD, r.stdout
        damaged = [line for line in r.stderr.splitlines() if "damaged" in line]
        assert damaged == [
            f"[launchkit] env store: {entry} is damaged (venv/etc/tinydata.json changed since it was"
            " built); building it again"
        ], r.stderr
        log = next((tmp_path / "j2/results/.launchkit/logs").glob("*_install.log")).read_text()
        assert "env store: built" in log
        shutil.rmtree(entry / "venv/lib" / os.listdir(entry / "venv/lib")[0] / "site-packages/tinydata")
        r = _job(repo, tmp_path, sha, "j3", READ, env)
        assert (
            r.stdout.strip() == GOOD and "tinydata/__init__.py is missing); building it again" in r.stderr
        ), r.stderr


# A job's command that prints the store module's value, then changes the module through its path in
# the store as a root job can (read-only modes do not stop root: made writable, changed, read-only again)
SPOIL = {
    "rewrites": "open(p, 'w').write('VALUE = 1 / 0\\n')",
    "empties": "open(p, 'w').close()",
    "deletes": "os.unlink(p)",
}


def _spoiling(how: str | None) -> list[str]:
    code = "import os, tinydata; print(tinydata.VALUE, flush=True); p = tinydata.__file__"
    if how:
        code += f"; os.chmod(p, 0o644); {SPOIL[how]}; os.path.exists(p) and os.chmod(p, 0o444)"
    return ["python", "-c", code]


@pytest.mark.slow
def test_a_store_module_a_job_changed_is_never_imported_by_the_next(repo, tmp_path):
    """Each job changes the module it imported from the store (rewritten, emptied, deleted, as root
    can); the next job of the key finds it before anything imports it, says so, builds the entry
    again and imports the package's own module."""
    with data_package(repo, tmp_path) as (sha, env):
        previous = None
        for i, how in enumerate([*SPOIL, None]):
            r = _job(repo, tmp_path, sha, f"j{i}", _spoiling(how), env)
            assert r.stdout.strip() == "tinydata", (how, r.stdout, r.stderr)
            damaged = [line for line in r.stderr.splitlines() if "damaged" in line]
            if previous is None:
                assert damaged == [], r.stderr
            else:
                what = "is missing" if previous == "deletes" else "changed since it was built"
                assert len(damaged) == 1 and re.search(
                    r"is damaged \(venv/lib/python3\.\d+/site-packages/tinydata/__init__\.py "
                    + what
                    + r"\); building it again$",
                    damaged[0],
                ), r.stderr
            previous = how
        assert len(_entries(tmp_path / "shared" / es.STORE / f"u{os.geteuid()}")) == 1  # spoiled ones gone


@pytest.mark.slow
@pytest.mark.parametrize("flock", [True, False], ids=["flock", "image-without-flock"])
def test_a_running_job_keeps_its_entry_through_a_prune(repo, tmp_path, flock):
    """A job still running past the 30 days holds a lease on its entry: a prune leaves it, and the job's
    next import works; once the job has ended, the entry goes. Without flock(1) in the image, the
    job's Python takes the lock."""
    from lk_helpers import entrypoint_env, entrypoint_path

    wait_then_import = [
        "python",
        "-c",
        "import sys; print('READY', flush=True); sys.stdin.readline(); import tinydata; print(tinydata.VALUE)",
    ]
    with data_package(repo, tmp_path) as (sha, env):
        full = entrypoint_env(tmp_path / "j1", str(repo.remote), sha, env)
        if not flock:  # the PATH's programs but flock
            tools = tmp_path / "tools-without-flock"
            tools.mkdir()
            for d in reversed(full["PATH"].split(os.pathsep)):
                for prog in Path(d).iterdir() if os.path.isdir(d) else []:
                    if prog.name != "flock" and os.access(prog, os.X_OK):
                        (tools / prog.name).unlink(missing_ok=True)
                        (tools / prog.name).symlink_to(prog)
            full["PATH"] = str(tools)
            assert shutil.which("flock", path=full["PATH"]) is None
        job = subprocess.Popen(
            ["bash", entrypoint_path(), *wait_then_import],
            env=full,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert job.stdout and job.stdout.readline().strip() == "READY"
            mine = tmp_path / "shared" / es.STORE / f"u{os.geteuid()}"
            (entry,) = _entries(mine)
            month = os.stat(entry / es.MANIFEST).st_mtime - 40 * 86400
            os.utime(entry / es.MANIFEST, (month, month))
            assert es.prune(str(mine), month + 40 * 86400, print) == []
            out, err = job.communicate("go\n", timeout=120)
        finally:
            if job.poll() is None:
                job.kill()
                job.communicate(timeout=30)
        assert job.returncode == 0 and out.strip() == "tinydata", err
        gone = es.prune(str(mine), month + 40 * 86400, print)  # the job has ended: its lease with it
        assert [os.path.basename(p).rsplit("-", 1)[0] for p in gone] == [f".trash-{entry.name}"]
