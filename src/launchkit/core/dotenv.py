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


def decode(data: bytes, source: str) -> str:
    """A dotenv file's bytes as text: a NUL byte (no environment variable can carry one) or bytes that are
    not UTF-8 (a spec is UTF-8) refused naming `source:line`, never the value."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UsageError(
            f"{source}:{line}: is not UTF-8 text (byte {e.start + 1})",
            hint="save the file as UTF-8 (Beaker specs are UTF-8 text)",
        ) from None
    if (nul := data.find(b"\0")) >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise UsageError(
            f"{source}:{line}: has a NUL byte (byte {nul + 1}), which no environment variable can carry",
            hint="remove it; for binary data store a base64 secret and decode it in the job",
        )
    return text


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
            quote, parts = rest[0], [rest[1:]]
            end, escaped = _closing(parts[0], quote, False)
            while end < 0:  # the value goes on on the next line: only that line is scanned (linear)
                if i >= len(lines):
                    raise UsageError(
                        f"{where}: {name}'s value has no closing {quote}", hint=f"end the value with {quote}"
                    )
                parts.append("\n" + lines[i])
                i += 1
                end, escaped = _closing(parts[-1], quote, escaped)
            body, end = "".join(parts), sum(map(len, parts[:-1])) + end
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


def _closing(part: str, quote: str, escaped: bool) -> tuple[int, bool]:
    """(the index in `part` of the quote that ends the value, or -1; whether the part ends inside an
    escape, so the next part's first character is escaped). `escaped`: this part's first one is."""
    i = 1 if escaped else 0
    while i < len(part):
        if quote == '"' and part[i] == "\\":
            i += 2
            continue
        if part[i] == quote:
            return i, False
        i += 1
    return -1, i > len(part)


def _no_reference(where: str, name: str, value: str) -> None:
    if _REFERENCE.search(value):
        raise UsageError(
            f"{where}: {name}'s value refers to a variable ($NAME), and env files are not expanded",
            hint="write the value itself, or single-quote it to keep the $ as it is",
        )
