"""Systems under test that ``ragmeter simulate`` talks to. Each takes the conversation so far as
chat messages (``[{"role": "system"|"user"|"assistant", "content"}]``) and returns the reply text.

- ``openai``: an OpenAI-compatible chat endpoint: ``POST {base}/chat/completions`` with
  ``{"model", "messages"}``; the reply is ``choices[0].message.content``.
- ``http``: any HTTP endpoint: ``POST {url}`` with ``{"messages": [...], "model": M}``; it answers
  ``{"content": "reply text"}`` (HTTP 200, JSON).
- ``python:MODULE:FUNCTION``: a Python callable ``FUNCTION(messages) -> str``.

An HTTP target's reply is read as it arrives, at most ``max_reply_mb`` MB (default
:data:`~ragmeter.llm.replies.DEFAULT_MAX_REPLY_MB`) and within ``timeout`` seconds in all; a larger
or slower reply ends the conversation with the reason. A 429 or 503 is asked again up to
:data:`RETRIES` times after the wait the target asks for (``Retry-After``, ``retry-after-ms``; at
most :data:`~ragmeter.llm.replies.MAX_SERVER_WAIT` s), else 1, 2, 4 s.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

from ragmeter.core.errors import ConfigError
from ragmeter.llm.replies import ReplyTooLarge, read_httpx_sync, reply_limit, retry_after_seconds

Target = Callable[[list[dict[str, str]]], str]

#: times a 429 or 503 answer of an HTTP target is asked again
RETRIES = 3
#: the statuses that mean "ask again later"
_LATER = frozenset({429, 503})
_HINT = "the target's reply limit; --max-reply-mb raises it"


def _sleep(seconds: float) -> None:
    # one indirection so tests can observe the waits without taking them
    time.sleep(seconds)


class TargetError(Exception):
    """The system under test did not give a reply (unreachable, an error status, a malformed reply)."""


def make_target(target: str, *, kind: str = "openai", model: str | None = None,
                api_key_env: str | None = None, timeout: float = 60.0,
                max_reply_mb: float | None = None) -> tuple[Target, Callable[[], None]]:
    """``(send, close)`` for a target; ``target`` is a URL or ``python:MODULE:FUNCTION``.
    ``timeout`` bounds each reply in all (seconds), ``max_reply_mb`` its size (MB).

    Raises:
        ConfigError: an unknown kind, a URL that is not http(s), a callable that cannot be imported,
            a missing model for an OpenAI-compatible endpoint, an unset key variable.
    """
    if target.startswith("python:"):
        return _python(target), lambda: None
    if kind not in ("openai", "http"):
        raise ConfigError(f"--target-kind must be openai or http, got {kind!r}")
    if not target.startswith(("http://", "https://")):
        raise ConfigError(f"--target must be an http(s) URL or python:MODULE:FUNCTION, got {target!r}")
    if kind == "openai" and not model:
        raise ConfigError("--target-model is required for an OpenAI-compatible target")
    headers = {"content-type": "application/json"}
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise ConfigError(f"--target-api-key-env names {api_key_env}, which is not set")
        headers["authorization"] = f"Bearer {key}"
    import httpx

    client = httpx.Client(timeout=timeout, headers=headers)
    url = target.rstrip("/") + "/chat/completions" if kind == "openai" else target
    limit = reply_limit(max_reply_mb)

    def post(body: dict[str, Any]) -> tuple[int, Any, bytes]:
        deadline = time.monotonic() + timeout
        with client.stream("POST", url, json=body) as resp:
            return resp.status_code, resp.headers, read_httpx_sync(resp, limit, _HINT, deadline)

    def send(messages: list[dict[str, str]]) -> str:
        body: dict[str, Any] = {"messages": messages}
        if model:
            body["model"] = model
        for attempt in range(RETRIES + 1):
            try:
                status, headers, raw = post(body)
            except ReplyTooLarge as exc:
                raise TargetError(str(exc)) from None
            except (httpx.TimeoutException, TimeoutError):
                raise TargetError(f"no complete reply within --timeout {timeout:g} s") from None
            except httpx.HTTPError as exc:
                raise TargetError(f"{type(exc).__name__}: {exc}") from None
            if status not in _LATER or attempt == RETRIES:
                break
            wait = retry_after_seconds(headers)
            _sleep(wait if wait is not None else float(2 ** attempt))
        text = raw.decode("utf-8", errors="replace")
        if status != 200:
            raise TargetError(f"HTTP {status}: {text[:300]}")
        try:
            data = json.loads(text)
            reply = data["choices"][0]["message"]["content"] if kind == "openai" else data["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise TargetError(f"unexpected reply (expected {'choices[0].message.content' if kind == 'openai' else 'content'}): "
                              f"{text[:300]}") from None
        if not isinstance(reply, str):
            raise TargetError(f"the reply's text is {type(reply).__name__}, not text")
        return reply

    return send, client.close


def _python(target: str) -> Target:
    spec = target.removeprefix("python:")
    mod_name, _, fn_name = spec.partition(":")
    if not mod_name or not fn_name:
        raise ConfigError(f"--target python:MODULE:FUNCTION expected, got {target!r}")
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"cannot import {spec}: {exc}") from None
    if not callable(fn):
        raise ConfigError(f"{spec} is not callable")

    def send(messages: list[dict[str, str]]) -> str:
        try:
            out = fn([dict(m) for m in messages])
        except Exception as exc:  # noqa: BLE001 - the user's code: any failure ends this conversation
            raise TargetError(f"{spec} raised {type(exc).__name__}: {exc}") from None
        if not isinstance(out, str):
            raise TargetError(f"{spec} returned {type(out).__name__}, not text")
        return out

    return send
