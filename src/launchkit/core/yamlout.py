"""Deterministic, readable YAML for JSON-like data (the Beaker spec), without importing PyYAML.

`import yaml` costs ~10 ms, a tenth of the dry-run budget, for output that needs a small subset of
YAML: block mappings and sequences of str/int/float/bool/None. Strings are plain only when that is
unambiguous, multi-line strings become literal blocks (`|`), everything else is double-quoted with
escapes. tests/test_yamlout.py checks with PyYAML (and hypothesis) that `yaml.safe_load` gives the
data back exactly.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

# Plain (unquoted) only for simple words that YAML 1.1 cannot read as anything but a string.
_PLAIN = re.compile(r"(?:--?)?[A-Za-z_/][A-Za-z0-9_./@+=-]*(?::[A-Za-z0-9_./@+=-]+)*")
_NOT_STRINGS = {"yes", "no", "on", "off", "true", "false", "null", "y", "n"}
# Starting with a digit (commit SHAs, ids) is fine unless some YAML reader could take it for a number
# or a date: 12, 1_0, 1.5, 1e5, 0x1f, 0o17, 0b1, 2026-01-01, 1:30.
_DIGIT_PLAIN = re.compile(r"[0-9][A-Za-z0-9_./@+=-]*")
_NUMBERISH = re.compile(
    r"[0-9_]*\.?[0-9_]*(?:[eE][-+]?[0-9_]+)?|0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+"
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}.*"
)
# Characters a YAML reader rejects or treats as line breaks: they must be escaped.
_ESCAPE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
_BLOCK_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")


def dump(data: Any) -> str:
    """YAML text for `data` (dicts keep their order)."""
    if not (isinstance(data, (dict, list)) and data):
        return _scalar(data) + "\n"
    lines: list[str] = []
    _collection(data, 0, lines)
    return "\n".join(lines) + "\n"


def _collection(value: dict[str, Any] | list[Any], indent: int, lines: list[str]) -> None:
    """A non-empty mapping or sequence, one entry per line at `indent` (sequences under a key share
    its indentation, as PyYAML writes them)."""
    pad = " " * indent
    if isinstance(value, dict):
        for key, item in value.items():
            head = f"{pad}{_scalar(str(key))}:"
            if isinstance(item, (dict, list)) and item:
                lines.append(head)
                _collection(item, indent + 2 if isinstance(item, dict) else indent, lines)
            else:
                lines.append(f"{head} {_value(item, indent + 2)}")
        return
    for item in value:
        if isinstance(item, (dict, list)) and item:
            nested: list[str] = []
            _collection(item, indent + 2, nested)
            lines.append(f"{pad}- {nested[0][indent + 2 :]}")  # the first entry shares the dash's line
            lines.extend(nested[1:])
        else:
            lines.append(f"{pad}- {_value(item, indent + 2)}")


def _value(value: Any, indent: int) -> str:
    if isinstance(value, str) and _block_ok(value):
        return _block(value, indent)
    return _scalar(value)


def _block_ok(text: str) -> bool:
    # Multi-line, starting with a visible character (so the content indentation is unambiguous),
    # and nothing a YAML reader would normalise (CR, NEL, LS/PS, control characters).
    return "\n" in text and text[0] not in " \t\n" and not _BLOCK_UNSAFE.search(text)


def _block(text: str, indent: int) -> str:
    """A literal block scalar: `|` keeps one final newline, `|-` none, `|+` all of them."""
    body = text.rstrip("\n")
    trailing = len(text) - len(body)
    chomp = "-" if trailing == 0 else ("" if trailing == 1 else "+")
    pad = " " * indent
    lines = [pad + line if line else "" for line in body.split("\n")] + [""] * max(trailing - 1, 0)
    return "\n".join([f"|{chomp}", *lines])


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    text = str(value)
    if (_PLAIN.fullmatch(text) and text.lower() not in _NOT_STRINGS) or (
        _DIGIT_PLAIN.fullmatch(text) and not _NUMBERISH.fullmatch(text)
    ):
        return text
    quoted = json.dumps(text, ensure_ascii=False)  # JSON escapes are valid YAML double-quoted escapes
    return _ESCAPE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    if e and exponent[0] not in "+-":
        exponent = "+" + exponent
    return mantissa + (f"e{exponent}" if e else "")
