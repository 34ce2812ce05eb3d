"""What the JSON trace exports (MLflow, Langfuse, LangSmith) share: a span's kind-specific fields
from its inputs and outputs, the same way for each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.io.spans.messages import arguments_of, input_messages, lc_message, loads_maybe, output_messages
from ragmeter.io.spans.record import cost, count, text


def documents(value: Any) -> list[dict[str, Any]]:
    """Retrieved documents: a list (or ``{"documents": [...]}``) of texts, LangChain ``Document`` s
    (``page_content``, ``metadata``) or ``{"content"/"text", "id", "score"}`` objects."""
    value = loads_maybe(value)
    if isinstance(value, Mapping):
        value = value.get("documents", value.get("output", value.get("results")))
    if not isinstance(value, list):
        return []
    out = []
    for d in value:
        d = loads_maybe(d)
        if isinstance(d, Mapping) and isinstance(d.get("kwargs"), Mapping):
            d = d["kwargs"]
        if isinstance(d, str):
            out.append({"text": d})
            continue
        if not isinstance(d, Mapping):
            continue
        meta = d.get("metadata") if isinstance(d.get("metadata"), Mapping) else {}
        doc: dict[str, Any] = {"text": d.get("page_content", d.get("content", d.get("text")))}
        did = d.get("id", meta.get("id", meta.get("doc_id")))
        if did is not None:
            doc["id"] = str(did)
        score = d.get("score", meta.get("score"))
        if isinstance(score, int | float) and not isinstance(score, bool):
            doc["score"] = float(score)
        if isinstance(doc["text"], str) or "id" in doc:
            out.append(doc)
    return out


def fill(fields: dict[str, Any], kind: str, name: str, inputs: Any, outputs: Any) -> dict[str, Any]:
    """``fields`` completed for a span of ``kind`` from what it received and returned."""
    fields["kind"], fields["name"] = kind, name
    if kind == "llm":
        fields["input"] = input_messages(inputs) or None
        fields["output"] = output_messages(outputs) or None
    elif kind == "tool":
        raw = loads_maybe(inputs)
        if isinstance(raw, Mapping) and set(raw) <= {"input", "tool_input", "args"} and len(raw) == 1:
            inner = next(iter(raw.values()))
            raw = inner if arguments_of(inner) is not None else raw
        args = arguments_of(raw)
        result = lc_message(loads_maybe(outputs))
        if isinstance(result, Mapping) and set(result) <= {"output"} and result:
            result = lc_message(loads_maybe(result["output"]))
        if isinstance(result, Mapping) and result.get("role") == "tool":
            fields.setdefault("tool_call_id", result.get("tool_call_id"))
            if result.get("is_error"):
                fields.setdefault("tool_error", str(result.get("content")))
            result = loads_maybe(result.get("content"))
        fields.update(tool_name=text(name, "the tool name", 200), tool_arguments=args, tool_result=result,
                      input=raw, output=result)
        if args is None:
            fields["arguments_raw"] = str(raw)
    elif kind == "retriever":
        q = loads_maybe(inputs)
        if isinstance(q, Mapping):
            q = next((q[k] for k in ("query", "input", "question") if isinstance(q.get(k), str)), None)
        if isinstance(q, str):
            fields["query"] = q
        fields["documents"] = documents(outputs)
        fields["input"] = loads_maybe(inputs)
    else:
        fields["input"], fields["output"] = loads_maybe(inputs), loads_maybe(outputs)
    return {k: v for k, v in fields.items() if v is not None}


def usage(fields: dict[str, Any], data: Any, where: str) -> None:
    """Token counts of a usage object (``input_tokens`` / ``prompt_tokens`` / ``input`` ...)."""
    if not isinstance(data, Mapping):
        return
    for keys, dst in ((("input_tokens", "prompt_tokens", "input", "promptTokens"), "input_tokens"),
                      (("output_tokens", "completion_tokens", "output", "completionTokens"), "output_tokens")):
        for k in keys:
            if data.get(k) is not None and dst not in fields:
                fields[dst] = count(data[k], f"{where}.{k}")


def usd(fields: dict[str, Any], value: Any, where: str) -> None:
    if isinstance(value, Mapping):
        value = value.get("total_cost", value.get("total"))
    if value is not None:
        fields["cost_usd"] = cost(value, where)


def need_id(value: Any, what: str) -> str:
    if value is None or value == "" or isinstance(value, bool) or not isinstance(value, str | int):
        raise DatasetError(f"{what} is missing (every span needs one)")
    return str(value)
