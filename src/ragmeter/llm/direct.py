"""The OpenAI-compatible chat-completions request sent straight through aiohttp or httpx.

Importing the openai SDK costs 0.6-0.9 s of CPU even from bytecode (openai 1.109 and 3.3; its
typed models: ``openai.types`` is half of it), paid by every fresh process before its first judge
call -- a third to a half of the whole ideal duration of a small judged run (150 calls x 0.2 s / 16
in flight = 1.9 s). ragmeter already sends
the body pre-encoded and reads the reply as plain JSON (no SDK models), so for the ``openai``
provider it posts the same request with the transport the SDK itself would use: aiohttp (the
SDK's ``DefaultAioHttpClient``) when installed, else httpx (the SDK's default). Same URL
(``base_url`` + ``/chat/completions``, ``OPENAI_BASE_URL`` or ``https://api.openai.com/v1``), same
headers (bearer key, ``OpenAI-Organization``/``OpenAI-Project`` from ``OPENAI_ORG_ID``/
``OPENAI_PROJECT_ID``), and errors shaped as the SDK's (``status_code``, ``response.headers``,
``"Error code: 400 - {...}"``) so :func:`ragmeter.llm.providers.classify` reads them unchanged.
Azure OpenAI keeps the SDK (its deployment routing and API versions), and
``judge_http_client=sdk`` sends OpenAI-compatible requests through the SDK's client as well.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from typing import Any

from ragmeter.llm.replies import JUDGE_HINT, read_aiohttp, read_httpx, reply_limit

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class APIStatusError(Exception):
    """A non-2xx reply, as the openai SDK reports it: ``status_code``, ``response`` (its headers),
    ``body`` (the decoded ``error`` object, or the text) and the SDK's message."""

    def __init__(self, status: int, headers: Any, text: str) -> None:
        try:
            data: Any = json.loads(text) if text else None
        except ValueError:
            data = None
        shown = data if data is not None else text
        super().__init__(f"Error code: {status} - {shown}")
        self.status_code = status
        self.body = data.get("error", data) if isinstance(data, dict) else shown
        self.response = _Response(status, headers)


class APITimeoutError(Exception):
    """No complete reply within the timeout (the SDK's name for it: a builtin ``TimeoutError``
    would read as the caller's own wait running out)."""


class BadRequestError(APIStatusError):
    """HTTP 400 (the endpoint rejected a parameter: the client adapts its request)."""


class _Response:
    def __init__(self, status: int, headers: Any) -> None:
        self.status_code = status
        self.headers = headers


def use_aiohttp(choice: str) -> bool:
    """``judge_http_client``: ``auto`` -> aiohttp when installed, ``aiohttp`` -> required,
    ``httpx`` -> httpx."""
    from ragmeter.llm.config import JudgeConfigError

    if choice == "httpx":
        return False
    have = importlib.util.find_spec("aiohttp") is not None
    if not have and choice == "aiohttp":
        raise JudgeConfigError("judge_http_client=aiohttp needs aiohttp: pip install 'openai[aiohttp]'")
    return have


class DirectClient:
    """POSTs JSON to an OpenAI-compatible endpoint; one connection pool for the client's life.

    Args:
        base_url: the endpoint (``None``: ``OPENAI_BASE_URL`` or the OpenAI API).
        key: the bearer key.
        timeout: seconds a request may take in all.
        aiohttp: aiohttp's session (``True``) or httpx's ``AsyncClient``.
        max_reply: the largest reply body read, in bytes (default
            :data:`~ragmeter.llm.replies.DEFAULT_MAX_REPLY_MB`); the body is read as it arrives
            and abandoned past it (:class:`~ragmeter.llm.replies.ReplyTooLarge`).
    """

    def __init__(self, base_url: str | None, key: str, timeout: float, aiohttp: bool,
                 max_reply: int | None = None) -> None:
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.timeout = timeout
        self.max_reply = max_reply if max_reply is not None else reply_limit(None)
        from ragmeter._version import __version__

        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json",
                        "Accept": "application/json", "User-Agent": f"ragmeter/{__version__}"}
        for env, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
            if os.environ.get(env):
                self.headers[header] = os.environ[env]
        self.aiohttp = aiohttp
        self._session: Any = None

    async def start(self) -> None:
        """Open the connection pool (on the event loop that will use it)."""
        if self.aiohttp:
            import aiohttp

            self._session = aiohttp.ClientSession(
                headers=self.headers, connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                trust_env=True)  # HTTPS_PROXY / NO_PROXY / .netrc, as httpx reads them by default
        else:
            import httpx

            self._session = httpx.AsyncClient(
                headers=self.headers, timeout=self.timeout,
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=100))

    async def post(self, path: str, content: bytes, timeout: float | None = None) -> tuple[Any, Any]:
        """The decoded JSON reply (or its text when it is not JSON) and the reply's headers.

        The body is read as it arrives, at most ``max_reply`` bytes, and the whole request
        (headers and body) within the timeout.

        Raises:
            APITimeoutError: no complete reply in time.
            ReplyTooLarge: the body passed ``max_reply`` bytes (the rest is not read).
            BadRequestError: HTTP 400.
            APIStatusError: any other status outside 2xx.
        """
        url = self.base_url + path
        total = self.timeout if timeout is None else timeout
        if self.aiohttp:
            import aiohttp

            kw = {"timeout": aiohttp.ClientTimeout(total=timeout)} if timeout is not None else {}
            try:
                async with self._session.post(url, data=content, **kw) as r:
                    status, headers = r.status, r.headers
                    raw = await read_aiohttp(r, self.max_reply, JUDGE_HINT)
            except TimeoutError as exc:  # aiohttp's total timeout
                raise APITimeoutError("Request timed out.") from exc
        else:
            import httpx

            try:
                # httpx's timeout bounds each read; the deadline bounds the whole reply, as aiohttp's
                async with asyncio.timeout(total):
                    async with self._session.stream("POST", url, content=content,
                                                    **({"timeout": timeout} if timeout is not None else {})) as r:
                        status, headers = r.status_code, r.headers
                        raw = await read_httpx(r, self.max_reply, JUDGE_HINT)
            except (httpx.TimeoutException, TimeoutError) as exc:
                raise APITimeoutError("Request timed out.") from exc
        text = raw.decode("utf-8", errors="replace")
        if not 200 <= status < 300:
            raise (BadRequestError if status == 400 else APIStatusError)(status, headers, text)
        try:
            return json.loads(text), headers
        except ValueError:
            return text, headers

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await (session.close() if self.aiohttp else session.aclose())
