"""Write a :class:`Conversation` in the shapes :mod:`ragmeter.conversations.readers` reads:
DeepEval ``ConversationalTestCase`` JSON, ragas ``MultiTurnSample`` JSON, an OpenAI message list.
Per-turn fields those tools have no place for (``reference``, ``contexts`` where the format has
none, ``expected_tools``) travel in each message's ``metadata``."""

from __future__ import annotations

import json
from typing import Any

from ragmeter.conversations.model import Conversation, Turn


def _chunk(c: Any) -> Any:
    d = c.model_dump(exclude_none=True)
    return d["text"] if set(d) == {"text"} else d


def _meta(t: Turn, *, contexts: bool) -> dict[str, Any] | None:
    m = dict(t.metadata)
    if t.reference is not None:
        m["reference"] = t.reference
    if t.expected_tools is not None:
        m["expected_tools"] = list(t.expected_tools)
    if contexts and t.contexts is not None:
        m["contexts"] = [_chunk(c) for c in t.contexts]
    return m or None


def to_deepeval(conv: Conversation) -> dict[str, Any]:
    """``ConversationalTestCase(**d)`` accepts the result (DeepEval 4.3)."""
    turns = []
    for t in conv.turns:
        if t.role not in ("user", "assistant"):
            continue
        d: dict[str, Any] = {"role": t.role, "content": t.content}
        if t.contexts is not None:
            d["retrieval_context"] = [c.text or "" for c in t.contexts]
        if t.tool_calls:
            d["tools_called"] = [{"name": c.name, "input_parameters": c.arguments, "output": c.result}
                                 for c in t.tool_calls]
        meta = _meta(t, contexts=t.contexts is not None and any(c.text is None or c.id for c in t.contexts))
        if meta:
            d["metadata"] = meta
        turns.append(d)
    out: dict[str, Any] = {"name": conv.id, "turns": turns}
    for k in ("scenario", "user_description", "expected_outcome", "chatbot_role"):
        if getattr(conv, k) is not None:
            out[k] = getattr(conv, k)
    meta = dict(conv.metadata)
    if conv.reference_topics is not None:
        meta["reference_topics"] = conv.reference_topics
    if meta:
        out["metadata"] = meta
    return out


def to_ragas(conv: Conversation) -> dict[str, Any]:
    """``MultiTurnSample(**d)`` accepts the result (ragas 0.4), apart from ``id`` and
    ``chatbot_role``, which ragas has no field for (ragmeter reads them)."""
    msgs: list[dict[str, Any]] = []
    for t in conv.turns:
        if t.role == "user":
            msgs.append({"type": "human", "content": t.content, "metadata": _meta(t, contexts=True)})
        elif t.role == "assistant":
            d: dict[str, Any] = {"type": "ai", "content": t.content, "metadata": _meta(t, contexts=True)}
            if t.tool_calls:
                d["tool_calls"] = [{"name": c.name, "args": c.arguments} for c in t.tool_calls]
            msgs.append(d)
            msgs.extend({"type": "tool", "content": c.result if isinstance(c.result, str) else json.dumps(c.result)}
                        for c in t.tool_calls if c.result is not None)
    out: dict[str, Any] = {"id": conv.id, "user_input": msgs}
    if conv.reference is not None:
        out["reference"] = conv.reference
    if conv.reference_topics is not None:
        out["reference_topics"] = conv.reference_topics
    if conv.chatbot_role is not None:
        out["chatbot_role"] = conv.chatbot_role
    for k in ("scenario", "user_description", "expected_outcome"):
        if getattr(conv, k) is not None:
            out[k] = getattr(conv, k)
    if conv.metadata:
        out["metadata"] = dict(conv.metadata)
    return out


def to_openai(conv: Conversation) -> list[dict[str, Any]]:
    """OpenAI chat messages; the chatbot role is the system message."""
    msgs: list[dict[str, Any]] = []
    if conv.chatbot_role is not None:
        msgs.append({"role": "system", "content": conv.chatbot_role})
    for t in conv.turns:
        if t.role not in ("user", "assistant"):
            continue
        d: dict[str, Any] = {"role": t.role, "content": t.content}
        if t.tool_calls:
            d["tool_calls"] = [{"id": c.id or f"call_{i}", "type": "function",
                                "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                               for i, c in enumerate(t.tool_calls)]
        meta = _meta(t, contexts=True)
        if meta:
            d["metadata"] = meta
        msgs.append(d)
        for i, c in enumerate(t.tool_calls):
            if c.result is not None:
                msgs.append({"role": "tool", "tool_call_id": c.id or f"call_{i}",
                             "content": c.result if isinstance(c.result, str) else json.dumps(c.result)})
    return msgs
