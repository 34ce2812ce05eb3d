"""The openai SDK as a judge transport, kept where ragmeter's own (:mod:`ragmeter.llm.transport`)
does not reach: Azure OpenAI (its deployment routing, API versions and the SDK's authentication
options) and ``judge_http_client=sdk`` (OpenAI-compatible requests through ``AsyncOpenAI``).

It behaves as the own transport does: the SDK's retries off, the same whole-request deadline
(``judge_timeout``), redirects not followed (the SDK follows them by default), replies bounded by
``judge_max_reply_mb``; and its exceptions become :class:`~ragmeter.llm.transport.TransportError`
here, at its edge, so the judge service never sees an SDK exception.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import inspect
import sys
from typing import Any

from ragmeter.llm.config import JudgeConfig, JudgeConfigError
from ragmeter.llm.replies import JUDGE_HINT, capping_hooks, reply_limit
from ragmeter.llm.transport import as_transport_error, encode


class SDKClient:
    """``openai.AsyncOpenAI`` (or ``AsyncAzureOpenAI``) posting pre-encoded JSON bodies.

    Args:
        cfg: the judge configuration (Azure when ``cfg.provider == "azure"``).
        key: the API key (local servers ignore it, but the SDK insists on one).
    """

    def __init__(self, cfg: JudgeConfig, key: str | None) -> None:
        self.cfg, self.key = cfg, key
        self.name = "httpx"
        self._client: Any = None

    async def start(self) -> None:
        import openai

        http, self.name = http_client(openai, self.cfg)
        if self.cfg.provider == "azure":
            self._client = openai.AsyncAzureOpenAI(api_key=self.key, azure_endpoint=self.cfg.base_url,
                                                   api_version=self.cfg.api_version, timeout=self.cfg.timeout,
                                                   max_retries=0, http_client=http)
        else:
            self._client = openai.AsyncOpenAI(api_key=self.key or "not-needed", base_url=self.cfg.base_url,
                                              timeout=self.cfg.timeout, max_retries=0, http_client=http)

    async def post(self, path: str, body: dict[str, Any], timeout: float | None = None) -> tuple[Any, Any]:
        """The SDK's documented raw request (``client.post``: same authentication, base URL and
        headers as ``chat.completions.create``): the decoded JSON reply (or its text) and headers.

        Raises:
            TransportError: any failure, mapped from the SDK's exception.
        """
        client = self._client if timeout is None else self._client.with_options(timeout=timeout, max_retries=0)
        try:
            async with asyncio.timeout(self.cfg.timeout if timeout is None else timeout):
                return await _raw_post(client, path, body)
        except Exception as exc:  # noqa: BLE001 - mapped once, here
            err = as_transport_error(exc)
            if err is None:
                raise
            raise err from exc

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()


def http_client(sdk: Any, cfg: JudgeConfig) -> tuple[Any, str]:
    """The SDK's HTTP client and its transport's name: the aiohttp transport
    (``DefaultAioHttpClient``, the SDK's documented option "for improved concurrency performance")
    when aiohttp is installed, else the SDK's default httpx client. Either bounds every reply body
    to ``judge_max_reply_mb`` (:func:`~ragmeter.llm.replies.capping_hooks`) and follows no redirect.

    ``judge_http_client``: ``sdk`` or ``auto`` (aiohttp when installed), ``aiohttp`` (required) or
    ``httpx``.
    """
    kw = {"timeout": cfg.timeout, "follow_redirects": False,
          "event_hooks": capping_hooks(reply_limit(cfg.max_reply_mb), JUDGE_HINT)}
    if cfg.http_client != "httpx":
        have = importlib.util.find_spec("aiohttp") is not None and hasattr(sdk, "DefaultAioHttpClient")
        if not have and cfg.http_client == "aiohttp":
            raise JudgeConfigError(f"judge_http_client=aiohttp needs aiohttp: pip install '{sdk.__name__}[aiohttp]'")
        if have:
            try:
                return sdk.DefaultAioHttpClient(**kw), "aiohttp"
            except RuntimeError as exc:  # the SDK's transport package (httpx-aiohttp for openai 1.x) is missing
                if cfg.http_client == "aiohttp":
                    raise JudgeConfigError(
                        f"judge_http_client=aiohttp: {exc}; pip install '{sdk.__name__}[aiohttp]'") from exc
    return sdk.DefaultAsyncHttpxClient(**kw), "httpx"


_JSON_HEADERS: Any = {"headers": {"Content-Type": "application/json"}}


async def _raw_post(client: Any, path: str, body: dict[str, Any]) -> tuple[Any, Any]:
    """``client.post(path, cast_to=...)``: the decoded JSON reply as plain dicts and lists (no reply
    models), or the body's text when it is not JSON, and the reply's headers (through the SDK's
    ``AsyncAPIResponse``; ``None`` when the SDK has none). The body goes pre-encoded
    (``content=``) when the SDK accepts it, so the SDK neither copies nor re-encodes it; older SDKs
    get ``body=``. Only the SDK's public client API is used, so a change of its HTTP stack (httpx,
    httpx2, aiohttp) does not matter here."""
    wrapper = _response_type(type(client))
    cast = wrapper or object
    if _accepts_content(type(client)):
        out = await client.post(path, cast_to=cast, content=encode(body), options=_JSON_HEADERS)
    else:
        out = await client.post(path, cast_to=cast, body=body)
    if wrapper is None:
        return out, None
    return await out.parse(), out.headers


@functools.lru_cache(maxsize=8)
def _accepts_content(cls: type) -> bool:
    return "content" in inspect.signature(cls.post).parameters


@functools.lru_cache(maxsize=8)
def _response_type(cls: type) -> Any:
    """The SDK's ``AsyncAPIResponse[object]`` (the reply with its headers, parsed on demand), or
    ``None`` for an SDK without it."""
    sdk = sys.modules.get(cls.__module__.split(".", 1)[0])
    wrapper = getattr(sdk, "AsyncAPIResponse", None)
    try:
        return wrapper[object] if wrapper is not None else None
    except TypeError:
        return None
