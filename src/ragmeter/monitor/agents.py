"""Agent traces in production: the traces arriving at the OTLP receiver (``POST /v1/traces``) that
an agent wrote (tool calls, agents, handoffs) are kept whole beside their call, counted in the
aggregates, and can be scored by ``ragmeter monitor evaluate``.

A trace's call (:mod:`ragmeter.monitor.spans`) carries the trace's figures in its metadata under
:data:`FIGURES_KEY` (``tool_calls``, ``tool_errors``, ``steps``, ``spans``, ``agents``,
``cost_usd``); the trace itself (:class:`~ragmeter.core.schema.AgentTrace`, its spans with their
inputs, outputs, tool arguments and results, cleaned by the receiver's privacy options) is stored
in the store's key-value table (namespace :data:`KV_TRACES`, key = the call's id), in the same
transaction as the call. ``monitor prune`` deletes both.

The aggregates (:func:`agent_figures`, added to every window and bucket of ``monitor stats``):
``traces`` (agent traces), ``tool_calls``, ``tool_errors`` (calls whose span ended in an error or
whose result says it failed), ``tool_error_rate`` = tool_errors / tool_calls, ``steps`` (LLM calls)
and ``steps_per_trace``, ``tool_calls_per_trace``, ``cost_per_trace_usd`` (mean over the traces
with a cost: the sum of their LLM spans' costs, else the call's cost).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ragmeter.core.schema import AgentTrace
from ragmeter.monitor.calls import KV_AGENT_TRACES, insert_call_rows

#: the key of a call's metadata that holds its agent trace's figures
FIGURES_KEY = "agent_trace"
#: the key-value namespace of the stored agent traces (key: the call's id)
KV_TRACES = KV_AGENT_TRACES
#: span fields kept as they are (ids, kinds, names); every other text is cleaned by the privacy options
_STRUCTURAL = {"span_id", "parent_id", "kind", "name", "agent", "to_agent", "status", "model", "tool_name",
               "trace_id", "id", "start_ms", "latency_ms", "input_tokens", "output_tokens", "cost_usd",
               "turn", "step_count", "type", "role"}


def is_agent_trace(trace: AgentTrace) -> bool:
    """Whether an agent wrote ``trace``: it has a tool, agent or handoff span, or its LLM calls
    asked for tools (a plain RAG pipeline's trace, retriever then LLM, is not one)."""
    return bool(trace.tool_calls) or any(sp.kind in ("tool", "agent", "handoff") for sp in trace.spans)


def figures(trace: AgentTrace) -> dict[str, Any]:
    """What the aggregates count of one agent trace."""
    steps = trace.step_count if trace.step_count is not None else sum(1 for sp in trace.spans if sp.kind == "llm")
    cost = getattr(trace, "cost_usd", None)
    return {"tool_calls": len(trace.tool_calls),
            "tool_errors": sum(1 for c in trace.tool_calls if c.error),
            "steps": int(steps), "spans": len(trace.spans),
            "agents": sorted({sp.agent for sp in trace.spans if sp.agent}),
            "cost_usd": float(cost) if isinstance(cost, int | float) else None}


def traces_of(spans: Sequence[Any]) -> dict[str, AgentTrace | str]:
    """``{trace id: AgentTrace}`` of the complete traces among ``spans`` (OTLP ``SpanRecord``) that
    an agent wrote (:func:`is_agent_trace`), read by :func:`ragmeter.io.spans.agent_traces_from_spans`;
    for a trace whose spans no convention can read as an agent's (a tool span without a tool
    name ...), the reader's message naming the trace and the span instead. Its call is stored all
    the same (a root refused for that would leave its stored children waiting for ever), with
    that message in its metadata (``agent_trace_error``): kept, never dropped in silence."""
    from ragmeter.core.errors import DatasetError
    from ragmeter.io.spans import agent_traces_from_spans

    groups: dict[str, list[Any]] = {}
    for sp in spans:
        groups.setdefault(sp.trace_id, []).append(sp)
    out: dict[str, AgentTrace | str] = {}
    for tid, group in groups.items():
        try:
            got = agent_traces_from_spans(group)
        except DatasetError as exc:
            out[tid] = str(exc)[:500]
            continue
        out.update((t.trace_id, t) for t in got if t.trace_id and is_agent_trace(t))
    return out


def attach(call_rows: list[dict[str, Any]], traces: Mapping[str, AgentTrace | str], privacy: Any) -> list[dict[str, Any]]:
    """Add each agent trace's figures to its call's metadata (rows of
    :func:`ragmeter.monitor.calls.normalise_call`, ``call_id`` ``otel:TRACE``) and return the
    key-value rows that keep the traces (texts cleaned by ``privacy``)."""
    from ragmeter.store.models import utcnow

    kv: list[dict[str, Any]] = []
    now = utcnow()
    for row in call_rows:
        cid = row.get("call_id") or ""
        trace = traces.get(cid.removeprefix("otel:"))
        if trace is None:
            continue
        if isinstance(trace, str):  # not readable as an agent's trace: the call says why
            row["meta"] = {**(row.get("meta") or {}), "agent_trace_error": trace}
            continue
        row["meta"] = {**(row.get("meta") or {}), FIGURES_KEY: figures(trace)}
        dump = _clean(trace.model_dump(mode="json", exclude_none=True), privacy)
        kv.append({"namespace": KV_TRACES, "key": cid, "value": {"trace": dump, "ts": row["ts"].isoformat()},
                   "created_at": now})
    return kv


def _clean(value: Any, privacy: Any, key: str = "") -> Any:
    if isinstance(value, str):
        return value if key in _STRUCTURAL else privacy.clean(value)
    if isinstance(value, Mapping):
        return {k: _clean(v, privacy, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v, privacy, key) for v in value]
    return value


def insert_trace_rows(session: Any, rows: list[dict[str, Any]]) -> None:
    """Store the traces of :func:`attach` inside the caller's transaction; a trace already stored
    (a re-sent request) is kept as it is."""
    if not rows:
        return
    from ragmeter.store.models import KeyValueRow

    table = KeyValueRow.__table__
    dialect = session.get_bind().dialect.name
    if dialect in ("sqlite", "postgresql"):
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        else:
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        session.execute(dialect_insert(table).on_conflict_do_nothing(index_elements=["namespace", "key"]), rows)
        return
    from sqlalchemy import select

    seen = set(session.scalars(select(KeyValueRow.key).where(KeyValueRow.namespace == KV_TRACES,
                                                             KeyValueRow.key.in_([r["key"] for r in rows]))))
    fresh = [r for r in rows if r["key"] not in seen]
    if fresh:
        session.execute(table.insert(), fresh)


def insert_calls(store: Any, call_rows: list[dict[str, Any]], trace_rows: list[dict[str, Any]]) -> None:
    """Store calls and the agent traces of :func:`attach` in one transaction (``monitor import``)."""
    with store.session() as s, s.begin():
        insert_call_rows(s, call_rows)
        insert_trace_rows(s, trace_rows)


def read_traces(store: Any, call_ids: Iterable[str]) -> dict[str, AgentTrace]:
    """The stored agent traces of these calls, ``{call id: AgentTrace}`` (calls without one left out)."""
    got = store.kv_get_many(KV_TRACES, [c for c in call_ids if c])
    return {cid: AgentTrace.model_validate(rec["trace"]) for cid, rec in got.items()
            if isinstance(rec, Mapping) and isinstance(rec.get("trace"), Mapping)}


def agent_figures(metas: Sequence[Any], costs: Sequence[Any]) -> dict[str, Any]:
    """The agent-trace aggregates of a window's calls (their ``meta`` and ``cost_usd`` columns)."""
    traces = tool_calls = tool_errors = steps = 0
    trace_costs: list[float] = []
    for meta, call_cost in zip(metas, costs, strict=True):
        fig = meta.get(FIGURES_KEY) if isinstance(meta, Mapping) else None
        if not isinstance(fig, Mapping):
            continue
        traces += 1
        tool_calls += int(fig.get("tool_calls") or 0)
        tool_errors += int(fig.get("tool_errors") or 0)
        steps += int(fig.get("steps") or 0)
        cost = fig.get("cost_usd") if fig.get("cost_usd") is not None else call_cost
        if cost is not None:
            trace_costs.append(float(cost))
    return {"traces": traces, "tool_calls": tool_calls, "tool_errors": tool_errors,
            "tool_error_rate": (tool_errors / tool_calls) if tool_calls else None,
            "steps": steps, "steps_per_trace": (steps / traces) if traces else None,
            "tool_calls_per_trace": (tool_calls / traces) if traces else None,
            "cost_per_trace_usd": (sum(trace_costs) / len(trace_costs)) if trace_costs else None}
