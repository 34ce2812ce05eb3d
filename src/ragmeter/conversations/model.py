"""The conversation data shape: a :class:`Conversation` is an id and its :class:`Turn` s.

A run scores conversations as samples (:func:`to_samples`): one sample per conversation (metric
family ``conversation``: one value per conversation) and one sample per assistant turn (every
sample metric: one value per assistant turn), so conversations are stored with the run like any
other samples, and the conversation is rebuilt from the stored samples (:func:`from_sample`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragmeter.core.schema import AgentTrace, Chunk, Sample, ToolCall

#: metadata key of a conversation sample holding the whole conversation
CONVERSATION_KEY = "conversation"
#: metadata key holding the conversation id (conversation and turn samples)
CONVERSATION_ID = "conversation_id"
#: metadata key of a turn sample: the position of the assistant turn in its conversation
TURN_KEY = "turn"
#: metadata key of a turn sample: the turns before the user message it answers
HISTORY_KEY = "history"

Role = Literal["user", "assistant", "system", "tool"]


class Turn(BaseModel):
    """One message of a conversation.

    ``contexts``: the chunks retrieved for this (assistant) turn; ``tool_calls``: the tools it
    called (with results); ``reference``: the expected answer of this turn; ``expected_tools``:
    the tool names it should have called (per-turn tool correctness).
    """

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: str
    contexts: list[Chunk] | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    reference: str | None = None
    expected_tools: list[str] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Conversation(BaseModel):
    """A multi-turn conversation with a user (and optionally what is expected of it).

    ``chatbot_role``: the role the assistant must keep (role adherence); ``scenario``,
    ``user_description``, ``expected_outcome``: what a simulated or scripted user wanted;
    ``reference``: a reference outcome for the whole conversation; ``reference_topics``: the
    topics the assistant may talk about (topic adherence).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    turns: list[Turn]
    chatbot_role: str | None = None
    scenario: str | None = None
    user_description: str | None = None
    expected_outcome: str | None = None
    reference: str | None = None
    reference_topics: list[str] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("turns")
    @classmethod
    def _has_turns(cls, v: list[Turn]) -> list[Turn]:
        if not v:
            raise ValueError("a conversation needs at least one turn")
        return v

    def assistant_positions(self) -> list[int]:
        """Positions (in ``turns``) of the assistant turns."""
        return [i for i, t in enumerate(self.turns) if t.role == "assistant"]


def turn_id(conversation_id: str, position: int) -> str:
    """The sample id of the assistant turn at ``position``: ``CONV#tN``."""
    return f"{conversation_id}#t{position}"


def _history(turns: list[Turn]) -> list[dict[str, str]]:
    return [{"role": t.role, "content": t.content} for t in turns if t.role in ("user", "assistant", "system")]


def to_samples(conv: Conversation) -> list[Sample]:
    """The conversation sample, then one sample per assistant turn (question: the last user
    message before it; answer: its text; contexts, reference, tool calls of the turn; the turns
    before the question in ``metadata.history``)."""
    meta = {k: v for k, v in conv.metadata.items() if k not in (CONVERSATION_KEY, CONVERSATION_ID, TURN_KEY, HISTORY_KEY)}
    out = [Sample(id=conv.id, metadata={**meta, CONVERSATION_ID: conv.id,
                                        CONVERSATION_KEY: conv.model_dump(mode="json", exclude_none=True)})]
    for pos in conv.assistant_positions():
        t = conv.turns[pos]
        q_pos = next((i for i in range(pos - 1, -1, -1) if conv.turns[i].role == "user"), None)
        question = conv.turns[q_pos].content if q_pos is not None else None
        before = conv.turns[:q_pos] if q_pos is not None else conv.turns[:pos]
        trace = None
        if t.tool_calls or t.expected_tools is not None:
            trace = AgentTrace(tool_calls=list(t.tool_calls), input_text=question, final_text=t.content)
        tmeta = {**meta, **{k: v for k, v in t.metadata.items() if k not in (CONVERSATION_KEY, CONVERSATION_ID)},
                 CONVERSATION_ID: conv.id, TURN_KEY: pos, HISTORY_KEY: _history(before)}
        if t.expected_tools is not None:
            tmeta["expected_tools"] = list(t.expected_tools)
        out.append(Sample(id=turn_id(conv.id, pos), question=question, answer=t.content,
                          references=[t.reference] if t.reference is not None else [],
                          contexts=t.contexts, metadata=tmeta, trace=trace))
    return out


def is_conversation_sample(sample: Sample) -> bool:
    return isinstance(sample.metadata.get(CONVERSATION_KEY), dict)


def is_turn_sample(sample: Sample) -> bool:
    return CONVERSATION_ID in sample.metadata and TURN_KEY in sample.metadata and not is_conversation_sample(sample)


def from_sample(sample: Sample) -> Conversation:
    """The conversation a conversation sample carries."""
    return Conversation.model_validate(sample.metadata[CONVERSATION_KEY])
