"""One redaction layer for every string that leaves the process: error messages, stored run
configurations, no-value reasons, judge error bodies, reports and dashboard responses.

It masks what looks like a credential and keeps the rest readable:

- the password of a URL (``postgresql://user:***@host/db``), or its user info when it has no
  password (``https://***@host/v1``: a bare token is a credential as often as a name);
- secret query parameters (``?key=***``, ``api_key=``, ``access_token=``, ``sig=`` ...);
- ``Authorization`` values and bearer tokens (``Bearer ***``);
- well-known key formats (OpenAI ``sk-``, Anthropic ``sk-ant-``, Google ``AIza``, GitHub ``ghp_``,
  Hugging Face ``hf_``, Slack ``xox?-``, AWS ``AKIA``, JWTs);
- ``name: value`` / ``name=value`` pairs whose name says secret (``api_key``, ``password``, ``token``,
  ``secret`` ...), and in mappings every value under such a name. A lower-case word after
  ``name: `` that a sentence goes on from is prose and stays ("credentials: set VAR to a file").

Names that only *point at* a secret (``api_key_env``, ``credentials_file``) are kept.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"

#: key names whose value is a secret (compared after lower-casing and splitting on ``_``, ``-``, ``.``)
_SECRET_WORDS = {"token", "secret", "password", "passwd", "pwd", "apikey", "authorization", "cookie",
                 "credential", "credentials", "passphrase", "bearer"}
_SECRET_PAIRS = {("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
                 ("auth", "key"), ("subscription", "key"), ("client", "secret"), ("x", "api", "key")}
#: name endings that mean "where the secret is", not the secret itself
_POINTER_SUFFIXES = ("env", "var", "file", "path", "name", "names")
#: query parameters whose value is a secret (besides every secret name above)
_SECRET_PARAMS = {"key", "sig", "signature", "code", "auth", "access_token", "refresh_token", "id_token"}

_KEY_FORMATS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-ant-[A-Za-z0-9_\-]{8,}"
    r"|sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"
    r"|AIza[0-9A-Za-z_\-]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|hf_[A-Za-z0-9]{20,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"
    r")")
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s/:@'\"<>]*:)(?P<pw>[^\s@'\"<>]+)(?=@)")
# user info without a password (``https://TOKEN@host``): a bare token is a credential as often as a name
_URL_USER = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<user>[^\s/:@'\"<>]+)(?=@)")
# a bearer token outside an ``Authorization`` pair; it must look like one (a digit or punctuation),
# so prose such as "a bearer token" stays readable
_AUTH_SCHEME = re.compile(r"(?i)\b(?P<scheme>bearer)(?P<sep>\s+)(?=[A-Za-z0-9._~+/=\-]*[0-9._~+/=\-])"
                          r"(?P<val>[A-Za-z0-9._~+/=\-]{8,})")
_QUERY_PARAM = re.compile(r"(?P<head>[?&;](?P<name>[A-Za-z0-9_.\-]+)=)(?P<val>[^&\s#'\"<>]+)")
_PAIR = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?P<sep>[\"']?\s*[:=]\s*[\"']?)"
                   r"(?P<val>(?:(?:bearer|basic|token)\s+)?[^\s\"',;}&)\]]+)", re.I)


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[_\-.\s]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()) if w]


def is_secret_name(name: str) -> bool:
    """Whether a key named ``name`` holds a secret: ``api_key``, ``x-api-key``, ``password``,
    ``judge_token``, ``Authorization`` ... but not ``api_key_env``, ``max_tokens`` or ``key``."""
    words = _words(str(name))
    if not words or words[-1] in _POINTER_SUFFIXES:
        return False
    # the last word decides: ``judge_token`` is a secret, ``token_param`` is not
    return words[-1] in _SECRET_WORDS or any(tuple(words[-len(p):]) == p for p in _SECRET_PAIRS)


def _secret_param(name: str) -> bool:
    return name.lower() in _SECRET_PARAMS or is_secret_name(name)


#: a lower-case word after ``name: `` that the sentence goes on from ("needs credentials: set
#: RAGMETER_SHEETS_CREDENTIALS to ...") is prose, not a value
_PROSE_WORD = re.compile(r"[a-z]{1,12}")
_PROSE_NEXT = re.compile(r" +[A-Za-z$`'\"(]")


def _prose(m: re.Match[str]) -> bool:
    return (m.group("sep").strip() == ":" and m.group("sep") != ":" and _PROSE_WORD.fullmatch(m.group("val"))
            is not None and _PROSE_NEXT.match(m.string, m.end()) is not None)


def _mask_pair(m: re.Match[str]) -> str:
    if not is_secret_name(m.group("name")) or m.group("val").startswith(MASK) or _prose(m):
        return m.group(0)
    val = m.group("val")
    scheme = re.match(r"(?i)(bearer|basic|token)\s+", val)
    return m.group("name") + m.group("sep") + (scheme.group(0) if scheme else "") + MASK


def redact(text: Any) -> str:
    """``text`` with every credential-looking part replaced by ``***``."""
    s = text if isinstance(text, str) else str(text)
    if not s:
        return s
    # no-value reasons repeat across thousands of samples: remember the short ones
    return _redact_cached(s) if len(s) <= 512 else _redact(s)


@functools.lru_cache(maxsize=4096)
def _redact_cached(s: str) -> str:
    return _redact(s)


def _redact(s: str) -> str:
    s = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, s)
    s = _URL_USER.sub(lambda m: m.group("head") + MASK, s)
    s = _QUERY_PARAM.sub(lambda m: m.group("head") + MASK if _secret_param(m.group("name")) else m.group(0), s)
    s = _AUTH_SCHEME.sub(lambda m: m.group("scheme") + m.group("sep") + MASK, s)
    s = _KEY_FORMATS.sub(MASK, s)
    return _PAIR.sub(_mask_pair, s)


def is_headers_name(name: str) -> bool:
    """Whether a key named ``name`` holds HTTP headers (``headers``, ``judge_headers``,
    ``extra_headers``): every value under it may be a credential (``Authorization``, ``api-key``,
    a tenant token), so only the header names are ever shown."""
    words = _words(str(name))
    return bool(words) and words[-1] == "headers"


def _headers_masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: MASK if v not in (None, "") else v for k, v in value.items()}
    return MASK if value not in (None, "", [], {}) else value


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value with secrets masked: values under secret names become ``***``,
    as do the values of every header under a headers key (the header names are kept), and every
    string is passed through :func:`redact`."""
    if isinstance(obj, dict):
        return {k: (_headers_masked(v) if is_headers_name(str(k))
                    else MASK if is_secret_name(str(k)) and v not in (None, "") and not isinstance(v, (dict, list))
                    else redact_obj(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, str):
        return redact(obj)
    return obj


def redact_url(url: str | None) -> str | None:
    """A URL with its password and secret query parameters masked (``None`` stays ``None``)."""
    return None if url is None else redact(url)


def endpoint_id(url: str | None) -> str:
    """A normalised endpoint for cache keys: scheme and host lower-cased, default port and
    trailing slash dropped, user info and secret query parameters removed (``""`` for none)."""
    if not url:
        return ""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    port = parts.port
    if port and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    query = urlencode(sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                             if not _secret_param(k)))
    return urlunsplit((scheme, host, path, query, ""))


def find_secrets(obj: Any, where: str = "") -> Iterator[str]:
    """Paths (``judge.api_key``, ``options.judge_headers.Authorization``) of the secrets a
    configuration holds: values under secret names, key-shaped strings, URLs with a password."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            path = f"{where}.{k}" if where else str(k)
            if is_secret_name(str(k)) and v not in (None, "") and not isinstance(v, (dict, list)):
                yield path
            else:
                yield from find_secrets(v, path)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from find_secrets(v, f"{where}[{i}]")
    elif isinstance(obj, str) and redact(obj) != obj:
        yield where or "<value>"


#: environment variable naming a credentials file (``NAME=value`` lines, ``#`` comments)
CREDENTIALS_ENV = "RAGMETER_CREDENTIALS"

SECRET_HELP = ("secrets are read only from environment variables: put the judge's key in "
               "$OPENAI_API_KEY, $ANTHROPIC_API_KEY or $GOOGLE_API_KEY, or in a variable you name "
               "with `judge_api_key_env: MY_VAR` (CLI: --judge-api-key-env MY_VAR); a database "
               f"password in $RAGMETER_DB; or list NAME=value lines in a file named by ${CREDENTIALS_ENV}")
