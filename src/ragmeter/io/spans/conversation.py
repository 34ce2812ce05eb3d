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


def _turns(trace: AgentTrace, users: list[str]) -> list[tuple[str, str | None, list[Any]]]:
    """``(user message, the agent's answer or None, the tool calls it made)`` of each user turn."""
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
    return [(u, answers.get(k), calls.get(k, [])) for k, u in enumerate(users)]


def conversation_of(trace: AgentTrace) -> Conversation | None:
    """The trace as a conversation when it holds two user turns or more, else ``None``."""
    users = user_turns(trace)
    if len(users) < 2:
        return None
    turns: list[Turn] = []
    for u, answer, calls in _turns(trace, users):
        turns.append(Turn(role="user", content=u))
        if answer is None:
            break
        turns.append(Turn(role="assistant", content=answer, tool_calls=calls))
    meta = {"trace_id": trace.trace_id}
    return Conversation(id=trace.trace_id or "trace", turns=turns, metadata={k: v for k, v in meta.items() if v})


def single_turn(trace: AgentTrace) -> Conversation:
    """A trace of one user turn as a conversation of one exchange (beside conversations)."""
    turns = [Turn(role="user", content=trace.input_text or "")]
    if trace.final_text is not None:
        turns.append(Turn(role="assistant", content=trace.final_text, tool_calls=list(trace.tool_calls)))
    return Conversation(id=trace.trace_id or "trace", metadata={"trace_id": trace.trace_id}, turns=turns)


def _overlap(known: list[str], users: list[str]) -> int:
    """How many of ``users``' first messages repeat the end of ``known`` (the history a trace's LLM
    calls were sent again: all of it, a window of it, or none)."""
    for j in range(min(len(known), len(users)), 0, -1):
        if known[-j:] == users[:j]:
            return j
    return 0


def session_conversation(session: str, traces: list[AgentTrace]) -> Conversation:
    """The traces of one session (a chat app writes a trace per user message) as one conversation:
    the traces in the order they started (as read when a trace has no start time), each adding the
    user messages it was the first to receive, then its answer with the tool calls it made. A trace
    that repeats the previous user message without history (a user who says "yes" twice) is a turn
    of its own: every trace is at least one turn. Each assistant turn names its trace
    (``metadata.trace_id``)."""
    if all(getattr(t, "started_ms", None) is not None for t in traces):
        traces = sorted(traces, key=lambda t: t.started_ms)  # type: ignore[no-any-return]  # stable: ties keep file order
    known: list[str] = []
    turns: list[Turn] = []
    for t in traces:
        users = user_turns(t) or ([t.input_text] if t.input_text else [])
        new = users[_overlap(known, users):] or users[-1:]
        if not new:  # a trace without a user message: its answer continues the conversation
            if t.final_text is not None:
                turns.append(Turn(role="assistant", content=t.final_text, tool_calls=list(t.tool_calls),
                                  metadata={"trace_id": t.trace_id} if t.trace_id else {}))
            continue
        parts = _turns(t, users)[len(users) - len(new):]
        for i, (u, answer, calls) in enumerate(parts):
            last = i == len(parts) - 1
            turns.append(Turn(role="user", content=u))
            if last:  # the trace's answer: its last LLM reply, or what its root returned
                answer = answer if answer is not None else t.final_text
                calls = calls if len(parts) > 1 else list(t.tool_calls)
            if answer is not None:
                turns.append(Turn(role="assistant", content=answer, tool_calls=calls,
                                  metadata={"trace_id": t.trace_id} if t.trace_id else {}))
        known += new
    meta = {"session_id": session, "trace_ids": [t.trace_id for t in traces if t.trace_id]}
    return Conversation(id=session, turns=turns, metadata=meta)


def conversations_of(traces: list[AgentTrace]) -> list[Conversation] | None:
    """The traces as conversations when any is one: a trace holding several user turns
    (:func:`conversation_of`), or the traces of one session (their ``session_id``, when two traces
    or more share it: :func:`session_conversation`). Then every trace is in a conversation (one of
    a single exchange when it holds one turn); else ``None`` (each trace a sample)."""
    sessions: dict[str, list[AgentTrace]] = {}
    for t in traces:
        sid = getattr(t, "session_id", None)
        if sid:
            sessions.setdefault(str(sid), []).append(t)
    joined = {k: v for k, v in sessions.items() if len(v) > 1}
    convs = [None if joined and str(getattr(t, "session_id", None)) in joined else conversation_of(t) for t in traces]
    if not joined and all(c is None for c in convs):
        return None
    out: list[Conversation] = []
    done: set[str] = set()
    for t, c in zip(traces, convs, strict=True):
        sid = str(getattr(t, "session_id", None))
        if joined and sid in joined:
            if sid not in done:
                done.add(sid)
                out.append(session_conversation(sid, joined[sid]))
            continue
        out.append(c if c is not None else single_turn(t))
    return out
