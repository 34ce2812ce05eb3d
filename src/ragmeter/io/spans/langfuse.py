"""Langfuse traces as exported (the API's trace object with its ``observations``, or the UI's
download): one trace per line, in a list, or under ``data``.

An observation's ``type`` gives its kind: ``GENERATION`` an LLM call (``model``, ``usage`` /
``usageDetails``, ``calculatedTotalCost`` / ``costDetails``), ``TOOL`` a tool call, ``RETRIEVER`` a
retrieval, ``AGENT`` an agent, ``CHAIN`` a step, ``EMBEDDING``; ``SPAN`` and ``EVENT`` are steps of
no kind. ``level: ERROR`` with its ``statusMessage`` is a failed step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import AgentTrace, TraceSpan
from ragmeter.io.spans.common import fill, need_id, usage, usd
from ragmeter.io.spans.record import text
from ragmeter.io.spans.tree import build_trace, finish_spans, first_start_ms, iso_ms, timed

KINDS = {"GENERATION": "llm", "TOOL": "tool", "RETRIEVER": "retriever", "AGENT": "agent", "CHAIN": "chain",
         "EMBEDDING": "embedding", "SPAN": "other", "EVENT": "other", "EVALUATOR": "other", "GUARDRAIL": "other"}


def is_langfuse(obj: Any) -> bool:
    return isinstance(obj, Mapping) and isinstance(obj.get("observations"), list) and "id" in obj


def objects(obj: Any) -> list[Any]:
    if isinstance(obj, Mapping) and isinstance(obj.get("data"), list) and not is_langfuse(obj):
        return list(obj["data"])
    return list(obj) if isinstance(obj, list) else [obj]


def _span(ob: Mapping[str, Any]) -> TraceSpan:
    sid = need_id(ob.get("id"), "'id'")
    kind = KINDS.get(str(ob.get("type") or "").upper(), "other")
    fields: dict[str, Any] = {"span_id": sid, "parent_id": ob.get("parentObservationId") or None}
    # an EVENT is a point in time: no end, and not cut short
    timed(fields, ob.get("startTime"), ob.get("endTime") or (ob.get("startTime") if ob.get("type") == "EVENT" else None))
    if str(ob.get("level") or "").upper() == "ERROR":
        fields["status"], fields["error"] = "error", str(ob.get("statusMessage") or "error")
    name = str(ob.get("name") or ob.get("type") or "")
    fill(fields, kind, name, ob.get("input"), ob.get("output"))
    if kind == "llm":
        if ob.get("model") is not None:
            fields["model"] = text(ob["model"], "'model'", 200)
        usage(fields, ob.get("usageDetails") or ob.get("usage"), "'usage'")
        cost = ob.get("calculatedTotalCost")
        if cost is None and isinstance(ob.get("costDetails"), Mapping):
            cost = ob["costDetails"].get("total")
        usd(fields, cost, "'calculatedTotalCost'")
    return TraceSpan.model_validate(fields)


def read(items: list[tuple[int, Any]], where: str) -> list[AgentTrace]:
    out = []
    for line, obj in items:
        if not is_langfuse(obj):
            raise DatasetError(f"{where}:{line}: expected a Langfuse trace (id, observations)")
        tid = str(obj["id"])
        spans = []
        for i, ob in enumerate(obj["observations"]):
            if isinstance(ob, str):  # the traces list (GET /api/public/traces) names its observations
                raise DatasetError(f"{where}:{line}: trace {tid}: observations[{i}] is an id ({ob[:40]!r}), "
                                   "as the traces list gives them: export each trace with its observations "
                                   "(GET /api/public/traces/{id}: the Python SDK's langfuse.api.trace.get(id), "
                                   "fetch_trace(id) in v2)")
            if not isinstance(ob, Mapping):
                raise DatasetError(f"{where}:{line}: trace {tid}: observations[{i}] must be an object")
            try:
                spans.append(_span(ob))
            except (DatasetError, ValueError) as exc:
                raise DatasetError(f"{where}:{line}: trace {tid} span {ob.get('id') or i}: {exc}") from None
        started = first_start_ms(spans)
        if started is None and obj.get("timestamp") is not None:
            try:
                started = iso_ms(obj["timestamp"], "'timestamp'")
            except DatasetError as exc:
                raise DatasetError(f"{where}:{line}: trace {tid}: {exc}") from None
        session = obj.get("sessionId")
        trace = build_trace(tid, finish_spans(spans), session_id=None if session in (None, "") else str(session),
                            started_ms=started)
        if trace.input_text is None and isinstance(obj.get("input"), str):
            trace.input_text = obj["input"]
        if trace.final_text is None and isinstance(obj.get("output"), str) and not getattr(trace, "incomplete", False):
            trace.final_text = obj["output"]
        out.append(trace)
    return out
