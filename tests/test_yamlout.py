"""The spec's YAML writer must give PyYAML back exactly the data it was given."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from launchkit.core.yamlout import dump

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
WORDS = st.sampled_from(
    [
        "",
        " ",
        "yes",
        "No",
        "ON",
        "null",
        "~",
        "true",
        "1",
        "0x1f",
        "1:30",
        "1e3",
        ".inf",
        "2026-01-01",
        "<<",
        "=",
        "-",
        "- a",
        "a: b",
        "a #b",
        "#x",
        "'q'",
        '"q"',
        "*a",
        "&a",
        "!tag",
        "%x",
        "@x",
        "`x",
        "|",
        ">",
        "? x",
        "{a}",
        "[a]",
        "a,b",
        "python:3.12",
        "ai2/jupiter",
        "x\n",
        "x\n\n",
        "\nx",
        " x\ny",
        "x\r\ny",
        "a\u2028b",
        "é\n日本\n",
        "x \n y ",
        "\tx\ny",
        "x\n\ty",
        "--",
        "---",
        "...",
        "a\n---\nb",
        "a\n...\nb",
        "-c",
        "--lr",
        "-1",
        "-.5",
        "--flag=1",
        "-",
        "-.inf",
        "a=b",
        "-y",
        "-n",
        "+1",
        "/x:y",
        "x:",
        "x:y:z",
        "_",
        "x.",
        "a/b:c/d",
        "12e45678",
        "9ed6b61e",
        "1_000",
        "0o17",
        "0b101",
        "0x1F",
        "1.5e3",
        "2026-01-01T00:00:00",
        "2026-1-1",
        "01HXYZ",
        "0.1.0",
        "1.",
        "1e",
        "123abc",
        "1-2",
        "007",
        "1/2",
        "1+1",
        "3.12",
    ]
)
HEXISH = st.from_regex(r"[0-9][0-9a-fEe_.x-]{0,8}", fullmatch=True)
SCALAR = st.one_of(HEXISH, st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), TEXT, WORDS)
KEY = st.one_of(st.from_regex(r"[a-zA-Z][a-zA-Z0-9]{0,10}", fullmatch=True), WORDS.filter(bool))
DATA = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEY, inner, max_size=4)),
    max_leaves=25,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(DATA)
def test_round_trip(data):
    assert yaml.safe_load(dump(data)) == data


def test_script_is_a_literal_block():
    text = dump({"command": ["bash", "-c", 'set -e\necho "$@"\n', "x"]})
    assert text == 'command:\n- bash\n- -c\n- |\n  set -e\n  echo "$@"\n- x\n'


def test_readable_plain_scalars():
    assert dump({"image": {"docker": "python:3.12"}, "n": 2, "f": 1e-05, "ok": True, "none": None}) == (
        'image:\n  docker: python:3.12\n"n": 2\nf: 1.0e-05\nok: true\nnone: null\n'
    )
