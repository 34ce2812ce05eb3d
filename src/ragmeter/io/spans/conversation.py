"""A trace that holds several user turns (a chat agent answering one message after another in
one trace) as a :class:`~ragmeter.conversations.model.Conversation`: each user message, then the
agent's answer to it with the tool calls it made on the way.

The user turns are the user messages of the LLM calls' inputs (each call resends the history, so
the longest input holds them all). An LLM call belongs to the turn of the last user message it
was sent; the answer of a turn is the last such call that asked for no tool. A turn the trace
never answered (cut short) ends the conversation with that user message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.conversations.model import Conversation, Turn
from ragmeter.core.schema import AgentTrace, TraceSpan
from ragmeter.io.traces import _text


def _users(span: TraceSpan) -> list[str]:
    return [t for m in span.input or [] if isinstance(m, Mapping) and m.get("role") == "user"
            and (t := _text(m.get("content")))]


def user_turns(trace: AgentTrace) -> list[str]:
    """The user messages of the trace, in order."""
    turns: list[str] = []
    for s in trace.spans:
        if s.kind != "llm":
            continue
        users = _users(s)
        if users[:len(turns)] == turns:
            turns = users if len(users) > len(turns) else turns
        else:  # a call that was not sent the whole history (a sub-agent): its new messages only
            turns += [u for u in users if u not in turns]
    return turns


def conversation_of(trace: AgentTrace) -> Conversation | None:
    """The trace as a conversation when it holds two user turns or more, else ``None``."""
    users = user_turns(trace)
    if len(users) < 2:
        return None
    llms = [s for s in trace.spans if s.kind == "llm"]
    turn_of_llm = [max(0, len(_users(s)) - 1) for s in llms]
    answers: dict[int, str] = {}
    for s, k in zip(llms, turn_of_llm, strict=True):
        out = [m for m in s.output or [] if isinstance(m, Mapping)]
        if out and not any(m.get("tool_calls") for m in out):
            text = next((_text(m.get("content")) for m in reversed(out) if _text(m.get("content"))), None)
            if text:
                answers[k] = text
    calls: dict[int, list[Any]] = {}
    for c in trace.tool_calls:
        k = turn_of_llm[c.turn] if c.turn is not None and c.turn < len(turn_of_llm) else 0
        calls.setdefault(k, []).append(c)
    turns: list[Turn] = []
    for k, u in enumerate(users):
        turns.append(Turn(role="user", content=u))
        if k not in answers:
            break
        turns.append(Turn(role="assistant", content=answers[k], tool_calls=calls.get(k, [])))
    meta = {"trace_id": trace.trace_id}
    return Conversation(id=trace.trace_id or "trace", turns=turns, metadata={k: v for k, v in meta.items() if v})
