"""Provider clients: one small async adapter per SDK (openai, anthropic, google-genai).

Each adapter turns (system prompt, messages, pydantic schema) into the provider's native
structured-output request (OpenAI ``response_format`` json_schema, Anthropic forced tool call,
Gemini ``response_json_schema``) and its reply into a :class:`Reply` (text or decoded arguments,
token usage). Retries, rate limits and caching live in the service, so every SDK runs with its own
retries off. SDKs are imported only when a client starts.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ragmeter.core.redact import redact
from ragmeter.llm.config import JudgeConfig, JudgeConfigError, needs_key
from ragmeter.llm.limits import remaining_requests
from ragmeter.llm.replies import JUDGE_HINT, ReplyTooLarge, capping_hooks, reply_limit, retry_after_seconds
from ragmeter.llm.structured import REFUSAL_PREFIX, schema_json, strict_schema


class NonJSONReply(Exception):
    """The judge answered HTTP 200 with a body that is not JSON (a proxy's or login page's HTML,
    a truncated body): retried like a transient error, then recorded as a judge failure."""

    def __init__(self, body: Any) -> None:
        text = body if isinstance(body, str) else repr(body)
        kind = "an HTML page" if text.lstrip()[:15].lower().startswith(("<!doctype", "<html")) else "a non-JSON body"
        self.snippet = redact(" ".join(text.split())[:200])
        super().__init__(f"the judge answered HTTP 200 with {kind}, not a JSON reply "
                         f"(check --judge-base-url): {self.snippet!r}")


def _json_reply(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise NonJSONReply(data)
    return data


#: a minimal request that proves the endpoint is reachable, accepts the key and knows the model
PING = "Reply with the single word: ok"


@dataclass
class Reply:
    """What a provider answered: text, or tool-call arguments already decoded, and token usage."""

    text: str | None
    data: dict[str, Any] | None
    input_tokens: int
    output_tokens: int
    finish_reason: str | None = None
    #: requests left in the provider's rate-limit window, from the reply's headers (``None``: not said)
    remaining: int | None = None
    #: the reply's tokens with their log-probabilities, when asked for and given (OpenAI-compatible)
    logprobs: list[dict[str, Any]] | None = None

    @property
    def raw(self) -> str:
        if self.data is not None:
            return json.dumps(self.data, ensure_ascii=False)
        return self.text or ""


@dataclass
class Problem:
    """A failed request, classified: ``transient`` (retry), ``config`` (stop the run) or ``final``."""

    kind: str
    short: str
    message: str
    status: int | None = None
    retry_after: float | None = None
    #: what exactly went wrong, for the sample's no-value reason: the provider's own error message
    #: for an HTTP error reply, else the exception's (redacted)
    detail: str = ""


SCHEMA_INSTRUCTION = ("\n\nReply with one JSON object and nothing else (no prose, no code fence). "
                      "It must match this JSON schema:\n")


def _sampling(sampling: dict[str, Any] | None, known: tuple[str, ...], temperature: bool) -> dict[str, Any]:
    """The sampling parameters of one request this provider takes (``temperature`` only while the
    endpoint accepts one); the others are not sent."""
    return {k: v for k, v in (sampling or {}).items()
            if k in known and v is not None and (temperature or k != "temperature")}


def _user_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


class OpenAIClient:
    """OpenAI and every OpenAI-compatible server (Azure OpenAI, vLLM, Ollama, llama.cpp, LM Studio).

    Asks for ``response_format={"type": "json_schema", ...}``; a server that rejects it is asked
    again with ``json_object``, then with plain text plus the schema in the prompt. Likewise a
    server that rejects ``max_tokens`` gets ``max_completion_tokens``, and one that rejects
    ``temperature`` gets none, and one that rejects ``logprobs`` gets none (G-Eval then uses the
    plain score). These adaptations are kept for the rest of the run.
    """

    provider = "openai"

    def __init__(self, cfg: JudgeConfig) -> None:
        self.cfg = cfg
        self.mode = cfg.response_format
        self.token_param = "max_tokens"
        self.send_temperature = True
        self.send_logprobs = True
        self.adaptations: list[str] = []
        self.transport = "httpx"
        self._path = "/chat/completions"
        self._client: Any = None

    async def start(self) -> None:
        # the openai extra is what installs the transport (httpx, and aiohttp with its extra)
        if importlib.util.find_spec("openai") is None:
            raise JudgeConfigError("the openai judge needs the openai package: "
                                   "pip install 'ragmeter-eval[openai]'")
        key = self.cfg.api_key()
        if not key and needs_key(self.cfg):
            raise JudgeConfigError(f"the judge's API key is not set: export {self.cfg.api_key_env}=...")
        if self.cfg.provider != "azure" and self.cfg.http_client != "sdk":
            # the SDK's request without importing the SDK (see ragmeter.llm.direct); local
            # servers ignore the key, but the SDK sends one
            from ragmeter.llm.direct import DirectClient, use_aiohttp

            aio = use_aiohttp(self.cfg.http_client)
            self.transport = "aiohttp" if aio else "httpx"
            self._client = DirectClient(self.cfg.base_url, key or "not-needed", self.cfg.timeout, aio,
                                        max_reply=reply_limit(self.cfg.max_reply_mb))
            await self._client.start()
            return
        import openai

        http, self.transport = http_client(openai, self.cfg)
        if self.cfg.provider == "azure":
            # Azure routes by deployment; the SDK derives this path from the model of a typed call
            self._path = f"/deployments/{self.cfg.model}/chat/completions"
            self._client = openai.AsyncAzureOpenAI(api_key=key, azure_endpoint=self.cfg.base_url,
                                                   api_version=self.cfg.api_version,
                                                   timeout=self.cfg.timeout, max_retries=0,
                                                   http_client=http)
        else:  # judge_http_client=sdk; local servers ignore the key, but the SDK insists on one
            self._client = openai.AsyncOpenAI(api_key=key or "not-needed", base_url=self.cfg.base_url,
                                              timeout=self.cfg.timeout, max_retries=0, http_client=http)

    def build(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel],
              max_tokens: int, sampling: dict[str, Any] | None = None,
              logprobs: int | None = None) -> dict[str, Any]:
        """The JSON body of the chat-completions request (``sampling``: a request's own
        ``temperature``, ``top_p``, ``seed``, ``reasoning_effort``; ``logprobs``: ask for the tokens'
        log-probabilities with that many alternatives each)."""
        if self.mode != "json_schema":
            system = system + SCHEMA_INSTRUCTION + schema_json(schema)
        body: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": [{"role": "system", "content": system}, *_user_messages(messages)],
            self.token_param: max_tokens,
        }
        if self.send_temperature:
            body["temperature"] = self.cfg.temperature
        body.update(_sampling(sampling, ("temperature", "top_p", "seed", "reasoning_effort"),
                              self.send_temperature))
        if self.mode == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": schema.__name__, "schema": strict_schema(schema), "strict": True}}
        elif self.mode == "json_object":
            body["response_format"] = {"type": "json_object"}
        if logprobs and self.send_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = logprobs
        return body

    async def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel],
                       max_tokens: int, sampling: dict[str, Any] | None = None,
                       logprobs: int | None = None) -> Reply:
        while True:
            body = self.build(system, messages, schema, max_tokens, sampling, logprobs)
            try:
                # the body already encoded, the reply read as plain JSON: the SDK's typed call
                # would walk the JSON schema through its request transformer, deep-copy the body
                # and build reply models on every call -- milliseconds of CPU per request
                data, headers = await self._post(body)
            except Exception as exc:
                if getattr(exc, "status_code", None) == 400 and self._adapt(str(exc)):
                    continue
                raise
            reply = self.parse(_json_reply(data))
            reply.remaining = remaining_requests(headers)
            return reply

    async def ping(self, timeout: float) -> None:
        """One 1-token request without retries (pre-flight); raises what a real call would."""
        body = {"model": self.cfg.model, "messages": [{"role": "user", "content": PING}], "max_tokens": 1}
        _json_reply((await self._post(body, timeout))[0])

    async def _post(self, body: dict[str, Any], timeout: float | None = None) -> tuple[Any, Any]:
        from ragmeter.llm.direct import DirectClient

        if isinstance(self._client, DirectClient):
            return await self._client.post(self._path, _encode(body), timeout)
        # Azure and judge_http_client=sdk: the SDK's documented request for any endpoint (``client.post``: same auth, base
        # URL, headers and error classes as chat.completions.create)
        client = self._client if timeout is None else self._client.with_options(timeout=timeout, max_retries=0)
        return await _raw_post(client, self._path, body, want_headers=timeout is None)

    @staticmethod
    def parse(data: dict[str, Any]) -> Reply:
        """A chat-completions reply (decoded JSON) -> :class:`Reply`."""
        choices = data.get("choices") or []
        choice = choices[0] if choices else {}
        msg = choice.get("message") or {}
        text = msg.get("content")
        if not text and msg.get("refusal"):
            text = REFUSAL_PREFIX + str(msg["refusal"])
        usage = data.get("usage") or {}
        lp = choice.get("logprobs")
        content = lp.get("content") if isinstance(lp, dict) else None
        return Reply(text=text, data=None, input_tokens=int(usage.get("prompt_tokens") or 0),
                     output_tokens=int(usage.get("completion_tokens") or 0),
                     finish_reason=choice.get("finish_reason"),
                     logprobs=_token_logprobs(content))

    def _adapt(self, message: str) -> bool:
        m = message.lower()
        if "logprobs" in m and self.send_logprobs:
            self.send_logprobs = False
            self.adaptations.append("logprobs not sent")
            return True
        if ("response_format" in m or "json_schema" in m or "json_object" in m) and self.mode != "text":
            self.mode = "json_object" if self.mode == "json_schema" else "text"
            self.adaptations.append(f"response_format -> {self.mode}")
            return True
        if "max_tokens" in m and self.token_param == "max_tokens":
            self.token_param = "max_completion_tokens"
            self.adaptations.append("max_tokens -> max_completion_tokens")
            return True
        if "temperature" in m and self.send_temperature:
            self.send_temperature = False
            self.adaptations.append("temperature not sent")
            return True
        return False

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


class AnthropicClient:
    """Anthropic Messages API; the verdict comes back as a forced tool call whose input schema is
    the verdict's JSON schema."""

    provider = "anthropic"

    def __init__(self, cfg: JudgeConfig) -> None:
        self.cfg = cfg
        self.send_temperature = True
        self.adaptations: list[str] = []
        self.transport = "httpx"
        self._client: Any = None

    async def start(self) -> None:
        try:
            import anthropic
        except ImportError:
            raise JudgeConfigError("the anthropic judge needs the anthropic package: "
                                   "pip install 'ragmeter-eval[anthropic]'") from None
        key = self.cfg.api_key()
        if not key:
            raise JudgeConfigError(f"the judge's API key is not set: export {self.cfg.api_key_env}=...")
        http, self.transport = http_client(anthropic, self.cfg)
        self._client = anthropic.AsyncAnthropic(api_key=key, base_url=self.cfg.base_url,
                                                timeout=self.cfg.timeout, max_retries=0, http_client=http)

    def build(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel],
              max_tokens: int, sampling: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON body of the messages request (``sampling``: ``temperature``, ``top_p``; the
        Messages API has no seed)."""
        name = schema.__name__
        body: dict[str, Any] = {
            "model": self.cfg.model, "max_tokens": max_tokens, "system": system,
            "messages": _user_messages(messages),
            "tools": [{"name": name, "description": "Record the verdict.",
                       "input_schema": strict_schema(schema)}],
            "tool_choice": {"type": "tool", "name": name},
        }
        if self.send_temperature:
            body["temperature"] = self.cfg.temperature
        body.update(_sampling(sampling, ("temperature", "top_p"), self.send_temperature))
        return body

    async def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel],
                       max_tokens: int, sampling: dict[str, Any] | None = None,
                       logprobs: int | None = None) -> Reply:
        """The verdict (``logprobs`` is ignored: the Messages API gives none)."""
        import anthropic

        while True:
            try:
                data, headers = await _raw_post(self._client, "/v1/messages",
                                                self.build(system, messages, schema, max_tokens, sampling),
                                                want_headers=True)
            except anthropic.BadRequestError as exc:
                if "temperature" in str(exc).lower() and self.send_temperature:
                    self.send_temperature = False
                    self.adaptations.append("temperature not sent")
                    continue
                raise
            reply = self.parse(_json_reply(data))
            reply.remaining = remaining_requests(headers)
            return reply

    async def ping(self, timeout: float) -> None:
        """One 1-token request without retries (pre-flight); raises what a real call would."""
        body = {"model": self.cfg.model, "max_tokens": 1, "messages": [{"role": "user", "content": PING}]}
        _json_reply((await _raw_post(self._client.with_options(timeout=timeout, max_retries=0),
                                     "/v1/messages", body))[0])

    @staticmethod
    def parse(data: dict[str, Any]) -> Reply:
        """A messages reply (decoded JSON) -> :class:`Reply`: the forced tool call's input."""
        tool_input = None
        texts = []
        for block in data.get("content") or []:
            if block.get("type") == "tool_use":
                if isinstance(block.get("input"), dict):
                    tool_input = block["input"]
                else:
                    texts.append(json.dumps(block.get("input")))
            elif block.get("type") == "text":
                texts.append(block.get("text") or "")
        usage = data.get("usage") or {}
        return Reply(text="\n".join(texts) or None, data=tool_input,
                     input_tokens=int(usage.get("input_tokens") or 0),
                     output_tokens=int(usage.get("output_tokens") or 0),
                     finish_reason=data.get("stop_reason"))

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


class GoogleClient:
    """Gemini through google-genai, with ``response_mime_type=application/json`` and
    ``response_json_schema``."""

    provider = "google"

    def __init__(self, cfg: JudgeConfig) -> None:
        self.cfg = cfg
        self.adaptations: list[str] = []
        self._client: Any = None
        self._http: Any = None

    async def start(self) -> None:
        try:
            from google import genai
            from google.genai import types
        except ImportError:
            raise JudgeConfigError("the google judge needs the google-genai package: "
                                   "pip install 'ragmeter-eval[google]'") from None
        key = self.cfg.api_key()
        if not key:
            raise JudgeConfigError(f"the judge's API key is not set: export {self.cfg.api_key_env}=...")
        # google-genai reads a reply whole (aiohttp's ``text()`` when aiohttp is installed): it is
        # given an httpx2 client (its own HTTP package) whose replies are bounded like the other SDKs'
        import httpx2

        self._http = httpx2.AsyncClient(timeout=self.cfg.timeout, follow_redirects=True,
                                        event_hooks=capping_hooks(reply_limit(self.cfg.max_reply_mb), JUDGE_HINT))
        opts = types.HttpOptions(base_url=self.cfg.base_url, timeout=int(self.cfg.timeout * 1000),
                                 httpx_async_client=self._http)
        self._client = genai.Client(api_key=key, http_options=opts)

    def build(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel],
              max_tokens: int, sampling: dict[str, Any] | None = None) -> dict[str, Any]:
        from google.genai import types

        contents = [types.Content(role="model" if m["role"] == "assistant" else "user",
                                  parts=[types.Part(text=m["content"])]) for m in messages]
        config = types.GenerateContentConfig(
            system_instruction=system, temperature=self.cfg.temperature,
            max_output_tokens=max_tokens, response_mime_type="application/json",
            response_json_schema=strict_schema(schema),
            **_sampling(sampling, ("temperature", "top_p", "seed"), True))
        return {"model": self.cfg.model, "contents": contents, "config": config}

    async def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel],
                       max_tokens: int, sampling: dict[str, Any] | None = None,
                       logprobs: int | None = None) -> Reply:
        """The verdict (``logprobs`` is not asked for: G-Eval uses the plain score)."""
        resp = await self._client.aio.models.generate_content(**self.build(system, messages, schema, max_tokens,
                                                                          sampling))
        return self.parse(resp)

    async def ping(self, timeout: float) -> None:
        """Look the model up (free; checks the key and the model name), within ``timeout``."""
        import asyncio

        await asyncio.wait_for(self._client.aio.models.get(model=self.cfg.model), timeout)

    @staticmethod
    def parse(resp: Any) -> Reply:
        try:
            text = resp.text
        except (ValueError, AttributeError):
            text = None
        usage = getattr(resp, "usage_metadata", None)
        cands = getattr(resp, "candidates", None) or []
        finish = getattr(cands[0], "finish_reason", None) if cands else None
        return Reply(text=text, data=None,
                     input_tokens=int(getattr(usage, "prompt_token_count", 0) or 0),
                     output_tokens=int((getattr(usage, "candidates_token_count", 0) or 0)
                                       + (getattr(usage, "thoughts_token_count", 0) or 0)),
                     finish_reason=str(finish) if finish is not None else None)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aio.aclose()
        if self._http is not None:  # the SDK leaves a client it was given open
            await self._http.aclose()


def _token_logprobs(content: Any) -> list[dict[str, Any]] | None:
    """``choices[0].logprobs.content`` of a chat-completions reply as plain
    ``{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}`` dicts (``None`` when absent)."""
    if not isinstance(content, list):
        return None
    out = []
    for t in content:
        if not isinstance(t, dict) or not isinstance(t.get("token"), str):
            continue
        top = [{"token": x["token"], "logprob": float(x["logprob"])} for x in t.get("top_logprobs") or []
               if isinstance(x, dict) and isinstance(x.get("token"), str)
               and isinstance(x.get("logprob"), int | float)]
        lp = t.get("logprob")
        out.append({"token": t["token"], "logprob": float(lp) if isinstance(lp, int | float) else None,
                    "top_logprobs": top})
    return out


def http_client(sdk: Any, cfg: JudgeConfig) -> tuple[Any, str]:
    """The SDK's HTTP client and its transport's name: the aiohttp transport
    (``DefaultAioHttpClient``, the SDKs' documented option "for improved concurrency
    performance"; about half the CPU per request of the default httpx transport) when aiohttp is
    installed, else the SDK's default httpx client (``DefaultAsyncHttpxClient``: the SDK's own
    defaults). Either bounds every reply body to ``judge_max_reply_mb``
    (:func:`ragmeter.llm.replies.capping_hooks`).

    ``judge_http_client``: ``auto`` (default), ``aiohttp`` (required) or ``httpx``.
    """
    hooks = capping_hooks(reply_limit(cfg.max_reply_mb), JUDGE_HINT)
    if cfg.http_client != "httpx":
        have = importlib.util.find_spec("aiohttp") is not None and hasattr(sdk, "DefaultAioHttpClient")
        if not have and cfg.http_client == "aiohttp":
            raise JudgeConfigError(f"judge_http_client=aiohttp needs aiohttp: pip install '{sdk.__name__}[aiohttp]'")
        if have:
            try:
                return sdk.DefaultAioHttpClient(timeout=cfg.timeout, event_hooks=hooks), "aiohttp"
            except RuntimeError as exc:  # the SDK's transport package (httpx-aiohttp for openai 1.x) is missing
                if cfg.http_client == "aiohttp":
                    raise JudgeConfigError(
                        f"judge_http_client=aiohttp: {exc}; pip install '{sdk.__name__}[aiohttp]'") from exc
    return sdk.DefaultAsyncHttpxClient(timeout=cfg.timeout, event_hooks=hooks), "httpx"


_JSON_HEADERS: Any = {"headers": {"Content-Type": "application/json"}}


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def _raw_post(client: Any, path: str, body: dict[str, Any], *,
                    want_headers: bool = False) -> tuple[Any, Any]:
    """``client.post(path, cast_to=object, ...)``: the decoded JSON reply as plain dicts and lists
    (no reply models), or the body's text when it is not JSON, and, with ``want_headers``, the
    reply's headers (through the SDK's ``AsyncAPIResponse``; ``None`` when the SDK has none). The
    body goes pre-encoded (``content=``) when the SDK accepts it, so the SDK neither copies nor
    re-encodes it; older SDKs get ``body=``. Only the SDKs' public client API is used, so a change
    of their HTTP stack (httpx, httpx2, aiohttp) does not matter here."""
    wrapper = _response_type(type(client)) if want_headers else None
    cast = wrapper or object
    if _accepts_content(type(client)):
        data = _encode(body)
        out = await client.post(path, cast_to=cast, content=data, options=_JSON_HEADERS)
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


def make_client(cfg: JudgeConfig) -> OpenAIClient | AnthropicClient | GoogleClient:
    if cfg.provider in {"openai", "azure"}:
        return OpenAIClient(cfg)
    if cfg.provider == "anthropic":
        return AnthropicClient(cfg)
    if cfg.provider == "google":
        return GoogleClient(cfg)
    raise JudgeConfigError(f"unknown judge provider {cfg.provider!r}")


#: the exception types classify() reads, by the module that defines them: HTTP transports (their
#: connection-failure and timeout bases), provider SDKs (their wrappers and status errors)
_TRANSPORTS = ("httpx", "httpx2", "httpcore", "httpcore2")
_SDKS = ("openai", "anthropic")
_GOOGLE = "google.genai.errors"
#: message fragments of a dropped connection that a transport reports under another type
_CONNECTION_TEXT = ("connect call failed", "cannot connect to host", "connection refused", "connection reset",
                    "server disconnected", "peer closed", "remote end closed", "connection aborted",
                    "broken pipe", "incomplete chunked read", "connection was closed")


@dataclass(frozen=True)
class _ErrorTypes:
    connection: tuple[type[BaseException], ...]  # the connection failed or dropped (transport level)
    timeout: tuple[type[BaseException], ...]  # no answer in time (transport or SDK)
    unreachable: tuple[type[BaseException], ...]  # an SDK's "could not reach the API" wrapper
    status: tuple[tuple[type[BaseException], str], ...]  # an HTTP error reply, and its status attribute


def _error_types() -> _ErrorTypes:
    """The typed exceptions of the transports and SDKs this process has loaded: one that is not
    imported cannot have raised, so classifying imports nothing, and a missing optional SDK leaves
    the others' classification intact."""
    return _error_types_of(tuple(m for m in (*_TRANSPORTS, "aiohttp", *_SDKS, _GOOGLE) if m in sys.modules))


@functools.lru_cache(maxsize=16)
def _error_types_of(loaded: tuple[str, ...]) -> _ErrorTypes:
    import asyncio
    import importlib

    mods = {name: importlib.import_module(name) for name in loaded}
    connection: list[type[BaseException]] = [ConnectionError, asyncio.IncompleteReadError]
    timeout: list[type[BaseException]] = [TimeoutError]  # asyncio's and aiohttp's timeouts too
    unreachable: list[type[BaseException]] = []
    status: list[tuple[type[BaseException], str]] = []
    for name in _TRANSPORTS:
        if name in mods:
            connection += [mods[name].NetworkError, mods[name].RemoteProtocolError]
            timeout.append(mods[name].TimeoutException)
    if "aiohttp" in mods:  # not ClientConnectionError: aiohttp's ServerTimeoutError is one too
        aio = mods["aiohttp"]
        connection += [aio.ServerDisconnectedError, aio.ClientOSError, aio.ClientPayloadError]
    for name in _SDKS:
        if name in mods:
            sdk = mods[name]
            timeout.append(sdk.APITimeoutError)
            unreachable.append(sdk.APIConnectionError)
            status.append((sdk.APIStatusError, "status_code"))
    if _GOOGLE in mods:
        status.append((mods[_GOOGLE].APIError, "code"))
    return _ErrorTypes(tuple(connection), tuple(timeout), tuple(unreachable), tuple(status))


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


def classify(exc: BaseException) -> Problem:
    """Sort an SDK/transport exception into retry / stop-the-run / give-up-on-this-request.

    By the SDKs' and transports' exception types: the SDKs wrap transport errors
    (``APIConnectionError``, ``APITimeoutError``), and their aiohttp transport reports some dropped
    connections as timeouts, so the whole cause chain is read: a refused, reset or dropped
    connection is a "connection error", only a real wait is a "timeout". An HTTP error reply is
    retried on 408, 429 and 5xx, stops the run on 401/403/404, and is final otherwise; a reply
    larger than the limit (:class:`~ragmeter.llm.replies.ReplyTooLarge`) is final. Messages
    pass through the redaction layer (a server may echo the key it was sent).
    """
    chain = _chain(exc)
    msg = redact(f"{type(exc).__name__}: {exc}"[:500])
    said = redact(" | ".join(dict.fromkeys(str(e) for e in chain if str(e)))[:500])
    if isinstance(exc, NonJSONReply):
        return Problem("transient", "non-JSON reply", msg, detail=said)
    too_large = next((e for e in chain if isinstance(e, ReplyTooLarge)), None)
    if too_large is not None:  # an SDK wraps it (openai: APIConnectionError): final, never retried
        return Problem("final", too_large.short, redact(str(too_large)), detail=JUDGE_HINT)
    types = _error_types()
    texts = [str(e).lower() for e in chain]
    detail = redact(" | ".join(dict.fromkeys(str(e) for e in chain[1:] if str(e)))[:300])
    full = msg + (f" | {detail}" if detail else "")
    if any(isinstance(e, types.connection) for e in chain[1:]) or any(m in t for t in texts for m in _CONNECTION_TEXT):
        return Problem("transient", "connection error", full, detail=said)
    if any(isinstance(e, types.timeout) for e in chain):
        return Problem("transient", "timeout", full, detail=said)
    status = _http_status(exc, types)
    if status is None and isinstance(exc, types.connection + types.unreachable):
        return Problem("transient", "connection error", full, detail=said)
    if status is None:
        return Problem("final", type(exc).__name__, msg, detail=said)
    retry_after = retry_after_seconds(getattr(getattr(exc, "response", None), "headers", None))
    said = redact(provider_message(exc)[:500])
    if status == 429 or status >= 500 or status == 408:
        return Problem("transient", f"HTTP {status}", msg, status, retry_after, detail=said)
    if status in {401, 403}:
        return Problem("config", f"HTTP {status}", "the judge rejected the credentials "
                       f"(HTTP {status}): check the key variable and the model's access. {msg}", status)
    if status == 404:
        return Problem("config", "HTTP 404", f"the judge's model or endpoint was not found (HTTP 404): "
                       f"check the model name and --judge-base-url. {msg}", status)
    return Problem("final", f"HTTP {status}", msg, status, detail=said)


def provider_message(exc: BaseException) -> str:
    """The message a provider put in its error reply: ``error.message`` of the body the SDKs
    decode (OpenAI: the ``error`` object; Anthropic: ``{"type": "error", "error": {...}}``),
    google-genai's ``message``, else the exception's text without the SDK's ``Error code: N -``."""
    body: Any = getattr(exc, "body", None)
    for _ in range(3):  # {"error": {"message": ...}} nests at most this deep in the known shapes
        if not isinstance(body, dict):
            break
        if isinstance(body.get("message"), str) and body["message"].strip():
            return body["message"]
        body = body.get("error")
    if isinstance(body, str) and body.strip():
        return body
    said = getattr(exc, "message", None)
    if isinstance(said, str) and said.strip():
        return said
    return re.sub(r"^Error code: \d+ - ", "", str(exc))
