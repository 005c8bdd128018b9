"""What counts as a secret, and credentials kept out of printed URLs. No I/O; standard library only
(the Application's reporter uses `redact_text` on every message).

- `looks_secret_name`: environment variable names whose values must go through `--env-secret`.
- `token_kind`: a value shaped like a known service token (by its documented prefix).
- `secret_value_kind`: why a value is itself a secret (token, credentials in a URL, JWT, PEM private
  key, a long random string; for a secret-looking name, any word that is not a path, number or URL).
- `refuse_secret_value`: the one rule every value written into a spec goes through.
- `redact_url` / `redact_text`: URL user-info and credential query parameters replaced by `***`.
- `url_host_only`: a URL that is itself a credential (a Slack webhook) shown as scheme and host.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from itertools import pairwise
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from launchkit.errors import UsageError

# Parts of a name that mark a secret anywhere in it (`*TOKEN*`, `*SECRET*`, `*PASSW*`, ...) or at its
# end (`*KEY`, `*PAT`, `*_PWD`). Whole-name matches: AZURE_API_BASE carries a key in its URL.
_SECRET_PARTS = ("TOKEN", "SECRET", "PASSW", "PASSPHRASE", "CREDENTIAL", "PRIVATE_KEY", "WEBHOOK")
_SECRET_ENDINGS = ("KEY", "KEYS", "PAT", "_PWD")
_SECRET_NAMES = frozenset({"AZURE_API_BASE"})
# Words of a name (between `_`s) that mark a secret: `AUTH`, `HF_AUTH`, `BASIC_AUTH`, `AUTHORIZATION`
# (not `AUTHOR`, `GIT_AUTHOR_NAME` or `OAUTH_CLIENT_ID`).
_SECRET_WORDS = frozenset({"AUTH", "AUTHORIZATION", "BEARER"})
# An HTTP Authorization header's value (`Bearer <token>`, `Basic <base64>`): a credential by its shape.
_AUTH_VALUE = re.compile(r"(?i)\s*(?:bearer|basic|token|digest)\s+[A-Za-z0-9+/=._~-]{8,}\s*")
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

# A Slack webhook is itself the credential (whoever has the URL can post), in any case of the host.
_SLACK_WEBHOOK = re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/", re.IGNORECASE)
_JWT = re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")
# PEM blocks that hold a secret (certificates and public keys are public: not refused)
_PEM = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*(?:PRIVATE KEY|PRIVATE KEY BLOCK|PGP MESSAGE))-----")
# Runs of base64/base64url characters; a random one is long, mixes cases and digits (letter case
# switching often, few separators), unlike model names, paths, ULIDs, git SHAs and run names.
_RUN = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_BOOL = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null"})


def looks_secret_name(name: str) -> bool:
    """A variable name whose value must never land in a spec (it goes through --env-secret)."""
    upper = _NOT_SECRET.sub("", name.upper())
    return (
        name.upper() in _SECRET_NAMES
        or any(part in upper for part in _SECRET_PARTS)
        or not _SECRET_WORDS.isdisjoint(upper.split("_"))
        or upper.endswith(_SECRET_ENDINGS)
    )


def token_kind(value: str) -> str | None:
    """What kind of credential `value` looks like (by a known token prefix), else None."""
    return next((kind for kind, pattern in _TOKENS if pattern.search(value)), None)


def _entropy(s: str) -> float:
    return -sum(n / len(s) * math.log2(n / len(s)) for n in Counter(s).values())


def _random_run(value: str) -> bool:
    """A long base64-ish run that looks random (tuned on real names and ids: tests/test_creds_values.py)."""
    for run in _RUN.findall(value):
        t = run.rstrip("=")
        if len(t) < 24 or not (re.search("[a-z]", t) and re.search("[A-Z]", t) and re.search("[0-9]", t)):
            continue
        seps = sum(c in "+/_-" for c in t)
        pairs = [(a, b) for a, b in pairwise(t) if a.isalpha() and b.isalpha()]
        case_switches = sum(a.isupper() != b.isupper() for a, b in pairs) / max(1, len(pairs))
        if seps <= max(2, len(t) * 0.1) and case_switches >= 0.25 and _entropy(t) >= 3.8:
            return True
    return False


def url_credential(value: str) -> str | None:
    """What credential a URL in `value` carries (user-info, or a secret query/fragment parameter)."""
    if "://" not in value:
        return None

    for m in _URL.finditer(value):
        try:
            parts = urlsplit(m.group(0))
            user, password = parts.username, parts.password
        except ValueError:
            continue
        if password:
            return "a URL with a password"
        if user and parts.scheme.lower() in ("http", "https"):
            return "a URL with a user name (a token, on http)"
        for section in (parts.query, parts.fragment):
            for k, v in parse_qsl(section, keep_blank_values=True):
                if _CREDENTIAL_PARAM.search(k) and v and v.lower() not in _BOOL and not _NUMBER.fullmatch(v):
                    return f"a URL with a credential parameter ({k}=)"
    return None


def _plain(value: str) -> bool:
    """A value that is not a secret whatever the name: a path, number, boolean or URL (checked apart)."""
    v = value.strip()
    return (
        not v
        or v.lower() in _BOOL
        or bool(_NUMBER.fullmatch(v))
        or v.startswith(("/", "~", "./", "../", "$"))
        or "://" in v
        or bool(re.fullmatch(r"[\w.-]+(?:/[\w.-]+)*\.(?:json|ya?ml|toml|txt|cfg|ini|env|pem|key|crt)", v))
    )


def secret_value_kind(value: str, name: str = "") -> str | None:
    """Why `value` (of the variable `name`) is itself a secret, else None. The answer never quotes it.

    Any name: a known token prefix, credentials in a URL, a JWT, a PEM private key, a long random
    run. A secret-looking `name` (`*_TOKEN`, `*_KEY`, `*PASSWORD*`, ...) also refuses any other single
    word (a W&B key is hex, like a git SHA; passwords are short) but accepts what a secret never is:
    a path, number, boolean or credential-free URL.
    """
    kind = token_kind(value)
    if kind:
        return f"a {kind}"
    kind = url_credential(value)
    if kind:
        return kind
    if _SLACK_WEBHOOK.search(value):
        return "a Slack webhook URL (the URL is the credential)"
    if name and "WEBHOOK" in name.upper() and "://" in value:
        return f"a webhook URL ({name} is named like a webhook; the URL is the credential)"
    if _JWT.search(value):
        return "a JWT"
    if _AUTH_VALUE.fullmatch(value):
        return "an HTTP Authorization value (a scheme and its credentials)"
    m = _PEM.search(value)
    if m:
        return f"a PEM block ({m.group(1)})"
    if _random_run(value):
        return "a long random string (a key or token)"
    if name and looks_secret_name(name) and not _plain(value) and not re.search(r"\s", value.strip()):
        return f"a password or key (not a path, number or URL), and {name} is named like a secret"
    return None


class SecretValueError(UsageError, ValueError):
    """A secret about to be written into a spec. A ValueError too: raised in a pydantic validator (a
    profile's env in config), it is reported where the value came from."""

    def __str__(self) -> str:
        return self.one_line()


def refuse_secret_value(
    where: str, name: str, value: str, *, values: str = "--env values", hint: str | None = None
) -> None:
    """The secret-by-value rule, the same for every way a value enters a job's spec: `run --env`,
    `--env-file`, config `env`, profiles and presets, `mason --env`, `--sweep` values. A value that is
    itself a secret (secret_value_kind) is refused, the variable named and the value never quoted.
    `values`: what is written into the spec; `hint`: the fix (default: store it, pass its name)."""
    kind = secret_value_kind(value, name)
    if kind:
        raise SecretValueError(
            f"{where} {name!r}: its value looks like {kind}, and {values} are written into the spec",
            hint=hint or f"store it with `launchkit secret set {name}` and pass --env-secret {name}",
        )


def redact_url(url: str, mask: str | None = MASK) -> str:
    """`url` with its password, an http(s) user name (often a token) and credential query values
    replaced by `mask`; with `mask=None` they are removed. Anything that is not a URL is unchanged."""
    if "://" not in url:
        return url

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
    query = _mask_params(parts.query, mask)
    fragment = parts.fragment  # `#access_token=` (OAuth's implicit flow)
    fragment = _mask_params(fragment, mask) if "=" in fragment else fragment
    if netloc == parts.netloc and query == parts.query and fragment == parts.fragment:
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query, fragment=fragment))


def _mask_params(section: str, mask: str | None) -> str:
    """A query (or fragment) with credential parameters' values masked, or removed (`mask=None`)."""
    if not section or not _CREDENTIAL_PARAM.search(section):
        return section

    pairs = parse_qsl(section, keep_blank_values=True)
    kept = [
        (k, v if not _CREDENTIAL_PARAM.search(k) else mask)
        for k, v in pairs
        if mask is not None or not _CREDENTIAL_PARAM.search(k)
    ]
    return urlencode(kept, safe="*/:")


def redact_text(text: str) -> str:
    """Every URL in `text` through `redact_url`."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def url_host_only(url: str) -> str:
    """What may be shown of a URL that is itself a credential (a Slack webhook): scheme and host only.
    The job's own poster (runtime/node/launch/notify.py: host_only, which cannot import launchkit) shows
    it the same way; importing it here would load the runtime package on every command (tested equal)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # not a parseable URL (e.g. a bad port)
        return "(value not shown)"
    return f"{parts.scheme}://{host}/…" if host else "(value not shown)"
