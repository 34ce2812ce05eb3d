"""Replies from servers are bounded: in size (a body is read as a stream and abandoned past a byte
limit, never buffered whole) and in the waits a server may ask for (``Retry-After``,
``retry-after-ms``). Used by every judge transport (ragmeter's own aiohttp/httpx transport, the
openai SDK's httpx client) and by ``ragmeter simulate``'s target client.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator
from typing import Any

#: the largest reply body read from a judge or a simulated target, by default, in MB (10^6 bytes):
#: a judge's verdict is a few KB (2,048 output tokens with 20 log-probabilities each stay under
#: 3 MB); ``judge_max_reply_mb`` / ``simulate --max-reply-mb`` change it
DEFAULT_MAX_REPLY_MB = 8.0
#: the longest wait a server may ask for (``Retry-After``, ``retry-after-ms``), in seconds; a longer
#: one is cut to this (the openai SDK ignores waits over 60 s and backs off on its own)
MAX_SERVER_WAIT = 60.0
#: how to raise a judge's reply limit, said when a reply passes it
JUDGE_HINT = "the judge's reply limit; --option judge_max_reply_mb=N raises it"
_CHUNK = 64 * 1024


def reply_limit(mb: float | None) -> int:
    """Bytes of a reply limit given in MB (``None``: the default)."""
    return int((DEFAULT_MAX_REPLY_MB if mb is None else mb) * 1_000_000)


def mb_text(limit: int) -> str:
    """``8_000_000`` -> ``"8 MB"``."""
    return f"{limit / 1_000_000:g} MB"


class ReplyTooLarge(Exception):
    """A server's reply passed the byte limit; reading stopped there (the rest was never read).

    Attributes:
        limit: the limit in bytes.
        short: the reason a sample or a conversation gets ("reply larger than 8 MB").
    """

    def __init__(self, limit: int, hint: str = "") -> None:
        self.limit = limit
        self.short = f"reply larger than {mb_text(limit)}"
        super().__init__(self.short + (f" ({hint})" if hint else ""))


def _declared(headers: Any) -> int | None:
    try:
        value = headers.get("content-length")
        return int(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


class _Counter:
    def __init__(self, limit: int, headers: Any, hint: str) -> None:
        self.limit, self.hint, self.n = limit, hint, 0
        declared = _declared(headers)
        if declared is not None and declared > limit:
            raise ReplyTooLarge(limit, hint)

    def add(self, chunk: bytes) -> bytes:
        self.n += len(chunk)
        if self.n > self.limit:
            raise ReplyTooLarge(self.limit, self.hint)
        return chunk


async def read_aiohttp(response: Any, limit: int, hint: str = "") -> bytes:
    """The (decoded) body of an aiohttp response, at most ``limit`` bytes.

    Raises:
        ReplyTooLarge: the declared length or the bytes read pass ``limit``.
    """
    count = _Counter(limit, response.headers, hint)
    buf = bytearray()
    async for chunk in response.content.iter_chunked(_CHUNK):
        buf += count.add(chunk)
    return bytes(buf)


async def read_httpx(response: Any, limit: int, hint: str = "") -> bytes:
    """The (decoded) body of an httpx response opened with ``client.stream(...)``, at most
    ``limit`` bytes (:class:`ReplyTooLarge` past it)."""
    count = _Counter(limit, response.headers, hint)
    buf = bytearray()
    async for chunk in response.aiter_bytes(_CHUNK):
        buf += count.add(chunk)
    return bytes(buf)


def read_httpx_sync(response: Any, limit: int, hint: str = "", deadline: float | None = None) -> bytes:
    """:func:`read_httpx` for a synchronous httpx response; ``deadline`` (``time.monotonic()``
    value) bounds the whole read (httpx's timeout bounds each read, not their sum).

    Raises:
        ReplyTooLarge: past ``limit``.
        TimeoutError: the body did not arrive by ``deadline``.
    """
    count = _Counter(limit, response.headers, hint)
    buf = bytearray()
    for chunk in response.iter_bytes(_CHUNK):
        buf += count.add(chunk)
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError("the reply did not arrive in time")
    return bytes(buf)


def capping_hooks(limit: int, hint: str = "") -> dict[str, list[Any]]:
    """``event_hooks`` for an httpx ``AsyncClient`` (an SDK's client: the openai SDK's, for Azure
    OpenAI and ``judge_http_client=sdk``) that bound every reply body to ``limit`` bytes: the
    reply's stream is wrapped before the SDK reads it, so reading stops at the limit. The bytes
    counted are those received (a compressed body is counted compressed)."""

    async def cap(response: Any) -> None:
        stream_class = _capped_stream_class(type(response).__module__.split(".", 1)[0])
        response.stream = stream_class(response.stream, _Counter(limit, response.headers, hint))

    return {"response": [cap]}


_STREAMS: dict[str, type] = {}


def _capped_stream_class(package: str) -> type:
    """An ``AsyncByteStream`` of the response's own HTTP package (``httpx``, or ``httpx2`` that
    newer SDKs use) that raises :class:`ReplyTooLarge` past its limit."""
    if package not in _STREAMS:
        import importlib

        base = importlib.import_module(package).AsyncByteStream

        class CappedStream(base):  # type: ignore[misc, valid-type]
            def __init__(self, inner: Any, count: _Counter) -> None:
                self.inner, self.count = inner, count

            async def __aiter__(self) -> AsyncIterator[bytes]:
                async for chunk in self.inner:
                    yield self.count.add(chunk)

            async def aclose(self) -> None:
                await self.inner.aclose()

        _STREAMS[package] = CappedStream
    return _STREAMS[package]


def capped_wait(seconds: float) -> float:
    """A wait a server asked for, within [0, :data:`MAX_SERVER_WAIT`]."""
    return min(MAX_SERVER_WAIT, max(0.0, seconds))


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date), at
    most :data:`MAX_SERVER_WAIT` (``None``: the reply asks for no wait)."""
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        ra = headers.get("retry-after") if ms is None else None
    except Exception:  # noqa: BLE001 - header containers differ between SDKs
        return None
    if ms is not None:
        try:
            value = float(ms) / 1000
        except ValueError:
            return None
        return None if value != value else capped_wait(value)  # NaN asks for nothing
    if ra is None:
        return None
    try:
        value = float(ra)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(ra)
        except (TypeError, ValueError):
            return None
        value = when.timestamp() - time.time()
    return None if value != value else capped_wait(value)

