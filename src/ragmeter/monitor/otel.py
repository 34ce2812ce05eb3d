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

import base64
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ragmeter.errors import DatasetError

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


@dataclass
class SpanRecord:
    """A span reduced to what the conversion needs."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    resource: dict[str, Any] = field(default_factory=dict)


# ---- OTLP value decoding ----------------------------------------------------------------------
def _any_value(v: Mapping[str, Any]) -> Any:
    """An OTLP/JSON ``AnyValue`` as a Python value."""
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_any_value(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return _attributes((v["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attributes(items: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    return {a["key"]: _any_value(a.get("value") or {}) for a in items or [] if "key" in a}


def _hex_id(value: Any) -> str:
    """Trace/span ids: hex in OTLP/JSON; base64 where a protobuf message went through JSON."""
    if not value:
        return ""
    text = str(value)
    if all(c in "0123456789abcdefABCDEF" for c in text) and len(text) in (16, 32):
        return text.lower()
    try:
        return base64.b64decode(text).hex()
    except (ValueError, TypeError):
        return text


def _status_error(status: Mapping[str, Any] | None) -> str | None:
    status = status or {}
    code = status.get("code", status.get("status_code"))
    if code in (2, "STATUS_CODE_ERROR", "ERROR"):
        return str(status.get("message") or status.get("description") or "error")
    return None


def spans_from_otlp_json(obj: Mapping[str, Any]) -> list[SpanRecord]:
    """Spans of one OTLP/JSON ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``)."""
    out: list[SpanRecord] = []
    for rs in obj.get("resourceSpans") or obj.get("resource_spans") or []:
        resource = _attributes((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("scope_spans") or rs.get("instrumentationLibrarySpans") or []:
            for sp in ss.get("spans") or []:
                out.append(SpanRecord(
                    trace_id=_hex_id(sp.get("traceId") or sp.get("trace_id")),
                    span_id=_hex_id(sp.get("spanId") or sp.get("span_id")),
                    parent_id=_hex_id(sp.get("parentSpanId") or sp.get("parent_span_id")) or None,
                    name=str(sp.get("name", "")),
                    start_ns=int(sp.get("startTimeUnixNano") or sp.get("start_time_unix_nano") or 0),
                    end_ns=int(sp.get("endTimeUnixNano") or sp.get("end_time_unix_nano") or 0),
                    attributes=_attributes(sp.get("attributes")),
                    error=_status_error(sp.get("status")),
                    resource=resource))
    return out


def spans_from_protobuf(body: bytes) -> list[SpanRecord]:
    """Spans of an OTLP/HTTP protobuf body (needs ``opentelemetry-proto``)."""
    try:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:  # pragma: no cover - depends on the installed extra
        raise DatasetError("OTLP protobuf needs opentelemetry-proto: pip install 'ragmeter-eval[monitor]' "
                           "(or send OTLP/JSON)") from None
    msg = ExportTraceServiceRequest()
    try:
        msg.ParseFromString(body)
    except Exception as exc:  # noqa: BLE001 - any decode error is the sender's input error
        raise DatasetError(f"not an OTLP ExportTraceServiceRequest: {exc}") from None
    return spans_from_otlp_json(MessageToDict(msg))


def _iso_ns(text: Any) -> int:
    dt = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1e9)


def spans_from_console_json(obj: Mapping[str, Any]) -> SpanRecord:
    """A span as printed by the Python SDK's ``ConsoleSpanExporter`` (``span.to_json()``)."""
    ctx = obj.get("context") or {}
    parent = obj.get("parent_id")
    return SpanRecord(
        trace_id=str(ctx.get("trace_id", "")).removeprefix("0x"),
        span_id=str(ctx.get("span_id", "")).removeprefix("0x"),
        parent_id=str(parent).removeprefix("0x") if parent else None,
        name=str(obj.get("name", "")),
        start_ns=_iso_ns(obj["start_time"]), end_ns=_iso_ns(obj["end_time"]),
        attributes=dict(obj.get("attributes") or {}),
        error=_status_error({"code": (obj.get("status") or {}).get("status_code"),
                             "message": (obj.get("status") or {}).get("description")}),
        resource=dict((obj.get("resource") or {}).get("attributes") or {}))


def _objects_in_text(text: str, source: str) -> Iterator[tuple[int, Any]]:
    """JSON objects in ``text``: one document, JSON lines, or concatenated pretty-printed objects
    (what ``ConsoleSpanExporter`` prints). Yields ``(line, object)``."""
    decoder = json.JSONDecoder()
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            line = text.count("\n", 0, exc.pos) + 1
            col = exc.pos - (text.rfind("\n", 0, exc.pos) + 1) + 1
            raise DatasetError(f"{source}:{line}:{col}: not valid JSON ({exc.msg})") from None
        except (ValueError, RecursionError) as exc:  # a number of 5,000 digits, arrays nested 100,000 deep
            line = text.count("\n", 0, i) + 1
            raise DatasetError(f"{source}:{line}: not usable JSON ({exc})"[:300]) from None
        yield text.count("\n", 0, i) + 1, obj
        i = end


def read_spans(path: str | Path) -> list[SpanRecord]:
    """Every span in an OTLP/JSON file (one request per file or per line) or in a file of
    ``ConsoleSpanExporter`` output."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DatasetError(f"{p}: no such file") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    spans: list[SpanRecord] = []
    for line, obj in _objects_in_text(text, str(p)):
        items = obj if isinstance(obj, list) else [obj]
        for item in items:
            if not isinstance(item, Mapping):
                raise DatasetError(f"{p}:{line}: expected an OTLP request or a span object")
            try:
                if "resourceSpans" in item or "resource_spans" in item:
                    spans.extend(spans_from_otlp_json(item))
                elif "context" in item and "start_time" in item:
                    spans.append(spans_from_console_json(item))
                else:
                    raise DatasetError(f"{p}:{line}: neither OTLP/JSON (resourceSpans) nor a "
                                       f"ConsoleSpanExporter span (context, start_time)")
            except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
                # JSON, but a value has a shape or type no span field takes (a number for a list,
                # a date that is not ISO 8601): the file's error, named with its line
                raise DatasetError(f"{p}:{line}: not a valid span ({type(exc).__name__}: {exc})"[:300]) from None
    return spans


# ---- spans -> calls ---------------------------------------------------------------------------
def _first(attrs: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for k in keys:
        if attrs.get(k) not in (None, ""):
            return attrs[k]
    return None


def _unwrap(value: Any, fields: tuple[str, ...]) -> str | None:
    """A text from an attribute that may hold JSON (a chain's inputs/outputs, a message list)."""
    if value is None:
        return None
    if isinstance(value, str):
        s = value.strip()
        if s[:1] in "[{":
            try:
                value = json.loads(s)
            except json.JSONDecodeError:
                return value
        else:
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
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
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


def calls_from_spans(spans: Iterable[SpanRecord]) -> tuple[list[dict[str, Any]], list[SpanRecord]]:
    """Group spans by trace and turn each trace that has its root span into one call (a mapping
    for :func:`ragmeter.monitor.calls.normalise_call`). Returns ``(calls, leftover)``: spans of
    traces whose root has not arrived (an exporter may send a trace's children first)."""
    traces: dict[str, list[SpanRecord]] = {}
    for s in spans:
        traces.setdefault(s.trace_id, []).append(s)
    calls: list[dict[str, Any]] = []
    leftover: list[SpanRecord] = []
    for trace_id, group in traces.items():
        ids = {s.span_id for s in group}
        roots = [s for s in group if not s.parent_id or s.parent_id not in ids]
        true_roots = [s for s in roots if not s.parent_id]
        if not true_roots:
            leftover.extend(group)
            continue
        root = min(true_roots, key=lambda s: s.start_ns)
        calls.append(_call_from_trace(trace_id, root, group))
    return calls, leftover


def _call_from_trace(trace_id: str, root: SpanRecord, group: list[SpanRecord]) -> dict[str, Any]:
    ordered = sorted(group, key=lambda s: s.start_ns)
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
    contexts: list[dict[str, Any]] = []
    for s in ordered:
        contexts.extend(_documents(s.attributes))
    if not contexts and a.get("ragmeter.contexts"):
        raw = a["ragmeter.contexts"]
        contexts = list(json.loads(raw)) if isinstance(raw, str) else list(raw)
    model = _first(a, _MODEL_KEYS)
    tin = tout = 0
    has_tokens = False
    cost = _first(a, _COST_KEYS)
    for s in ordered:
        model = model or _first(s.attributes, _MODEL_KEYS)
        i, o = _first(s.attributes, _IN_TOKENS), _first(s.attributes, _OUT_TOKENS)
        if i is not None or o is not None:
            has_tokens = True
            tin += int(i or 0)
            tout += int(o or 0)
        if s is not root and cost is None:
            c = _first(s.attributes, _COST_KEYS)
            cost = None if c is None else float(c)
    error = root.error or next((s.error for s in ordered if s.error), None)
    meta: dict[str, Any] = {"route": root.name, "trace_id": trace_id}
    for k_src, k_dst in (("service.name", "service"), ("service.version", "version"),
                         ("deployment.environment", "environment")):
        if root.resource.get(k_src) is not None:
            meta[k_dst] = root.resource[k_src]
    extra = a.get("metadata")
    if isinstance(extra, str):
        try:
            extra = json.loads(extra)
        except json.JSONDecodeError:
            extra = None
    if isinstance(extra, Mapping):
        meta.update({str(k): v for k, v in extra.items()})
    feedback = a.get("ragmeter.feedback")
    return {
        "call_id": f"otel:{trace_id}",
        "timestamp": datetime.fromtimestamp(root.start_ns / 1e9, UTC),
        "query": query, "answer": answer, "contexts": contexts or None,
        "latency_ms": max(0.0, (root.end_ns - root.start_ns) / 1e6),
        "cost_usd": None if cost is None else float(cost),
        "error": error, "feedback": feedback,
        "input_tokens": tin if has_tokens else None, "output_tokens": tout if has_tokens else None,
        "model": None if model is None else str(model), "metadata": meta,
    }
