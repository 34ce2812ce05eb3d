"""The validation layer at the HTTP boundary of ``ragmeter serve``.

Every write endpoint reads its body through :func:`read_body` (a byte limit, checked against
``Content-Length`` before anything is read and again while reading) and :func:`json_body`
(:func:`ragmeter.core.safejson.loads`: UTF-8, JSON syntax, nesting depth, number sizes, lone surrogates,
NUL characters, each error naming the JSON path). Refusals are :class:`Rejected` exceptions that
the app answers as ``{"detail": ...}`` with their status: 400 (not JSON), 413 (too large), 415
(not JSON content), 422 (JSON of the wrong shape or with an unusable value). Store calls run in
worker threads (:func:`in_thread`), never on the event loop, and writes have a limiter of their
own, so writers waiting for the database's write lock never hold the threads that reads need.
"""

# no ``from __future__ import annotations``: FastAPI reads the route signatures at run time
import asyncio
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
from fastapi import Request
from fastapi.responses import JSONResponse

from ragmeter.core.safejson import JSONInputError, loads

T = TypeVar("T")
#: writes that may wait for the database's write lock run at most this many at a time
WRITE_THREADS = 8
#: bounds of query parameters that reach SQL (LIMIT/OFFSET are 64-bit integers in SQLite)
MAX_OFFSET = 2**31


class Rejected(Exception):
    """A request refused with ``status`` and a ``detail`` naming the field."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}

    def response(self) -> JSONResponse:
        return JSONResponse({"detail": self.detail}, status_code=self.status,
                            headers={"Cache-Control": "no-store", **self.headers})


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The request body, refused with 413 past ``max_bytes`` (before reading it when the client
    announces its length)."""
    length = request.headers.get("content-length")
    if length is not None and length.strip().isdigit() and len(length) < 30 and int(length) > max_bytes:
        raise Rejected(413, f"body over {max_bytes} bytes: send smaller requests")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise Rejected(413, f"body over {max_bytes} bytes: send smaller requests")
        chunks.append(chunk)
    return b"".join(chunks)


def require_json_content(request: Request) -> None:
    """415 unless the request says its body is JSON."""
    ctype = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise Rejected(415, "send JSON (Content-Type: application/json)")


def parse_json(body: bytes, *, what: str = "body") -> Any:
    """``body`` as checked JSON; 400 when it is not JSON, 422 naming the path of a bad value."""
    try:
        return loads(body)
    except JSONInputError as exc:
        if exc.syntax:
            raise Rejected(400, f"{what} is {exc.message}" if exc.message.startswith("not ")
                           else f"{what}: {exc.message}") from None
        raise Rejected(422, f"{what}: {exc}") from None


async def json_body(request: Request, max_bytes: int, *, what: str = "body") -> Any:
    """Read and check a JSON body (see :func:`read_body` and :func:`parse_json`)."""
    return parse_json(await read_body(request, max_bytes), what=what)


def expect_object(value: Any, fields: str) -> dict[str, Any]:
    """``value`` when it is a JSON object, else 422 naming the expected ``fields``."""
    if not isinstance(value, dict):
        raise Rejected(422, f"body must be a JSON object {fields}, got {_kind(value)}")
    return value


def text_field(body: dict[str, Any], name: str, *, max_chars: int = 1000, required: bool = True,
               numbers: bool = False) -> str | None:
    """``body[name]`` as text (numbers too when ``numbers``); 422 naming the field otherwise."""
    value = body.get(name)
    if value is None:
        if required:
            raise Rejected(422, f"field '{name}' is missing")
        return None
    if numbers and isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise Rejected(422, f"field '{name}' must be text, got {_kind(value)}")
    if len(value) > max_chars:
        raise Rejected(422, f"field '{name}' is longer than {max_chars} characters")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


#: one write limiter per event loop (a test client may run each request on a loop of its own)
_write_limiters: "weakref.WeakKeyDictionary[Any, anyio.CapacityLimiter]" = weakref.WeakKeyDictionary()


async def in_thread(fn: Callable[..., T], *args: Any, write: bool = False) -> T:
    """Run a store call in a worker thread; writes share their own limiter (:data:`WRITE_THREADS`)."""
    limiter = None
    if write:
        loop = asyncio.get_running_loop()
        limiter = _write_limiters.get(loop)
        if limiter is None:
            limiter = _write_limiters[loop] = anyio.CapacityLimiter(WRITE_THREADS)
    return await anyio.to_thread.run_sync(lambda: fn(*args), limiter=limiter)
