"""Agent traces read from the spans agents already write: OTLP (JSON, protobuf, the SDK's console
output) under the OTel GenAI or OpenInference conventions, Phoenix's span dataframe (Parquet, CSV),
the OpenAI Agents SDK's trace export, LangSmith run trees, MLflow and Langfuse trace exports.

Each trace becomes one :class:`~ragmeter.core.schema.AgentTrace` that keeps its tree
(``spans``) and fills the fields the agent metrics read (:mod:`ragmeter.io.spans.tree`).

    >>> traces = read_span_file("spans.json")          # format detected from the content
    >>> traces = agent_traces_from_otlp({"resourceSpans": [...]})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import AgentTrace, TraceSpan
from ragmeter.io.spans.otlp import SpanRecord, decode_export
from ragmeter.io.spans.tree import build_trace, sample_row

__all__ = ["SPAN_FORMATS", "agent_traces_from_otlp", "agent_traces_from_spans", "detect_span_format",
           "read_span_file", "span_rows"]

#: ``--format`` values of span files, and what each reads
SPAN_FORMATS = {
    "otlp": "OTLP/JSON ExportTraceServiceRequest (resourceSpans), one per file or per line; "
            "ConsoleSpanExporter output",
    "otlp-proto": "OTLP protobuf ExportTraceServiceRequest bytes (.pb)",
    "phoenix": "Phoenix's get_spans_dataframe() saved as Parquet, CSV or JSON records (OpenInference attributes.* columns)",
    "agents-sdk": "OpenAI Agents SDK trace export (trace and trace.span objects, one per line or in a list)",
    "langsmith": "LangChain / LangGraph runs as LangSmith keeps them (run JSON with child_runs, or a flat list)",
    "mlflow": "MLflow traces (Trace.to_json(): info + data.spans)",
    "langfuse": "Langfuse traces with their observations (GENERATION, SPAN, EVENT, TOOL, RETRIEVER ...)",
}


def agent_traces_from_spans(records: Iterable[SpanRecord], *, where: str = "") -> list[AgentTrace]:
    """OTel spans grouped by trace, each trace an :class:`AgentTrace` (traces in order of their
    first span's start).

    Raises:
        DatasetError: a span no convention can read, naming ``where``, the trace and the span id.
    """
    from ragmeter.io.spans.record import trace_spans

    groups: dict[str, list[SpanRecord]] = {}
    for r in records:
        if not r.trace_id or not r.span_id:
            raise DatasetError(f"{where + ': ' if where else ''}span {r.name or '?'!r} has no "
                               f"{'trace' if not r.trace_id else 'span'} id")
        groups.setdefault(r.trace_id, []).append(r)
    out = []
    for tid, group in sorted(groups.items(), key=lambda kv: min((r.start_ns for r in kv[1]), default=0)):
        try:
            spans = trace_spans(group)
        except DatasetError as exc:
            raise DatasetError(f"{where}: {exc}" if where else str(exc)) from None
        try:
            out.append(build_trace(tid, spans, service=_service(group), session_id=session_of(group),
                                   started_ms=min((r.start_ns for r in group if r.start_ns), default=0) / 1e6 or None))
        except (ValueError, TypeError) as exc:  # a tool call no trace can hold (no name ...)
            raise DatasetError(f"{where + ': ' if where else ''}trace {tid}: {exc}"[:500]) from None
    return out


def _service(group: list[SpanRecord]) -> str | None:
    for r in group:
        name = r.resource.get("service.name")
        if isinstance(name, str) and name and not name.startswith("unknown_service"):
            return name
    return None


#: span attributes that name the session (conversation) a trace belongs to: OpenInference,
#: OTel GenAI, Langfuse's OTel attributes, MLflow's session metadata, LangSmith's thread metadata
SESSION_ATTRIBUTES = ("session.id", "gen_ai.conversation.id", "langfuse.session.id", "mlflow.trace.session",
                      "langsmith.metadata.session_id", "langsmith.metadata.thread_id")


def session_of(group: list[SpanRecord]) -> str | None:
    """The session id one of the trace's spans records (:data:`SESSION_ATTRIBUTES`), else ``None``."""
    for r in group:
        for key in SESSION_ATTRIBUTES:
            v = r.attributes.get(key)
            if isinstance(v, str | int) and not isinstance(v, bool) and str(v):
                return str(v)
    return None


def agent_traces_from_otlp(request: Mapping[str, Any], *, where: str = "") -> list[AgentTrace]:
    """The agent traces of one OTLP/JSON ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``).

    Raises:
        DatasetError: a value of the wrong shape (naming its path in the request) or a span no
            convention can read (naming the trace and span id).
    """
    return agent_traces_from_spans(decode_export(request), where=where)


def detect_span_format(path: str | Path) -> str | None:
    """The span format of a file (a key of :data:`SPAN_FORMATS`), or ``None`` when it holds no
    spans ragmeter knows (a dataset, a message log)."""
    from ragmeter.io.spans import detect

    return detect.span_format(Path(path))


def read_span_file(path: str | Path, fmt: str | None = None) -> list[AgentTrace]:
    """Every agent trace in a span file; ``fmt`` (a key of :data:`SPAN_FORMATS`) forces the format,
    else it is detected from the content.

    Raises:
        DatasetError: naming the file, and the trace and span id of a malformed span.
    """
    from ragmeter.io.spans import detect

    p = Path(path)
    if fmt is None:
        fmt = detect.span_format(p)
        if fmt is None:
            raise DatasetError(f"{p}: no spans of a known format (OTLP, Phoenix, OpenAI Agents SDK, "
                               "LangSmith, MLflow, Langfuse)")
    if fmt not in SPAN_FORMATS:
        raise DatasetError(f"unknown span format {fmt!r}; one of {', '.join(SPAN_FORMATS)}")
    return detect.read(p, fmt)


def span_rows(traces: Iterable[AgentTrace], source: str = "") -> list[dict[str, Any]]:
    """Dataset rows of agent traces (``id``, ``question``, ``answer``, ``contexts``, ``trace``)."""
    return [sample_row(t, source) for t in traces]


def traces_from_tree(groups: Iterable[tuple[str, list[TraceSpan], dict[str, Any]]]) -> list[AgentTrace]:
    """Traces already read as spans by a format reader: ``(trace id, spans, extra fields)``."""
    return [build_trace(tid, spans, **extra) for tid, spans, extra in groups]
