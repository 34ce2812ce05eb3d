"""The data model: a ``Sample`` is one evaluated RAG/agent interaction, ``Score`` one metric's verdict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragmeter.redact import redact, redact_obj


class Chunk(BaseModel):
    """A piece of text retrieved by (or relevant to) a query.

    Any of ``text``, ``id`` or the span (``source``, ``start``, ``end``) identifies it; ``start`` and
    ``end`` are character offsets into ``source`` (``end`` exclusive, as Python slices).
    ``grade`` is a graded relevance (0 = not relevant, 1..3 increasingly relevant) for ground truth.
    """

    # frozen: a chunk is a value, so readers share one instance between the samples that retrieved
    # the same document (a million logged queries over a smaller corpus) instead of a copy in each
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str | None = None
    id: str | None = None
    source: str | None = None
    start: int | None = Field(default=None, ge=0)
    end: int | None = Field(default=None, ge=0)
    score: float | None = None
    grade: float | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v

    @field_validator("end")
    @classmethod
    def _end_after_start(cls, v: int | None, info: Any) -> int | None:
        start = info.data.get("start")
        if v is not None and start is not None and v < start:
            raise ValueError(f"end ({v}) is before start ({start})")
        return v

    @property
    def has_span(self) -> bool:
        return self.source is not None and self.start is not None and self.end is not None


class ToolCall(BaseModel):
    """One tool invocation of an agent.

    ``turn`` is the index of the assistant message that issued the call (OpenAI logs); calls that
    share a turn were issued in parallel, so their relative order carries no meaning.
    """

    model_config = ConfigDict(extra="allow")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    latency_ms: float | None = None
    error: str | None = None
    id: str | None = None
    turn: int | None = None


class AgentTrace(BaseModel):
    """What an agent did for one sample. Fields are optional: metrics say which they need.

    ``intent`` holds the agent's parse of the request: ``entity``, ``type``, ``confidence``.
    ``input_text`` / ``final_text`` are the first user and last assistant messages of a chat log.
    Built from JSONL or OpenAI chat messages by :func:`ragmeter.io.traces.parse_trace`.
    """

    model_config = ConfigDict(extra="allow")

    intent: dict[str, Any] | None = None
    plan: list[str] | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    trajectory: list[str] | None = None
    final_output: dict[str, Any] | None = None
    step_count: int | None = None
    latency_ms: float | None = None
    input_text: str | None = None
    final_text: str | None = None

    @property
    def tool_call_count(self) -> int:
        return len(self.tool_calls)


class Sample(BaseModel):
    """One evaluated interaction.

    ``answer`` ``None`` means "no answer given" (metrics needing it record no value); ``""`` is an
    empty answer and is scored. ``contexts``/``relevant`` ``None`` means unknown; ``[]`` means an
    empty retrieval / no relevant chunk. ``label`` is a human correctness label in [0, 1].
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    question: str | None = None
    answer: str | None = None
    references: list[str] = Field(default_factory=list)
    negative_references: list[str] = Field(default_factory=list)
    contexts: list[Chunk] | None = None
    relevant: list[Chunk] | None = None
    label: float | None = Field(default=None, ge=0, le=1)
    metadata: dict[str, Any] = Field(default_factory=dict)
    trace: AgentTrace | None = None

    @property
    def reference(self) -> str | None:
        """The first reference answer, or ``None``."""
        return self.references[0] if self.references else None

    @property
    def context_texts(self) -> list[str]:
        return [c.text or "" for c in (self.contexts or [])]


#: Sample fields a metric can require, and how "present" is decided for each.
FIELD_PRESENT = {
    "question": lambda s: s.question is not None,
    "answer": lambda s: s.answer is not None,
    "reference": lambda s: len(s.references) > 0,
    "negative_reference": lambda s: len(s.negative_references) > 0,
    "contexts": lambda s: s.contexts is not None,
    "context_texts": lambda s: s.contexts is not None and all(c.text is not None for c in s.contexts),
    "relevant": lambda s: s.relevant is not None,
    "label": lambda s: s.label is not None,
    "trace": lambda s: s.trace is not None,
}


@dataclass(frozen=True, slots=True)
class Score:
    """A metric's verdict for one sample: a value in the metric's range, or no value and why."""

    value: float | None
    reason: str | None = None
    details: dict[str, Any] | None = field(default=None, compare=False)

    @classmethod
    def missing(cls, reason: str, details: dict[str, Any] | None = None) -> Score:
        """No value, and why; the reason and details pass through the redaction layer (a judge
        error body or a crashed metric's message may carry a key)."""
        return cls(None, redact(reason), redact_obj(details) if details else details)
