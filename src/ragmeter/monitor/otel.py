"""OpenTelemetry traces as logged calls.

Reads spans that follow the OpenTelemetry GenAI semantic conventions (``gen_ai.*``) or
OpenInference (``input.value``, ``output.value``, ``llm.*``, ``retrieval.documents.*``, the
conventions of the LangChain and LlamaIndex instrumentations), from:

- OTLP/JSON: an ``ExportTraceServiceRequest`` object per line or per file (what the
  OpenTelemetry Collector's file exporter writes, and the JSON body of OTLP/HTTP);
- OTLP/HTTP protobuf bodies (``application/x-protobuf``, what the Python OTLP exporter sends);
- the Python SDK's ``ConsoleSpanExporter`` output (``span.to_json()`` objects).

One trace becomes one call: its root span gives the time, latency (end - start), query, answer,
status and route; retriever spans in the trace give the contexts; LLM spans give the model and
token counts (summed). The trace id is the call id, so importing a file twice stores it once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.io.spans import record
from ragmeter.io.spans.otlp import (
    SpanRecord,
    decode_export,
    read_spans,
    spans_from_console_json,
    spans_from_protobuf,
)

__all__ = ["SpanRecord", "calls_from_spans", "check_span", "read_spans", "spans_from_console_json",
           "spans_from_otlp_json", "spans_from_protobuf"]

_QUERY_KEYS = ("ragmeter.query", "input.value", "gen_ai.prompt", "gen_ai.prompt.0.content",
               "llm.input_messages.0.message.content", "traceloop.entity.input")
_ANSWER_KEYS = ("ragmeter.answer", "output.value", "gen_ai.completion", "gen_ai.completion.0.content",
                "llm.output_messages.0.message.content", "traceloop.entity.output")
_MODEL_KEYS = ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name")
_IN_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
_OUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
               "llm.token_count.completion")
_COST_KEYS = ("ragmeter.cost_usd", "llm.cost.total", "gen_ai.usage.cost")
_TEXT_FIELDS = ("question", "query", "input", "user_input", "prompt", "text")
_ANSWER_FIELDS = ("answer", "output", "response", "result", "text", "content")


def spans_from_otlp_json(obj: Any) -> list[SpanRecord]:
    """Spans of one OTLP/JSON ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``), checked
    field by field (:func:`ragmeter.monitor.otlp.decode_export`).

    Raises:
        DatasetError: a value of the wrong shape, naming its path in the request.
    """
    return decode_export(obj)


# ---- spans -> calls ---------------------------------------------------------------------------
def _first(attrs: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for k in keys:
        if attrs.get(k) not in (None, ""):
            return attrs[k]
    return None


def _json_text(text: str) -> Any:
    """``text`` parsed as JSON when it is JSON (checked: depth, numbers, texts), else ``text``."""
    from ragmeter.core.safejson import JSONInputError, loads

    try:
        return loads(text)
    except JSONInputError as exc:
        if exc.syntax:
            return text
        raise DatasetError(f"JSON value {exc}") from None


def _unwrap(value: Any, fields: tuple[str, ...]) -> str | None:
    """A text from an attribute that may hold JSON (a chain's inputs/outputs, a message list)."""
    if value is None:
        return None
    if isinstance(value, str):
        s = value.strip()
        if s[:1] not in ("[", "{"):
            return value
        value = _json_text(s)
        if isinstance(value, str):
            return value
    if isinstance(value, Mapping):
        for f in fields:
            if isinstance(value.get(f), str):
                return value[f]
        for v in value.values():
            text = _unwrap(v, fields)
            if text:
                return text
        return None
    if isinstance(value, list):
        # a message list: the last user message (query) or the last message (answer)
        for m in reversed(value):
            text = _unwrap(m, fields)
            if text:
                return text
        return None
    return str(value)


def _messages_text(value: Any, role: str | None) -> str | None:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON arrays of messages with
    ``role`` and ``parts`` or ``content``)."""
    if isinstance(value, str):
        value = _json_text(value)
        if isinstance(value, str):
            return value
    if not isinstance(value, list):
        return None
    for m in reversed(value):
        if not isinstance(m, Mapping) or (role and m.get("role") not in (role, None)):
            continue
        if isinstance(m.get("content"), str):
            return m["content"]
        parts = [p.get("content") for p in m.get("parts") or [] if isinstance(p, Mapping)
                 and isinstance(p.get("content"), str)]
        if parts:
            return "\n".join(parts)
    return None


def _documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    docs: dict[int, dict[str, Any]] = {}
    for k, v in attrs.items():
        if not k.startswith("retrieval.documents."):
            continue
        rest = k.removeprefix("retrieval.documents.")
        idx, _, name = rest.partition(".")
        if not idx.isdigit():
            continue
        if name == "document.content":
            docs.setdefault(int(idx), {})["text"] = str(v)
        elif name == "document.id":
            docs.setdefault(int(idx), {})["id"] = str(v)
    return [d for _, d in sorted(docs.items()) if d.get("text") is not None]


def _count(value: Any, key: str) -> int:
    """A token count attribute: a whole number in [0, 2**53] (the span readers' rule)."""
    return record.count(value, f"attribute {key!r}")


def _cost(value: Any, key: str) -> float:
    """A cost attribute: USD in [0, 1e9] (the span readers' rule)."""
    return record.cost(value, f"attribute {key!r}")


def _contexts_attr(raw: Any) -> list[Any]:
    value = _json_text(raw) if isinstance(raw, str) else raw
    if not isinstance(value, list) or not all(isinstance(c, str | Mapping) for c in value):
        raise DatasetError("attribute 'ragmeter.contexts' must be a JSON list of texts or "
                           f"{{'id', 'text'}} objects, got {str(raw)[:60]!r}")
    return list(value)


def _metadata_attr(raw: Any) -> Mapping[str, Any] | None:
    value = _json_text(raw) if isinstance(raw, str) and raw.strip()[:1] == "{" else raw
    return value if isinstance(value, Mapping) else None


def check_span(span: SpanRecord) -> None:
    """Refuse a span whose attributes the conversion to a call reads but cannot use (a token count
    that is not a number, a cost below 0, contexts that are not a list, a model that is not text),
    naming the span and the attribute: a receiver checks each span when it arrives, so a stored
    span can always be assembled into its trace's call later."""
    a = span.attributes
    checks: list[tuple[str, Any]] = []
    checks += [(k, lambda v, k=k: _count(v, k)) for k in (*_IN_TOKENS, *_OUT_TOKENS)]
    checks += [(k, lambda v, k=k: _cost(v, k)) for k in _COST_KEYS]
    checks += [(k, _model_name) for k in _MODEL_KEYS]
    checks += [("ragmeter.contexts", _contexts_attr), ("metadata", _metadata_attr)]
    checks += [(k, lambda v: _unwrap(v, _TEXT_FIELDS)) for k in (*_QUERY_KEYS, *_ANSWER_KEYS)]
    checks += [(k, lambda v: _messages_text(v, None)) for k in ("gen_ai.input.messages", "gen_ai.output.messages")]
    for key, check in checks:
        if a.get(key) in (None, ""):
            continue
        try:
            check(a[key])
        except DatasetError as exc:
            why = str(exc) if str(exc).startswith("attribute ") else f"attribute {key!r}: {exc}"
            raise DatasetError(f"span {span.span_id} of trace {span.trace_id}: {why}") from None


def _model_name(value: Any) -> str:
    if not isinstance(value, str) or len(value) > 200:
        raise DatasetError(f"must be a model name (text, at most 200 characters), got {str(value)[:60]!r}")
    return value


def calls_from_spans(spans: Iterable[SpanRecord]) -> tuple[list[dict[str, Any]], list[SpanRecord]]:
    """Group spans by trace and turn each trace that has its root span into one call (a mapping
    for :func:`ragmeter.monitor.calls.normalise_call`). Returns ``(calls, leftover)``: spans of
    traces whose root has not arrived (an exporter may send a trace's children first).

    Raises:
        DatasetError: a span attribute the call needs has an unusable value (see :func:`check_span`).
    """
    traces: dict[str, list[SpanRecord]] = {}
    for s in spans:
        if not s.trace_id or not s.span_id:  # never one call "otel:" for every span without an id
            raise DatasetError(f"span {s.name or s.span_id or '?'!r} has no {'trace' if not s.trace_id else 'span'} id")
        traces.setdefault(s.trace_id, []).append(s)
    calls: list[dict[str, Any]] = []
    leftover: list[SpanRecord] = []
    for trace_id, group in traces.items():
        root = trace_root(group)
        if root is None:
            leftover.extend(group)
            continue
        try:
            calls.append(_call_from_trace(trace_id, root, group))
        except DatasetError as exc:
            raise DatasetError(f"trace {trace_id}: {exc}") from None
    return calls, leftover


def trace_root(group: Iterable[SpanRecord]) -> SpanRecord | None:
    """The root span of one trace's spans (the earliest span without a parent), or None."""
    roots = [s for s in group if not s.parent_id]
    return min(roots, key=lambda s: (s.start_ns, s.span_id)) if roots else None


def _call_from_trace(trace_id: str, root: SpanRecord, group: list[SpanRecord]) -> dict[str, Any]:
    ordered = sorted(group, key=lambda s: (s.start_ns, s.span_id))
    a = root.attributes
    query = _unwrap(_first(a, _QUERY_KEYS), _TEXT_FIELDS) or _messages_text(a.get("gen_ai.input.messages"), "user")
    answer = _unwrap(_first(a, _ANSWER_KEYS), _ANSWER_FIELDS) or _messages_text(a.get("gen_ai.output.messages"), None)
    if query is None or answer is None:  # fall back to the first LLM span's messages
        for s in ordered:
            q = _unwrap(_first(s.attributes, _QUERY_KEYS), _TEXT_FIELDS) or \
                _messages_text(s.attributes.get("gen_ai.input.messages"), "user")
            ans = _unwrap(_first(s.attributes, _ANSWER_KEYS), _ANSWER_FIELDS) or \
                _messages_text(s.attributes.get("gen_ai.output.messages"), None)
            query = query or q
            answer = answer or ans
    contexts: list[Any] = []
    for s in ordered:
        contexts.extend(_documents(s.attributes))
    if not contexts and a.get("ragmeter.contexts"):
        contexts = _contexts_attr(a["ragmeter.contexts"])
    model = _first(a, _MODEL_KEYS)
    tin = tout = 0
    has_tokens = False
    cost = None if _first(a, _COST_KEYS) is None else _cost(_first(a, _COST_KEYS), "cost")
    for s in ordered:
        model = model or _first(s.attributes, _MODEL_KEYS)
        i, o = _first(s.attributes, _IN_TOKENS), _first(s.attributes, _OUT_TOKENS)
        if i is not None or o is not None:
            has_tokens = True
            tin += 0 if i is None else _count(i, "input tokens")
            tout += 0 if o is None else _count(o, "output tokens")
        if s is not root and cost is None:
            c = _first(s.attributes, _COST_KEYS)
            cost = None if c is None else _cost(c, "cost")
    error = root.error or next((s.error for s in ordered if s.error), None)
    meta: dict[str, Any] = {"route": root.name, "trace_id": trace_id}
    for k_src, k_dst in (("service.name", "service"), ("service.version", "version"),
                         ("deployment.environment", "environment")):
        if root.resource.get(k_src) is not None:
            meta[k_dst] = root.resource[k_src]
    extra = _metadata_attr(a.get("metadata"))
    if extra:
        meta.update({str(k): v for k, v in extra.items()})
    feedback = a.get("ragmeter.feedback")
    return {
        "call_id": f"otel:{trace_id}",
        "timestamp": datetime.fromtimestamp(root.start_ns / 1e9, UTC),
        "query": query, "answer": answer, "contexts": contexts or None,
        "latency_ms": max(0.0, (root.end_ns - root.start_ns) / 1e6),
        "cost_usd": cost,
        "error": error, "feedback": feedback,
        "input_tokens": tin if has_tokens else None, "output_tokens": tout if has_tokens else None,
        "model": None if model is None else str(model), "metadata": meta,
    }
