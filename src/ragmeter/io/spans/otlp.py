"""Strict decoding of OTLP trace exports (``ExportTraceServiceRequest`` as JSON, or as protobuf turned
into the same JSON shape by ``MessageToDict``) into :class:`SpanRecord` objects.

Every field is checked against the OTLP specification's shape, and an error names its place in the
request (``resourceSpans[0].scopeSpans[1].spans[2].startTimeUnixNano: ...``): lists that are not
lists, spans that are not objects, trace ids that are missing or are not 16 bytes (32 hex digits,
or base64 as protobuf bytes are written in JSON), span ids that are not 8 bytes, times that are not
unsigned 64-bit nanoseconds, attribute values that are not ``AnyValue`` objects. A span without a
trace id is refused, never stored under an empty id.

Also the OTLP files: OTLP/JSON (one request per file or per line, what the Collector's file exporter
writes), OTLP protobuf (``ExportTraceServiceRequest`` bytes) and the Python SDK's
``ConsoleSpanExporter`` output. Shared by the monitor (spans -> logged calls) and the agent-trace
readers of :mod:`ragmeter.io.spans` (spans -> :class:`~ragmeter.core.schema.AgentTrace`).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragmeter.core.errors import DatasetError

MAX_NANOS = 2**64 - 1
MAX_INT64 = 2**63 - 1


class NotOTLPError(DatasetError):
    """A body that is not an OTLP trace export at all (protobuf that does not decode)."""


@dataclass
class SpanRecord:
    """A span reduced to what the conversion to a call needs."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    resource: dict[str, Any] = field(default_factory=dict)
    #: the span's events: ``{"name", "time_ns", "attributes"}`` (GenAI message events, exceptions)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: the instrumentation scope's name (``openinference.instrumentation.langchain`` ...)
    scope: str = ""

    def to_data(self) -> dict[str, Any]:
        """The span as a JSON object (everything but the two ids), as the store keeps it."""
        data = {"parent_id": self.parent_id, "name": self.name, "start_ns": self.start_ns,
                "end_ns": self.end_ns, "attributes": self.attributes, "error": self.error,
                "resource": self.resource}
        if self.events:
            data["events"] = self.events
        if self.scope:
            data["scope"] = self.scope
        return data

    @classmethod
    def from_data(cls, trace_id: str, span_id: str, data: Mapping[str, Any]) -> SpanRecord:
        return cls(trace_id=trace_id, span_id=span_id, parent_id=data.get("parent_id"),
                   name=data.get("name") or "", start_ns=int(data.get("start_ns") or 0),
                   end_ns=int(data.get("end_ns") or 0), attributes=dict(data.get("attributes") or {}),
                   error=data.get("error"), resource=dict(data.get("resource") or {}),
                   events=list(data.get("events") or []), scope=str(data.get("scope") or ""))


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _fail(path: str, message: str) -> DatasetError:
    return DatasetError(f"{path}: {message}")


def _object(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(path, f"must be an object, got {_kind(value)}")
    return value


def _list(obj: Mapping[str, Any], keys: tuple[str, ...], path: str) -> list[Any]:
    """The first of ``keys`` present in ``obj`` as a list (absent or null: empty)."""
    for key in keys:
        if obj.get(key) is not None:
            value = obj[key]
            if not isinstance(value, list):
                raise _fail(f"{path}.{key}" if path else key, f"must be a list, got {_kind(value)}")
            return value
    return []


def _get(obj: Mapping[str, Any], *keys: str) -> tuple[str, Any]:
    for key in keys:
        if obj.get(key) not in (None, ""):
            return key, obj[key]
    return keys[0], None


def _id(value: Any, n_bytes: int, path: str, *, required: bool) -> str:
    """A trace or span id as lower-case hex: ``2 * n_bytes`` hex digits, or ``n_bytes`` in base64."""
    if value is None or value == "":
        if required:
            raise _fail(path, "missing (every span needs one)")
        return ""
    if not isinstance(value, str):
        raise _fail(path, f"must be text (hex digits), got {_kind(value)}")
    text = value.strip()
    if len(text) == 2 * n_bytes and all(c in "0123456789abcdefABCDEF" for c in text):
        hexed = text.lower()
    else:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != n_bytes:
            raise _fail(path, f"must be {2 * n_bytes} hex digits ({n_bytes} bytes), got {text[:40]!r}")
        hexed = raw.hex()
    if required and not hexed.strip("0"):
        raise _fail(path, "is all zeros (an invalid id)")
    return hexed


def _nanos(value: Any, path: str) -> int:
    """Unix nanoseconds: an unsigned 64-bit integer, as a number or as decimal text."""
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise _fail(path, "must be unix nanoseconds, got true/false")
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise _fail(path, f"must be whole unix nanoseconds, got {value!r}")
        value = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if not text.isdigit() or not text.isascii() or len(text) > 20:
            raise _fail(path, f"must be unix nanoseconds (digits), got {value[:40]!r}")
        value = int(text)
    elif not isinstance(value, int):
        raise _fail(path, f"must be unix nanoseconds, got {_kind(value)}")
    if not 0 <= value <= MAX_NANOS:
        raise _fail(path, f"must be between 0 and 2**64-1 nanoseconds, got {value}")
    return value


def any_value(v: Any, path: str) -> Any:
    """An OTLP/JSON ``AnyValue`` (``{"stringValue": ...}``, ``{"intValue": ...}`` ...) as a Python value."""
    v = _object(v, path)
    if "stringValue" in v:
        if not isinstance(v["stringValue"], str):
            raise _fail(f"{path}.stringValue", f"must be text, got {_kind(v['stringValue'])}")
        return v["stringValue"]
    if "intValue" in v:
        x = v["intValue"]
        if isinstance(x, str) and x.strip().lstrip("-").isdigit() and x.isascii() and len(x) <= 21:
            x = int(x)
        if isinstance(x, bool) or not isinstance(x, int) or abs(x) > MAX_INT64:
            raise _fail(f"{path}.intValue", f"must be a 64-bit integer, got {str(x)[:40]!r}")
        return x
    if "doubleValue" in v:
        x = v["doubleValue"]
        if isinstance(x, str):
            try:
                x = float(x)
            except ValueError:
                raise _fail(f"{path}.doubleValue", f"must be a number, got {x[:40]!r}") from None
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise _fail(f"{path}.doubleValue", f"must be a finite number, got {str(x)[:40]!r}")
        return float(x)
    if "boolValue" in v:
        if not isinstance(v["boolValue"], bool):
            raise _fail(f"{path}.boolValue", f"must be true or false, got {_kind(v['boolValue'])}")
        return v["boolValue"]
    if "arrayValue" in v:
        arr = _object(v["arrayValue"] if v["arrayValue"] is not None else {}, f"{path}.arrayValue")
        return [any_value(x, f"{path}.arrayValue.values[{i}]")
                for i, x in enumerate(_list(arr, ("values",), f"{path}.arrayValue"))]
    if "kvlistValue" in v:
        kv = _object(v["kvlistValue"] if v["kvlistValue"] is not None else {}, f"{path}.kvlistValue")
        return attributes(_list(kv, ("values",), f"{path}.kvlistValue"), f"{path}.kvlistValue.values")
    if "bytesValue" in v:
        if not isinstance(v["bytesValue"], str):
            raise _fail(f"{path}.bytesValue", f"must be base64 text, got {_kind(v['bytesValue'])}")
        return v["bytesValue"]
    return None


def attributes(items: Any, path: str) -> dict[str, Any]:
    """A list of ``{"key", "value"}`` objects as a dict."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise _fail(path, f"must be a list of {{key, value}} objects, got {_kind(items)}")
    out: dict[str, Any] = {}
    for i, a in enumerate(items):
        a = _object(a, f"{path}[{i}]")
        key = a.get("key")
        if not isinstance(key, str):
            raise _fail(f"{path}[{i}].key", f"must be text, got {_kind(key)}")
        out[key] = None if a.get("value") is None else any_value(a["value"], f"{path}[{i}].value")
    return out


def _status(status: Any, path: str) -> str | None:
    if status is None:
        return None
    status = _object(status, path)
    code = status.get("code", status.get("status_code"))
    if code is not None and (isinstance(code, bool) or not isinstance(code, int | str)):
        raise _fail(f"{path}.code", f"must be a status code, got {_kind(code)}")
    message = status.get("message", status.get("description"))
    if message is not None and not isinstance(message, str):
        raise _fail(f"{path}.message", f"must be text, got {_kind(message)}")
    if code in (2, "2", "STATUS_CODE_ERROR", "ERROR"):
        return message or "error"
    return None


def _events(items: Any, path: str) -> list[dict[str, Any]]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise _fail(path, f"must be a list of events, got {_kind(items)}")
    out = []
    for i, ev in enumerate(items):
        ev = _object(ev, f"{path}[{i}]")
        name = ev.get("name")
        if name is not None and not isinstance(name, str):
            raise _fail(f"{path}[{i}].name", f"must be text, got {_kind(name)}")
        key, t = _get(ev, "timeUnixNano", "time_unix_nano")
        out.append({"name": name or "", "time_ns": _nanos(t, f"{path}[{i}].{key}"),
                    "attributes": attributes(ev.get("attributes"), f"{path}[{i}].attributes")})
    return out


def _span(sp: Any, path: str, resource: dict[str, Any], scope: str = "") -> SpanRecord:
    sp = _object(sp, path)
    key, trace = _get(sp, "traceId", "trace_id")
    trace_id = _id(trace, 16, f"{path}.{key}", required=True)
    key, span = _get(sp, "spanId", "span_id")
    span_id = _id(span, 8, f"{path}.{key}", required=True)
    key, parent = _get(sp, "parentSpanId", "parent_span_id")
    parent_id = _id(parent, 8, f"{path}.{key}", required=False) or None
    name = sp.get("name")
    if name is not None and not isinstance(name, str):
        raise _fail(f"{path}.name", f"must be text, got {_kind(name)}")
    key, start = _get(sp, "startTimeUnixNano", "start_time_unix_nano")
    start_ns = _nanos(start, f"{path}.{key}")
    key, end = _get(sp, "endTimeUnixNano", "end_time_unix_nano")
    end_ns = _nanos(end, f"{path}.{key}")
    return SpanRecord(trace_id=trace_id, span_id=span_id, parent_id=parent_id, name=name or "",
                      start_ns=start_ns, end_ns=end_ns,
                      attributes=attributes(sp.get("attributes"), f"{path}.attributes"),
                      error=_status(sp.get("status"), f"{path}.status"), resource=resource,
                      events=_events(sp.get("events"), f"{path}.events"), scope=scope)


def decode_export(obj: Any) -> list[SpanRecord]:
    """The spans of one ``ExportTraceServiceRequest`` object (``{"resourceSpans": [...]}``).

    Raises:
        DatasetError: naming the path of the first value of the wrong shape.
    """
    if not isinstance(obj, Mapping):
        raise DatasetError(f'the body must be an object {{"resourceSpans": [...]}}, got {_kind(obj)}')
    out: list[SpanRecord] = []
    for i, rs in enumerate(_list(obj, ("resourceSpans", "resource_spans"), "")):
        path = f"resourceSpans[{i}]"
        rs = _object(rs, path)
        res = _object(rs.get("resource") if rs.get("resource") is not None else {}, f"{path}.resource")
        resource = attributes(res.get("attributes"), f"{path}.resource.attributes")
        scopes = _list(rs, ("scopeSpans", "scope_spans", "instrumentationLibrarySpans"), path)
        for j, ss in enumerate(scopes):
            spath = f"{path}.scopeSpans[{j}]"
            ss = _object(ss, spath)
            sc = ss.get("scope") if isinstance(ss.get("scope"), Mapping) else \
                ss.get("instrumentationLibrary") if isinstance(ss.get("instrumentationLibrary"), Mapping) else {}
            scope = sc.get("name") if isinstance(sc.get("name"), str) else ""
            for k, sp in enumerate(_list(ss, ("spans",), spath)):
                out.append(_span(sp, f"{spath}.spans[{k}]", resource, scope))
    return out


# ---- files ------------------------------------------------------------------------------------
def spans_from_protobuf(body: bytes) -> list[SpanRecord]:
    """Spans of an OTLP protobuf ``ExportTraceServiceRequest`` (needs ``opentelemetry-proto``)."""
    try:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:  # pragma: no cover - depends on the installed extra
        raise NotOTLPError("OTLP protobuf needs opentelemetry-proto: pip install 'ragmeter-eval[monitor]' "
                           "(or send OTLP/JSON)") from None
    msg = ExportTraceServiceRequest()
    try:
        msg.ParseFromString(body)
    except Exception as exc:  # noqa: BLE001 - any decode error is the sender's input error
        raise NotOTLPError(f"not an OTLP ExportTraceServiceRequest (protobuf): {exc}") from None
    from ragmeter.core.safejson import JSONInputError, check

    obj = MessageToDict(msg)
    try:
        check(obj)
    except JSONInputError as exc:
        raise DatasetError(str(exc)) from None
    return decode_export(obj)


def _iso_ns(text: Any) -> int:
    from ragmeter.io.spans.tree import iso_ns

    return iso_ns(str(text), "a span's time") or 0


def _console_status(status: Any) -> str | None:
    status = status or {}
    if status.get("status_code") in (2, "STATUS_CODE_ERROR", "ERROR"):
        return str(status.get("description") or "error")
    return None


def spans_from_console_json(obj: Mapping[str, Any]) -> SpanRecord:
    """A span as printed by the Python SDK's ``ConsoleSpanExporter`` (``span.to_json()``)."""
    ctx = obj.get("context") or {}
    parent = obj.get("parent_id")
    events = [{"name": str(e.get("name") or ""), "time_ns": _iso_ns(e["timestamp"]) if e.get("timestamp") else 0,
               "attributes": dict(e.get("attributes") or {})} for e in obj.get("events") or []]
    return SpanRecord(
        trace_id=str(ctx.get("trace_id", "")).removeprefix("0x"),
        span_id=str(ctx.get("span_id", "")).removeprefix("0x"),
        parent_id=str(parent).removeprefix("0x") if parent else None,
        name=str(obj.get("name", "")),
        start_ns=_iso_ns(obj["start_time"]), end_ns=_iso_ns(obj["end_time"]) if obj.get("end_time") else 0,
        attributes=dict(obj.get("attributes") or {}), error=_console_status(obj.get("status")),
        resource=dict((obj.get("resource") or {}).get("attributes") or {}), events=events)


def objects_in_text(text: str, source: str) -> Iterator[tuple[int, Any]]:
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


def read_text(path: str | Path) -> str:
    """A span file's text (UTF-8; ``.gz`` gunzipped), with errors naming the file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise DatasetError(f"{p}: is a directory, expected a span file") from None
    if p.suffix.lower() == ".gz":
        import gzip

        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise DatasetError(f"{p}: not a readable gzip file ({exc})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def is_protobuf_file(path: str | Path) -> bool:
    """A ``.pb`` / ``.binpb`` / ``.protobuf`` file: OTLP protobuf bytes, not JSON."""
    return Path(path).suffix.lower() in (".pb", ".binpb", ".protobuf")


def read_spans(path: str | Path) -> list[SpanRecord]:
    """Every span in an OTLP/JSON file (one request per file or per line), an OTLP protobuf file
    (``.pb``: one serialized ``ExportTraceServiceRequest``) or a file of ``ConsoleSpanExporter``
    output."""
    p = Path(path)
    if is_protobuf_file(p):
        try:
            body = p.read_bytes()
        except FileNotFoundError:
            raise DatasetError(f"{p}: no such file") from None
        try:
            return spans_from_protobuf(body)
        except DatasetError as exc:
            raise DatasetError(f"{p}: {exc}") from None
    text = read_text(p)
    spans: list[SpanRecord] = []
    for line, obj in objects_in_text(text, str(p)):
        items = obj if isinstance(obj, list) else [obj]
        for item in items:
            if not isinstance(item, Mapping):
                raise DatasetError(f"{p}:{line}: expected an OTLP request or a span object")
            try:
                if "resourceSpans" in item or "resource_spans" in item:
                    spans.extend(decode_export(item))
                elif "context" in item and "start_time" in item:
                    spans.append(spans_from_console_json(item))
                else:
                    raise DatasetError(f"{p}:{line}: neither OTLP/JSON (resourceSpans) nor a "
                                       f"ConsoleSpanExporter span (context, start_time)")
            except DatasetError as exc:
                raise DatasetError(str(exc) if str(exc).startswith(f"{p}:") else f"{p}:{line}: {exc}") from None
            except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
                # JSON, but a value has a shape or type no span field takes (a number for a list,
                # a date that is not ISO 8601): the file's error, named with its line
                raise DatasetError(f"{p}:{line}: not a valid span ({type(exc).__name__}: {exc})"[:300]) from None
    return spans
