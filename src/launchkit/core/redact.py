"""What counts as a secret, and credentials kept out of printed URLs. No I/O; standard library only
(the Application's reporter uses `redact_text` on every message).

- `looks_secret_name`: environment variable names whose values must go through `--env-secret`.
- `token_kind`: a value shaped like a known service token (by its documented prefix).
- `redact_url` / `redact_text`: URL user-info and credential query parameters replaced by `***`.
"""

from __future__ import annotations

import re

# Parts of a name that mark a secret anywhere in it (`*TOKEN*`, `*SECRET*`, `*PASSW*`, ...) or at its
# end (`*KEY`, `*PAT`, `*_PWD`). Whole-name matches: AZURE_API_BASE carries a key in its URL.
_SECRET_PARTS = ("TOKEN", "SECRET", "PASSW", "PASSPHRASE", "CREDENTIAL", "PRIVATE_KEY", "WEBHOOK")
_SECRET_ENDINGS = ("KEY", "KEYS", "PAT", "_PWD")
_SECRET_NAMES = frozenset({"AZURE_API_BASE"})
# Common names that only look secret: token counts and tokenizer settings are not credentials.
_NOT_SECRET = re.compile(r"TOKENIZ[A-Z]*|(?:MAX|MIN|NUM|TOTAL|N)_(?:[A-Z0-9]+_)*TOKENS?")

# Known token formats by prefix (each service documents its prefix); the value is never echoed.
_TOKEN_KINDS: tuple[tuple[str, str], ...] = (
    ("Hugging Face token", r"hf_[A-Za-z0-9]{20,}"),
    ("GitHub token", r"gh[pousr]_[A-Za-z0-9]{20,}"),
    ("GitHub token", r"github_pat_[A-Za-z0-9_]{20,}"),
    ("GitLab token", r"glpat-[A-Za-z0-9_-]{20,}"),
    ("API key (sk-...)", r"sk-[A-Za-z0-9_-]{20,}"),
    ("Slack token", r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    ("AWS access key", r"(?:AKIA|ASIA)[A-Z0-9]{16}"),
    ("Google API key", r"AIza[A-Za-z0-9_-]{30,}"),
)
_TOKENS = [(kind, re.compile(rf"(?<![A-Za-z0-9]){pattern}")) for kind, pattern in _TOKEN_KINDS]

# Query parameters that carry credentials (`?access_token=`, `token=`, `key=`, `sig=`, ...).
_CREDENTIAL_PARAM = re.compile(
    r"token|secret|passw|key|sig|credential|auth|session|code|ticket", re.IGNORECASE
)
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]]+")
MASK = "***"


def looks_secret_name(name: str) -> bool:
    """A variable name whose value must never land in a spec (it goes through --env-secret)."""
    upper = _NOT_SECRET.sub("", name.upper())
    return (
        name.upper() in _SECRET_NAMES
        or any(part in upper for part in _SECRET_PARTS)
        or upper.endswith(_SECRET_ENDINGS)
    )


def token_kind(value: str) -> str | None:
    """What kind of credential `value` looks like (by a known token prefix), else None."""
    return next((kind for kind, pattern in _TOKENS if pattern.search(value)), None)


def redact_url(url: str, mask: str | None = MASK) -> str:
    """`url` with its password, an http(s) user name (often a token) and credential query values
    replaced by `mask`; with `mask=None` they are removed. Anything that is not a URL is unchanged."""
    if "://" not in url:
        return url
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:  # not a parseable URL (e.g. a bad port): leave it
        return url
    netloc = parts.netloc
    if user is not None:
        host = netloc.rpartition("@")[2]
        if password is None and parts.scheme not in ("http", "https"):
            netloc = f"{user}@{host}"  # ssh://git@host: a user name, not a credential
        elif mask is None:
            netloc = f"{user}@{host}" if parts.scheme not in ("http", "https") else host
        elif password is not None and parts.scheme not in ("http", "https"):
            netloc = f"{user}:{mask}@{host}"
        else:
            netloc = f"{mask}@{host}"
    query = parts.query
    if query and _CREDENTIAL_PARAM.search(query):
        pairs = parse_qsl(query, keep_blank_values=True)
        kept = [
            (k, v if not _CREDENTIAL_PARAM.search(k) else mask)
            for k, v in pairs
            if mask is not None or not _CREDENTIAL_PARAM.search(k)
        ]
        query = urlencode(kept, safe="*/:")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def redact_text(text: str) -> str:
    """Every URL in `text` through `redact_url`."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)
