"""Tables keep the answer at COLUMNS=80 (issue 45, item 4): values users look for are shortened (the
vendor prefix, `nodes free`/`cordon`) or moved to a table or line of their own, never cut with `…`."""

from __future__ import annotations

import json

from inproc import run_main
from test_queue import WS, fs

AT_80 = {"COLUMNS": "80"}


def _fits(text: str) -> None:
    for line in text.splitlines():
        assert len(line) <= 80, line
    assert "…" not in text, text


def test_find_gpus_for_a_replica_keeps_when_and_what(fake_beaker):
    st = fake_beaker.state
    st.workspaces[st.find_workspace(WS).id].slot_limit = 64
    fs.allocate(st, "ai2/jupiter", 32, budget="ai2/oe-default")
    r = run_main("find-gpus", "--gpus", "8", "-w", WS, env=AT_80)
    assert r.code == 0, r.stderr
    _fits(r.stdout)
    rows = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("ai2/")}
    assert "nodes free" in r.stdout and " cordon " in r.stdout  # when it could start, whole
    assert "START: nodes free = when nodes free up; cordon = when cordoned nodes return" in r.stdout
    assert "A100 80GB, L40S" in r.stdout and "NVIDIA" not in r.stdout  # the type, told apart
    assert "unallocated" in r.stdout and "allocated" in r.stdout
    assert rows  # and the JSON keeps the backend's own words
    start = {x["cluster"]: x["start"] for x in json.loads(run_main("find-gpus", "--gpus", "8", "-w", WS,
                                                                    "--json").stdout)}  # fmt: skip
    assert start["ai2/holmes"] == "when cordoned nodes return"


def test_find_gpus_by_type_keeps_the_types_and_tags_whole(fake_beaker):
    for args in (("--gpu-type", "h100"), ("--gpu-type", "a100"), ()):
        r = run_main("find-gpus", *args, env=AT_80)
        assert r.code == 0, r.stderr
        _fits(r.stdout)
    assert "A100 80GB, L40S" in r.stdout and "interconnect:ib, storage:weka" in r.stdout, r.stdout
    wide = run_main("find-gpus", env={"COLUMNS": "200"}).stdout  # room: one table, as before
    assert wide.splitlines()[0].split()[-2:] == ["GPU_TYPES", "TAGS"] and "\n\n" not in wide


def test_profiles_list_reads_at_80_columns_and_cuts_no_value():
    r = run_main("profiles", "--list", env=AT_80)
    assert r.code == 0, r.stderr
    for line in r.stdout.splitlines():  # wider only for one value that has no space to wrap at
        assert len(line) <= 80 or " " not in line.strip(), line
    words = r.stdout.split()
    assert "ai2/prometheus*" in words and "--preset" in words
    assert "NCCL_TUNER_CONFIG_PATH=/var/lib/tcpxo/lib64/a3plus_tuner_config_ll128.textproto" in words
