"""The data model: a ``Sample`` is one evaluated RAG/agent interaction, ``Score`` one metric's verdict."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragmeter.core.redact import redact, redact_obj


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


#: a duration, an offset or a cost: finite and not negative (a trace with a latency of -5 ms or inf
#: made agent-stats' mean and percentiles wrong)
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
#: a count of steps or tokens
Count = Annotated[int, Field(ge=0)]


class ToolCall(BaseModel):
    """One tool invocation of an agent.

    ``turn`` is the index of the assistant message that issued the call (OpenAI logs); calls that
    share a turn were issued in parallel, so their relative order carries no meaning.
    """

    model_config = ConfigDict(extra="allow")

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    latency_ms: NonNegative | None = None
    error: str | None = None
    id: str | None = None
    turn: int | None = None


#: What a span of an agent trace did (OpenTelemetry GenAI operations and OpenInference span kinds,
#: mapped by the readers in :mod:`ragmeter.io.spans`).
SPAN_KINDS = ("agent", "llm", "tool", "retriever", "chain", "handoff", "embedding", "other")


class TraceSpan(BaseModel):
    """One step of an agent trace as an instrumentation recorded it: a node of the trace's tree.

    ``start_ms`` is the offset from the trace's first span; ``parent_id`` links the tree (``None`` at
    a root). An LLM span carries ``model``, tokens and cost; a tool span ``tool_name``,
    ``tool_arguments`` and ``tool_result``; a retriever span ``query`` and ``documents``; a handoff
    ``agent`` (from) and ``to_agent``. ``status`` is ``error`` with ``error`` the message when the
    step failed. ``input`` / ``output`` keep the span's messages or values as recorded (bounded).
    """

    model_config = ConfigDict(extra="allow")

    span_id: str
    parent_id: str | None = None
    kind: str = "other"
    name: str = ""
    agent: str | None = None
    to_agent: str | None = None
    start_ms: NonNegative | None = None
    latency_ms: NonNegative | None = None
    status: str = "ok"
    error: str | None = None
    input: Any = None
    output: Any = None
    model: str | None = None
    input_tokens: Count | None = None
    output_tokens: Count | None = None
    cost_usd: NonNegative | None = None
    tool_name: str | None = None
    tool_arguments: dict[str, Any] | None = None
    tool_result: Any = None
    query: str | None = None
    documents: list[Chunk] | None = None

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, v: str) -> str:
        if v not in SPAN_KINDS:
            raise ValueError(f"span kind {v!r} is not one of {', '.join(SPAN_KINDS)}")
        return v


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
    step_count: Count | None = None
    latency_ms: NonNegative | None = None
    input_text: str | None = None
    final_text: str | None = None
    #: the trace's id in the source (OTel trace id, an Agents SDK ``trace_...``, a LangSmith run id)
    trace_id: str | None = None
    #: every span in start order, parents before children; empty for a trace written as JSONL
    spans: list[TraceSpan] = Field(default_factory=list)

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
    # a conversation sample (ragmeter.conversations.model.to_samples) carries its conversation here
    "conversation": lambda s: isinstance(s.metadata.get("conversation"), dict),
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


@dataclass(slots=True)
class ScoreColumn:
    """One metric's verdicts for a batch of samples, as columns: what the vectorised metrics (the
    lexical family) return instead of one :class:`Score` object per sample, so values go from the
    kernel to the store and the summary as one float array.

    Attributes:
        values: float64 array, NaN where a sample has no value.
        reasons: per sample, why it has no value (``None`` where it has one); ``None`` when every
            sample has a value.
        details: per sample, the metric's details (``None`` where it has none); ``None`` when no
            sample has details.
    """

    values: Any
    reasons: list[str | None] | None = None
    details: list[dict[str, Any] | None] | None = None

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Any:  # a column reads like the list of Score objects it stands for
        return iter(self.scores())

    def __getitem__(self, i: int) -> Score:
        v = float(self.values[i])
        return Score(None if v != v else v, self.reasons[i] if self.reasons else None,
                     self.details[i] if self.details else None)

    @classmethod
    def of(cls, scores: ScoreColumn | list[Score] | tuple[Score, ...]) -> ScoreColumn:
        """A column from a list of :class:`Score` (a column is returned as it is)."""
        if isinstance(scores, ScoreColumn):
            return scores
        import numpy as np

        values = np.fromiter((np.nan if s.value is None else s.value for s in scores), dtype=np.float64,
                             count=len(scores))
        reasons = [s.reason for s in scores] if any(s.value is None for s in scores) else None
        details = [s.details for s in scores] if any(s.details for s in scores) else None
        return cls(values, reasons, details)

    @classmethod
    def concat(cls, parts: list[ScoreColumn]) -> ScoreColumn:
        import numpy as np

        if len(parts) == 1:
            return parts[0]
        values = np.concatenate([p.values for p in parts]) if parts else np.zeros(0)
        reasons = ([r for p in parts for r in (p.reasons or [None] * len(p))]
                   if any(p.reasons for p in parts) else None)
        details = ([d for p in parts for d in (p.details or [None] * len(p))]
                   if any(p.details for p in parts) else None)
        return cls(values, reasons, details)

    def value_list(self) -> list[float | None]:
        """Values as Python floats, ``None`` where there is none."""
        out = self.values.tolist()
        if self.reasons is not None:
            return [None if v != v else v for v in out]
        return out

    def reason_list(self) -> list[str | None]:
        return self.reasons if self.reasons is not None else [None] * len(self)

    def scores(self) -> list[Score]:
        """One :class:`Score` per sample."""
        reasons = self.reasons or [None] * len(self)
        details = self.details or [None] * len(self)
        return [Score(None if v != v else v, r, d)
                for v, r, d in zip(self.values.tolist(), reasons, details, strict=True)]


class ScoreColumns(Mapping[str, list[Score]]):
    """``{metric_key: [Score per sample]}`` aligned with the samples, kept as columns: the runner
    collects each metric's batches as :class:`~ragmeter.core.schema.ScoreColumn` and the Score objects of
    a metric are made only when someone reads that metric (a 100,000-sample lexical run needs none).

    Args:
        samples: the run's samples, in order.
        chunks: per metric key, ``(sample ids, column)`` batches as they were scored.
    """

    def __init__(self, samples: Sequence[Sample], chunks: Mapping[str, list[tuple[list[str], ScoreColumn]]]) -> None:
        self._samples = samples
        self._chunks = dict(chunks)
        self._columns: dict[str, ScoreColumn] = {}
        self._lists: dict[str, list[Score]] = {}
        self._index: dict[str, int] | None = None

    def __iter__(self) -> Iterator[str]:
        return iter(self._chunks)

    def __len__(self) -> int:
        return len(self._chunks)

    def __getitem__(self, key: str) -> list[Score]:
        got = self._lists.get(key)
        if got is None:
            got = self._lists[key] = self.column(key).scores()
        return got

    def __repr__(self) -> str:
        return f"ScoreColumns({list(self._chunks)}, {len(self._samples)} samples)"

    def column(self, key: str) -> ScoreColumn:
        """One metric's values aligned with the samples ("not scored" where no batch had a sample)."""
        col = self._columns.get(key)
        if col is None:
            col = self._columns[key] = self._align(self._chunks[key])
        return col

    def _align(self, chunks: list[tuple[list[str], ScoreColumn]]) -> ScoreColumn:
        import numpy as np

        n = len(self._samples)
        if len(chunks) == 1 and len(chunks[0][0]) == n and all(
                a == s.id for a, s in zip(chunks[0][0], self._samples, strict=True)):
            return chunks[0][1]
        if self._index is None:
            self._index = {s.id: i for i, s in enumerate(self._samples)}
        index = self._index
        values = np.full(n, np.nan)
        seen = np.zeros(n, dtype=bool)
        reasons: dict[int, str | None] = {}
        details: dict[int, Any] = {}
        for ids, col in chunks:
            pos = np.fromiter(map(index.__getitem__, ids), dtype=np.int64, count=len(ids))
            values[pos] = col.values
            seen[pos] = True
            if col.reasons is not None:
                reasons.update((p, r) for p, r in zip(pos.tolist(), col.reasons, strict=True) if r is not None)
            if col.details is not None:
                details.update((p, d) for p, d in zip(pos.tolist(), col.details, strict=True) if d)
        for p in np.flatnonzero(~seen).tolist():
            reasons[p] = "not scored"
        return ScoreColumn(values, [reasons.get(i) for i in range(n)] if reasons else None,
                           [details.get(i) for i in range(n)] if details else None)

    def for_aggregate(self) -> dict[str, tuple[Any, list[str | None]]]:
        """``{key: (values with NaN, reasons)}`` as :func:`ragmeter.stats.aggregate_many` takes them."""
        return {k: (c.values, c.reason_list()) for k in self._chunks for c in (self.column(k),)}
