"""The OpenAI Agents SDK's trace export: the JSON of its traces and spans (``trace.export()`` /
``span.export()``, what a ``TracingProcessor`` or the SDK's backend exporter sends: objects with
``"object": "trace"`` or ``"trace.span"``), one per line, in a JSON list, or under ``data``.

Span types: ``agent`` (an agent's run), ``generation`` (a chat completion: its ``input`` and
``output`` messages, ``model``, ``usage``), ``response`` (a Responses API call), ``function`` (a
tool: ``name``, ``input`` arguments as JSON text, ``output``), ``handoff`` (``from_agent`` ->
``to_agent``), ``guardrail`` (``name``, ``triggered``), ``custom`` and the rest as steps of no kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import AgentTrace, TraceSpan
from ragmeter.io.spans.messages import arguments_of, loads_maybe, messages_from
from ragmeter.io.spans.record import count, text
from ragmeter.io.spans.tree import build_trace, finish_spans, first_start_ms, timed


def is_agents_sdk(obj: Any) -> bool:
    return isinstance(obj, Mapping) and obj.get("object") in ("trace", "trace.span")


def objects(obj: Any) -> list[Any]:
    """The trace and span objects of one JSON value (an object, a list, or ``{"data": [...]}``)."""
    if isinstance(obj, Mapping) and isinstance(obj.get("data"), list) and "object" not in obj:
        return list(obj["data"])
    return list(obj) if isinstance(obj, list) else [obj]


def _span(item: Mapping[str, Any]) -> TraceSpan:
    data = item.get("span_data")
    if not isinstance(data, Mapping):
        raise DatasetError("'span_data' must be an object")
    kind_name = data.get("type")
    fields: dict[str, Any] = {"span_id": text(item.get("id"), "'id'", 200),
                              "parent_id": item.get("parent_id") or None}
    timed(fields, item.get("started_at"), item.get("ended_at"))
    err = item.get("error")
    if isinstance(err, Mapping) and err:
        fields["status"], fields["error"] = "error", str(err.get("message") or "error")
    usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
    name = data.get("name")
    if kind_name in ("generation", "response"):
        fields.update(kind="llm", name=str(name or kind_name), input=messages_from(data.get("input")) or None,
                      output=messages_from(data.get("output")) or None)
        if data.get("model") is not None:
            fields["model"] = text(data["model"], "'span_data.model'", 200)
        for src, dst in (("input_tokens", "input_tokens"), ("prompt_tokens", "input_tokens"),
                         ("output_tokens", "output_tokens"), ("completion_tokens", "output_tokens")):
            if usage.get(src) is not None and dst not in fields:
                fields[dst] = count(usage[src], f"'span_data.usage.{src}'")
    elif kind_name == "function":
        args = arguments_of(data.get("input"))
        fields.update(kind="tool", name=str(name or "function"), tool_name=text(name, "'span_data.name'", 200),
                      tool_arguments=args, tool_result=loads_maybe(data.get("output")),
                      input=data.get("input"), output=data.get("output"))
        if args is None:
            fields["arguments_raw"] = str(data.get("input"))
    elif kind_name == "agent":
        fields.update(kind="agent", name=str(name or "agent"), agent=None if name is None else str(name))
    elif kind_name == "handoff":
        fields.update(kind="handoff", name="handoff", agent=data.get("from_agent"), to_agent=data.get("to_agent"))
    elif kind_name == "guardrail":
        fields.update(kind="other", name=f"guardrail {name or ''}".strip(), output={"triggered": data.get("triggered")})
    else:
        fields.update(kind="other", name=str(name or kind_name or "span"),
                      output=data.get("data") if isinstance(data.get("data"), Mapping) else None)
    return TraceSpan.model_validate(fields)


def read(items: list[tuple[int, Any]], where: str) -> list[AgentTrace]:
    """Agent traces from ``(line, object)`` pairs of an Agents SDK export."""
    traces: dict[str, dict[str, Any]] = {}
    spans: dict[str, list[TraceSpan]] = {}
    for line, item in items:
        if not isinstance(item, Mapping) or not is_agents_sdk(item):
            raise DatasetError(f"{where}:{line}: expected an Agents SDK trace or span object "
                               "(\"object\": \"trace\" or \"trace.span\")")
        tid = item.get("trace_id") if item["object"] == "trace.span" else item.get("id")
        if not isinstance(tid, str) or not tid:
            raise DatasetError(f"{where}:{line}: a {item['object']} without a trace id")
        if item["object"] == "trace":
            traces[tid] = {"workflow": item.get("workflow_name"), "group_id": item.get("group_id")}
            continue
        try:
            spans.setdefault(tid, []).append(_span(item))
        except (DatasetError, ValueError) as exc:
            raise DatasetError(f"{where}:{line}: trace {tid} span {item.get('id')}: {exc}") from None
    out = []
    for tid in sorted(set(spans) | set(traces), key=lambda t: min(
            (s.start_ms for s in spans.get(t, []) if s.start_ms is not None), default=0.0)):
        extra, group = traces.get(tid, {}), spans.get(tid, [])
        started = first_start_ms(group)
        # group_id: "a grouping identifier to link multiple traces from the same conversation" (the SDK's docs)
        out.append(build_trace(tid, finish_spans(group), workflow=extra.get("workflow"),
                               group_id=extra.get("group_id"), session_id=extra.get("group_id"), started_ms=started))
    return out
