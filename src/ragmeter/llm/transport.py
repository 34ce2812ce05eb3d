"""The judge's own HTTP transport and the one error type every judge request fails with.

ragmeter sends OpenAI-compatible and Anthropic requests itself (:class:`Transport`) instead of
through the providers' SDKs: importing the openai SDK costs 0.6-0.9 s of CPU in a fresh process
(a third to a half of a small judged run), and ragmeter needs none of it beyond one POST of a body
it already encodes. One transport means one behaviour, whichever HTTP package carries it:

- **Packages**: aiohttp when installed (``judge_http_client=auto``; the SDKs' own "improved
  concurrency" transport), else the httpx API: ``httpx2`` (what openai 3, anthropic 2 and
  google-genai 3 depend on) when installed, else ``httpx``.
- **Timeouts**: ``judge_timeout`` bounds the whole request -- connecting, sending, the headers and
  the whole body -- as one deadline (``asyncio.timeout``), not each network read.
- **Redirects** are not followed: a chat-completions POST redirected with 301/302/303 would be
  re-sent as a GET without its body (what httpx and aiohttp do, and the openai SDK, which follows
  redirects), and a redirect to another host would carry the key headers neither package strips
  (``x-api-key``). A 3xx reply stops the run as a configuration error naming where it points.
- **Replies** are read as they arrive, at most ``judge_max_reply_mb``
  (:mod:`ragmeter.llm.replies`); a server's ``Retry-After`` is read once, capped at 60 s.
- **Failures** are :class:`TransportError` with a ``kind``; what is retried is decided from that
  kind and the HTTP status alone (:meth:`TransportError.problem`): never from message text.

The SDK paths that remain (Azure OpenAI, ``judge_http_client=sdk``, google-genai) turn their
exceptions into the same :class:`TransportError` at their edge (:func:`as_transport_error`).
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import sys
from dataclasses import dataclass
from typing import Any

from ragmeter.core.redact import redact, redact_url
from ragmeter.llm.replies import JUDGE_HINT, ReplyTooLarge, read_aiohttp, read_httpx, retry_after_seconds

#: what went wrong, as :attr:`TransportError.kind` says it
TIMEOUT, CONNECT, HTTP_STATUS, REPLY_TOO_LARGE, INVALID_REPLY, REQUEST = (
    "timeout", "connect", "http_status", "reply_too_large", "invalid_reply", "request")
#: HTTP statuses retried besides every 5xx (408: request timeout, 429: too many requests)
RETRIED_STATUSES = frozenset({408, 429})
#: HTTP statuses that stop the run besides every 3xx: the same answer would come for every request
CONFIG_STATUSES = frozenset({401, 403, 404})
_SHORT = {TIMEOUT: "timeout", CONNECT: "connection error", INVALID_REPLY: "non-JSON reply", REQUEST: "request error"}


@dataclass
class Problem:
    """A failed request, classified: ``transient`` (retry), ``config`` (stop the run) or ``final``."""

    kind: str
    short: str
    message: str
    status: int | None = None
    retry_after: float | None = None
    #: what exactly went wrong, for the sample's no-value reason: the provider's own error message
    #: for an HTTP error reply, else what the transport said (redacted)
    detail: str = ""
    #: the :attr:`TransportError.kind` (``None``: not a transport failure, e.g. a bug's exception)
    cause: str | None = None


class TransportError(Exception):
    """A judge request that failed, whichever transport or SDK sent it.

    Attributes:
        kind: ``timeout`` (no complete reply in time), ``connect`` (the connection could not be
            made, or dropped), ``http_status`` (an error reply, ``status`` says which; 3xx too:
            redirects are not followed), ``reply_too_large`` (past ``judge_max_reply_mb``),
            ``invalid_reply`` (HTTP 200 with a body that is not JSON) or ``request`` (the request
            could not be made: a malformed URL, an unsupported scheme).
        status: the HTTP status of an ``http_status`` failure.
        retry_after: the wait the server asked for, in seconds, at most 60 (``None``: none).
        said: what went wrong in words: the provider's own error message for an error reply, else
            the transport's (redacted).
        body: the decoded error body of an error reply (``None`` otherwise).
    """

    def __init__(self, kind: str, said: str, *, status: int | None = None, retry_after: float | None = None,
                 body: Any = None, headers: Any = None) -> None:
        self.kind, self.status, self.retry_after = kind, status, retry_after
        self.said = redact(said)
        self.body, self.headers = body, headers
        head = f"HTTP {status}" if kind == HTTP_STATUS else _SHORT.get(kind, kind.replace("_", " "))
        super().__init__(f"{head}: {self.said}" if self.said else head)

    @property
    def retryable(self) -> bool:
        """Whether a new attempt may succeed: timeouts, connection failures, non-JSON replies,
        HTTP 408, 429 and 5xx."""
        if self.kind == HTTP_STATUS:
            return self.status is not None and (self.status in RETRIED_STATUSES or self.status >= 500)
        return self.kind in {TIMEOUT, CONNECT, INVALID_REPLY}

    @property
    def param(self) -> str | None:
        """The request parameter an error reply names (OpenAI's ``error.param``), if any."""
        err = self.body.get("error", self.body) if isinstance(self.body, dict) else None
        value = err.get("param") if isinstance(err, dict) else None
        return value if isinstance(value, str) else None

    def problem(self) -> Problem:
        """What the judge does about it: retry (``transient``), stop the run (``config``: 401, 403,
        404, a redirect) or record a judge failure for this request (``final``)."""
        msg = redact(str(self)[:500])
        status = self.status
        if self.kind == REPLY_TOO_LARGE:
            return Problem("final", self.said, f"{self.said} ({JUDGE_HINT})", detail=JUDGE_HINT, cause=self.kind)
        if self.kind != HTTP_STATUS or status is None:
            return Problem("transient" if self.retryable else "final", _SHORT.get(self.kind, self.kind), msg,
                           detail=self.said[:500], cause=self.kind)
        short = f"HTTP {status}"
        if self.retryable:
            return Problem("transient", short, msg, status, self.retry_after, detail=self.said[:500], cause=self.kind)
        if 300 <= status < 400:
            said = (f"the judge's endpoint answered with a redirect (HTTP {status}), which ragmeter does not "
                    f"follow: {self.said}; set --judge-base-url to the address it points to")
        elif status == 404:
            said = (f"the judge's model or endpoint was not found (HTTP 404): check the model name and "
                    f"--judge-base-url. {msg}")
        elif status in CONFIG_STATUSES:
            said = (f"the judge rejected the credentials (HTTP {status}): check the key variable and the "
                    f"model's access. {msg}")
        else:
            return Problem("final", short, msg, status, detail=self.said[:500], cause=self.kind)
        return Problem("config", short, said, status, cause=self.kind)


class NonJSONReply(TransportError):
    """The judge answered HTTP 200 with a body that is not JSON (a proxy's or login page's HTML,
    a truncated body): retried like a transient error, then recorded as a judge failure."""

    def __init__(self, body: Any) -> None:
        text = body if isinstance(body, str) else repr(body)
        what = "an HTML page" if text.lstrip()[:15].lower().startswith(("<!doctype", "<html")) else "a non-JSON body"
        self.snippet = redact(" ".join(text.split())[:200])
        super().__init__(INVALID_REPLY, f"the judge answered HTTP 200 with {what}, not a JSON reply "
                         f"(check --judge-base-url): {self.snippet!r}")


def classify(exc: BaseException) -> Problem:
    """Sort a failed request into retry / stop-the-run / give-up-on-this-request: a
    :class:`TransportError` (or an SDK's or transport's exception, mapped to one by
    :func:`as_transport_error`) by its kind and HTTP status; any other exception is final."""
    err = as_transport_error(exc)
    if err is not None:
        return err.problem()
    said = redact(" | ".join(dict.fromkeys(str(e) for e in _chain(exc) if str(e)))[:500])
    return Problem("final", type(exc).__name__, redact(f"{type(exc).__name__}: {exc}"[:500]), detail=said)


# ---- the SDKs' and HTTP packages' exceptions, by type -------------------------------------------------
_TRANSPORTS = ("httpx", "httpx2", "httpcore", "httpcore2")
_SDKS = ("openai", "anthropic")
_GOOGLE = "google.genai.errors"


@dataclass(frozen=True)
class _ErrorTypes:
    connection: tuple[type[BaseException], ...]  # the connection failed or dropped (transport level)
    timeout: tuple[type[BaseException], ...]  # no answer in time (transport or SDK)
    unreachable: tuple[type[BaseException], ...]  # an SDK's "could not reach the API" wrapper
    wrappers: tuple[type[BaseException], ...]  # an SDK's wrappers of the transport's error ("Connection error.")
    request: tuple[type[BaseException], ...]  # any other error of an HTTP package: the request was not made
    status: tuple[tuple[type[BaseException], str], ...]  # an HTTP error reply, and its status attribute


def _error_types() -> _ErrorTypes:
    """The exception types of the HTTP packages and SDKs this process has loaded: one that is not
    imported cannot have raised, so mapping imports nothing, and a missing optional SDK leaves the
    others' mapping intact."""
    return _error_types_of(tuple(m for m in (*_TRANSPORTS, "aiohttp", *_SDKS, _GOOGLE) if m in sys.modules))


@functools.lru_cache(maxsize=16)
def _error_types_of(loaded: tuple[str, ...]) -> _ErrorTypes:
    import importlib

    mods = {name: importlib.import_module(name) for name in loaded}
    connection: list[type[BaseException]] = [ConnectionError, asyncio.IncompleteReadError]
    timeout: list[type[BaseException]] = [TimeoutError]  # asyncio's deadline and aiohttp's timeouts too
    unreachable: list[type[BaseException]] = []
    request: list[type[BaseException]] = []
    status: list[tuple[type[BaseException], str]] = []
    for name in _TRANSPORTS:
        if name in mods:
            connection += [mods[name].NetworkError, mods[name].RemoteProtocolError]
            timeout.append(mods[name].TimeoutException)
    for name in ("httpx", "httpx2"):
        if name in mods:
            request.append(mods[name].HTTPError)
    if "aiohttp" in mods:  # not ClientConnectionError: aiohttp's ServerTimeoutError is one too
        aio = mods["aiohttp"]
        connection += [aio.ServerDisconnectedError, aio.ClientOSError, aio.ClientPayloadError]
        request.append(aio.ClientError)
    wrappers: list[type[BaseException]] = []
    for name in _SDKS:
        if name in mods:
            sdk = mods[name]
            timeout.append(sdk.APITimeoutError)
            unreachable.append(sdk.APIConnectionError)
            wrappers += [sdk.APITimeoutError, sdk.APIConnectionError]
            status.append((sdk.APIStatusError, "status_code"))
    if _GOOGLE in mods:
        status.append((mods[_GOOGLE].APIError, "code"))
    return _ErrorTypes(tuple(connection), tuple(timeout), tuple(unreachable), tuple(wrappers), tuple(request),
                       tuple(status))


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(out) < 6 and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _http_status(exc: BaseException, types: _ErrorTypes) -> int | None:
    """The HTTP status of an error reply: the SDKs' status errors (``openai.APIStatusError``,
    ``anthropic.APIStatusError``: ``status_code``; google-genai ``errors.APIError``: ``code``), or
    what another client's exception carries as ``status_code`` or an integer ``code``."""
    for cls, attr in types.status:
        if isinstance(exc, cls):
            value = getattr(exc, attr, None)
            return value if isinstance(value, int) else None
    value = getattr(exc, "status_code", None)
    if isinstance(value, int):
        return value
    code = getattr(exc, "code", None)
    return code if isinstance(code, int) else None


def as_transport_error(exc: BaseException, url: str | None = None) -> TransportError | None:
    """The :class:`TransportError` an SDK's or an HTTP package's exception stands for (``None``:
    it is none of theirs, e.g. a bug's ``ValueError``), by type alone.

    The SDKs wrap the HTTP package's error (``APIConnectionError``, ``APITimeoutError``) and their
    aiohttp transport reports a dropped connection as a timeout, so the whole cause chain is read:
    a refused, reset or dropped connection is ``connect``, only a real wait is ``timeout``. An
    error reply is ``http_status`` with the provider's message and the capped ``Retry-After``.
    ``url`` (else the request the exception carries) is named in a connection failure.
    """
    if isinstance(exc, TransportError):
        return exc
    chain = _chain(exc)
    too_large = next((e for e in chain if isinstance(e, ReplyTooLarge)), None)
    if too_large is not None:  # an SDK wraps it (openai: APIConnectionError): final, never retried
        return TransportError(REPLY_TOO_LARGE, too_large.short)
    types = _error_types()
    # what the transport said, without the SDK's wrapper ("Connection error.") over its cause
    inner = [e for e in chain if not isinstance(e, types.wrappers)] or chain
    said = " | ".join(dict.fromkeys(str(e) for e in inner if str(e)))[:500]
    where = url or _request_url(chain)
    said_where = f"{said or type(exc).__name__} ({redact_url(where)})" if where else said
    if any(isinstance(e, types.connection) for e in chain[1:]):
        return TransportError(CONNECT, said_where)
    if any(isinstance(e, types.timeout) for e in chain):
        return TransportError(TIMEOUT, (said or "no complete reply in time") + (f" ({redact_url(where)})" if where else ""))
    status = _http_status(exc, types)
    if status is not None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
        if 300 <= status < 400:
            return redirect_error(status, headers, where)
        return TransportError(HTTP_STATUS, provider_message(exc)[:500], status=status,
                              retry_after=retry_after_seconds(headers), body=getattr(exc, "body", None),
                              headers=headers)
    if isinstance(exc, types.connection + types.unreachable):
        return TransportError(CONNECT, said_where)
    if isinstance(exc, types.request):
        return TransportError(REQUEST, said_where)
    return None


def redirect_error(status: int, headers: Any, url: str | None) -> TransportError:
    """The error of a 3xx reply (not followed: see the module docstring), naming where it points."""
    try:
        where = headers.get("location") if headers is not None else None
    except Exception:  # noqa: BLE001 - header containers differ between packages
        where = None
    return TransportError(HTTP_STATUS, f"{redact_url(url) or 'the request'} is redirected to "
                          f"{redact_url(where) if where else 'an address it does not give'}", status=status,
                          headers=headers)


def _request_url(chain: list[BaseException]) -> str | None:
    for e in chain:
        try:
            request = getattr(e, "request", None)  # httpx raises when an error has no request
        except RuntimeError:
            continue
        if request is not None and getattr(request, "url", None) is not None:
            return str(request.url)
    return None


def provider_message(exc: BaseException) -> str:
    """The message a provider put in its error reply: ``error.message`` of the body (OpenAI: the
    ``error`` object; Anthropic: ``{"type": "error", "error": {...}}``), google-genai's
    ``message``, else the exception's text without the SDK's ``Error code: N -``."""
    said = _body_message(getattr(exc, "body", None))
    if said:
        return said
    said = getattr(exc, "message", None)
    if isinstance(said, str) and said.strip():
        return said
    text = str(exc)
    head, sep, rest = text.partition(" - ")
    return rest if sep and head.startswith("Error code: ") else text


def _body_message(body: Any) -> str | None:
    for _ in range(3):  # {"error": {"message": ...}} nests at most this deep in the known shapes
        if not isinstance(body, dict):
            break
        if isinstance(body.get("message"), str) and body["message"].strip():
            return body["message"]
        body = body.get("error")
    if isinstance(body, str) and body.strip():
        return body
    return None


# ---- the transport ------------------------------------------------------------------------------------
def choose_package(choice: str, extra: str = "openai") -> str:
    """The HTTP package of ``judge_http_client``: ``auto`` -> aiohttp when installed, else the httpx
    API; ``aiohttp`` -> aiohttp (required); ``httpx`` -> ``httpx2`` when installed, else ``httpx``.

    Raises:
        JudgeConfigError: the package asked for (or any, for ``auto``) is not installed.
    """
    from ragmeter.llm.config import JudgeConfigError

    have_aiohttp = importlib.util.find_spec("aiohttp") is not None
    if choice == "aiohttp" and not have_aiohttp:
        raise JudgeConfigError(f"judge_http_client=aiohttp needs aiohttp: pip install 'ragmeter-eval[{extra}]'")
    if choice != "httpx" and have_aiohttp:
        return "aiohttp"
    for name in ("httpx2", "httpx"):
        if importlib.util.find_spec(name) is not None:
            return name
    raise JudgeConfigError(f"the judge needs aiohttp or httpx to send requests: pip install 'ragmeter-eval[{extra}]'")


class Transport:
    """POSTs JSON to one endpoint and reads JSON back; one connection pool for its life.

    Args:
        base_url: the endpoint the request paths are appended to.
        headers: sent with every request (authentication, versions).
        timeout: seconds a whole request may take (see the module docstring).
        package: ``aiohttp``, ``httpx2`` or ``httpx`` (:func:`choose_package`).
        max_reply: the largest reply body read, in bytes.
    """

    def __init__(self, base_url: str, headers: dict[str, str], *, timeout: float, package: str,
                 max_reply: int) -> None:
        from ragmeter._version import __version__

        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.package = package
        #: the transport's name as ``judge_http_client`` says it
        self.name = "aiohttp" if package == "aiohttp" else "httpx"
        self.max_reply = max_reply
        self.headers = {"Content-Type": "application/json", "Accept": "application/json",
                        "User-Agent": f"ragmeter/{__version__}", **headers}
        self._session: Any = None

    async def start(self) -> None:
        """Open the connection pool (on the event loop that will use it). Proxies come from
        ``HTTPS_PROXY`` / ``NO_PROXY`` (and ``.netrc``) with either package."""
        if self.package == "aiohttp":
            import aiohttp

            # no timeout of aiohttp's own: the request's deadline is the one in ``_send``
            self._session = aiohttp.ClientSession(
                headers=self.headers, connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=None), trust_env=True)
        else:
            import importlib

            httpx = importlib.import_module(self.package)
            self._session = httpx.AsyncClient(
                headers=self.headers, timeout=None, follow_redirects=False, trust_env=True,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=100))

    async def post(self, path: str, body: dict[str, Any] | bytes, timeout: float | None = None) -> tuple[Any, Any]:
        """The decoded JSON reply (or its text when it is not JSON) and the reply's headers.

        Raises:
            TransportError: any failure (see :attr:`TransportError.kind`).
        """
        content = body if isinstance(body, bytes) else encode(body)
        return await self._send("POST", path, content, timeout)

    async def get(self, path: str, timeout: float | None = None) -> tuple[Any, Any]:
        """:meth:`post` without a body."""
        return await self._send("GET", path, None, timeout)

    async def _send(self, method: str, path: str, content: bytes | None, timeout: float | None) -> tuple[Any, Any]:
        url = self.base_url + path
        try:
            async with asyncio.timeout(self.timeout if timeout is None else timeout):
                if self.package == "aiohttp":
                    async with self._session.request(method, url, data=content, allow_redirects=False) as r:
                        status, headers = r.status, r.headers
                        raw = await read_aiohttp(r, self.max_reply, JUDGE_HINT)
                else:
                    async with self._session.stream(method, url, content=content) as r:
                        status, headers = r.status_code, r.headers
                        raw = await read_httpx(r, self.max_reply, JUDGE_HINT)
        except Exception as exc:  # noqa: BLE001 - every failure leaves as a TransportError
            err = as_transport_error(exc, url)
            if err is None:
                raise
            raise err from exc
        text = raw.decode("utf-8", errors="replace")
        if 300 <= status < 400:
            raise redirect_error(status, headers, url)
        if not 200 <= status < 300:
            try:
                data: Any = json.loads(text) if text else None
            except ValueError:
                data = None
            said = _body_message(data) or text.strip()[:500] or f"HTTP {status} with an empty body"
            body = data.get("error", data) if isinstance(data, dict) else data
            raise TransportError(HTTP_STATUS, said, status=status, retry_after=retry_after_seconds(headers),
                                 body=body, headers=headers)
        try:
            return json.loads(text), headers
        except ValueError:
            return text, headers

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await (session.close() if self.package == "aiohttp" else session.aclose())


def encode(body: dict[str, Any]) -> bytes:
    """A request body as compact UTF-8 JSON."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

