"""SQLAlchemy tables of the results store (SQLite by default, any SQLAlchemy URL works)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class SampleData(TypeDecorator[dict[str, Any]]):
    """A run's sample: a dict in Python; on SQLite a compressed blob (:mod:`ragmeter.store.codec`,
    which also reads the JSON text of older rows), JSON elsewhere (PostgreSQL compresses large
    values itself)."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        return dialect.type_descriptor(LargeBinary() if dialect.name == "sqlite" else JSON())

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        if dialect.name != "sqlite" or value is None:
            return value
        from ragmeter.store.codec import encode

        return encode(value)

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        from ragmeter.store.codec import decode

        return decode(value)


class Run(Base):
    """One evaluation run: its config, dataset fingerprint, status, timings and summary."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default="running")  # running|completed|failed
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)
    ragmeter_version: Mapped[str] = mapped_column(String(40))
    dataset_source: Mapped[str | None] = mapped_column(Text)
    dataset_fingerprint: Mapped[str] = mapped_column(String(64))
    n_samples: Mapped[int] = mapped_column(Integer, default=0)
    metrics: Mapped[list[Any]] = mapped_column(JSON, default=list)  # metric requests (name/params/key)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    timings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    summary: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # the format version of ``summary`` (store/records.py); NULL: stored before versions (read as 0)
    summary_format: Mapped[int | None] = mapped_column(Integer, nullable=True)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    tags: Mapped[list[str] | None] = mapped_column(JSON, default=list)
    # the lease: which process is writing the run, and when it last said it was alive
    owner: Mapped[str | None] = mapped_column(Text)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime)


class RunSample(Base):
    """A sample as it was evaluated in a run (so reports and comparisons need no dataset file)."""

    __tablename__ = "run_samples"
    __table_args__ = (UniqueConstraint("run_id", "sample_id"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # run_id lookups use the (run_id, sample_id) unique index: no index of its own
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    sample_id: Mapped[str] = mapped_column(Text)
    position: Mapped[int] = mapped_column(Integer)
    data: Mapped[dict[str, Any]] = mapped_column(SampleData)


class MetricName(Base):
    """A metric key stored once; scores refer to it by a small integer."""

    __tablename__ = "metric_names"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(Text, unique=True)


class ScoreRow(Base):
    """One (run, sample, metric) value, or no value with the reason. Stored once (primary key).

    Lean on purpose (tens of bytes a score): the metric is an id into ``metric_names``, the sample
    its position in the run (``run_samples.position``), details only where a metric has them, and
    on SQLite the table is clustered on its key (``WITHOUT ROWID``), so no second index is needed.
    """

    __tablename__ = "scores"
    __table_args__ = ({"sqlite_with_rowid": False},)

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    metric_id: Mapped[int] = mapped_column(ForeignKey("metric_names.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[float | None] = mapped_column(Float)
    reason: Mapped[str | None] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))


class EmbeddingCacheRow(Base):
    """A text's embedding under one model, keyed by (model id, sha256 of the text)."""

    __tablename__ = "embedding_cache"

    model_id: Mapped[str] = mapped_column(Text, primary_key=True)
    text_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    dim: Mapped[int] = mapped_column(Integer)
    vector: Mapped[bytes] = mapped_column(LargeBinary)  # float32, little-endian


class JudgeCacheRow(Base):
    """A judge reply keyed by hash(provider, model, prompt, parameters, prompt-template version)."""

    __tablename__ = "judge_cache"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    provider: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    response: Mapped[dict[str, Any]] = mapped_column(JSON)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class JudgeCallRow(Base):
    """Accounting of one judge request made (or served from cache) during a run."""

    __tablename__ = "judge_calls"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str | None] = mapped_column(Text, index=True)
    metric: Mapped[str | None] = mapped_column(Text)
    sample_id: Mapped[str | None] = mapped_column(Text)
    key: Mapped[str] = mapped_column(String(64))
    provider: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(Text)
    cached: Mapped[bool] = mapped_column(Boolean, default=False)
    ok: Mapped[bool] = mapped_column(Boolean, default=True)
    error: Mapped[str | None] = mapped_column(Text)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    #: of input_tokens: those the provider read from / wrote to its prompt cache (migration 0007)
    cached_input_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cache_write_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class KeyValueRow(Base):
    """A small keyed JSON record for other features' persistent state (e.g. LLM relevance qrels,
    baselines, grid-search rankings). ``namespace`` separates features."""

    __tablename__ = "kv"

    namespace: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


# ---- production monitoring ---------------------------------------------------------------------
class CallRow(Base):
    """One logged production RAG call (from ``ragmeter.monitor.log_call``, the HTTP ingest
    endpoint, or imported OpenTelemetry spans). ``call_id`` (optional, unique, up to 1,024
    characters, kept whole) makes re-sent batches and re-imported traces idempotent."""

    __tablename__ = "monitor_calls"
    __table_args__ = (Index("ix_monitor_calls_ts", "ts"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    call_id: Mapped[str | None] = mapped_column(String(1024), unique=True)
    ts: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    query: Mapped[str | None] = mapped_column(Text)
    answer: Mapped[str | None] = mapped_column(Text)
    contexts: Mapped[list[Any] | None] = mapped_column(JSON)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    feedback: Mapped[float | None] = mapped_column(Float)
    input_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(20), default="api")
    meta: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class OtelSpanRow(Base):
    """An OpenTelemetry span received by the OTLP endpoint whose trace has no root span yet (an
    exporter sends a trace's children first). Stored on arrival, so an acknowledged span survives
    a restart; the trace's call is assembled from these rows when its root arrives, and then they
    are deleted. ``data`` holds the span's parent, name, times, attributes, status and resource."""

    __tablename__ = "otel_spans"
    __table_args__ = (UniqueConstraint("trace_id", "span_id"), Index("ix_otel_spans_received_at", "received_at"))

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    trace_id: Mapped[str] = mapped_column(String(32))
    span_id: Mapped[str] = mapped_column(String(16))
    received_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


# ---- golden datasets -----------------------------------------------------------------------------
class CorpusDocumentRow(Base):
    """One version of a document of a named corpus: its extracted text and content hash.
    Re-adding a changed file adds a new version; the newest version is ``current``."""

    __tablename__ = "corpus_documents"
    __table_args__ = (UniqueConstraint("corpus", "path", "version"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    corpus: Mapped[str] = mapped_column(String(200), index=True)
    path: Mapped[str] = mapped_column(String(1000))
    version: Mapped[int] = mapped_column(Integer, default=1)
    current: Mapped[bool] = mapped_column(Boolean, default=True)
    doc_id: Mapped[str] = mapped_column(String(64))
    content_hash: Mapped[str] = mapped_column(String(64))
    format: Mapped[str] = mapped_column(String(10))
    text: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class DatasetRow(Base):
    """One version of a named dataset (generated or imported), with its content hash, tag and
    the record of how it was made (generator, parameters, filter counts)."""

    __tablename__ = "datasets"
    __table_args__ = (UniqueConstraint("name", "version"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    tag: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(20), default="final")  # final | draft
    content_hash: Mapped[str] = mapped_column(String(64), default="")
    parent_version: Mapped[int | None] = mapped_column(Integer)
    info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class DatasetSampleRow(Base):
    """A sample of a dataset version with its review state (pending, accepted, edited, rejected)."""

    __tablename__ = "dataset_samples"
    __table_args__ = (UniqueConstraint("dataset_pk", "sample_id"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_pk: Mapped[int] = mapped_column(ForeignKey("datasets.pk", ondelete="CASCADE"), index=True)
    sample_id: Mapped[str] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(Integer)
    review: Mapped[str] = mapped_column(String(20), default="pending")
    data: Mapped[dict[str, Any]] = mapped_column(JSON)
    reviewed_at: Mapped[datetime | None] = mapped_column(DateTime)


# ---- human annotation (ragmeter.human) --------------------------------------------------------
# Annotation tasks over a run's samples, their raters (personal links: only a hash of the token is
# stored) and the labels the raters gave. Labels are kept one per (task, item, rater, scale): a
# rater who changes a label replaces it; the row records when and under which task version.


class AnnotationTask(Base):
    """A set of a run's samples for people to label on some scales, with the rubric they see."""

    __tablename__ = "annotation_tasks"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str | None] = mapped_column(String(200))
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    scales: Mapped[list[Any]] = mapped_column(JSON)  # [{"name", "kind", "values", "labels"}]
    rubric: Mapped[str] = mapped_column(Text, default="")
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # n, seed, stratify, fields shown
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class AnnotationItem(Base):
    """One sample of the run included in a task."""

    __tablename__ = "annotation_items"
    __table_args__ = (UniqueConstraint("task_id", "sample_id"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("annotation_tasks.id", ondelete="CASCADE"), index=True)
    sample_id: Mapped[str] = mapped_column(String(200))
    position: Mapped[int] = mapped_column(Integer)
    stratum: Mapped[str | None] = mapped_column(String(100))


class AnnotationRater(Base):
    """A rater of a task; ``token_hash`` is sha256 of the personal link's token (never the token)."""

    __tablename__ = "annotation_raters"
    __table_args__ = (UniqueConstraint("task_id", "name"),)

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("annotation_tasks.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    order_seed: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class AnnotationLabel(Base):
    """One rater's label of one item on one scale (``value`` as shown; ``value_num`` its number)."""

    __tablename__ = "annotation_labels"
    __table_args__ = (UniqueConstraint("task_id", "sample_id", "rater", "scale"),
                      Index("ix_annotation_labels_task", "task_id", "scale"))

    pk: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("annotation_tasks.id", ondelete="CASCADE"))
    sample_id: Mapped[str] = mapped_column(String(200))
    rater: Mapped[str] = mapped_column(String(100))
    scale: Mapped[str] = mapped_column(String(100))
    value: Mapped[str] = mapped_column(String(100))
    value_num: Mapped[float | None] = mapped_column(Float)
    task_version: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(20), default="web")  # web | csv
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
