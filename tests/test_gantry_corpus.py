"""Real `gantry run` lines replayed through `launchkit run --dry-run` mean what gantry 3.7.0 makes of them.

The corpus, gantry's recorded specs and the meaning extractor are in tests/gantry_corpus.py (see its
docstring); re-record with `uv run python tests/data/gantry_corpus/record.py`, print the differences with
`uv run python tests/gantry_corpus.py report`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

import gantry_corpus as gc

LINES = gc.load_lines()
RECORDS = gc.load_records()
RECORDED = [ln for ln in LINES if ln["id"] in RECORDS]
GANTRY = os.environ.get("FAKEBEAKER_GANTRY", "/tmp/gantry-venv/bin/gantry")


# ---- the corpus as data


def test_corpus_is_large_sourced_sorted_and_unique():
    assert len(LINES) >= 110 and len({ln["repo"] for ln in LINES}) >= 10
    keys = [(ln["repo"], ln["path"], ln["line"], ln["commit"]) for ln in LINES]
    assert keys == sorted(keys)
    assert len({ln["id"] for ln in LINES}) == len(LINES)
    assert len({(ln["raw"], str(ln.get("argv"))) for ln in LINES}) == len(LINES)  # duplicates: seen_also
    for ln in LINES:
        assert len(ln["commit"]) == 40 and ln["path"] and ln["line"] >= 1, ln["id"]
        assert ("argv" in ln) != ("skip" in ln), ln["id"]  # usable, or kept with the reason
        if "argv" in ln:
            assert ln["raw"].startswith("gantry run") and "--" in ln["argv"], ln["id"]


def test_every_usable_line_is_recorded_with_a_spec_or_a_refusal():
    usable = {ln["id"] for ln in LINES if "argv" in ln}
    assert set(RECORDS) == usable
    for lid, rec in RECORDS.items():
        spec = gc.SPECS / f"{lid}.yaml"
        assert spec.exists() == (rec["exit"] == 0), lid
        if rec["exit"] != 0:
            assert rec["stderr_tail"], lid


# ---- the extractor (fast unit tests: each field maps to its counterpart)


def _spec(env: list[dict[str, Any]], **task: Any) -> dict[str, Any]:
    return {
        "budget": "ai2/b",
        "tasks": [{"name": "main", "arguments": ["python", "x.py"], "envVars": env, **task}],
    }


def test_meaning_maps_gantry_and_launchkit_encodings_to_the_same_fields():
    g = _spec(
        [
            {"name": "GANTRY_VERSION", "value": "3.7.0"},
            {"name": "GITHUB_REPO", "value": "a/b"},
            {"name": "GANTRY_NO_PYTHON", "value": "1"},
            {"name": "GANTRY_INSTALL_CMD", "value": "pip install ."},
            {"name": "GANTRY_USE_TORCHRUN", "value": "1"},
            {"name": "GANTRY_AWS_CONFIG", "secret": "awsc"},
            {"name": "FOO", "value": "1"},
            {"name": "HF_TOKEN", "secret": "hf"},
        ],
        datasets=[
            {"mountPath": "/gantry", "source": {"beaker": "01ENTRY"}},
            {"mountPath": "/w", "source": {"weka": "bucket"}},
        ],
        replicas=2,
        leaderSelection=True,
        constraints={"cluster": ["ai2/jupiter"]},
    )
    lk = _spec(
        [
            {"name": "LAUNCHKIT_VERSION", "value": "0.1"},
            {"name": "LAUNCHKIT_NO_PYTHON", "value": "1"},
            {"name": "LAUNCHKIT_INSTALL_CMD", "value": "pip install ."},
            {"name": "LAUNCHKIT_LAUNCHER", "value": "torchrun"},
            {"name": "LAUNCHKIT_AWS_CONFIG", "secret": "awsc"},
            {"name": "LAUNCHKIT_PROFILE_SETUP", "value": "ib"},
            {"name": "FOO", "value": "1"},
            {"name": "HF_TOKEN", "secret": "hf"},
        ],
        datasets=[{"mountPath": "/w", "source": {"weka": "bucket"}}],
        replicas=2,
        leaderSelection=True,
        constraints={"cluster": ["ai2/jupiter-cirrascale-2"]},
    )
    aliases = {"ai2/jupiter-cirrascale-2": "ai2/jupiter"}
    gm, lm = gc.meaning(g, "gantry", clusters=aliases), gc.meaning(lk, "launchkit", clusters=aliases)
    assert gc.differences(gm, lm) == {}
    assert gm["python"] == {"manager": "none", "install": "pip install ."}
    assert gm["credentials"] == {"aws_config": "awsc"} and gm["secrets"] == {"HF_TOKEN": "hf"}
    assert gm["env"] == {"FOO": "1"} and gm["mounts"] == {"/w": {"weka": "bucket"}}
    assert gm["multinode"] == {"replicas": 2, "leader_selection": True} and gm["clusters"] == ["ai2/jupiter"]


def test_differences_name_each_field_and_only_listed_additions_pass():
    base = [{"name": "FOO", "value": "1"}]
    g = gc.meaning(_spec(base, context={"priority": "high"}), "gantry")
    added = base + [{"name": "HF_HOME", "value": "/weka/x"}, {"name": "NCCL_IB_HCA", "value": "mlx5"}]
    lk = gc.meaning(_spec(added, context={"priority": "normal"}, hostNetworking=True), "launchkit")
    d = gc.differences(g, lk)
    assert d == {
        "env.HF_HOME": (None, "/weka/x"),
        "priority": ("high", "normal"),
        "multinode.host_networking": (None, True),
    }
    assert gc.category("env.HF_HOME", d["env.HF_HOME"]) == "env: added by launchkit"
    assert "NCCL_IB_HCA" in gc.ADDED_ENV and all(gc.ADDED_ENV.values())  # each addition has its reason


def test_dry_run_argv_keeps_the_users_flags_and_replaces_their_save_spec():
    argv = ["--gpus", "1", "--save-spec", "mine.yaml", "-y", "--", "python", "--save-spec", "x"]
    assert gc.dry_run_argv(argv, "F") == [
        "--gpus", "1", "-y", "--dry-run", "--save-spec", "F", "--", "python", "--save-spec", "x"
    ]  # fmt: skip
    assert gc.option_values(["-c", "a", "--cluster=b", "--", "-c", "z"], "--cluster", "-c") == ["a", "b"]


# ---- the replay


@pytest.fixture(scope="module")
def corpus_env(tmp_path_factory):
    """One fake Beaker knowing everything the corpus names, one repository with its files."""
    from fakebeaker import FakeBeaker

    tmp = tmp_path_factory.mktemp("corpus")
    repo = gc.make_repo(tmp / "repo", gc.corpus_files(LINES))
    with FakeBeaker(gc.build_state(LINES), directory=tmp / "fb") as fake:
        yield fake, repo, gc.state_maps(fake.state)


@pytest.mark.slow  # about 1 s a line in-process (launchkit's prepare against the fake)
@pytest.mark.parametrize("line", RECORDED, ids=[ln["id"] for ln in RECORDED])
def test_launchkit_means_what_gantry_means(line, corpus_env, monkeypatch):
    fake, repo, maps = corpus_env
    for k, v in fake.env.items():
        monkeypatch.setenv(k, v)
    status, diffs = gc.replay_line(line, RECORDS[line["id"]], repo, maps)
    shown = "\n".join(f"  {f}: gantry {a!r} / launchkit {b!r}" for f, (a, b) in diffs.items())
    assert status in ("same", "refused-ok"), f"{line['raw'][:200]}\n{shown}"


# ---- the recordings are still what gantry 3.7.0 produces


@pytest.mark.slow
def test_recordings_match_what_gantry_produces_now(tmp_path):
    if not Path(GANTRY).exists():
        pytest.skip(f"gantry 3.7.0 is not installed at {GANTRY} (bash .ci/install-gantry)")
    import sys

    from fakebeaker import FakeBeaker

    sys.path.insert(0, str(gc.DATA))
    import record

    accepted = [ln for ln in RECORDED if RECORDS[ln["id"]]["exit"] == 0]
    refused = [ln for ln in RECORDED if RECORDS[ln["id"]]["exit"] != 0]
    sample = accepted[:: max(1, len(accepted) // 4)][:4] + refused[:1]
    repo = gc.make_repo(tmp_path / "repo", gc.corpus_files(LINES))
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "specs"
    out.mkdir()
    with FakeBeaker(gc.build_state(LINES), directory=tmp_path / "fb") as fake:
        env = record.gantry_env(fake, home)
        maps = gc.state_maps(fake.state)
        for ln in sample:
            rec = record.run_gantry(GANTRY, ln, repo, env, out, fake.state)
            old = RECORDS[ln["id"]]
            assert rec["exit"] == old["exit"], (ln["id"], rec)
            if rec["exit"] == 0:
                now = gc.meaning(yaml.safe_load((out / f"{ln['id']}.yaml").read_text()), "gantry", **maps)
                then = gc.meaning(
                    yaml.safe_load((gc.SPECS / f"{ln['id']}.yaml").read_text()), "gantry", **maps
                )
                assert gc.differences(then, now) == {}, ln["id"]
            else:
                assert rec["stderr_tail"][-1] == old["stderr_tail"][-1], ln["id"]
