"""OpenInference conventions (Phoenix, the ``openinference-instrumentation-*`` packages):
``openinference.span.kind``, ``llm.*``, ``tool.*``, ``retrieval.documents.N.document.*``,
``input.value`` / ``output.value``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.io.spans.messages import arguments_of, loads_maybe, openinference_messages, unflatten

#: openinference.span.kind -> span kind
KINDS = {"LLM": "llm", "TOOL": "tool", "RETRIEVER": "retriever", "AGENT": "agent", "CHAIN": "chain",
         "EMBEDDING": "embedding", "RERANKER": "retriever", "GUARDRAIL": "other", "EVALUATOR": "other",
         "PROMPT": "other", "UNKNOWN": "other"}

MODEL_KEYS = ("llm.model_name",)
IN_TOKENS = ("llm.token_count.prompt",)
OUT_TOKENS = ("llm.token_count.completion",)
COST_KEYS = ("llm.cost.total",)


def is_openinference(attrs: Mapping[str, Any]) -> bool:
    return "openinference.span.kind" in attrs


def kind_of(attrs: Mapping[str, Any]) -> str:
    return KINDS.get(str(attrs.get("openinference.span.kind") or "").upper(), "other")


def llm_messages(attrs: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    inp = openinference_messages(attrs, "llm.input_messages")
    out = openinference_messages(attrs, "llm.output_messages")
    if not inp:  # the request as JSON: {"messages": [...], ...}
        from ragmeter.io.spans.messages import messages_from

        inp = messages_from(attrs.get("input.value"))
    return inp, out


def tool_fields(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A TOOL span: ``tool.name``; its arguments from ``input.value`` (JSON, or the Python dict text
    LangChain writes; a ``{"input": ...}`` wrapper is opened) or ``tool_call.function.arguments``;
    its result from ``output.value``."""
    raw = attrs.get("tool_call.function.arguments", attrs.get("input.value"))
    args = arguments_of(raw)
    if isinstance(args, dict) and set(args) == {"input"} and arguments_of(args["input"]) is not None \
            and isinstance(args["input"], str):
        args = arguments_of(args["input"])
    result = loads_maybe(attrs.get("output.value"))
    call_id = attrs.get("tool_call.id", attrs.get("tool.id"))
    data = result.get("data") if isinstance(result, Mapping) else None
    if isinstance(data, Mapping) and result.get("type") == "tool":  # a LangChain ToolMessage
        call_id = call_id or data.get("tool_call_id")
        if data.get("status") == "error":
            out_error = data.get("content")
        result = loads_maybe(data.get("content"))
    out: dict[str, Any] = {"tool_name": attrs.get("tool.name", attrs.get("tool_call.function.name")),
                           "tool_arguments": args, "tool_result": result, "tool_call_id": call_id}
    if isinstance(data, Mapping) and data.get("status") == "error":
        out["tool_error"] = str(out_error)
    if args is None:
        out["arguments_raw"] = str(raw)
    return out


def documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``retrieval.documents.N.document.{content, id, score}`` as ``{"text", "id", "score"}``."""
    items = attrs.get("retrieval.documents")
    if not isinstance(items, list):
        items = unflatten(attrs, "retrieval.documents")
    out = []
    for it in items:
        it = loads_maybe(it)
        d = it.get("document", it) if isinstance(it, Mapping) else None
        if not isinstance(d, Mapping):
            continue
        doc: dict[str, Any] = {"text": d.get("content")}
        if d.get("id") is not None:
            doc["id"] = str(d["id"])
        if isinstance(d.get("score"), int | float) and not isinstance(d.get("score"), bool):
            doc["score"] = float(d["score"])
        out.append(doc)
    return out
