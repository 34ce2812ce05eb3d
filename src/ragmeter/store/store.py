"""Store API used by the runner and by every presentation layer (CLI, report, dashboard)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, delete, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from ragmeter.errors import StoreError
from ragmeter.schema import Sample, Score
from ragmeter.store.models import Base, EmbeddingCacheRow, KeyValueRow, Run, RunSample, ScoreRow, utcnow
from ragmeter.store.views import RunViewsMixin

DEFAULT_PATH = Path(".ragmeter") / "ragmeter.db"


def default_url() -> str:
    """``$RAGMETER_DB`` if set, else a SQLite file at ``./.ragmeter/ragmeter.db``."""
    env = os.environ.get("RAGMETER_DB")
    if env:
        return env if "://" in env else f"sqlite:///{env}"
    return f"sqlite:///{DEFAULT_PATH}"


def open_store(url: str | None = None) -> Store:
    return Store(url or default_url())


class Store(RunViewsMixin):
    """A handle on the database. Thread-safe for the runner's use (one session per call)."""

    def __init__(self, url: str) -> None:
        if "://" not in url:
            url = f"sqlite:///{url}"
        self.url = url
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine: Engine = create_engine(url, future=True)
        except Exception as exc:  # noqa: BLE001 - any driver/URL problem
            raise StoreError(f"cannot open database {url!r}: {exc}") from exc
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        Base.metadata.create_all(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def session(self) -> Session:
        return self._sessions()

    # ---- runs -------------------------------------------------------------------------------
    def create_run(self, *, dataset_source: str, fingerprint: str, samples: Sequence[Sample],
                   metrics: list[dict[str, Any]], config: dict[str, Any], version: str,
                   name: str | None = None) -> str:
        run_id = uuid.uuid4().hex[:12]
        with self.session() as s, s.begin():
            s.add(Run(id=run_id, name=name, status="running", ragmeter_version=version,
                      dataset_source=dataset_source, dataset_fingerprint=fingerprint,
                      n_samples=len(samples), metrics=metrics, config=config))
            s.flush()
            s.add_all(RunSample(run_id=run_id, sample_id=x.id, position=i,
                                data=x.model_dump(mode="json", exclude_none=True))
                      for i, x in enumerate(samples))
        return run_id

    def resolve_run(self, ref: str) -> str:
        """A full id, a unique id prefix, ``latest``, or a run name -> the run id."""
        with self.session() as s:
            if ref in {"latest", "last"}:
                rid = s.scalar(select(Run.id).order_by(Run.created_at.desc()).limit(1))
                if rid is None:
                    raise StoreError("the store holds no run yet")
                return rid
            if s.get(Run, ref) is not None:
                return ref
            ids = s.scalars(select(Run.id).where(Run.id.like(f"{ref}%"))).all()
            if len(ids) == 1:
                return ids[0]
            if len(ids) > 1:
                raise StoreError(f"run id prefix {ref!r} is ambiguous: {', '.join(ids[:5])}")
            named = s.scalars(select(Run.id).where(Run.name == ref)
                              .order_by(Run.created_at.desc())).all()
            if named:
                return named[0]
        raise StoreError(f"no run {ref!r} in {self.url} (see `ragmeter runs`)")

    def get_run(self, ref: str) -> Run:
        rid = self.resolve_run(ref)
        with self.session() as s:
            run = s.get(Run, rid)
            assert run is not None
            return run

    def update_run(self, run_id: str, **fields: Any) -> None:
        with self.session() as s, s.begin():
            run = s.get(Run, run_id)
            if run is None:
                raise StoreError(f"no run {run_id!r}")
            for k, v in fields.items():
                setattr(run, k, v)

    def finish_run(self, run_id: str, *, status: str, summary: dict[str, Any],
                   timings: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
        self.update_run(run_id, status=status, summary=summary, timings=timings,
                        extra=extra or {}, finished_at=utcnow())

    def list_runs(self, limit: int | None = None) -> list[Run]:
        with self.session() as s:
            q = select(Run).order_by(Run.created_at.desc(), Run.id)
            if limit:
                q = q.limit(limit)
            return list(s.scalars(q).all())

    def delete_run(self, ref: str) -> None:
        rid = self.resolve_run(ref)
        with self.session() as s, s.begin():
            s.execute(delete(ScoreRow).where(ScoreRow.run_id == rid))
            s.execute(delete(RunSample).where(RunSample.run_id == rid))
            s.execute(delete(Run).where(Run.id == rid))

    def run_samples(self, run_id: str) -> list[Sample]:
        with self.session() as s:
            rows = s.scalars(select(RunSample).where(RunSample.run_id == run_id)
                             .order_by(RunSample.position)).all()
            return [Sample.model_validate(r.data) for r in rows]

    # ---- scores -----------------------------------------------------------------------------
    def add_scores(self, run_id: str, metric: str, sample_ids: Sequence[str],
                   scores: Sequence[Score]) -> None:
        """Insert one metric's scores for some samples, in one transaction."""
        if len(sample_ids) != len(scores):
            raise ValueError("sample_ids and scores differ in length")
        if not scores:
            return
        with self.session() as s, s.begin():
            s.execute(ScoreRow.__table__.insert(), [
                {"run_id": run_id, "sample_id": sid, "metric": metric,
                 "value": sc.value, "reason": sc.reason, "details": sc.details}
                for sid, sc in zip(sample_ids, scores, strict=True)])

    def scored_pairs(self, run_id: str) -> set[tuple[str, str]]:
        """The (sample_id, metric) pairs already stored for a run (what a resume can skip)."""
        with self.session() as s:
            return {(sid, metric) for sid, metric in s.execute(select(ScoreRow.sample_id, ScoreRow.metric)
                                                               .where(ScoreRow.run_id == run_id))}

    def scores(self, run_id: str, metric: str | None = None) -> list[ScoreRow]:
        with self.session() as s:
            q = select(ScoreRow).where(ScoreRow.run_id == run_id)
            if metric is not None:
                q = q.where(ScoreRow.metric == metric)
            return list(s.scalars(q.order_by(ScoreRow.pk)).all())

    def score_table(self, run_id: str) -> dict[str, dict[str, Score]]:
        """``{metric: {sample_id: Score}}`` for a run."""
        out: dict[str, dict[str, Score]] = {}
        with self.session() as s:
            # plain tuples, not ORM objects: this is the hot path of reports and comparisons
            rows = s.execute(select(ScoreRow.metric, ScoreRow.sample_id, ScoreRow.value,
                                    ScoreRow.reason, ScoreRow.details)
                             .where(ScoreRow.run_id == run_id).order_by(ScoreRow.pk))
            for metric, sid, value, reason, details in rows:
                out.setdefault(metric, {})[sid] = Score(value, reason, details)
        return out

    # ---- caches / key-value ----------------------------------------------------------------
    def get_embeddings(self, model_id: str, hashes: Iterable[str]) -> dict[str, bytes]:
        hashes = list(hashes)
        out: dict[str, bytes] = {}
        with self.session() as s:
            for i in range(0, len(hashes), 500):
                part = hashes[i:i + 500]
                for h, v in s.execute(select(EmbeddingCacheRow.text_hash, EmbeddingCacheRow.vector)
                                      .where(EmbeddingCacheRow.model_id == model_id,
                                             EmbeddingCacheRow.text_hash.in_(part))):
                    out[h] = v
        return out

    def put_embeddings(self, model_id: str, items: dict[str, bytes], dim: int) -> None:
        if not items:
            return
        with self.session() as s, s.begin():
            existing = set()
            keys = list(items)
            for i in range(0, len(keys), 500):
                existing |= set(s.scalars(select(EmbeddingCacheRow.text_hash).where(
                    EmbeddingCacheRow.model_id == model_id,
                    EmbeddingCacheRow.text_hash.in_(keys[i:i + 500]))).all())
            rows = [{"model_id": model_id, "text_hash": h, "dim": dim, "vector": v}
                    for h, v in items.items() if h not in existing]
            if rows:
                s.execute(EmbeddingCacheRow.__table__.insert(), rows)

    def kv_get(self, namespace: str, key: str) -> dict[str, Any] | None:
        with self.session() as s:
            row = s.get(KeyValueRow, (namespace, key))
            return row.value if row else None

    def kv_get_many(self, namespace: str, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        keys = list(keys)
        out: dict[str, dict[str, Any]] = {}
        with self.session() as s:
            for i in range(0, len(keys), 500):
                for row in s.scalars(select(KeyValueRow).where(KeyValueRow.namespace == namespace,
                                                                KeyValueRow.key.in_(keys[i:i + 500]))):
                    out[row.key] = row.value
        return out

    def kv_put(self, namespace: str, key: str, value: dict[str, Any]) -> None:
        with self.session() as s, s.begin():
            row = s.get(KeyValueRow, (namespace, key))
            if row is None:
                s.add(KeyValueRow(namespace=namespace, key=key, value=value))
            else:
                row.value = value

    def kv_list(self, namespace: str) -> dict[str, dict[str, Any]]:
        with self.session() as s:
            return {r.key: r.value for r in s.scalars(select(KeyValueRow)
                                                      .where(KeyValueRow.namespace == namespace))}

    def close(self) -> None:
        self.engine.dispose()


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()
