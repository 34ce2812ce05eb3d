"""Read conversations from the shapes other tools write.

One JSON value is one conversation:

- ragmeter's own JSONL row: ``{"id", "turns": [{"role", "content", "contexts", "tool_calls",
  "reference", "expected_tools", "metadata"}], "chatbot_role", "reference_topics", ...}``;
- DeepEval ``ConversationalTestCase`` JSON (``model_dump``/``model_dump_json``, either alias):
  ``turns`` of ``Turn`` (``role``, ``content``, ``retrieval_context``, ``tools_called`` with
  ``name``/``input_parameters``/``output``, ``metadata``/``additional_metadata``), ``scenario``,
  ``name``, ``user_description``, ``expected_outcome``, ``chatbot_role``, ``metadata``;
- ragas ``MultiTurnSample`` JSON: ``user_input`` of messages with ``type`` ``human``/``ai``/``tool``
  (``content``, ``metadata``, AI ``tool_calls`` of ``name``/``args``), ``reference``,
  ``reference_topics``, ``reference_tool_calls``;
- an OpenAI or Anthropic message list: a JSON array of messages, or ``{"messages": [...]}``
  (``system`` message or key: the chatbot role; OpenAI ``tool_calls``/``tool`` messages,
  Anthropic ``tool_use``/``tool_result`` blocks). A ``{"messages"}`` object counts as a
  conversation when it holds at least two user messages (one is an agent trace).

Assistant messages that follow each other (a tool call, its result, the final text) are one
assistant turn. A message's ``metadata`` may carry ``reference``, ``contexts`` and
``expected_tools`` in every format, so the same conversation gives the same turns whichever way
it was written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from ragmeter.conversations.model import Conversation, Turn
from ragmeter.core.errors import DatasetError
from ragmeter.core.schema import Chunk, Sample, ToolCall

_ID_KEYS = ("id", "conversation_id", "thread_id", "name")
_TURN_META = ("reference", "contexts", "expected_tools")


def looks_like_conversation(obj: Any) -> bool:
    """Whether one JSON value is a conversation in one of the shapes above."""
    if isinstance(obj, list):
        return bool(obj) and all(isinstance(m, Mapping) and "role" in m for m in obj)
    if not isinstance(obj, Mapping):
        return False
    if isinstance(obj.get("turns"), list):
        return True
    ui = obj.get("user_input")
    if isinstance(ui, list) and ui and all(isinstance(m, Mapping) and "type" in m for m in ui):
        return True
    msgs = obj.get("messages")
    if isinstance(msgs, list) and all(isinstance(m, Mapping) for m in msgs):
        return sum(1 for m in msgs if m.get("role") == "user" and _text(m.get("content")).strip()
                   and not _only_tool_results(m.get("content"))) >= 2
    return False


class _Err:
    def __init__(self, file: str | None, line: int | None) -> None:
        self.file, self.line = file, line

    def __call__(self, field: str, msg: str) -> DatasetError:
        return DatasetError(msg, file=self.file, line=self.line, field=field)


def parse_conversation(obj: Any, *, default_id: str = "conversation-1", file: str | None = None,
                       line: int | None = None) -> Conversation:
    """One conversation from any supported shape.

    Raises:
        DatasetError: naming the file, line and field of what is wrong.
    """
    err = _Err(file, line)
    if isinstance(obj, list):
        return _build({"messages": obj}, _messages(obj, err, "messages"), default_id, err, {})
    if not isinstance(obj, Mapping):
        raise err("", f"expected a conversation object or a list of messages, got {type(obj).__name__}")
    if isinstance(obj.get("turns"), list):
        turns = [_turn(t, err, f"turns[{i}]") for i, t in enumerate(obj["turns"])]
        extra = {"system": None}
    elif isinstance(obj.get("user_input"), list):
        turns = _ragas(obj["user_input"], err)
        extra = {}
    elif isinstance(obj.get("messages"), list):
        msgs = list(obj["messages"])
        if isinstance(obj.get("system"), str):
            msgs = [{"role": "system", "content": obj["system"]}, *msgs]
        turns = _messages(msgs, err, "messages")
        extra = {}
    else:
        raise err("turns", "no turns: expected 'turns' (ragmeter / DeepEval), 'user_input' (ragas "
                           "MultiTurnSample) or 'messages' (OpenAI / Anthropic)")
    return _build(obj, turns, default_id, err, extra)


def _build(obj: Mapping[str, Any], turns: list[Turn], default_id: str, err: _Err, _extra: dict[str, Any]) -> Conversation:
    cid = next((obj[k] for k in _ID_KEYS if obj.get(k) not in (None, "")), default_id)
    if not isinstance(cid, str | int) or isinstance(cid, bool):
        raise err("id", f"expected text, got {type(cid).__name__}")
    role = _first(obj, "chatbot_role", "chatbotRole")
    system = [t for t in turns if t.role == "system"]
    if role is None and system:
        role = "\n".join(t.content for t in system)
    turns = [t for t in turns if t.role != "system"]
    if not turns:
        raise err("turns", "a conversation needs at least one user or assistant message")
    meta = _first(obj, "metadata", "additional_metadata", "additionalMetadata") or {}
    if not isinstance(meta, Mapping):
        raise err("metadata", f"expected an object, got {type(meta).__name__}")
    if obj.get("mcp_servers") is not None:  # DeepEval's ConversationalTestCase.mcp_servers
        meta = {**meta, "mcp_servers": obj["mcp_servers"]}
    topics = obj.get("reference_topics")
    if topics is None and isinstance(meta, Mapping) and meta.get("reference_topics") is not None:
        # DeepEval has no field for them: its metadata carries them (writers.to_deepeval)
        topics = meta["reference_topics"]
        meta = {k: v for k, v in meta.items() if k != "reference_topics"}
    if topics is not None and not (isinstance(topics, list) and all(isinstance(x, str) for x in topics)):
        raise err("reference_topics", "expected a list of texts")
    if obj.get("reference_tool_calls") is not None:  # ragas MultiTurnSample: kept for ragas:tool_call_*
        meta = {**meta, "reference_tool_calls": _reference_tool_calls(obj["reference_tool_calls"], err)}
    fields = {"chatbot_role": role, "scenario": obj.get("scenario"),
              "user_description": _first(obj, "user_description", "userDescription"),
              "expected_outcome": _first(obj, "expected_outcome", "expectedOutcome"),
              "reference": obj.get("reference"), "reference_topics": topics}
    for k, v in fields.items():
        if v is not None and not isinstance(v, str) and k != "reference_topics":
            raise err(k, f"expected text, got {type(v).__name__}")
    try:
        return Conversation(id=str(cid), turns=turns, metadata=dict(meta), **fields)
    except ValidationError as exc:
        e = exc.errors()[0]
        raise err(".".join(map(str, e["loc"])), e["msg"]) from None


def _reference_tool_calls(value: Any, err: _Err) -> list[dict[str, Any]]:
    """ragas' ``reference_tool_calls``: a list of ``{"name": str, "args": {...}}`` (``arguments`` is
    accepted for ``args``), kept as ``{"name", "args"}`` dicts."""
    if not isinstance(value, list):
        raise err("reference_tool_calls", f"expected a list of {{name, args}} tool calls, got {type(value).__name__}")
    out = []
    for i, c in enumerate(value):
        where = f"reference_tool_calls[{i}]"
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str) or not c["name"]:
            raise err(where, 'expected a tool call {"name": ..., "args": {...}} with a non-empty name')
        args = c.get("args", c.get("arguments")) or {}
        if not isinstance(args, Mapping):
            raise err(f"{where}.args", f"expected an object of arguments, got {type(args).__name__}")
        out.append({"name": c["name"], "args": dict(args)})
    return out


def _first(obj: Mapping[str, Any], *keys: str) -> Any:
    return next((obj[k] for k in keys if obj.get(k) is not None), None)


def _text(content: Any) -> str:
    """Text of a message content: a string, or the text parts of a list of blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"
                       and isinstance(p.get("text"), str))
    return ""


def _only_tool_results(content: Any) -> bool:
    return isinstance(content, list) and bool(content) and all(
        isinstance(p, Mapping) and p.get("type") == "tool_result" for p in content)


def _turn_extras(meta: Any, err: _Err, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(turn fields, metadata)`` from a message's metadata: ``reference``, ``contexts`` and
    ``expected_tools`` become turn fields."""
    if meta is None:
        return {}, {}
    if not isinstance(meta, Mapping):
        raise err(f"{where}.metadata", f"expected an object, got {type(meta).__name__}")
    fields = {k: meta[k] for k in _TURN_META if meta.get(k) is not None}
    return fields, {k: v for k, v in meta.items() if k not in _TURN_META}


def _contexts(v: Any, err: _Err, where: str) -> list[Chunk]:
    if not isinstance(v, list):
        raise err(where, f"expected a list of texts or chunks, got {type(v).__name__}")
    out = []
    for i, c in enumerate(v):
        if isinstance(c, str):
            out.append(Chunk(text=c))
        elif isinstance(c, Mapping):
            d = {k: c[k] for k in ("text", "id", "source", "start", "end", "score") if c.get(k) is not None}
            if "text" not in d and isinstance(c.get("content"), str):  # DeepEval RetrievedContextData
                d["text"] = c["content"]
            try:
                out.append(Chunk(**d))
            except ValidationError as exc:
                raise err(f"{where}[{i}]", exc.errors()[0]["msg"]) from None
        else:
            raise err(f"{where}[{i}]", f"expected a text or an object, got {type(c).__name__}")
    return out


def _tool_call(c: Any, err: _Err, where: str, *, args_key: str = "arguments") -> ToolCall:
    if not isinstance(c, Mapping):
        raise err(where, f"expected an object, got {type(c).__name__}")
    fn = c.get("function") if isinstance(c.get("function"), Mapping) else None
    name = (fn or c).get("name")
    if not isinstance(name, str) or not name:
        raise err(f"{where}.name", "a tool call needs a name")
    args: Any = (fn or {}).get("arguments") if fn else next(
        (c[k] for k in (args_key, "arguments", "args", "input_parameters", "inputParameters", "input")
         if c.get(k) is not None), None)
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            raise err(f"{where}.arguments", "not JSON") from None
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise err(f"{where}.arguments", f"expected an object, got {type(args).__name__}")
    result = c.get("result", c.get("output"))
    # DeepEval's ToolCall.type MCP is kept: its MCP metrics count the MCP calls
    kind = {"type": "MCP"} if c.get("type") == "MCP" else {}
    return ToolCall(name=name, arguments=dict(args), result=result, id=c.get("id") if isinstance(c.get("id"), str) else None,
                    **kind)


def _turn(t: Any, err: _Err, where: str) -> Turn:
    """A ragmeter or DeepEval turn."""
    if not isinstance(t, Mapping):
        raise err(where, f"expected an object, got {type(t).__name__}")
    role = t.get("role")
    if role not in ("user", "assistant", "system", "tool"):
        raise err(f"{where}.role", f"expected user, assistant, system or tool, got {role!r}")
    content = t.get("content")
    if not isinstance(content, str):
        raise err(f"{where}.content", f"expected text, got {type(content).__name__}")
    fields, meta = _turn_extras(_first(t, "metadata", "additional_metadata", "additionalMetadata"), err, where)
    for k in _TURN_META:
        if t.get(k) is not None:
            fields[k] = t[k]
    ctx = _first(t, "retrieval_context", "retrievalContext")
    if ctx is not None:
        fields.setdefault("contexts", ctx)
    for k in ("mcp_tools_called", "mcp_resources_called", "mcp_prompts_called"):  # DeepEval's MCP turn fields
        if t.get(k) is not None:
            meta[k] = t[k]
    calls = _first(t, "tool_calls", "tools_called", "toolsCalled") or []
    if not isinstance(calls, list):
        raise err(f"{where}.tool_calls", f"expected a list, got {type(calls).__name__}")
    return _make_turn(role, content, fields, meta,
                      [_tool_call(c, err, f"{where}.tool_calls[{i}]") for i, c in enumerate(calls)], err, where)


def _make_turn(role: str, content: str, fields: dict[str, Any], meta: dict[str, Any], calls: list[ToolCall],
               err: _Err, where: str) -> Turn:
    ctx = fields.get("contexts")
    ref = fields.get("reference")
    if ref is not None and not isinstance(ref, str):
        raise err(f"{where}.reference", f"expected text, got {type(ref).__name__}")
    exp = fields.get("expected_tools")
    if exp is not None and not (isinstance(exp, list) and all(isinstance(x, str) for x in exp)):
        raise err(f"{where}.expected_tools", "expected a list of tool names")
    return Turn(role=role, content=content, contexts=_contexts(ctx, err, f"{where}.contexts") if ctx is not None else None,
                tool_calls=calls, reference=ref, expected_tools=exp, metadata=meta)


def _merge(turns: list[Turn]) -> list[Turn]:
    """Consecutive assistant messages (tool calls, then text) as one assistant turn."""
    out: list[Turn] = []
    for t in turns:
        if out and t.role == "assistant" and out[-1].role == "assistant":
            prev = out[-1]
            out[-1] = prev.model_copy(update={
                "content": "\n".join(x for x in (prev.content, t.content) if x),
                "tool_calls": [*prev.tool_calls, *t.tool_calls],
                "contexts": (prev.contexts or []) + (t.contexts or []) if prev.contexts is not None or t.contexts is not None else None,
                "reference": t.reference if t.reference is not None else prev.reference,
                "expected_tools": t.expected_tools if t.expected_tools is not None else prev.expected_tools,
                "metadata": {**prev.metadata, **t.metadata}})
        else:
            out.append(t)
    return out


def _attach_result(turns: list[Turn], call_id: Any, result: Any, is_error: bool = False) -> None:
    for t in reversed(turns):
        for i, c in enumerate(t.tool_calls):
            if (call_id is None or c.id == call_id) and c.result is None and c.error is None:
                upd = {"error": result if isinstance(result, str) else json.dumps(result)} if is_error else {"result": result}
                t.tool_calls[i] = c.model_copy(update=upd)
                return


def _messages(msgs: Iterable[Any], err: _Err, where: str) -> list[Turn]:
    """OpenAI / Anthropic chat messages as turns."""
    turns: list[Turn] = []
    for i, m in enumerate(msgs):
        w = f"{where}[{i}]"
        if not isinstance(m, Mapping):
            raise err(w, f"expected a message object, got {type(m).__name__}")
        role = m.get("role")
        content = m.get("content")
        if content is not None and not isinstance(content, str | list):
            raise err(f"{w}.content", f"expected text or a list of blocks, got {type(content).__name__}")
        fields, meta = _turn_extras(m.get("metadata"), err, w)
        if role == "tool":  # OpenAI tool result
            _attach_result(turns, m.get("tool_call_id"), _text(content) if content is not None else None)
            continue
        if role in ("system", "developer"):
            turns.append(Turn(role="system", content=_text(content)))
            continue
        if role not in ("user", "assistant"):
            raise err(f"{w}.role", f"expected system, user, assistant or tool, got {role!r}")
        calls: list[ToolCall] = []
        if isinstance(content, list):
            for j, p in enumerate(content):
                if not isinstance(p, Mapping):
                    raise err(f"{w}.content[{j}]", f"expected a content block, got {type(p).__name__}")
                if p.get("type") == "tool_use":
                    calls.append(_tool_call(p, err, f"{w}.content[{j}]", args_key="input"))
                elif p.get("type") == "tool_result":
                    res = p.get("content")
                    _attach_result(turns, p.get("tool_use_id"), _text(res) if isinstance(res, list) else res,
                                   bool(p.get("is_error")))
        tc = m.get("tool_calls") or []
        if not isinstance(tc, list):
            raise err(f"{w}.tool_calls", f"expected a list, got {type(tc).__name__}")
        calls += [_tool_call(c, err, f"{w}.tool_calls[{j}]") for j, c in enumerate(tc)]
        if role == "user" and _only_tool_results(content):
            continue
        turns.append(_make_turn(role, _text(content), fields, meta, calls, err, w))
    return _merge(turns)


_RAGAS_ROLE = {"human": "user", "ai": "assistant"}


def _ragas(msgs: list[Any], err: _Err) -> list[Turn]:
    turns: list[Turn] = []
    for i, m in enumerate(msgs):
        w = f"user_input[{i}]"
        if not isinstance(m, Mapping):
            raise err(w, f"expected a message object, got {type(m).__name__}")
        kind = m.get("type")
        content = m.get("content")
        if not isinstance(content, str):
            raise err(f"{w}.content", f"expected text, got {type(content).__name__}")
        if kind == "tool":
            _attach_result(turns, None, content)
            continue
        if not isinstance(kind, str) or kind not in _RAGAS_ROLE:
            raise err(f"{w}.type", f"expected human, ai or tool, got {kind!r}")
        fields, meta = _turn_extras(m.get("metadata"), err, w)
        tc = m.get("tool_calls") or []
        if not isinstance(tc, list):
            raise err(f"{w}.tool_calls", f"expected a list, got {type(tc).__name__}")
        calls = [_tool_call(c, err, f"{w}.tool_calls[{j}]", args_key="args") for j, c in enumerate(tc)]
        turns.append(_make_turn(_RAGAS_ROLE[kind], content, fields, meta, calls, err, w))
    return _merge(turns)


def conversation_samples(rows: Iterable[tuple[int, Any]], source: str, on_error: str = "raise"
                         ) -> tuple[list[Sample], list[int], list[DatasetError], list[str]]:
    """Samples of the conversations in ``rows`` (``(line, JSON value | DatasetError)``):
    ``(samples, their lines, skipped rows, columns seen)``; see :func:`to_samples`."""
    from ragmeter.conversations.model import to_samples

    samples: list[Sample] = []
    lines: list[int] = []
    skipped: list[DatasetError] = []
    seen: dict[str, int] = {}
    columns: dict[str, None] = {}
    for n, (lineno, row) in enumerate(rows, start=1):
        try:
            if isinstance(row, DatasetError):
                raise row
            if isinstance(row, Mapping):
                columns.update(dict.fromkeys(map(str, row)))
            conv = parse_conversation(row, default_id=f"conversation-{n}", file=source, line=lineno)
            parts = to_samples(conv)
            for s in parts:
                if s.id in seen:
                    raise DatasetError(f"duplicate id {s.id!r} (first seen on line {seen[s.id]})",
                                       file=source, line=lineno, field="id")
            for s in parts:
                seen[s.id] = lineno
            samples.extend(parts)
            lines.extend([lineno] * len(parts))
        except DatasetError as exc:
            if on_error == "raise":
                raise
            skipped.append(exc)
    return samples, lines, skipped, list(columns)
