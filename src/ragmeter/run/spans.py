"""Scoring an agent trace per span (``ragmeter eval --per-span``): each sample's trace becomes rows
linked to it, each metric scores the rows of the kinds its spec names, and the run's intervals are
clustered by trace.

:func:`expand` turns a sample whose trace has spans (:class:`~ragmeter.core.schema.TraceSpan`) into:

- the trace row: the sample itself (its final answer, its whole trace), kind ``trace``;
- one row per agent when the trace holds several (spans grouped by ``agent``): that agent's tool
  calls, steps and last output, with the sample's expectations overridden by
  ``metadata.agents.<name>`` (``expected_tools``, ``expected_trajectory`` ...), kind ``agent``;
- one row per retriever span: its query (else the sample's question), its documents as the
  contexts, the sample's ``relevant`` chunks (qrels) and references, kind ``retriever``;
- one row per LLM span: its output text as the answer, the documents of every retriever span
  before it in the trace's tree order (depth first, siblings by start) as the contexts, kind ``llm``;
- one row per tool span: a trace of that one call (name, arguments, result, error), kind ``tool``.

A sample without spans stays one row, kind ``sample``, that every metric scores as it is.

Every row keeps ``trace_id``, ``span_id`` (not on trace rows), ``span_kind`` and ``agent`` in its
metadata, and the trace's sample id in ``trace_sample``. A metric scores the rows whose kind is
in its :attr:`~ragmeter.metrics.registry.MetricSpec.span_kinds` (retrieval metrics the retriever
spans, context metrics the LLM spans, agent metrics the trace and its agents ...): a row of another
kind is not scored by it at all (neither a value nor a missing one). A span without what a metric
needs (a retriever span that recorded no documents, an LLM span with no text output or nothing
retrieved before it) is "no value" with the missing field named.

The rows of one trace are not independent (one agent, one question, one run of the tools), so a
metric's run interval is the cluster-robust one over traces (CR1, as the turns of a conversation:
:mod:`ragmeter.conversations.scope`), and its summary carries ``n_clusters``, the traces with a value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragmeter.core.counts import count
from ragmeter.core.errors import ConfigError
from ragmeter.core.schema import AgentTrace, Chunk, Sample, ToolCall, TraceSpan
from ragmeter.io.readers import Dataset
from ragmeter.metrics.registry import MetricRequest

#: metadata keys every row of a per-span run carries
TRACE_ID, SPAN_ID, SPAN_KIND, AGENT, TRACE_SAMPLE = "trace_id", "span_id", "span_kind", "agent", "trace_sample"
#: the kind of the row of a sample without spans: every metric scores it
SAMPLE_ROW = "sample"


def expand(samples: Sequence[Sample]) -> list[Sample]:
    """Every sample followed by the rows of its trace (module docstring). A sample without a trace
    (or a trace without spans) is one trace row.

    Raises:
        ConfigError: the samples are conversations (their turns are scored per turn already).
    """
    out: list[Sample] = []
    for s in samples:
        if isinstance(s.metadata.get("conversation"), dict):
            raise ConfigError("--per-span scores agent traces; this dataset holds conversations, "
                              "which are scored per assistant turn without it")
        out.extend(_rows(s))
    return out


def expand_dataset(dataset: Dataset) -> Dataset:
    """``dataset`` with its samples :func:`expand` ed, each row at its sample's source line."""
    if is_span_run(dataset.samples):  # already expanded (a resumed run's stored rows)
        return dataset
    rows: list[Sample] = []
    lines: list[int] = []
    for i, s in enumerate(dataset.samples):
        got = expand([s])
        rows.extend(got)
        if i < len(dataset.lines):
            lines.extend([dataset.lines[i]] * len(got))
    return dataclasses.replace(dataset, samples=rows, lines=lines)


def is_span_run(samples: Sequence[Sample]) -> bool:
    """Whether ``samples`` are the rows of a per-span run (:func:`expand`: the first is a trace row)."""
    if not samples:
        return False
    meta = samples[0].metadata
    return meta.get(SPAN_KIND) in ("trace", SAMPLE_ROW) and TRACE_SAMPLE in meta and TRACE_ID in meta


class TraceClusters(dict[str, str]):
    """``{row id: its trace's sample id}``: the clusters of a paired comparison of two per-span
    runs; ``unit`` and ``members`` name them in the comparison's notes."""

    unit, members = "trace", "rows"


def trace_clusters(samples: Sequence[Sample]) -> TraceClusters | None:
    """The :class:`TraceClusters` of a per-span run's rows, else ``None``."""
    if not is_span_run(samples):
        return None
    return TraceClusters((s.id, str(s.metadata.get(TRACE_SAMPLE, s.id))) for s in samples)


def describe_rows(samples: Sequence[Sample]) -> str:
    """``"T traces, N span rows"`` (``"N samples"`` when the samples are not per-span rows)."""
    if not is_span_run(samples):
        return count(len(samples), "sample")
    kinds = [row_kind(s) for s in samples]
    n_traces, n_plain = kinds.count("trace"), kinds.count(SAMPLE_ROW)
    rows = len(samples) - n_traces - n_plain
    text = f"{n_traces} trace{'s' * (n_traces != 1)}, {rows} span row{'s' * (rows != 1)}"
    return text + (f", {n_plain} sample{'s' * (n_plain != 1)} without spans" if n_plain else "")


def row_kind(s: Sample) -> str | None:
    kind = s.metadata.get(SPAN_KIND)
    return kind if isinstance(kind, str) else None


def rows_for(kinds: Iterable[str], samples: Sequence[Sample]) -> list[Sample]:
    """The rows of ``kinds`` (a metric's ``span_kinds``) in a per-span run; every sample otherwise."""
    if not is_span_run(samples):
        return list(samples)
    want = {*kinds, SAMPLE_ROW}
    return [s for s in samples if row_kind(s) in want]


def restrict(columns: Mapping[str, tuple[Any, list[str | None]]], requests: Sequence[MetricRequest],
             samples: Sequence[Sample]) -> dict[str, tuple[Any, list[str | None]]]:
    """``{key: (values, reasons)}`` keeping, per metric, only the rows of its span kinds: what its
    summary is computed over."""
    kinds = np.array([row_kind(s) or "" for s in samples], dtype=object)
    by_key = {r.key: r.spec.span_kinds or () for r in requests}
    out = {}
    for key, (values, reasons) in columns.items():
        idx = np.flatnonzero(np.isin(kinds, [*by_key.get(key, ()), SAMPLE_ROW]))
        out[key] = (np.asarray(values, dtype=np.float64)[idx], [reasons[i] for i in idx.tolist()])
    return out


def cluster_intervals(summary: Mapping[str, Any], columns: Mapping[str, tuple[Any, list[str | None]]],
                      requests: Sequence[MetricRequest], samples: Sequence[Sample]) -> dict[str, dict[str, Any]]:
    """Per metric with values: ``n_clusters`` (the traces it has a value on) and, when a trace gives
    it more than one value, the cluster-robust interval over traces in place of the independent
    one (:func:`ragmeter.conversations.scope.cluster_ci`). A metric no row of whose kinds exists
    gets ``nothing_to_score`` (the run is then incomplete: :func:`ragmeter.run.runner.incomplete_reasons`)."""
    from ragmeter.conversations.scope import cluster_ci

    kinds = [row_kind(s) or "" for s in samples]
    clusters = [str(s.metadata.get(TRACE_SAMPLE, s.id)) for s in samples]
    out: dict[str, dict[str, Any]] = {}
    for r in requests:
        key = r.key
        want = {*(r.spec.span_kinds or ()), SAMPLE_ROW}
        pos = [i for i, k in enumerate(kinds) if k in want]
        if key in summary and not pos:
            named = ", ".join(r.spec.span_kinds or ()) or "none"
            out[key] = {"nothing_to_score": f"no row of the kinds it scores per span ({named}) in any trace"}
            continue
        if key not in columns or key not in summary or not summary[key].n:
            continue
        vals = np.asarray(columns[key][0], dtype=np.float64)[pos]
        labels = [clusters[i] for i in pos]
        with_value = [c for c, v in zip(labels, vals.tolist(), strict=True) if v == v]
        n_traces = len(set(with_value))
        if n_traces == len(with_value):  # one value per trace: the independent interval is right
            out[key] = {"n_clusters": n_traces}
            continue
        ci = cluster_ci(vals, labels, bounds=r.spec.range)
        out[key] = ci if ci is not None else {"n_clusters": n_traces}
    return out


# ----------------------------------------------------------------------------------------------
# the rows of one trace

def _rows(s: Sample) -> list[Sample]:
    trace = s.trace
    tid = (trace.trace_id if trace is not None and trace.trace_id else None) or s.id
    link = {TRACE_ID: tid, TRACE_SAMPLE: s.id}
    if trace is None or not trace.spans:  # nothing to split: every metric scores it as it is
        return [s.model_copy(update={"metadata": {**s.metadata, **link, SPAN_KIND: SAMPLE_ROW}})]
    head = s.model_copy(update={"metadata": {**s.metadata, **link, SPAN_KIND: "trace"}})
    ordered = tree_order(trace.spans)
    rows = [head]
    used = {s.id}
    agents = list(dict.fromkeys(sp.agent for sp in ordered if sp.agent))
    if len(agents) > 1:
        for name in agents:
            rows.append(_agent_row(s, trace, [sp for sp in ordered if sp.agent == name], name, link, used))
    seen_docs: list[Chunk] = []
    retrieved = False
    for sp in ordered:
        if sp.kind == "retriever":
            rows.append(_span_row(s, sp, link, used, question=sp.query or s.question,
                                  contexts=list(sp.documents) if sp.documents is not None else None))
            if sp.documents is not None:
                retrieved = True
                seen_docs.extend(d for d in sp.documents if d not in seen_docs)
        elif sp.kind == "llm":
            rows.append(_span_row(s, sp, link, used, question=_last_user_text(sp.input) or s.question,
                                  answer=output_text(sp.output), contexts=list(seen_docs) if retrieved else None))
        elif sp.kind == "tool":
            call = _call(sp)
            rows.append(_span_row(s, sp, link, used, question=s.question,
                                  trace=AgentTrace(tool_calls=[call], trajectory=[call.name], step_count=1,
                                                   trace_id=tid, spans=[sp], latency_ms=sp.latency_ms)))
    return rows


def tree_order(spans: Sequence[TraceSpan]) -> list[TraceSpan]:
    """``spans`` depth first from the roots, siblings by start (then as listed); a span whose
    parent is not in the trace is a root."""
    ids = {sp.span_id for sp in spans}
    children: dict[str | None, list[tuple[float, int, TraceSpan]]] = {}
    for i, sp in enumerate(spans):
        parent = sp.parent_id if sp.parent_id in ids and sp.parent_id != sp.span_id else None
        start = sp.start_ms if sp.start_ms is not None else float("inf")
        children.setdefault(parent, []).append((start, i, sp))
    out: list[TraceSpan] = []
    seen: set[int] = set()
    stack = sorted(children.get(None, []), key=lambda t: (t[0], t[1]), reverse=True)
    while stack:
        _, i, sp = stack.pop()
        if i in seen:  # a cycle of parent ids
            continue
        seen.add(i)
        out.append(sp)
        stack.extend(sorted(children.get(sp.span_id, []), key=lambda t: (t[0], t[1]), reverse=True))
    out.extend(sp for i, sp in enumerate(spans) if i not in seen)  # spans only reachable through a cycle
    return out


def _row_id(s: Sample, part: str, used: set[str]) -> str:
    base = f"{s.id}#{part}"
    rid, n = base, 2
    while rid in used:
        rid, n = f"{base}~{n}", n + 1
    used.add(rid)
    return rid


def _span_row(s: Sample, sp: TraceSpan, link: dict[str, str], used: set[str], **fields: Any) -> Sample:
    meta = {**s.metadata, **link, SPAN_ID: sp.span_id, SPAN_KIND: sp.kind}
    if sp.agent:
        meta[AGENT] = sp.agent
        meta.update(_agent_expectations(s, sp.agent))
    if sp.name:
        meta["span_name"] = sp.name
    return Sample(id=_row_id(s, sp.span_id, used), references=list(s.references),
                  relevant=s.relevant, metadata=meta, **fields)


def _agent_expectations(s: Sample, agent: str) -> dict[str, Any]:
    per_agent = s.metadata.get("agents")
    got = per_agent.get(agent) if isinstance(per_agent, Mapping) else None
    return dict(got) if isinstance(got, Mapping) else {}


def _agent_row(s: Sample, trace: AgentTrace, spans: list[TraceSpan], name: str, link: dict[str, str],
               used: set[str]) -> Sample:
    calls = [_call(sp) for sp in spans if sp.kind == "tool"]
    outputs = [t for sp in spans if sp.kind == "llm" and (t := output_text(sp.output))]
    sub = AgentTrace(tool_calls=calls, trajectory=[c.name for c in calls], spans=spans,
                     step_count=sum(1 for sp in spans if sp.kind == "llm") or None,
                     final_text=outputs[-1] if outputs else None, trace_id=trace.trace_id)
    meta = {**s.metadata, **link, SPAN_KIND: "agent", AGENT: name, **_agent_expectations(s, name)}
    return Sample(id=_row_id(s, f"agent:{name}", used), question=s.question,
                  answer=outputs[-1] if outputs else None, references=list(s.references),
                  metadata=meta, trace=sub)


def _call(sp: TraceSpan) -> ToolCall:
    # arguments that were not a JSON object stay the span's text (arguments_raw), so they match no
    # expected arguments, as on the whole trace, instead of reading as a call without arguments
    raw = getattr(sp, "arguments_raw", None) if sp.tool_arguments is None else None
    return ToolCall(name=sp.tool_name or sp.name or "tool", arguments=dict(sp.tool_arguments or {}),
                    result=sp.tool_result, latency_ms=sp.latency_ms, id=sp.span_id,
                    error=sp.error or ("error" if sp.status == "error" else None),
                    **({"arguments_raw": raw} if raw is not None else {}))


def output_text(value: Any) -> str | None:
    """The text an LLM span produced (``None`` when it only called tools): a string as it is, the
    assistant message(s) of a message list (OpenAI ``content``, OTel GenAI ``parts`` of type
    ``text``), or an object's ``content`` / ``text``."""
    texts = _texts(value, roles=("assistant", "model", "ai", None))
    return "\n".join(texts) if texts else None


def _last_user_text(value: Any) -> str | None:
    if not isinstance(value, list):
        return None
    users = [m for m in value if isinstance(m, Mapping) and m.get("role") in ("user", "human")]
    texts = _texts(users[-1], roles=("user", "human")) if users else []
    return "\n".join(texts) if texts else None


def _texts(value: Any, roles: tuple[str | None, ...]) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        msgs = [m for m in value if not isinstance(m, Mapping) or m.get("role") in roles]
        return [t for m in msgs for t in _texts(m, roles)]
    if not isinstance(value, Mapping):
        return []
    for key in ("content", "text"):
        v = value.get(key)
        if isinstance(v, str):
            return [v] if v.strip() else []
        if isinstance(v, list):
            return [t for part in v for t in _part_text(part)]
    parts = value.get("parts")
    if isinstance(parts, list):
        return [t for part in parts for t in _part_text(part)]
    for key in ("message", "messages", "output", "choices"):
        if key in value:
            return _texts(value[key], roles)
    return []


def _part_text(part: Any) -> list[str]:
    if isinstance(part, str):
        return [part] if part.strip() else []
    if isinstance(part, Mapping) and part.get("type", "text") in ("text", "output_text"):
        v = part.get("content", part.get("text"))
        if isinstance(v, str) and v.strip():
            return [v]
    return []
