"""A trace written by hand as spans (ragmeter's JSONL ``trace`` with a ``spans`` list) gets the
fields its spans give, as a span file's trace does (:func:`ragmeter.io.spans.tree.build_trace`):
tool calls, trajectory, steps, latency, question and answer, tokens and cost. A field the trace
states wins over the one its spans give."""

from __future__ import annotations

from pydantic import ValidationError

from ragmeter.core.schema import AgentTrace
from ragmeter.io.spans.tree import build_trace


def with_span_fields(trace: AgentTrace) -> AgentTrace:
    """``trace`` with what its fields do not say taken from its spans (unchanged without spans)."""
    if not trace.spans:
        return trace
    given = {k: getattr(trace, k) for k in trace.model_fields_set} | dict(trace.model_extra or {})
    try:
        built = build_trace(trace.trace_id or "", trace.spans).model_dump(exclude_none=True)
    except ValidationError as exc:  # a tool span without a tool name makes a call without a name
        e = exc.errors()[0]
        raise ValueError(f"spans: {'.'.join(map(str, e['loc']))}: {e['msg']} (a tool span needs its tool_name)"
                         if e["loc"][-1:] == ("name",) else f"spans: {'.'.join(map(str, e['loc']))}: {e['msg']}") from None
    if not trace.trace_id:
        built.pop("trace_id", None)
    return AgentTrace.model_validate({**built, **given})
