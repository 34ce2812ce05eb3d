"""MLflow traces as JSON (``Trace.to_json()``, what ``mlflow.get_trace(...)`` gives and the UI
downloads): ``{"info": {...}, "data": {"spans": [...]}}``, one per line or in a list.

A span's kind is its ``mlflow.spanType`` (``LLM`` / ``CHAT_MODEL``, ``TOOL``, ``RETRIEVER``,
``AGENT``, ``CHAIN``, ``EMBEDDING``; the rest are steps of no kind); what it received and returned
are ``mlflow.spanInputs`` / ``mlflow.spanOutputs`` (JSON); tokens ``mlflow.chat.tokenUsage``, cost
``mlflow.llm.cost``, model ``mlflow.llm.model``. Both span layouts are read: MLflow 3 (OTel-like,
``start_time_unix_nano``, ``status.code``) and MLflow 2 (``context.span_id``, ``start_time`` in
nanoseconds, ``status_code``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import AgentTrace, TraceSpan
from ragmeter.io.spans.common import fill, need_id, usage, usd
from ragmeter.io.spans.messages import loads_maybe
from ragmeter.io.spans.record import text
from ragmeter.io.spans.tree import build_trace, finish_spans, first_start_ms

KINDS = {"LLM": "llm", "CHAT_MODEL": "llm", "TOOL": "tool", "RETRIEVER": "retriever", "AGENT": "agent",
         "CHAIN": "chain", "EMBEDDING": "embedding", "RERANKER": "retriever"}


def is_mlflow(obj: Any) -> bool:
    return isinstance(obj, Mapping) and isinstance(obj.get("info"), Mapping) and \
        isinstance(obj.get("data"), Mapping) and isinstance(obj["data"].get("spans"), list)


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    from ragmeter.core.safejson import JSONInputError, loads

    try:
        return loads(value)
    except JSONInputError as exc:
        if exc.syntax:
            return value
        raise DatasetError(f"JSON value {exc}") from None


def _span(sp: Mapping[str, Any]) -> TraceSpan:
    ctx = sp.get("context") if isinstance(sp.get("context"), Mapping) else {}
    sid = need_id(sp.get("span_id", ctx.get("span_id")), "'span_id'")
    parent = sp.get("parent_span_id", sp.get("parent_id"))
    attrs = sp.get("attributes") if isinstance(sp.get("attributes"), Mapping) else {}
    a = {k: _json(v) for k, v in attrs.items()}  # MLflow writes every attribute as JSON text
    start = sp.get("start_time_unix_nano", sp.get("start_time"))
    end = sp.get("end_time_unix_nano", sp.get("end_time"))
    fields: dict[str, Any] = {"span_id": sid, "parent_id": None if parent in (None, "") else str(parent)}
    if isinstance(start, int | float) and not isinstance(start, bool):
        fields["start_ms"] = start / 1e6
        if isinstance(end, int | float) and not isinstance(end, bool) and end >= start:
            fields["latency_ms"] = (end - start) / 1e6
        elif end in (None, 0):
            fields["status"] = "unfinished"
    status = sp.get("status") if isinstance(sp.get("status"), Mapping) else {"code": sp.get("status_code"),
                                                                              "message": sp.get("status_message")}
    if str(status.get("code") or "").upper() in ("STATUS_CODE_ERROR", "ERROR"):
        fields["status"], fields["error"] = "error", str(status.get("message") or "error")
    kind = KINDS.get(str(a.get("mlflow.spanType") or "").upper(), "other")
    name = str(sp.get("name") or "")
    fill(fields, kind, name, a.get("mlflow.spanInputs"), a.get("mlflow.spanOutputs"))
    if kind == "llm":
        usage(fields, a.get("mlflow.chat.tokenUsage"), "attribute 'mlflow.chat.tokenUsage'")
        usd(fields, a.get("mlflow.llm.cost"), "attribute 'mlflow.llm.cost'")
        model = a.get("mlflow.llm.model")
        if model is None and isinstance(loads_maybe(a.get("mlflow.spanInputs")), Mapping):
            model = loads_maybe(a.get("mlflow.spanInputs")).get("model")
        if model is not None:
            fields["model"] = text(model, "the model", 200)
    return TraceSpan.model_validate(fields)


def _session(info: Mapping[str, Any]) -> str | None:
    """MLflow 3's ``mlflow.trace.session`` trace metadata (``trace_metadata``, ``request_metadata``
    before), or a ``session_id`` / ``mlflow.trace.session`` tag as MLflow 2's docs set it."""
    for key in ("trace_metadata", "request_metadata", "tags"):
        meta = info.get(key)
        if isinstance(meta, list):  # [{"key": ..., "value": ...}] as the REST API writes it
            meta = {m.get("key"): m.get("value") for m in meta if isinstance(m, Mapping)}
        if isinstance(meta, Mapping):
            for name in ("mlflow.trace.session", "session_id"):
                if isinstance(meta.get(name), str) and meta[name]:
                    return meta[name]
    return None


def read(items: list[tuple[int, Any]], where: str) -> list[AgentTrace]:
    out = []
    for line, obj in items:
        if not is_mlflow(obj):
            raise DatasetError(f"{where}:{line}: expected an MLflow trace ({{\"info\", \"data\": {{\"spans\"}}}})")
        info = obj["info"]
        tid = str(info.get("trace_id") or info.get("request_id") or "")
        spans = []
        for i, sp in enumerate(obj["data"]["spans"]):
            if not isinstance(sp, Mapping):
                raise DatasetError(f"{where}:{line}: trace {tid}: data.spans[{i}] must be an object")
            try:
                spans.append(_span(sp))
            except (DatasetError, ValueError) as exc:
                raise DatasetError(f"{where}:{line}: trace {tid} span {sp.get('span_id') or i}: {exc}") from None
        started = first_start_ms(spans)
        out.append(build_trace(tid or (spans[0].span_id if spans else f"line-{line}"), finish_spans(spans),
                               session_id=_session(info), started_ms=started))
    return out
