"""OpenTelemetry GenAI semantic conventions (``gen_ai.*``): what an ``invoke_agent``, ``chat`` or
``execute_tool`` span did, as a :class:`~ragmeter.core.schema.TraceSpan`.

Messages come from ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON), else the older
indexed ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*`` attributes, else the span's events
(``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``,
``gen_ai.client.inference.operation.details``, the old ``gen_ai.content.prompt`` /
``gen_ai.content.completion``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.io.spans.messages import arguments_of, genai_message, loads_maybe, messages_from, unflatten

#: gen_ai.operation.name -> span kind
OPERATIONS = {"chat": "llm", "text_completion": "llm", "generate_content": "llm", "completion": "llm",
              "invoke_agent": "agent", "create_agent": "agent", "execute_tool": "tool",
              "embeddings": "embedding", "retrieval": "retriever", "retrieve": "retriever"}

MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model")
IN_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
OUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
COST_KEYS = ("gen_ai.usage.cost", "operation.cost", "ragmeter.cost_usd")


def is_genai(attrs: Mapping[str, Any]) -> bool:
    return any(k.startswith("gen_ai.") for k in attrs)


def kind_of(name: str, attrs: Mapping[str, Any]) -> str:
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op in OPERATIONS:
        return OPERATIONS[op]
    first = name.split(" ", 1)[0]
    if first in OPERATIONS:
        return OPERATIONS[first]
    if attrs.get("gen_ai.tool.name") is not None:  # pydantic-ai's older "running tool" spans
        return "tool"
    if attrs.get("gen_ai.agent.name") is not None and name.startswith(("agent run", "invoke_agent")):
        return "agent"
    if any(k in attrs for k in (*MODEL_KEYS, *IN_TOKENS, "gen_ai.input.messages", "gen_ai.prompt.0.role")):
        return "llm"
    return "other"


def _event_messages(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    inp: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for ev in events:
        name, a = ev.get("name") or "", ev.get("attributes") or {}
        if name == "gen_ai.client.inference.operation.details":
            inp += messages_from(a.get("gen_ai.input.messages"))
            out += messages_from(a.get("gen_ai.output.messages"))
        elif name == "gen_ai.content.prompt":
            inp += messages_from(a.get("gen_ai.prompt"))
        elif name == "gen_ai.content.completion":
            out += messages_from(a.get("gen_ai.completion"))
        elif name.startswith("gen_ai.") and name.endswith(".message") or name == "gen_ai.choice":
            body = loads_maybe(a.get("gen_ai.event.content", a.get("content", a.get("body"))))
            m: dict[str, Any] = dict(body) if isinstance(body, Mapping) else {"content": body}
            for k in ("id", "tool_calls", "message", "finish_reason"):
                if k in a and k not in m:
                    m[k] = loads_maybe(a[k])
            role = name.removeprefix("gen_ai.").removesuffix(".message")
            m.setdefault("role", "assistant" if name == "gen_ai.choice" else role)
            if role == "tool" and m.get("id") is not None:
                m.setdefault("tool_call_id", m["id"])
            msg = genai_message(m)
            if msg is not None:
                (out if name == "gen_ai.choice" else inp).append(msg)
    return inp, out


def llm_messages(attrs: Mapping[str, Any], events: list[dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``(input, output)`` messages of an LLM span.

    Raises:
        DatasetError: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` is not a JSON list.
    """
    for key in ("gen_ai.input.messages", "gen_ai.output.messages"):
        value = attrs.get(key)
        if value not in (None, "") and not isinstance(loads_maybe(value), list):
            raise DatasetError(f"attribute {key!r} must be a JSON list of messages, got {str(value)[:60]!r}")
    inp = messages_from(attrs.get("gen_ai.input.messages"))
    out = messages_from(attrs.get("gen_ai.output.messages"))
    system = attrs.get("gen_ai.system_instructions")
    if not inp:
        inp = [m for m in (genai_message(x) for x in unflatten(attrs, "gen_ai.prompt")) if m]
    if not out:
        out = [m for m in (genai_message({"role": "assistant", **x} if isinstance(x, Mapping) else x)
                           for x in unflatten(attrs, "gen_ai.completion")) if m]
    if not inp and isinstance(attrs.get("gen_ai.prompt"), str):
        inp = messages_from(attrs["gen_ai.prompt"])
    if not out and isinstance(attrs.get("gen_ai.completion"), str):
        out = messages_from(attrs["gen_ai.completion"])
    if not inp or not out:
        ein, eout = _event_messages(events)
        inp, out = inp or ein, out or eout
    if system is not None and not any(m.get("role") == "system" for m in inp):
        from ragmeter.io.spans.messages import _text_of

        text = _text_of(loads_maybe(system))
        if text:
            inp = [{"role": "system", "content": text}, *inp]
    return inp, out


def tool_fields(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A tool span's name, call id, arguments and result (``gen_ai.tool.*``; pydantic-ai's
    ``tool_arguments`` / ``tool_response``)."""
    raw_args = next((attrs[k] for k in ("gen_ai.tool.call.arguments", "tool_arguments", "gen_ai.tool.arguments")
                     if attrs.get(k) is not None), None)
    result = next((attrs[k] for k in ("gen_ai.tool.call.result", "tool_response", "gen_ai.tool.result")
                   if attrs.get(k) is not None), None)
    out: dict[str, Any] = {"tool_name": attrs.get("gen_ai.tool.name"), "tool_result": result,
                           "tool_call_id": attrs.get("gen_ai.tool.call.id")}
    args = arguments_of(raw_args)
    out["tool_arguments"] = args
    if args is None:
        out["arguments_raw"] = str(raw_args)
    return out
