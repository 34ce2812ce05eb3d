"""LangChain / LangGraph runs as LangSmith keeps them (a run's JSON: ``id``, ``name``,
``run_type``, ``inputs``, ``outputs``, ``error``, ``start_time``, ``end_time``, ``child_runs``, or a
flat list of runs linked by ``parent_run_id`` and ``trace_id``), one run tree per line, in a list,
or under ``runs``.

``run_type`` ``llm`` / ``chat_model`` is an LLM call (its messages from ``inputs.messages`` /
``outputs.generations``, LangChain's serialized messages read; tokens from ``llm_output.token_usage``
or the message's ``usage_metadata``; model from ``extra.invocation_params`` or
``extra.metadata.ls_model_name``), ``tool`` a tool call, ``retriever`` a retrieval (documents from
``outputs.documents``), ``chain`` a step (a LangGraph node), ``embedding`` an embedding call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import AgentTrace, TraceSpan
from ragmeter.io.spans.common import fill, need_id, usage, usd
from ragmeter.io.spans.messages import lc_message, loads_maybe
from ragmeter.io.spans.record import text
from ragmeter.io.spans.tree import build_trace, finish_spans, first_start_ms, timed

KINDS = {"llm": "llm", "chat_model": "llm", "tool": "tool", "retriever": "retriever", "chain": "chain",
         "embedding": "embedding", "prompt": "other", "parser": "other"}


def is_run(obj: Any) -> bool:
    return isinstance(obj, Mapping) and isinstance(obj.get("run_type"), str) and "id" in obj


def objects(obj: Any) -> list[Any]:
    if isinstance(obj, Mapping) and isinstance(obj.get("runs"), list) and not is_run(obj):
        return list(obj["runs"])
    return list(obj) if isinstance(obj, list) else [obj]


def _walk(run: Mapping[str, Any], parent: str | None, out: list[tuple[Mapping[str, Any], str | None]]) -> None:
    out.append((run, parent))
    for child in run.get("child_runs") or []:
        if not isinstance(child, Mapping):
            raise DatasetError(f"run {run.get('id')}: child_runs must hold run objects")
        _walk(child, str(run.get("id")), out)


def _llm_usage(fields: dict[str, Any], outputs: Any) -> None:
    outputs = loads_maybe(outputs)
    if not isinstance(outputs, Mapping):
        return
    llm_output = outputs.get("llm_output") if isinstance(outputs.get("llm_output"), Mapping) else {}
    usage(fields, llm_output.get("token_usage") or llm_output.get("usage"), "outputs.llm_output.token_usage")
    for row in outputs.get("generations") or []:
        for g in row if isinstance(row, list) else [row]:
            msg = lc_message(g.get("message")) if isinstance(g, Mapping) else None
            if isinstance(msg, Mapping):
                usage(fields, msg.get("usage_metadata"), "usage_metadata")
    if fields.get("model") is None and isinstance(llm_output.get("model_name"), str):
        fields["model"] = llm_output["model_name"]


def _span(run: Mapping[str, Any], parent: str | None) -> TraceSpan:
    sid = need_id(run.get("id"), "'id'")
    kind = KINDS.get(str(run.get("run_type")), "other")
    fields: dict[str, Any] = {"span_id": sid, "parent_id": parent or run.get("parent_run_id") or None}
    timed(fields, run.get("start_time"), run.get("end_time"))
    if run.get("error"):
        fields["status"], fields["error"] = "error", str(run["error"])[:2000]
    name = str(run.get("name") or run.get("run_type"))
    fill(fields, kind, name, run.get("inputs"), run.get("outputs"))
    extra = run.get("extra") if isinstance(run.get("extra"), Mapping) else {}
    meta = extra.get("metadata") if isinstance(extra.get("metadata"), Mapping) else {}
    if meta.get("langgraph_node") is not None and kind in ("chain", "other"):
        fields["agent"] = str(meta["langgraph_node"]) if kind == "chain" and name == meta["langgraph_node"] else None
    if kind == "llm":
        params = extra.get("invocation_params") if isinstance(extra.get("invocation_params"), Mapping) else {}
        model = params.get("model") or params.get("model_name") or meta.get("ls_model_name")
        if model is not None:
            fields["model"] = text(model, "the model", 200)
        _llm_usage(fields, run.get("outputs"))
        usd(fields, run.get("total_cost"), "'total_cost'")
    return TraceSpan.model_validate({k: v for k, v in fields.items() if v is not None})


def _session(run: Mapping[str, Any]) -> str | None:
    """The thread a run belongs to: LangSmith groups traces into a thread by the ``session_id``,
    ``thread_id`` or ``conversation_id`` key of their metadata (LangGraph sets ``thread_id``)."""
    extra = run.get("extra") if isinstance(run.get("extra"), Mapping) else {}
    meta = extra.get("metadata") if isinstance(extra.get("metadata"), Mapping) else {}
    for key in ("session_id", "thread_id", "conversation_id"):
        v = meta.get(key)
        if isinstance(v, str | int) and not isinstance(v, bool) and str(v):
            return str(v)
    return None


def read(items: list[tuple[int, Any]], where: str) -> list[AgentTrace]:
    groups: dict[str, list[TraceSpan]] = {}
    order: list[str] = []
    sessions: dict[str, str] = {}
    for line, obj in items:
        if not is_run(obj):
            raise DatasetError(f"{where}:{line}: expected a LangSmith run (id, run_type, inputs, outputs ...)")
        flat: list[tuple[Mapping[str, Any], str | None]] = []
        try:
            _walk(obj, None, flat)
        except DatasetError as exc:
            raise DatasetError(f"{where}:{line}: {exc}") from None
        for run, parent in flat:
            tid = str(run.get("trace_id") or obj.get("trace_id") or obj.get("id"))
            try:
                span = _span(run, parent)
            except (DatasetError, ValueError) as exc:
                raise DatasetError(f"{where}:{line}: trace {tid} span {run.get('id')}: {exc}") from None
            if tid not in groups:
                order.append(tid)
            if tid not in sessions and (sid := _session(run)) is not None:
                sessions[tid] = sid
            groups.setdefault(tid, []).append(span)
    out = []
    for tid in order:
        started = first_start_ms(groups[tid])
        out.append(build_trace(tid, finish_spans(groups[tid]), session_id=sessions.get(tid), started_ms=started))
    return out
