"""A trace written by hand as spans (ragmeter's JSONL ``trace`` with a ``spans`` list) gets the
fields its spans give, as a span file's trace does (:func:`ragmeter.io.spans.tree.build_trace`):
tool calls, trajectory, steps, latency, question and answer, tokens and cost. A field the trace
states wins over the one its spans give."""

from __future__ import annotations

from ragmeter.core.schema import AgentTrace
from ragmeter.io.spans.tree import build_trace


def with_span_fields(trace: AgentTrace) -> AgentTrace:
    """``trace`` with what its fields do not say taken from its spans (unchanged without spans)."""
    if not trace.spans:
        return trace
    given = {k: getattr(trace, k) for k in trace.model_fields_set} | dict(trace.model_extra or {})
    built = build_trace(trace.trace_id or "", trace.spans).model_dump(exclude_none=True)
    if not trace.trace_id:
        built.pop("trace_id", None)
    return AgentTrace.model_validate({**built, **given})
