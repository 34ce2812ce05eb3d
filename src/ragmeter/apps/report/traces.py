"""Agent traces in the report and the dashboard: each trace as a tree of its spans (kind, name,
agent, latency, tokens, cost, tool arguments and results, retrieved documents, LLM input and
output) with the scores of that span and their reasons. In a run scored per span
(``--per-span``, :mod:`ragmeter.run.spans`) a span's scores are those of its row; the trace's
own scores (and each agent's, in a multi-agent trace) sit on the tree's head. Reads only the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ragmeter.core.schema import AgentTrace, Sample, Score, TraceSpan
from ragmeter.run.spans import output_text
from ragmeter.store import Store

#: at most this many traces are drawn as trees in one report (the rest are listed)
MAX_TREES = 200
#: a span's input, output, arguments or result shown up to this many characters
MAX_TEXT = 4000
#: metadata keys of a per-span run's rows (ragmeter.run.spans, not imported: the report reads stored data)
_SPAN_ID, _SPAN_KIND, _AGENT, _TRACE_SAMPLE = "span_id", "span_kind", "agent", "trace_sample"


def _has_tree(s: Sample) -> bool:
    return s.trace is not None and bool(s.trace.spans)


def run_has_traces(store: Store, run_id: str) -> bool:
    """Whether a run's first sample is an agent trace with spans (read from that sample only)."""
    first = next(iter(store.iter_sample_rows(run_id, chunk=1)), None)
    trace = ((first[3] or {}).get("trace") or {}) if first is not None else {}
    return isinstance(trace, Mapping) and bool(trace.get("spans"))


def _score(sc: Score) -> dict[str, Any]:
    det = sc.details or {}
    out: dict[str, Any] = {"value": sc.value, "reason": sc.reason or None, "summary": det.get("summary")}
    why = det.get("reasoning") or det.get("reason")
    if isinstance(why, str):
        out["reasoning"] = why
    claims = det.get("claims")
    if isinstance(claims, list):
        out["verdicts"] = [f"{c.get('verdict', '?')}: {c.get('claim', '')}" for c in claims[:20] if isinstance(c, Mapping)]
    return out


def _text(value: Any) -> str | None:
    """A span's value as text for the page (JSON indented), cut to :data:`MAX_TEXT` characters."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"… ({len(text) - MAX_TEXT} more characters)"


def _node(sp: TraceSpan, scores: dict[str, dict[str, Any]]) -> dict[str, Any]:
    tokens = None
    if sp.input_tokens is not None or sp.output_tokens is not None:
        tokens = {"input": sp.input_tokens, "output": sp.output_tokens}
    return {"span_id": sp.span_id, "kind": sp.kind, "name": sp.name or sp.tool_name or sp.kind,
            "agent": sp.agent, "to_agent": sp.to_agent, "latency_ms": sp.latency_ms, "start_ms": sp.start_ms,
            "status": sp.status, "error": sp.error, "model": sp.model, "tokens": tokens, "cost_usd": sp.cost_usd,
            "tool_name": sp.tool_name, "tool_arguments": _text(sp.tool_arguments), "tool_result": _text(sp.tool_result),
            "query": sp.query,
            "documents": [{"id": d.id, "text": _text(d.text)} for d in sp.documents or []],
            "has_documents": sp.documents is not None,
            "input": _text(sp.input) if sp.kind != "tool" else None,
            # an LLM's answer as its text (the message list is in its input's format)
            "output": (_text(output_text(sp.output)) or _text(sp.output)) if sp.kind != "tool" else None,
            "scores": scores, "children": []}


def _tree(trace: AgentTrace, span_scores: Mapping[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The spans as nested nodes (roots first; children by start), each with its scores. A span
    whose parent is missing, or whose parents lead back to it (a cycle), is drawn as a root."""
    parent = {sp.span_id: sp.parent_id for sp in trace.spans}
    nodes = {sp.span_id: _node(sp, span_scores.get(sp.span_id, {})) for sp in trace.spans}
    order = sorted(range(len(trace.spans)), key=lambda i: (
        trace.spans[i].start_ms if trace.spans[i].start_ms is not None else float("inf"), i))

    def attached(sid: str) -> bool:
        seen, p = {sid}, parent.get(sid)
        while p in parent:
            if p in seen:
                return False
            seen.add(p)
            p = parent[p]
        return parent.get(sid) in parent

    roots: list[dict[str, Any]] = []
    for i in order:
        sid = trace.spans[i].span_id
        if nodes[sid].get("_placed"):
            continue  # a repeated span id: drawn once
        nodes[sid]["_placed"] = True
        if attached(sid):
            nodes[str(parent[sid])]["children"].append(nodes[sid])
        else:
            roots.append(nodes[sid])
    for n in nodes.values():
        n.pop("_placed", None)
    return roots


def _trace_entry(s: Sample, rows: list[Sample], table: Mapping[str, Mapping[str, Score]]) -> dict[str, Any]:
    def scores_of(sid: str) -> dict[str, dict[str, Any]]:
        return {k: _score(col[sid]) for k, col in table.items() if sid in col and col[sid].reason != "not scored"}

    assert s.trace is not None
    span_scores: dict[str, dict[str, dict[str, Any]]] = {}
    agents: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        kind = r.metadata.get(_SPAN_KIND)
        if kind == "agent" and r.metadata.get(_AGENT):
            agents[str(r.metadata[_AGENT])] = scores_of(r.id)
        elif r.metadata.get(_SPAN_ID) is not None:
            span_scores.setdefault(str(r.metadata[_SPAN_ID]), {}).update(scores_of(r.id))
    trace = s.trace
    calls = trace.tool_calls
    return {"id": s.id, "trace_id": trace.trace_id, "question": s.question, "answer": s.answer,
            "scores": scores_of(s.id), "agents": agents, "nodes": _tree(trace, span_scores),
            "n_spans": len(trace.spans), "n_tool_calls": len(calls),
            "n_tool_errors": sum(1 for c in calls if c.error), "latency_ms": trace.latency_ms}


def _group(samples: list[Sample]) -> list[tuple[Sample, list[Sample]]]:
    """Each sample with a trace tree, with the per-span rows of its trace (``trace_sample``)."""
    rows: dict[str, list[Sample]] = {}
    for s in samples:
        owner = s.metadata.get(_TRACE_SAMPLE)
        if owner is not None and owner != s.id:
            rows.setdefault(str(owner), []).append(s)
    return [(s, rows.get(s.id, [])) for s in samples if _has_tree(s) and s.metadata.get(_TRACE_SAMPLE, s.id) == s.id]


def traces_for(store: Store, run_id: str, *, limit: int = MAX_TREES) -> dict[str, Any] | None:
    """``{"trees": [...], "total": n, "index": [{"id", "trace_id", "n_spans", ...}]}`` or ``None``
    for a run whose samples carry no trace with spans."""
    if not run_has_traces(store, run_id):
        return None
    samples = store.run_samples(run_id)
    groups = _group(samples)
    if not groups:
        return None
    table = store.score_table(run_id)
    trees = [_trace_entry(s, rows, table) for s, rows in groups[:limit]]
    index = [{"id": s.id, "trace_id": s.trace.trace_id if s.trace else None,
              "n_spans": len(s.trace.spans) if s.trace else 0} for s, _ in groups]
    return {"trees": trees, "total": len(groups), "index": index}


def trace_view(store: Store, run_ref: str, sample_id: str) -> dict[str, Any]:
    """One trace of a run (the sample that holds it) as a tree.

    Raises:
        StoreError: no such run, or no sample with a trace of that id in it.
    """
    from ragmeter.core.errors import StoreError

    run = store.get_run(run_ref)
    samples = store.run_samples(run.id)
    got = [(s, rows) for s, rows in _group(samples) if s.id == sample_id]
    if not got:
        raise StoreError(f"run {run.id} has no agent trace {sample_id!r}")
    table = store.score_table(run.id)
    header = {"id": run.id, "name": run.name, "label": run.name or run.id, "status": run.status}
    return {"run": header, "tree": _trace_entry(got[0][0], got[0][1], table)}
