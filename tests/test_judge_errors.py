"""The judge's error classification against the provider SDKs' real exception types.

Each SDK's exceptions are built as the SDK builds them, around an HTTP response made with httpx,
so what is retried (429, 408, 5xx, timeouts, dropped connections), what stops the run (401, 403,
404) and what is final (400, 422 ...) is checked on the types the judge really receives."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import aiohttp
import anthropic
import httpx
import httpx2
import openai
import pytest
from google.genai import errors as genai_errors

from ragmeter.llm.transport import NonJSONReply, TransportError, as_transport_error, classify

URL = "https://api.example.test/v1/chat/completions"


def _response(status: int, headers: dict[str, str] | None = None, lib=httpx):
    request = lib.Request("POST", URL)
    return lib.Response(status, headers=headers or {}, request=request, json={"error": {"message": "no"}})


def _raised_from(exc: BaseException, cause: BaseException) -> BaseException:
    """``exc`` as raised ``from cause`` (its cause chain is what the SDKs leave)."""
    try:
        try:
            raise cause
        except BaseException as inner:
            raise exc from inner
    except BaseException as outer:
        return outer


def _status_error(sdk, cls_name: str, status: int, headers=None, lib=httpx):
    return getattr(sdk, cls_name)("the API said no", response=_response(status, headers, lib), body=None)


# (exception class name, HTTP status, kind, short)
STATUS_CASES = [
    ("BadRequestError", 400, "final", "HTTP 400"),
    ("AuthenticationError", 401, "config", "HTTP 401"),
    ("PermissionDeniedError", 403, "config", "HTTP 403"),
    ("NotFoundError", 404, "config", "HTTP 404"),
    ("ConflictError", 409, "final", "HTTP 409"),
    ("UnprocessableEntityError", 422, "final", "HTTP 422"),
    ("RateLimitError", 429, "transient", "HTTP 429"),
    ("InternalServerError", 500, "transient", "HTTP 500"),
    ("InternalServerError", 503, "transient", "HTTP 503"),
    ("APIStatusError", 408, "transient", "HTTP 408"),
]


@pytest.mark.parametrize("sdk", [openai, anthropic], ids=["openai", "anthropic"])
@pytest.mark.parametrize("cls_name, status, kind, short", STATUS_CASES)
def test_sdk_status_errors(sdk, cls_name, status, kind, short):
    p = classify(_status_error(sdk, cls_name, status))
    assert (p.kind, p.short, p.status) == (kind, short, status)
    if kind == "config":
        assert "check" in p.message


@pytest.mark.parametrize("sdk", [openai, anthropic], ids=["openai", "anthropic"])
@pytest.mark.parametrize("lib", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_sdk_rate_limit_carries_retry_after(sdk, lib):
    p = classify(_status_error(sdk, "RateLimitError", 429, {"retry-after": "3"}, lib))
    assert (p.kind, p.status, p.retry_after) == ("transient", 429, 3.0)
    p = classify(_status_error(sdk, "RateLimitError", 429, {"retry-after-ms": "1500"}, lib))
    assert p.retry_after == 1.5


def test_anthropic_overloaded_is_retried():
    p = classify(_status_error(anthropic, "OverloadedError", 529))
    assert (p.kind, p.short) == ("transient", "HTTP 529")


@pytest.mark.parametrize("sdk", [openai, anthropic], ids=["openai", "anthropic"])
def test_sdk_timeouts_and_connection_errors(sdk):
    request = httpx.Request("POST", URL)
    assert classify(sdk.APITimeoutError(request=request)).short == "timeout"
    p = classify(sdk.APIConnectionError(request=request))
    assert (p.kind, p.short) == ("transient", "connection error")
    # the transport's own error underneath decides: a refused connection, a read timeout
    refused = _raised_from(sdk.APIConnectionError(request=request), httpx.ConnectError("[Errno 111] nope"))
    assert classify(refused).short == "connection error"
    waited = _raised_from(sdk.APITimeoutError(request=request), httpx2.ReadTimeout("slow"))
    assert classify(waited).short == "timeout"
    # the aiohttp transport reports a dropped connection as a timeout: still a connection error
    dropped = _raised_from(sdk.APITimeoutError(request=request), aiohttp.ServerDisconnectedError())
    assert classify(dropped).short == "connection error"
    reset = _raised_from(sdk.APIConnectionError(request=request), aiohttp.ClientOSError(104, "reset by peer"))
    assert classify(reset).short == "connection error"
    slow = _raised_from(sdk.APITimeoutError(request=request), aiohttp.SocketTimeoutError("read"))
    assert classify(slow).short == "timeout"


@pytest.mark.parametrize("cls, status, kind", [
    (genai_errors.ClientError, 400, "final"), (genai_errors.ClientError, 401, "config"),
    (genai_errors.ClientError, 403, "config"), (genai_errors.ClientError, 404, "config"),
    (genai_errors.ClientError, 429, "transient"), (genai_errors.ServerError, 500, "transient"),
    (genai_errors.ServerError, 503, "transient"), (genai_errors.APIError, 408, "transient"),
])
def test_google_genai_errors(cls, status, kind):
    body = {"error": {"code": status, "message": "no", "status": "SOMETHING"}}
    p = classify(cls(status, body, _response(status, {"retry-after": "2"})))
    assert (p.kind, p.status) == (kind, status)
    if kind == "transient":
        assert p.retry_after == 2.0


@pytest.mark.parametrize("exc, short", [
    (httpx.ReadTimeout("slow"), "timeout"), (httpx2.ConnectTimeout("slow"), "timeout"),
    (httpx.ConnectError("refused"), "connection error"), (httpx2.RemoteProtocolError("eof"), "connection error"),
    (aiohttp.ClientPayloadError("cut"), "connection error"), (aiohttp.ServerTimeoutError("slow"), "timeout"),
    (ConnectionResetError(104, "reset"), "connection error"), (asyncio.IncompleteReadError(b"", 10), "connection error"), (TimeoutError(), "timeout"),
    (BrokenPipeError(32, "pipe"), "connection error"),
])
def test_raw_transport_errors(exc, short):
    """google-genai raises its transport's errors unwrapped."""
    p = classify(exc)
    assert (p.kind, p.short) == ("transient", short)


def test_other_errors():
    assert (classify(ValueError("x")).kind, classify(ValueError("x")).short) == ("final", "ValueError")
    assert classify(openai.APIResponseValidationError(_response(200), None)).kind == "final"
    p = classify(NonJSONReply("<html>login</html>"))
    assert (p.kind, p.short) == ("transient", "non-JSON reply")


def test_missing_sdk_leaves_the_others_working(monkeypatch):
    """Without anthropic and google-genai loaded (not installed), OpenAI's errors still classify."""
    for name in ("anthropic", "google.genai.errors"):
        monkeypatch.delitem(sys.modules, name)
    assert classify(_status_error(openai, "RateLimitError", 429)).kind == "transient"
    assert classify(_status_error(openai, "NotFoundError", 404)).kind == "config"
    assert classify(openai.APITimeoutError(request=httpx.Request("POST", URL))).short == "timeout"


def test_classifying_imports_no_sdk():
    src = str(Path(__file__).resolve().parents[1] / "src")
    code = ("import sys\nfrom ragmeter.llm.transport import classify\n"
            "assert classify(TimeoutError()).short == 'timeout'\n"
            "assert classify(ConnectionRefusedError()).short == 'connection error'\n"
            "print(sorted(m for m in ('openai', 'anthropic', 'google.genai') if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": src},
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("err, kind, short", [
    (TransportError("timeout", ""), "transient", "timeout"),
    (TransportError("connect", "refused"), "transient", "connection error"),
    (TransportError("invalid_reply", "<html>"), "transient", "non-JSON reply"),
    (TransportError("reply_too_large", "reply larger than 8 MB"), "final", "reply larger than 8 MB"),
    (TransportError("request", "bad URL"), "final", "request error"),
    *[(TransportError("http_status", "said", status=s), k, f"HTTP {s}") for s, k in [
        (400, "final"), (401, "config"), (403, "config"), (404, "config"), (405, "final"), (408, "transient"),
        (409, "final"), (422, "final"), (429, "transient"), (500, "transient"), (502, "transient"),
        (503, "transient"), (529, "transient"), (301, "config"), (302, "config"), (307, "config")]],
])
def test_the_transport_error_alone_decides(err, kind, short):
    """What is retried follows from the error's kind and HTTP status, nothing else."""
    p = classify(err)
    assert (p.kind, p.short, p.cause) == (kind, short, err.kind)
    assert err.retryable == (kind == "transient")


@pytest.mark.parametrize("text", ["Connection reset by peer", "server disconnected", "Request timed out.",
                                  "Error code: 429 - rate limited", "503 Service Unavailable"])
def test_words_in_a_message_decide_nothing(text):
    """An exception that is no transport's or SDK's is final whatever its message says."""
    for exc in (RuntimeError(text), ValueError(text)):
        p = classify(exc)
        assert (p.kind, p.short, p.cause) == ("final", type(exc).__name__, None)
    # a transport's error of its own kind keeps that kind whatever its words
    assert classify(TransportError("http_status", text, status=400)).kind == "final"
    assert classify(TransportError("connect", text)).kind == "transient"


@pytest.mark.parametrize("sdk", [openai, anthropic], ids=["openai", "anthropic"])
def test_sdk_errors_become_transport_errors(sdk):
    """The SDK path's edge: each SDK exception stands for one TransportError, by type."""
    request = httpx.Request("POST", URL)
    err = as_transport_error(_status_error(sdk, "RateLimitError", 429, {"retry-after": "100000"}))
    assert (err.kind, err.status, err.retry_after, err.said) == ("http_status", 429, 60.0, "the API said no")
    err = as_transport_error(_raised_from(sdk.APIConnectionError(request=request), httpx.ConnectError("refused")))
    assert err.kind == "connect" and URL in err.said and "Connection error" not in err.said
    assert as_transport_error(sdk.APITimeoutError(request=request)).kind == "timeout"
    moved = as_transport_error(_status_error(sdk, "APIStatusError", 308, {"location": "https://b.test/v1"}))
    assert (moved.kind, moved.status) == ("http_status", 308) and "redirected to https://b.test/v1" in moved.said
    assert as_transport_error(ValueError("x")) is None
