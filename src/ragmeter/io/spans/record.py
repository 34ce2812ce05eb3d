"""One OpenTelemetry span (:class:`~ragmeter.io.spans.otlp.SpanRecord`) read as a
:class:`~ragmeter.core.schema.TraceSpan`, under whichever convention it follows: OpenInference
(``openinference.span.kind``) or the OTel GenAI conventions (``gen_ai.*``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import TraceSpan
from ragmeter.io.spans import genai, openinference
from ragmeter.io.spans.messages import loads_maybe
from ragmeter.io.spans.otlp import SpanRecord


class SpanError(DatasetError):
    """A span whose values no span of its convention has: names the trace and the span."""


def first(attrs: Mapping[str, Any], keys: Iterable[str]) -> tuple[str | None, Any]:
    for k in keys:
        if attrs.get(k) not in (None, ""):
            return k, attrs[k]
    return None, None


def count(value: Any, key: str) -> int:
    """A token count: a whole number in [0, 2**53]."""
    x: Any = value
    if isinstance(x, str):
        try:
            x = float(x.strip()) if x.strip() else None
        except ValueError:
            x = None
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) \
            or x < 0 or x > 2**53 or x != int(x):
        raise DatasetError(f"{key} must be a whole number of tokens >= 0, got {str(value)[:40]!r}")
    return int(x)


def cost(value: Any, key: str) -> float:
    x: Any = value
    if isinstance(x, str):
        try:
            x = float(x)
        except ValueError:
            x = None
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or not 0 <= x <= 1e9:
        raise DatasetError(f"{key} must be a cost in USD between 0 and 1e9, got {str(value)[:40]!r}")
    return float(x)


def text(value: Any, key: str, limit: int = 500) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise DatasetError(f"{key} must be text (at most {limit} characters), got {str(value)[:60]!r}")
    return value


def _exception_message(events: list[dict[str, Any]]) -> str | None:
    for ev in events:
        if ev.get("name") == "exception":
            a = ev.get("attributes") or {}
            msg = a.get("exception.message") or a.get("exception.type")
            if msg:
                return str(msg)
    return None


def trace_span(rec: SpanRecord, t0_ns: int) -> TraceSpan:
    """The :class:`TraceSpan` of one OTel span; ``t0_ns`` is the trace's first start.

    Raises:
        SpanError: a token count, cost, model or tool name of the wrong type, naming trace and span.
    """
    try:
        return _trace_span(rec, t0_ns)
    except (DatasetError, ValueError, TypeError) as exc:  # ValueError: a field TraceSpan refuses
        raise SpanError(f"trace {rec.trace_id} span {rec.span_id} ({rec.name!r}): {_short(exc)}") from None


def _short(exc: Exception) -> str:
    from pydantic import ValidationError

    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
    return str(exc)


def _trace_span(rec: SpanRecord, t0_ns: int) -> TraceSpan:
    a = rec.attributes
    oi = openinference.is_openinference(a)
    kind = openinference.kind_of(a) if oi else genai.kind_of(rec.name, a)
    fields: dict[str, Any] = {"span_id": rec.span_id, "parent_id": rec.parent_id, "kind": kind,
                              "name": rec.name}
    if rec.start_ns:
        fields["start_ms"] = max(0.0, (rec.start_ns - t0_ns) / 1e6)
    if rec.end_ns and rec.start_ns and rec.end_ns >= rec.start_ns:
        fields["latency_ms"] = (rec.end_ns - rec.start_ns) / 1e6
    elif not rec.end_ns:
        fields["status"] = "unfinished"
    if rec.error:
        fields["status"] = "error"
        fields["error"] = rec.error if rec.error != "error" else (_exception_message(rec.events) or "error")
    key, model = first(a, (*genai.MODEL_KEYS, *openinference.MODEL_KEYS))
    if model is not None:
        fields["model"] = text(model, f"attribute {key!r}", 200)
    key, tin = first(a, (*genai.IN_TOKENS, *openinference.IN_TOKENS))
    if tin is not None:
        fields["input_tokens"] = count(tin, f"attribute {key!r}")
    key, tout = first(a, (*genai.OUT_TOKENS, *openinference.OUT_TOKENS))
    if tout is not None:
        fields["output_tokens"] = count(tout, f"attribute {key!r}")
    key, c = first(a, (*genai.COST_KEYS, *openinference.COST_KEYS))
    if c is not None:
        fields["cost_usd"] = cost(c, f"attribute {key!r}")
    _, provider = first(a, ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"))
    if isinstance(provider, str) and kind == "llm":
        fields["provider"] = provider
    _, agent = first(a, ("gen_ai.agent.name", "agent.name", "graph.node.id"))
    if agent is not None:
        fields["agent"] = str(agent)
    if kind == "llm":
        inp, out = openinference.llm_messages(a) if oi else genai.llm_messages(a, rec.events)
        fields["input"], fields["output"] = inp or None, out or None
    elif kind == "tool":
        tf = openinference.tool_fields(a) if oi else genai.tool_fields(a)
        if tf.get("tool_name") is None:
            tf["tool_name"] = rec.name.removeprefix("execute_tool ").strip() or None
        if tf.get("tool_name") is None:
            raise DatasetError("a tool span without a tool name (tool.name / gen_ai.tool.name)")
        tf["tool_name"] = text(tf["tool_name"], "the tool name", 200)
        fields.update({k: v for k, v in tf.items() if v is not None})
        fields["input"], fields["output"] = tf.get("tool_arguments"), tf.get("tool_result")
    elif kind == "retriever":
        fields["documents"] = openinference.documents(a)
        q = loads_maybe(a.get("input.value"))
        if isinstance(q, Mapping):
            q = next((q[k] for k in ("query", "input", "question") if isinstance(q.get(k), str)), None)
        if isinstance(q, str):
            fields["query"] = q
    else:
        _, iv = first(a, ("input.value", "gen_ai.input.messages"))
        _, ov = first(a, ("output.value", "gen_ai.output.messages"))
        fields["input"], fields["output"] = loads_maybe(iv), loads_maybe(ov)
    return TraceSpan.model_validate(fields)


def trace_spans(records: list[SpanRecord]) -> list[TraceSpan]:
    """One trace's spans as :class:`TraceSpan` objects, in start order with parents before their
    children (a span that starts in the same nanosecond as its parent comes after it)."""
    t0 = min((r.start_ns for r in records if r.start_ns), default=0)
    ids = {r.span_id: r for r in records}

    def depth(r: SpanRecord) -> int:
        d, seen, cur = 0, set(), r
        while cur.parent_id and cur.parent_id in ids and cur.span_id not in seen:
            seen.add(cur.span_id)
            cur = ids[cur.parent_id]
            d += 1
        return d

    ordered = sorted(records, key=lambda r: (r.start_ns if r.start_ns else math.inf, depth(r), r.span_id))
    return [trace_span(r, t0) for r in ordered]
