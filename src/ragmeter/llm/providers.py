"""Provider clients: one small async adapter per wire format (OpenAI chat completions, Anthropic
messages, Gemini generateContent).

Each adapter turns (system prompt, messages, pydantic schema) into the provider's native
structured-output request (OpenAI ``response_format`` json_schema, Anthropic forced tool call,
Gemini ``responseJsonSchema``) and its reply into a :class:`Reply` (text or decoded arguments,
token usage). Every request goes through ragmeter's own transport
(:class:`~ragmeter.llm.transport.Transport`); the openai SDK only for Azure OpenAI and
``judge_http_client=sdk`` (:mod:`ragmeter.llm.sdk`). Either fails with
:class:`~ragmeter.llm.transport.TransportError`. Retries, rate limits and caching live in the
service. No SDK is imported by a default OpenAI-compatible, Anthropic or Gemini judge.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ragmeter.llm.config import JudgeConfig, JudgeConfigError, needs_key
from ragmeter.llm.limits import remaining_requests
from ragmeter.llm.replies import reply_limit
from ragmeter.llm.structured import REFUSAL_PREFIX, schema_json, strict_schema
from ragmeter.llm.transport import (
    HTTP_STATUS,
    NonJSONReply,
    Transport,
    TransportError,
    choose_package,
)


def _json_reply(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise NonJSONReply(data)
    return data


def _needs_package(module: str, provider: str, extra: str) -> None:
    # the provider's extra is what installs the transport (aiohttp, httpx); its SDK marks it installed
    if importlib.util.find_spec(module) is None:
        raise JudgeConfigError(f"the {provider} judge needs the {module} package: pip install 'ragmeter-eval[{extra}]'")


def _transport(cfg: JudgeConfig, base_url: str, headers: dict[str, str], extra: str) -> Transport:
    return Transport(base_url, headers, timeout=cfg.timeout, package=choose_package(cfg.http_client, extra),
                     max_reply=reply_limit(cfg.max_reply_mb))


def _rejected(err: TransportError) -> str:
    """What a 400 reply says was wrong with the request, lower-cased: the parameter it names
    (OpenAI's ``error.param``) and the provider's message, read for the name of a parameter to
    stop sending (never to decide a retry)."""
    return f"{err.param or ''} {err.said}".lower()


#: the endpoints and API versions the providers' SDKs use by default
OPENAI_URL = "https://api.openai.com/v1"
ANTHROPIC_URL = "https://api.anthropic.com"
#: the Messages API version sent (``anthropic-version``): the one its forced tool calls are documented on
ANTHROPIC_VERSION = "2023-06-01"
GEMINI_URL = "https://generativelanguage.googleapis.com"
GEMINI_API_VERSION = "v1beta"


#: a minimal request that proves the endpoint is reachable, accepts the key and knows the model
PING = "Reply with the single word: ok"


@dataclass
class Reply:
    """What a provider answered: text, or tool-call arguments already decoded, and token usage
    (``input_tokens`` counts every prompt token, the ``cached_tokens`` read from the provider's
    prompt cache and the ``cache_write_tokens`` written to it included)."""

    text: str | None
    data: dict[str, Any] | None
    input_tokens: int
    output_tokens: int
    finish_reason: str | None = None
    #: requests left in the provider's rate-limit window, from the reply's headers (``None``: not said)
    remaining: int | None = None
    #: the reply's tokens with their log-probabilities, when asked for and given (OpenAI-compatible)
    logprobs: list[dict[str, Any]] | None = None
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def raw(self) -> str:
        if self.data is not None:
            return json.dumps(self.data, ensure_ascii=False)
        return self.text or ""


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
        _needs_package("openai", "openai", "openai")
        key = self.cfg.api_key()
        if not key and needs_key(self.cfg):
            raise JudgeConfigError(f"the judge's API key is not set: export {self.cfg.api_key_env}=...")
        if self.cfg.provider == "azure" or self.cfg.http_client == "sdk":
            from ragmeter.llm.sdk import SDKClient

            if self.cfg.provider == "azure":  # Azure routes by deployment, as the SDK's typed call does
                self._path = f"/deployments/{self.cfg.model}/chat/completions"
            self._client = SDKClient(self.cfg, key)
        else:
            # the SDK's request (its URL, headers and body) without importing the SDK; local
            # servers ignore the key, but the SDK sends one
            headers = {"Authorization": f"Bearer {key or 'not-needed'}"}
            for env, header in (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project")):
                if os.environ.get(env):
                    headers[header] = os.environ[env]
            self._client = _transport(self.cfg, self.cfg.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL,
                                      headers, "openai")
        await self._client.start()
        self.transport = self._client.name

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
                # the body as plain JSON, the reply read as plain JSON: the SDK's typed call would
                # walk the JSON schema through its request transformer, deep-copy the body and
                # build reply models on every call -- milliseconds of CPU per request
                data, headers = await self._client.post(self._path, body)
            except TransportError as err:
                if err.kind == HTTP_STATUS and err.status == 400 and self._adapt(_rejected(err)):
                    continue
                raise
            reply = self.parse(_json_reply(data))
            reply.remaining = remaining_requests(headers)
            return reply

    async def ping(self, timeout: float) -> None:
        """One 1-token request without retries (pre-flight); raises what a real call would."""
        body = {"model": self.cfg.model, "messages": [{"role": "user", "content": PING}], "max_tokens": 1}
        _json_reply((await self._client.post(self._path, body, timeout))[0])

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
        details = usage.get("prompt_tokens_details")  # the prompt-cache hit (automatic, 1,024+ tokens)
        return Reply(text=text, data=None, input_tokens=_count(usage.get("prompt_tokens")),
                     output_tokens=_count(usage.get("completion_tokens")),
                     finish_reason=choice.get("finish_reason"),
                     logprobs=_token_logprobs(content),
                     cached_tokens=_count(details.get("cached_tokens")) if isinstance(details, dict) else 0)

    def _adapt(self, m: str) -> bool:
        """Stop sending the parameter a 400 reply rejected (``m``: :func:`_rejected`)."""
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
        _needs_package("anthropic", "anthropic", "anthropic")
        key = self.cfg.api_key()
        if not key:
            raise JudgeConfigError(f"the judge's API key is not set: export {self.cfg.api_key_env}=...")
        self._client = _transport(self.cfg, self.cfg.base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_URL,
                                  {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION}, "anthropic")
        await self._client.start()
        self.transport = self._client.name

    def build(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel],
              max_tokens: int, sampling: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON body of the messages request (``sampling``: ``temperature``, ``top_p``; the
        Messages API has no seed)."""
        name = schema.__name__
        tools = [{"name": name, "description": "Record the verdict.", "input_schema": strict_schema(schema)}]
        body: dict[str, Any] = {
            "model": self.cfg.model, "max_tokens": max_tokens,
            # the fixed part (tools, then the system prompt: instructions, rubric, schema) is the
            # prompt's prefix; a breakpoint after it when it is long enough to be cached
            "system": ([{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
                       if cacheable(self.cfg.model, json.dumps(tools) + system) else system),
            "messages": _user_messages(messages),
            "tools": tools,
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
        while True:
            try:
                data, headers = await self._client.post(
                    "/v1/messages", self.build(system, messages, schema, max_tokens, sampling))
            except TransportError as err:
                if (err.kind == HTTP_STATUS and err.status == 400 and "temperature" in _rejected(err)
                        and self.send_temperature):
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
        _json_reply((await self._client.post("/v1/messages", body, timeout))[0])

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
        # Anthropic's input_tokens are those after the last cache breakpoint: the prompt's tokens
        # are those plus the ones read from and written to the prompt cache
        read, written = _count(usage.get("cache_read_input_tokens")), _count(usage.get("cache_creation_input_tokens"))
        return Reply(text="\n".join(texts) or None, data=tool_input,
                     input_tokens=_count(usage.get("input_tokens")) + read + written,
                     output_tokens=_count(usage.get("output_tokens")),
                     finish_reason=data.get("stop_reason"), cached_tokens=read, cache_write_tokens=written)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


class GoogleClient:
    """Gemini's ``generateContent`` with ``responseMimeType=application/json`` and
    ``responseJsonSchema`` (the request google-genai sends, without importing it)."""

    provider = "google"

    def __init__(self, cfg: JudgeConfig) -> None:
        self.cfg = cfg
        self.adaptations: list[str] = []
        self.transport = "httpx"
        self._client: Any = None
        model = cfg.model if cfg.model.startswith(("models/", "tunedModels/")) else f"models/{cfg.model}"
        self._model_path = f"/{GEMINI_API_VERSION}/{model}"

    async def start(self) -> None:
        _needs_package("google.genai", "google", "google")
        key = self.cfg.api_key()
        if not key:
            raise JudgeConfigError(f"the judge's API key is not set: export {self.cfg.api_key_env}=...")
        self._client = _transport(self.cfg, self.cfg.base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or GEMINI_URL,
                                  {"x-goog-api-key": key}, "google")
        await self._client.start()
        self.transport = self._client.name

    def build(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel],
              max_tokens: int, sampling: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON body of the generateContent request (``sampling``: ``temperature``, ``top_p``,
        ``seed``)."""
        config: dict[str, Any] = {"temperature": self.cfg.temperature, "maxOutputTokens": max_tokens,
                                  "responseMimeType": "application/json",
                                  "responseJsonSchema": strict_schema(schema)}
        names = {"temperature": "temperature", "top_p": "topP", "seed": "seed"}
        config.update({names[k]: v for k, v in _sampling(sampling, tuple(names), True).items()})
        return {"contents": [{"role": "model" if m["role"] == "assistant" else "user",
                              "parts": [{"text": m["content"]}]} for m in messages],
                "systemInstruction": {"role": "user", "parts": [{"text": system}]},
                "generationConfig": config}

    async def complete(self, system: str, messages: list[dict[str, str]], schema: type[BaseModel],
                       max_tokens: int, sampling: dict[str, Any] | None = None,
                       logprobs: int | None = None) -> Reply:
        """The verdict (``logprobs`` is not asked for: G-Eval uses the plain score)."""
        data, _ = await self._client.post(self._model_path + ":generateContent",
                                          self.build(system, messages, schema, max_tokens, sampling))
        return self.parse(_json_reply(data))

    async def ping(self, timeout: float) -> None:
        """Look the model up (free; checks the key and the model name), within ``timeout``."""
        _json_reply((await self._client.get(self._model_path, timeout))[0])

    @staticmethod
    def parse(data: dict[str, Any]) -> Reply:
        """A generateContent reply (decoded JSON) -> :class:`Reply`: the first candidate's text
        parts (not its thoughts), as google-genai's ``response.text`` joins them."""
        cands = data.get("candidates") or []
        first = cands[0] if cands and isinstance(cands[0], dict) else {}
        parts = (first.get("content") or {}).get("parts") or []
        texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
                 and not p.get("thought")]
        usage = data.get("usageMetadata") or {}
        finish = first.get("finishReason") or (data.get("promptFeedback") or {}).get("blockReason")
        return Reply(text="".join(texts) if texts else None, data=None,
                     input_tokens=_count(usage.get("promptTokenCount")),
                     output_tokens=int((usage.get("candidatesTokenCount") or 0) + (usage.get("thoughtsTokenCount") or 0)),
                     finish_reason=str(finish) if finish is not None else None,
                     cached_tokens=_count(usage.get("cachedContentTokenCount")))  # Gemini's implicit cache

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()


def _count(value: Any) -> int:
    """A token count of a reply's usage (absent, null or not a number: 0)."""
    return int(value) if isinstance(value, int | float) and value > 0 else 0


#: Anthropic's minimum cacheable prompt length (tokens of the prefix up to a ``cache_control``
#: breakpoint), by model name prefix (the first that matches: longer prefixes first); a shorter
#: prefix is not cached. From Anthropic's prompt caching guide, "Cache limitations"
#: (platform.claude.com/docs/en/build-with-claude/prompt-caching), which lowered Claude Sonnet
#: 4.6's from 2,048 to 1,024 and lists Opus 4.7 at 2,048, Opus 4.8 at 1,024; a model not listed
#: gets the largest minimum
ANTHROPIC_CACHE_MINIMUM = (
    ("claude-opus-4-8", 1024), ("claude-opus-4-7", 2048),
    ("claude-opus-4-6", 4096), ("claude-opus-4-5", 4096), ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 1024), ("claude-3-5-haiku", 2048), ("claude-3-haiku", 2048),
    ("claude-sonnet-4-5", 1024), ("claude-opus-4-1", 1024), ("claude-opus-4", 1024),
    ("claude-sonnet-4", 1024), ("claude-3-7-sonnet", 1024), ("claude-3-5-sonnet", 1024),
    ("claude-3-opus", 1024),
)
_CACHE_MINIMUM_UNKNOWN = 4096
#: characters per token of the conservative estimate: Claude's tokenizer gives English text about
#: one token per 3.5 characters, so 4 undercounts and a prefix marked is long enough
_CHARS_PER_TOKEN = 4


def cache_minimum(model: str) -> int:
    """Anthropic's minimum cacheable prompt length for ``model`` (tokens)."""
    m = model.lower()
    return next((n for prefix, n in ANTHROPIC_CACHE_MINIMUM if m.startswith(prefix)), _CACHE_MINIMUM_UNKNOWN)


def cacheable(model: str, prefix: str) -> bool:
    """Whether ``prefix`` surely reaches ``model``'s minimum cacheable length: its tokens estimated
    low (one per 4 characters), so a prefix marked for caching is one Anthropic caches."""
    return len(prefix) // _CHARS_PER_TOKEN >= cache_minimum(model)


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


def make_client(cfg: JudgeConfig) -> OpenAIClient | AnthropicClient | GoogleClient:
    if cfg.provider in {"openai", "azure"}:
        return OpenAIClient(cfg)
    if cfg.provider == "anthropic":
        return AnthropicClient(cfg)
    if cfg.provider == "google":
        return GoogleClient(cfg)
    raise JudgeConfigError(f"unknown judge provider {cfg.provider!r}")
