"""A trace's spans (:class:`~ragmeter.core.schema.TraceSpan`, in start order) made into an
:class:`~ragmeter.core.schema.AgentTrace` whose fields every agent metric reads.

- ``tool_calls``: the tool spans in start order (name, arguments, result, error, latency); a trace
  without tool spans (a plain SDK loop traced at the LLM client) takes its calls from the LLM
  spans' messages: the assistant's ``tool_calls`` in each LLM output, the results from the ``tool``
  messages of later inputs. Each call's ``turn`` is the index of the LLM call that issued it (calls
  of one turn ran in parallel), so both ways give the same calls.
- ``trajectory``: the tool names in order, with ``handoff:AGENT`` where control passed to another
  agent; ``step_count``: the number of LLM calls; ``latency_ms``: the root span's duration.
- ``input_text``: the first user message the first LLM call received (else the root's input);
  ``final_text``: the last LLM call's answer when it calls no tool (else the root's output text);
  ``final_output``: that text when it is a JSON object.
- ``input_tokens``, ``output_tokens``, ``cost_usd``: sums over the LLM spans that record them.

A trace cut short (a span never ended, a last LLM call that asked for a tool and got no answer)
is kept as it is: what is missing stays ``None`` and the metrics that need it give no value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ragmeter.core.schema import AgentTrace, TraceSpan
from ragmeter.io.traces import _error_of, _json_object, _result_value, _text


def _content_text(value: Any, role: str = "assistant") -> str | None:
    """The text of a span's input (``role="user"``) or output: text as it is, the last message of
    that role in a message list, or a text field of an object."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        for m in reversed([m for m in value if isinstance(m, Mapping)]):
            if m.get("role", m.get("type")) in (role, None, "human" if role == "user" else "ai") \
                    and isinstance(m.get("content"), str | list):
                return _text(m["content"])
        return None
    if isinstance(value, Mapping):
        keys = ("input", "question", "query", "prompt") if role == "user" else \
            ("output", "final_output", "answer", "content", "text", "result")
        for k in keys:
            if isinstance(value.get(k), str):
                return value[k]
        for k in ("messages", "input", "output", "outputs"):
            if isinstance(value.get(k), list | Mapping):
                return _content_text(value[k], role)
    return None


def _llm_turns(spans: list[TraceSpan]) -> list[TraceSpan]:
    return [s for s in spans if s.kind == "llm"]


def _turn_of(span: TraceSpan, llms: list[TraceSpan]) -> int | None:
    """The index of the last LLM call that started before ``span``."""
    start = span.start_ms if span.start_ms is not None else float("inf")
    before = [i for i, s in enumerate(llms) if (s.start_ms if s.start_ms is not None else 0.0) <= start]
    return before[-1] if before else None


def _requested(llms: list[TraceSpan]) -> list[dict[str, Any]]:
    """The tool calls the LLM spans asked for (OpenAI shape), in order."""
    return [tc for s in llms for m in s.output or [] if isinstance(m, Mapping)
            for tc in m.get("tool_calls") or [] if isinstance(tc, Mapping)]


def _calls_from_tool_spans(spans: list[TraceSpan], llms: list[TraceSpan]) -> list[dict[str, Any]]:
    requested = _requested(llms)
    used: set[int] = set()

    def request_for(call_id: Any, name: str | None) -> dict[str, Any] | None:
        """The LLM's request a tool span answered: by call id, else the first unanswered of its name."""
        for i, tc in enumerate(requested):
            if i not in used and call_id and tc.get("id") == call_id:
                used.add(i)
                return tc
        for i, tc in enumerate(requested):
            if i not in used and (tc.get("function") or {}).get("name") == name:
                used.add(i)
                return tc
        return None

    calls = []
    for s in spans:
        if s.kind != "tool":
            continue
        call_id = getattr(s, "tool_call_id", None)
        req = request_for(call_id, s.tool_name)
        args, raw = s.tool_arguments, getattr(s, "arguments_raw", None)
        if args is None and req is not None:  # the span recorded its input as text (LangChain: "Paris")
            from ragmeter.io.spans.messages import arguments_of

            args = arguments_of((req.get("function") or {}).get("arguments"))
            raw = None if args is not None else raw
            if args is not None:  # the span's own row (--per-span) then holds the call's arguments too
                s.tool_arguments = args
        call: dict[str, Any] = {"name": s.tool_name, "arguments": args or {}, "result": s.tool_result,
                                "latency_ms": s.latency_ms, "id": call_id or (req or {}).get("id") or s.span_id,
                                "turn": _turn_of(s, llms), "span_id": s.span_id}
        if raw is not None:
            call["arguments_raw"] = raw
        if s.status == "error" or getattr(s, "tool_error", None):
            call["error"] = s.error or getattr(s, "tool_error", None) or "error"
        elif (err := _error_of(_result_value(s.tool_result))) is not None:
            call["error"] = err
        calls.append({k: v for k, v in call.items() if v is not None})
    return calls


def _calls_from_messages(llms: list[TraceSpan]) -> list[dict[str, Any]]:
    from ragmeter.io.traces import _tool_call

    calls: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for turn, s in enumerate(llms):
        for m in s.output or []:
            if isinstance(m, Mapping) and m.get("role") == "assistant":
                for tc in m.get("tool_calls") or []:
                    call = _tool_call(tc, len(calls), turn)
                    if call.get("id") and call["id"] in by_id:
                        continue
                    call["span_id"] = s.span_id
                    calls.append(call)
                    if call.get("id"):
                        by_id[call["id"]] = call
        for m in s.input or []:  # calls whose LLM output was not recorded, results of earlier calls
            if not isinstance(m, Mapping):
                continue
            if m.get("role") == "assistant":
                for tc in m.get("tool_calls") or []:
                    tid = tc.get("id") if isinstance(tc, Mapping) else None
                    if tid and tid not in by_id:
                        call = _tool_call(tc, len(calls), max(turn - 1, 0))
                        calls.append(call)
                        by_id[tid] = call
            elif m.get("role") == "tool":
                call = by_id.get(str(m.get("tool_call_id")))
                if call is None:
                    call = next((c for c in calls if "result" not in c
                                 and (m.get("name") is None or c["name"] == m.get("name"))), None)
                if call is not None and "result" not in call:
                    call["result"] = _result_value(m.get("content"))
                    err = _error_of(call["result"], m.get("is_error"), m.get("status"))
                    if err is not None:
                        call["error"] = err
    return calls


def _first_user(llms: list[TraceSpan]) -> str | None:
    for s in llms:
        for m in s.input or []:
            if isinstance(m, Mapping) and m.get("role") == "user":
                t = _text(m.get("content"))
                if t:
                    return t
    return None


def _answer(llms: list[TraceSpan]) -> tuple[str | None, bool]:
    """The last LLM call's answer, and whether that call asked for a tool instead."""
    if not llms:
        return None, False
    out = [m for m in llms[-1].output or [] if isinstance(m, Mapping)]
    if any(m.get("tool_calls") for m in out):
        return None, True
    texts = [_text(m.get("content")) for m in out if m.get("role") in ("assistant", None)]
    texts = [t for t in texts if t]
    return (texts[-1] if texts else None), False


def _roots(spans: list[TraceSpan]) -> list[TraceSpan]:
    ids = {s.span_id for s in spans}
    return [s for s in spans if not s.parent_id or s.parent_id not in ids]


def _agent_name(span: TraceSpan) -> str | None:
    return span.agent or (span.name.removeprefix("invoke_agent ").strip() or None if span.kind == "agent" else None)


def assign_agents(spans: list[TraceSpan]) -> None:
    """Each span without an ``agent`` gets the agent it ran under: the nearest enclosing agent span
    (or span naming its agent) that did work itself, an LLM call, a tool call, a retrieval or a
    hand-off. An agent span that only wraps other agents (a workflow's root) names no span."""
    by_id = {s.span_id: s for s in spans}

    def nearest(s: TraceSpan) -> TraceSpan | None:
        cur: TraceSpan | None = s
        seen: set[str] = set()
        while cur is not None and cur.span_id not in seen:
            seen.add(cur.span_id)
            if cur.kind == "agent" or cur.agent:
                return cur
            cur = by_id.get(cur.parent_id) if cur.parent_id else None
        return None

    near = {s.span_id: nearest(s) for s in spans}  # before any span is named
    owners = {a.span_id for s in spans if s.kind in ("llm", "tool", "retriever", "handoff")
              and (a := near[s.span_id]) is not None}
    for s in spans:
        a = near[s.span_id]
        if s.agent is None and a is not None and a.span_id in owners:
            s.agent = _agent_name(a)


def _once(spans: list[TraceSpan]) -> list[TraceSpan]:
    seen: dict[str, TraceSpan] = {}
    out = []
    for s in spans:
        first = seen.setdefault(s.span_id, s)
        if first is s:
            out.append(s)
        elif first != s:
            raise ValueError(f"span {s.span_id} ({s.name!r}) is recorded twice with different content "
                             "(two exports of one trace in one file?)")
    return out if len(out) < len(spans) else spans


def build_trace(trace_id: str, spans: list[TraceSpan], **extra: Any) -> AgentTrace:
    """The :class:`AgentTrace` of one trace's spans (start order, parents first).

    A span recorded twice alike (one export appended twice, an exporter's retry) counts once; twice
    with different content is a ValueError naming it."""
    spans = _once(spans)
    assign_agents(spans)
    llms = _llm_turns(spans)
    has_tools = any(s.kind == "tool" for s in spans)
    calls = _calls_from_tool_spans(spans, llms) if has_tools else _calls_from_messages(llms)
    trajectory: list[str] = []
    agent: str | None = None
    by_tool_span = {c.get("span_id"): c for c in calls}
    for s in spans:
        if s.kind == "handoff" and s.to_agent:
            trajectory.append(f"handoff:{s.to_agent}")
        elif s.kind == "tool" and s.span_id in by_tool_span:
            trajectory.append(s.tool_name or "")
        elif s.kind == "llm" and not has_tools:
            trajectory.extend(c["name"] for c in calls if c.get("span_id") == s.span_id)
        if s.kind == "agent" and s.agent:
            agent = agent or s.agent
    if not has_tools:  # calls recovered only from a later input have no span of their own
        named = sum(1 for c in calls if c.get("span_id"))
        if named < len(calls):
            trajectory = [c["name"] for c in calls]
    roots = _roots(spans)
    root = roots[0] if roots else None
    fields: dict[str, Any] = {"trace_id": trace_id, "spans": spans,
                              "tool_calls": [{k: v for k, v in c.items() if k != "span_id"} for c in calls],
                              "trajectory": trajectory}
    if llms:
        fields["step_count"] = len(llms)
    if root is not None and root.latency_ms is not None and len(roots) == 1:
        fields["latency_ms"] = root.latency_ms
    elif spans and all(s.latency_ms is not None and s.start_ms is not None for s in roots):
        fields["latency_ms"] = max(s.start_ms + s.latency_ms for s in roots)  # type: ignore[operator]
    question = _first_user(llms)
    if question is None and root is not None:
        question = _content_text(root.input, "user")
    answer, asked_tool = _answer(llms)
    if answer is None and root is not None and root.kind != "llm" and root.status != "unfinished":
        answer = _content_text(root.output)  # the agent returned after its last LLM call (or without one)
    if answer is None and not asked_tool:
        agents = [s for s in spans if s.kind == "agent" and s.output is not None]
        answer = _content_text(agents[-1].output) if agents else None
    if question is not None:
        fields["input_text"] = question
    if answer is not None:
        fields["final_text"] = answer
        obj = _json_object(answer)
        if obj is not None:
            fields["final_output"] = obj
    tin = [s.input_tokens for s in llms if s.input_tokens is not None]
    tout = [s.output_tokens for s in llms if s.output_tokens is not None]
    costs = [s.cost_usd for s in llms if s.cost_usd is not None]
    if tin:
        fields["input_tokens"] = sum(tin)
    if tout:
        fields["output_tokens"] = sum(tout)
    if costs:
        fields["cost_usd"] = sum(costs)
    if agent:
        fields["agent"] = agent
    if any(s.status == "unfinished" for s in spans) or (asked_tool and answer is None):
        fields["incomplete"] = True  # cut short: what is missing has no value
    fields.update({k: v for k, v in extra.items() if v is not None})
    return AgentTrace.model_validate(fields)


def contexts_of(trace: AgentTrace) -> list[dict[str, Any]] | None:
    """The documents of the trace's retriever spans, in order (``None`` when it has none)."""
    rs = [s for s in trace.spans if s.kind == "retriever"]
    if not rs:
        return None
    return [d.model_dump(exclude_none=True) for s in rs for d in s.documents or []]


def sample_row(trace: AgentTrace, source: str = "") -> dict[str, Any]:
    """A dataset row (``id``, ``question``, ``answer``, ``contexts``, ``trace``, metadata) for one
    trace, as :func:`ragmeter.io.readers.load` reads it."""
    row: dict[str, Any] = {"id": trace.trace_id or "trace", "trace": trace}
    if trace.input_text is not None:
        row["question"] = trace.input_text
    if trace.final_text is not None:
        row["answer"] = trace.final_text
    ctx = contexts_of(trace)
    if ctx is not None:
        row["contexts"] = ctx
    meta = {"trace_id": trace.trace_id, "span_format": source or None, "agent": getattr(trace, "agent", None),
            "session_id": getattr(trace, "session_id", None)}
    row["metadata"] = {k: v for k, v in meta.items() if v is not None}
    return row


def dumps_span(span: TraceSpan) -> str:  # a readable one-line form for error messages and debugging
    return json.dumps(span.model_dump(exclude_none=True), default=str)[:300]


def first_start_ms(spans: list[TraceSpan]) -> float | None:
    """The earliest absolute ``start_ms`` (epoch ms) of a trace's spans, read before
    :func:`finish_spans` makes them relative: the trace's ``started_ms`` (orders a session's traces)."""
    return min((s.start_ms for s in spans if s.start_ms is not None), default=None)


def finish_spans(spans: list[TraceSpan]) -> list[TraceSpan]:
    """Spans whose ``start_ms`` is absolute (epoch ms) made relative to the first start, in start
    order with parents before their children: what a format reader hands to :func:`build_trace`."""
    starts = [s.start_ms for s in spans if s.start_ms is not None]
    t0 = min(starts) if starts else 0.0
    ids = {s.span_id: s for s in spans}

    def depth(s: TraceSpan) -> int:
        d, seen, cur = 0, set(), s
        while cur.parent_id and cur.parent_id in ids and cur.span_id not in seen:
            seen.add(cur.span_id)
            cur = ids[cur.parent_id]
            d += 1
        return d

    for s in spans:
        if s.start_ms is not None:
            # to the microsecond, the precision of the ISO times these formats write: a difference of
            # two epoch-ms floats is off by ~0.2 µs (9.999755859375 for a span 10 ms after the root)
            s.start_ms = max(0.0, round(s.start_ms - t0, 3))
    return sorted(spans, key=lambda s: (s.start_ms if s.start_ms is not None else float("inf"), depth(s), s.span_id))


def iso_ns(value: Any, what: str) -> int | None:
    """An ISO 8601 time (or epoch seconds / ms / ns as a number) as epoch nanoseconds, exactly.

    An ISO time is counted in whole microseconds from the epoch (its precision), not through
    ``datetime.timestamp()``: a float of seconds since 1970 keeps ~0.2 µs, so a span's duration
    taken from two of them came out as 0.920166015625 ms instead of 0.92."""
    from datetime import UTC, datetime, timedelta

    from ragmeter.core.errors import DatasetError

    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, int) and value > 1e14:
            return value  # already nanoseconds
        v = float(value)
        return round(v if v > 1e14 else v * 1e6 if v > 1e11 else v * 1e9)
    try:
        dt = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise DatasetError(f"{what} must be an ISO 8601 time, got {str(value)[:40]!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


def iso_ms(value: Any, what: str) -> float | None:
    """An ISO 8601 time (or epoch seconds / ms / ns as a number) as epoch milliseconds."""
    ns = iso_ns(value, what)
    return None if ns is None else ns / 1e6


def timed(fields: dict[str, Any], start: Any, end: Any) -> dict[str, Any]:
    """``start_ms`` (absolute), ``latency_ms`` and the status of a span that never ended."""
    s, e = iso_ns(start, "the start time"), iso_ns(end, "the end time")
    fields["start_ms"] = None if s is None else s / 1e6
    if e is None:
        fields["status"] = "unfinished"
    elif s is not None and e >= s:
        fields["latency_ms"] = (e - s) / 1e6  # the difference of exact integers
    return fields
