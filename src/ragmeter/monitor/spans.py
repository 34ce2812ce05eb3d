"""OpenTelemetry spans kept in the store until their trace is complete.

An exporter sends a trace's spans as they end, children first, often in several requests. The
OTLP receiver (``POST /v1/traces``) stores every span of a request in ``otel_spans`` in the same
transaction that answers it, then turns each trace whose root span is now stored into one call,
assembled from the stored rows (:func:`ragmeter.monitor.otel.calls_from_spans`), and deletes that
trace's rows. So a span acknowledged with 200 survives a restart or a ``kill -9`` of the server,
and a request that fails (a bad root) changes nothing: spans stored before it stay stored.

A trace may hold at most :data:`MAX_PENDING_SPANS` spans while it waits for its root (environment
``RAGMETER_OTLP_MAX_PENDING_SPANS``); a request that would exceed it is refused as a whole
(:class:`PendingLimitError`, HTTP 413). Spans whose root never comes are deleted by
``ragmeter monitor prune`` with the calls of the same age.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.monitor import agents
from ragmeter.monitor.calls import Privacy, insert_call_rows, normalise_call
from ragmeter.monitor.otel import calls_from_spans, check_span
from ragmeter.monitor.otlp import SpanRecord

MAX_PENDING_SPANS = int(os.environ.get("RAGMETER_OTLP_MAX_PENDING_SPANS", "1000") or 1000)
_CHUNK = 500


class PendingLimitError(DatasetError):
    """A trace would hold more spans waiting for its root than allowed."""


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


def _insert_spans(session: Any, rows: list[dict[str, Any]]) -> None:
    """Insert span rows; a span already stored (a re-sent request) is kept as it is."""
    from ragmeter.store.models import OtelSpanRow

    table = OtelSpanRow.__table__
    dialect = session.get_bind().dialect.name
    if dialect in ("sqlite", "postgresql"):
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        else:
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        stmt = dialect_insert(table).on_conflict_do_nothing(index_elements=["trace_id", "span_id"])
        for i in range(0, len(rows), 5000):
            session.execute(stmt, rows[i:i + 5000])
        return
    from sqlalchemy import select, tuple_

    keys = [(r["trace_id"], r["span_id"]) for r in rows]
    seen = set(session.execute(select(OtelSpanRow.trace_id, OtelSpanRow.span_id)
                               .where(tuple_(OtelSpanRow.trace_id, OtelSpanRow.span_id).in_(keys))).all())
    fresh = [r for r in rows if (r["trace_id"], r["span_id"]) not in seen]
    if fresh:
        session.execute(table.insert(), fresh)


def receive_spans(store: Any, spans: Sequence[SpanRecord], *, privacy: Privacy | None = None,
                  source: str = "otlp", max_pending: int | None = None) -> dict[str, int]:
    """Store ``spans`` and turn every trace that now has its root span into a call, in one
    transaction (all or nothing).

    Returns ``{"spans", "calls", "pending_traces", "agent_traces"}``: spans received, calls stored,
    traces of this request still waiting for their root, agent traces among the calls
    (:mod:`ragmeter.monitor.agents`).

    Raises:
        DatasetError: a span the call would need cannot be used (nothing is stored).
        PendingLimitError: a trace would wait with more than ``max_pending`` spans (nothing is stored).
    """
    from sqlalchemy import delete, func, select, text

    from ragmeter.store.models import OtelSpanRow, utcnow

    limit = MAX_PENDING_SPANS if max_pending is None else max_pending
    for sp in spans:
        check_span(sp)
    now = utcnow()
    rows = list({(sp.trace_id, sp.span_id): {"trace_id": sp.trace_id, "span_id": sp.span_id,
                                             "received_at": now, "data": sp.to_data()}
                 for sp in spans}.values())
    traces = sorted({sp.trace_id for sp in spans})
    if not traces:
        return {"spans": 0, "calls": 0, "pending_traces": 0, "agent_traces": 0}
    with store.session() as s, s.begin():
        if s.get_bind().dialect.name == "postgresql":  # one writer per trace at a time
            for tid in traces:
                s.execute(text("SELECT pg_advisory_xact_lock(hashtext(:t))"), {"t": f"otel:{tid}"})
        # the first statement writes: on SQLite it takes the write lock, so the reads below see
        # every span another request stored before this one
        _insert_spans(s, rows)
        # a root completes its trace in the request that brings it (its spans are then deleted),
        # so only the traces with a root in this request can be complete
        complete = sorted({sp.trace_id for sp in spans if not sp.parent_id})
        waiting = sorted(set(traces) - set(complete))
        for chunk in _chunks(waiting):
            q = select(OtelSpanRow.trace_id, func.count()).where(OtelSpanRow.trace_id.in_(chunk)) \
                .group_by(OtelSpanRow.trace_id)
            for tid, n in s.execute(q):
                if n > limit:
                    raise PendingLimitError(f"trace {tid} would hold {n} spans waiting for its root span; "
                                            f"at most {limit} (send the root span)")
        stored: list[SpanRecord] = []
        for chunk in _chunks(complete):
            q = select(OtelSpanRow.trace_id, OtelSpanRow.span_id, OtelSpanRow.data) \
                .where(OtelSpanRow.trace_id.in_(chunk))
            stored.extend(SpanRecord.from_data(tid, sid, data) for tid, sid, data in s.execute(q))
        calls, _ = calls_from_spans(stored)
        call_rows = [normalise_call(c, where=f"trace {c['call_id'].removeprefix('otel:')}",
                                    privacy=privacy, source=source) for c in calls]
        # a trace an agent wrote is also kept whole, its figures on its call (monitor/agents.py)
        trace_rows = agents.attach(call_rows, agents.traces_of(stored), privacy or Privacy())
        insert_call_rows(s, call_rows)
        agents.insert_trace_rows(s, trace_rows)
        for chunk in _chunks(complete):
            s.execute(delete(OtelSpanRow).where(OtelSpanRow.trace_id.in_(chunk)))
    return {"spans": len(rows), "calls": len(call_rows), "pending_traces": len(traces) - len(complete),
            "agent_traces": len(trace_rows)}


def pending_spans(store: Any) -> int:
    """Spans stored by the OTLP receiver that wait for their trace's root span."""
    from sqlalchemy import func, select

    from ragmeter.store.models import OtelSpanRow

    with store.session() as s:
        return int(s.scalar(select(func.count()).select_from(OtelSpanRow)) or 0)
