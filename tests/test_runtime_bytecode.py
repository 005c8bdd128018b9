"""The bytecode shared between jobs in the node runtime (runtime/node/environment/bytecode.py), called directly:
the trust check on shared trees, the key, when it is off, seeding and pruning. Fast tier (tmp_path
trees; the background fill is recorded, not started; the end-to-end tests are in test_uv_cache.py and
test_creds_bytecode.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from launchkit.runtime.node.environment import bytecode, steplog

UID = os.geteuid()
DAY = 86400.0


def venv(tmp_path: Path, dists: tuple[str, ...] = ("numpy-2.0.dist-info",)) -> Path:
    v = tmp_path / "venv"
    sp = v / "lib/python3.12/site-packages"
    sp.mkdir(parents=True)
    for d in dists:
        (sp / d).mkdir()
    (v / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.3\n")
    (v / "bin").mkdir()
    (v / "bin/python").symlink_to(sys.executable)
    return v


ON = {"UV_CACHE_DIR": "", "LAUNCHKIT_BYTECODE_SEED_DELAY": "0"}


def test_private_tree_is_this_users_closed_real_directory(tmp_path):
    tree = tmp_path / "u"
    tree.mkdir(mode=0o700)
    tree.chmod(0o700)
    assert bytecode.private_tree(str(tree), UID)
    assert not bytecode.private_tree(str(tree), UID + 1)  # somebody else's
    for mode in (0o750, 0o705, 0o770, 0o701):
        tree.chmod(mode)
        assert not bytecode.private_tree(str(tree), UID), oct(mode)
    tree.chmod(0o700)
    (tmp_path / "link").symlink_to(tree)
    assert not bytecode.private_tree(str(tmp_path / "link"), UID)  # a symlink, even to a good tree
    (tmp_path / "file").write_text("")
    (tmp_path / "file").chmod(0o600)
    assert not bytecode.private_tree(str(tmp_path / "file"), UID)
    assert not bytecode.private_tree(str(tmp_path / "missing"), UID)


def test_tree_key_stands_for_the_venv_python_and_distributions(tmp_path):
    v = venv(tmp_path)
    sp = str(bytecode.site_packages(str(v)))
    first = bytecode.tree_key(str(v), sp)
    assert len(first) == 32 and bytecode.tree_key(str(v), sp) == first
    (Path(sp) / "demo").mkdir()  # not a distribution
    assert bytecode.tree_key(str(v), sp) == first
    (Path(sp) / "torch-2.5.dist-info").mkdir()
    second = bytecode.tree_key(str(v), sp)
    assert second != first
    (v / "pyvenv.cfg").write_text("version_info = 3.12.4\n")
    assert bytecode.tree_key(str(v), sp) != second


@pytest.mark.parametrize(
    ("extra", "off"),
    [
        ({}, False),
        ({"LAUNCHKIT_BYTECODE_CACHE": "0"}, True),
        ({"UV_CACHE_DIR": ""}, True),  # no shared cache: nothing to share
        ({"PYTHONPYCACHEPREFIX": "/mine"}, True),  # the user's own choice
        ({"PYTHONDONTWRITEBYTECODE": "1"}, True),
        ({"LAUNCHKIT_LOCAL_RUN": "local-1"}, True),  # a new venv path every run
        ({"LAUNCHKIT_UV_VENV": "/opt/venv"}, True),  # the image's venv has its .pyc files
        ({"LAUNCHKIT_SYSTEM_PYTHON": "1"}, True),
    ],
)
def test_off_when_it_cannot_help(tmp_path, extra, off):
    v = venv(tmp_path)
    environ = {"UV_CACHE_DIR": str(tmp_path / "cache"), **extra}
    assert bool(bytecode.off_reason(environ, str(v))) is off
    assert bytecode.off_reason({"UV_CACHE_DIR": "/c"}, str(tmp_path / "no-venv"))


def test_user_tree_is_made_private_under_a_shared_sticky_base(tmp_path):
    mine, why = bytecode.user_tree(str(tmp_path / "cache"), UID)
    assert why == "" and mine == str(tmp_path / "cache" / bytecode.BASE / f"u{UID}")
    assert (Path(mine).stat().st_mode & 0o777) == 0o700
    assert (Path(mine).parent.stat().st_mode & 0o7777) == 0o1777
    Path(mine).chmod(0o755)  # opened up (or made so by someone else): never trusted again as it is
    mine, why = bytecode.user_tree(str(tmp_path / "cache"), UID)
    assert mine == "" and why.endswith("not used") and "private directory" in why


def test_stale_trees_by_the_clock_given(tmp_path):
    for name, age in (("old", 15 * DAY), ("recent", 13 * DAY)):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (1_000_000_000 - age, 1_000_000_000 - age))
    (tmp_path / "file").write_text("")
    os.utime(tmp_path / "file", (0, 0))
    assert bytecode.stale_trees(str(tmp_path), now=1_000_000_000) == [str(tmp_path / "old")]
    assert bytecode.stale_trees(str(tmp_path / "missing"), now=0) == []


def test_seed_writes_hash_checked_pyc_under_the_prefix_once(tmp_path):
    src = tmp_path / "checkout"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg/mod.py").write_text("VALUE = 1\n")
    (src / ".venv").mkdir()
    (src / ".venv/skip.py").write_text("")
    prefix = tmp_path / "prefix"
    assert bytecode.seed([str(src)], str(prefix)) == 1
    pyc = next(prefix.rglob("mod.*.pyc"))
    head = pyc.read_bytes()[:16]
    assert head[:4] == importlib.util.MAGIC_NUMBER and head[4:8] == b"\3\0\0\0"  # checked hash
    assert head[8:] == importlib.util.source_hash(b"VALUE = 1\n")
    assert bytecode.seed([str(src)], str(prefix)) == 0  # up to date
    (src / "pkg/mod.py").write_text("VALUE = 2\n")  # same size: the hash tells
    assert bytecode.seed([str(src)], str(prefix)) == 1
    assert sys.pycache_prefix != str(prefix)  # this process's own prefix is given back
    assert not list(prefix.rglob("skip.*.pyc"))


def test_choose_fills_first_then_uses_the_tree(tmp_path):
    v = venv(tmp_path)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "train.py").write_text("print(1)\n")
    environ = {**ON, "UV_CACHE_DIR": str(tmp_path / "cache")}
    started: list[list[str]] = []
    log = steplog.StepLog(str(tmp_path / "bytecode.log"))

    def choose(now: float = 1e9) -> str:
        return bytecode.choose(environ, str(v), str(checkout), log, UID, now, started.append)

    assert choose() == ""  # the first job: nothing to use yet, filled in the background
    tree = Path(next(iter(started[0][started[0].index("--seed") + 1 :])))
    sp = bytecode.site_packages(str(v))
    assert started == [["--seed", str(tree), "--delay", "0", "--nice", "--", "stdlib", sp]]
    assert f"filling {tree} for later jobs" in Path(log.path).read_text()
    started.clear()
    assert (
        bytecode.choose(
            {**environ, "LAUNCHKIT_BYTECODE_SEED_NICE": "0"},
            str(v),
            str(checkout),
            log,
            UID,
            1e9,
            started.append,
        )
        == ""
    )
    assert "--nice" not in started[0]  # (a test's fill on a busy machine: niced, it would starve)

    bytecode.fill(["--seed", str(tree), "--delay", "0", "--", str(checkout)])  # (not the stdlib: fast)
    assert (tree / ".seeded").exists()
    started.clear()
    (checkout / "train.py").write_text("print(2)\n")
    assert choose() == str(tree)  # a later job: the tree, with the checkout checked into it
    assert started == []
    assert len(list(tree.rglob("train.*.pyc"))) == 1
    assert f"bytecode cache: {tree}" in Path(log.path).read_text()

    old = tree.parent / ("0" * 32)
    old.mkdir()
    os.utime(old, (1e9 - 15 * DAY, 1e9 - 15 * DAY))
    assert choose() == str(tree)
    assert started == [["--prune", str(old)]]
    bytecode.fill(started[0])
    assert not old.exists() and tree.exists()


def test_choose_leaves_an_untrusted_tree_alone(tmp_path):
    v = venv(tmp_path)
    cache = tmp_path / "cache"
    mine = cache / bytecode.BASE / f"u{UID}"
    mine.mkdir(parents=True)
    mine.chmod(0o777)
    started: list[list[str]] = []
    log = steplog.StepLog(str(tmp_path / "bytecode.log"))
    environ = {**ON, "UV_CACHE_DIR": str(cache)}
    assert bytecode.choose(environ, str(v), str(tmp_path), log, UID, 1e9, started.append) == ""
    assert started == [] and list(mine.iterdir()) == []
    assert "not used" in Path(log.path).read_text()


def test_the_fill_compiles_the_env_stores_packages_of_a_thin_venv(tmp_path):
    """A venv linked to the env store has its packages there: the first job's fill compiles them too,
    so later jobs import them compiled."""
    from launchkit.runtime.node.environment import envstore

    v = venv(tmp_path)
    store_sp = tmp_path / "store/venv/lib/python3.12/site-packages"
    store_sp.mkdir(parents=True)
    sp = bytecode.site_packages(str(v))
    (Path(sp) / envstore.PTH).write_text(f"import site; site.addsitedir({str(store_sp)!r})\n")
    started: list[list[str]] = []
    environ = {**ON, "UV_CACHE_DIR": str(tmp_path / "cache")}
    log = steplog.StepLog(str(tmp_path / "bytecode.log"))
    assert bytecode.choose(environ, str(v), str(tmp_path), log, UID, 1e9, started.append) == ""
    assert started[0][-3:] == ["stdlib", sp, str(store_sp)]
