"""`--env-file FILE`: the dotenv syntax, parsed. Pure: text in, entries out (core/parse.py reads the file).

What python-dotenv and docker's env files agree on, and what users write:
- `NAME=value`, `export NAME=value`; blank lines and `# comments`; spaces around `=` are ignored;
- unquoted values end at the line's end or at ` #` (an inline comment), trailing spaces dropped;
- 'single quotes' keep everything literally; "double quotes" take \\n \\t \\r \\" \\\\ \\$ escapes; both
  may span lines;
- `NAME` alone copies the variable from the launching shell (as `--env NAME` does).
Values are not expanded (Beaker never expands env values): `$NAME` and `${NAME}` outside single quotes
are refused with the fix, rather than reaching the job literally.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from launchkit.errors import UsageError

_EXPORT = re.compile(r"export\s+")
_REFERENCE = re.compile(r"(?<!\\)\$(\{|[A-Za-z_])")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}


@dataclass(frozen=True)
class Entry:
    name: str
    value: str | None  # None: `NAME` alone, copied from the launching shell
    line: int  # 1-based, where the entry starts


def parse(text: str, source: str) -> list[Entry]:
    """The entries of a dotenv file's `text`; errors name `source:line`."""
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[Entry] = []
    i = 0
    while i < len(lines):
        start, raw = i + 1, lines[i].strip()
        i += 1
        if not raw or raw.startswith("#"):
            continue
        if m := _EXPORT.match(raw):
            raw = raw[m.end() :]
        name, sep, rest = raw.partition("=")
        name = name.strip()
        where = f"{source}:{start}"
        if not sep:
            out.append(Entry(name, None, start))
            continue
        rest = rest.lstrip()
        if rest[:1] in ("'", '"'):
            quote, body = rest[0], rest[1:]
            while (end := _closing(body, quote)) < 0:  # the value goes on on the next line
                if i >= len(lines):
                    raise UsageError(
                        f"{where}: {name}'s value has no closing {quote}", hint=f"end the value with {quote}"
                    )
                body += "\n" + lines[i]
                i += 1
            value, after = body[:end], body[end + 1 :].strip()
            if after and not after.startswith("#"):
                raise UsageError(
                    f"{where}: {name}: {after[:20]!r} after the closing {quote}",
                    hint="quote the whole value, or start a comment with ' #'",
                )
            if quote == '"':
                _no_reference(where, name, value)
                value = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), value)
        else:
            value = re.split(r"\s#", rest, maxsplit=1)[0].rstrip()
            _no_reference(where, name, value)
        out.append(Entry(name, value, start))
    return out


def _closing(body: str, quote: str) -> int:
    """The index of the quote that ends the value, or -1 (a double quote may be escaped)."""
    i = 0
    while i < len(body):
        if quote == '"' and body[i] == "\\":
            i += 2
            continue
        if body[i] == quote:
            return i
        i += 1
    return -1


def _no_reference(where: str, name: str, value: str) -> None:
    if _REFERENCE.search(value):
        raise UsageError(
            f"{where}: {name}'s value refers to a variable ($NAME), and env files are not expanded",
            hint="write the value itself, or single-quote it to keep the $ as it is",
        )
