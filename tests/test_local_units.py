"""Local backend units: the log record format (raw bytes in, same bytes out) and GPU shares."""

from __future__ import annotations

import io

from launchkit.backends.local import logs


def test_pump_and_parse_round_trip_raw_bytes(tmp_path):
    data = b"plain\n\xff\xfe binary \x1b[0m\r progress\r\n" + b"y" * 5000 + b"\n\ntrailing without newline"
    path = tmp_path / "r.log"
    logs.pump(io.BytesIO(data), str(path))
    records = logs.read_records(str(path))
    assert b"".join(line for _, line in records) == data
    assert len(records) == 5
    stamps = [ts for ts, _ in records]
    assert stamps == sorted(stamps) and stamps[0] > 1_600_000_000 * 10**9


def test_tail_reader_keeps_partial_records_for_later(tmp_path):
    path = tmp_path / "r.log"
    path.write_bytes(b"1 one\n2 tw")
    tail = logs.Tail(str(path))
    assert list(tail.read()) == [(1, b"one\n")]
    with open(path, "ab") as f:
        f.write(b"o\n3~end\n")
    assert list(tail.read()) == [(2, b"two\n"), (3, b"end")]
    assert list(tail.read()) == []


def test_gpu_share_gives_each_replica_its_own_gpus():
    from launchkit.backends.local.supervisor import gpu_share

    assert gpu_share(0, 4, 2, 1) == (0, None)
    assert gpu_share(8, 4, 2, 0) == (4, "0,1,2,3")
    assert gpu_share(8, 4, 2, 1) == (4, "4,5,6,7")
    assert gpu_share(2, 4, 2, 1) == (2, None)  # not enough for disjoint shares: all share all
    assert gpu_share(2, None, 1, 0) == (2, None)
