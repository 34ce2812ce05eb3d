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
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


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
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    sample_id: Mapped[str] = mapped_column(Text)
    position: Mapped[int] = mapped_column(Integer)
    data: Mapped[dict[str, Any]] = mapped_column(JSON)


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
