"""Secret values masked in `follow` and `logs` output (issue 31): the streaming filter (a value split
across writes is still masked), and the commands against the fake Beaker and the local backend."""

from __future__ import annotations

import io
import random

import pytest

from fakebeaker.scenarios import BASIC_SECRETS
from launchkit.masking import MASK, MaskedOutput, Masker, patterns

WS = "ai2/launchkit"


def _filtered(values: list[str], chunks: list[bytes]) -> bytes:
    m = Masker(patterns(values))
    return b"".join(m.feed(c) for c in chunks) + m.end()


def _whole(values: list[str], data: bytes) -> bytes:
    return _filtered(values, [data])


@pytest.mark.parametrize("seed", range(40))
def test_any_split_of_the_stream_gives_the_same_output(seed):
    rng = random.Random(seed)
    values = ["hf_abcdefgh1234", "hf_abcd", "s3cr3t-\N{SNOWMAN}", "ABAB"]
    words = [v.encode() for v in values] + [
        b"hf_",
        b"hf_abc",
        b"AB",
        b" ",
        b"\n",
        b"text",
        b"A",
        "\N{SNOWMAN}".encode(),
    ]
    data = b"".join(rng.choice(words) for _ in range(200))
    cuts = sorted(rng.sample(range(1, len(data)), 30))
    chunks = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    assert _filtered(values, chunks) == _whole(values, data)
    for v in values:
        assert v.encode() not in _filtered(values, chunks)


def test_a_value_split_across_writes_is_masked():
    out = _filtered(["hf_secretvalue42"], [b"token=hf_sec", b"retval", b"ue42 done\n"])
    assert out == b"token=" + MASK + b" done\n"


def test_the_held_back_tail_is_let_out_or_masked_at_the_end():
    m = Masker(patterns(["hf_secretvalue42"]))
    assert m.feed(b"line ends with hf_") == b"line ends with "  # may begin the value: held
    assert m.end() == b"hf_"  # the stream ended: it was not the value
    m = Masker(patterns(["hf_secretvalue42"]))
    assert m.feed(b"cut hf_secretval") == b"cut "
    assert m.end() == MASK  # most of the value: never shown
    m = Masker(patterns(["hf_secretvalue42"]))
    assert m.feed(b"whole lines\n") == b"whole lines\n"  # nothing held at a line's end


def test_longer_values_win_and_lines_of_a_multi_line_value_are_masked():
    key = "-----BEGIN KEY-----\nMIIBVwIBADANBgkqhkiG9w0BAQEFAAS\n-----END KEY-----\n"
    out = _whole(["hf_abcd", "hf_abcdefgh1234", key, "ab"], b"hf_abcdefgh1234 hf_abcd ab " + key.encode())
    assert out.count(MASK) == 3 and b" ab " in out  # values under 4 bytes are not masked
    assert b"MIIBVwIB" not in _whole([key], b"printed one line: MIIBVwIBADANBgkqhkiG9w0BAQEFAAS\n")


def test_masked_output_reads_the_values_once_on_the_first_write():
    asked = []
    buf = io.BytesIO()
    out = MaskedOutput(buf, lambda: asked.append(1) or ["topsecret"])
    out.end()
    assert asked == []  # no output, no lookup
    for chunk in (b"a topsec", b"ret b\n"):
        out.write(chunk)
    out.end()
    assert buf.getvalue() == b"a *** b\n" and asked == [1]


# --------------------------------------------------------------------------- the commands, on Beaker
def _experiment(fake, name: str, lines: list[str]):
    spec = {
        "version": "v2",
        "description": "x [launchkit]",
        "tasks": [
            {
                "name": "main",
                "image": {"docker": "python:3.11"},
                "context": {},
                "command": ["true"],
                "envVars": [{"name": "HF_TOKEN", "secret": "HF_TOKEN"}, {"name": "MODE", "value": "x"}],
                "datasets": [{"mountPath": "/creds/gh", "source": {"secret": "GITHUB_TOKEN"}}],
                "result": {"path": "/results"},
            }
        ],
    }
    exp = fake.state.add_experiment(WS, name, author="alice", spec=spec)
    job = fake.state.schedule_job(exp)
    fake.state.append_logs(job, lines)
    fake.state.finish_job(job, 0)
    return exp


LINES = [
    f"token is {BASIC_SECRETS['HF_TOKEN']}",
    f"gh {BASIC_SECRETS['GITHUB_TOKEN']} and the shared W&B key {BASIC_SECRETS['WANDB_API_KEY']}",
]


@pytest.mark.slow
def test_logs_and_follow_mask_the_secrets_the_job_was_given(fake_beaker):
    from conftest import run_cli

    exp = _experiment(fake_beaker, "masked", LINES)
    for args in (("logs", exp.id), ("follow", exp.id), ("logs", "--follow", exp.id)):
        r = run_cli(*args, timeout=60)
        assert r.code == 0, r.stderr
        assert "token is ***" in r.stdout and "gh *** and" in r.stdout, r.stdout
        assert BASIC_SECRETS["HF_TOKEN"] not in r.stdout + r.stderr
        assert BASIC_SECRETS["WANDB_API_KEY"] in r.stdout  # not given to this job: not known as its secret
    shown = run_cli("logs", "--no-mask", exp.id, timeout=60)
    assert shown.code == 0 and BASIC_SECRETS["HF_TOKEN"] in shown.stdout


@pytest.mark.slow
def test_a_secret_the_user_may_not_read_is_named_not_masked(fake_beaker):
    from conftest import run_cli

    exp = _experiment(fake_beaker, "readonly", LINES)
    fake_beaker.state.find_workspace(WS).readers.add(fake_beaker.user("alice").id)  # 403 on values
    r = run_cli("logs", exp.id, timeout=60)
    assert r.code == 0, r.stderr
    assert "cannot read the value of secret GITHUB_TOKEN, HF_TOKEN to mask it" in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1
