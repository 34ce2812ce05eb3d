"""Systems under test that ``ragmeter simulate`` talks to. Each takes the conversation so far as
chat messages (``[{"role": "system"|"user"|"assistant", "content"}]``) and returns the reply text.

- ``openai``: an OpenAI-compatible chat endpoint: ``POST {base}/chat/completions`` with
  ``{"model", "messages"}``; the reply is ``choices[0].message.content``.
- ``http``: any HTTP endpoint: ``POST {url}`` with ``{"messages": [...], "model": M}``; it answers
  ``{"content": "reply text"}`` (HTTP 200, JSON).
- ``python:MODULE:FUNCTION``: a Python callable ``FUNCTION(messages) -> str``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from ragmeter.core.errors import ConfigError

Target = Callable[[list[dict[str, str]]], str]


class TargetError(Exception):
    """The system under test did not give a reply (unreachable, an error status, a malformed reply)."""


def make_target(target: str, *, kind: str = "openai", model: str | None = None,
                api_key_env: str | None = None, timeout: float = 60.0) -> tuple[Target, Callable[[], None]]:
    """``(send, close)`` for a target; ``target`` is a URL or ``python:MODULE:FUNCTION``.

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

    def send(messages: list[dict[str, str]]) -> str:
        body: dict[str, Any] = {"messages": messages}
        if model:
            body["model"] = model
        try:
            resp = client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise TargetError(f"{type(exc).__name__}: {exc}") from None
        if resp.status_code != 200:
            raise TargetError(f"HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            data = resp.json()
            text = data["choices"][0]["message"]["content"] if kind == "openai" else data["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise TargetError(f"unexpected reply (expected {'choices[0].message.content' if kind == 'openai' else 'content'}): "
                              f"{resp.text[:300]}") from None
        if not isinstance(text, str):
            raise TargetError(f"the reply's text is {type(text).__name__}, not text")
        return text

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
