"""Store API used by the runner and by every presentation layer (CLI, report, dashboard)."""

from __future__ import annotations

import json
import os
import socket
import uuid
import weakref
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, create_engine, delete, event, func, inspect, or_, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from ragmeter.core.errors import StoreError
from ragmeter.core.schema import Sample, Score, ScoreColumn
from ragmeter.store.models import (
    Base,
    EmbeddingCacheRow,
    JudgeCacheRow,
    KeyValueRow,
    MetricName,
    Run,
    RunSample,
    ScoreRow,
    utcnow,
)
from ragmeter.store.views import RunViewsMixin, no_run

DEFAULT_PATH = Path(".ragmeter") / "ragmeter.db"
BASELINE_REVISION = "0001_baseline"
LEASE_STALE = timedelta(seconds=60)  # a run whose writer has not beaten for this long is dead
_MIGRATIONS = Path(__file__).parent / "migrations"

if TYPE_CHECKING:
    from ragmeter.store.records import RunSummary


def default_url() -> str:
    """``$RAGMETER_DB`` if set, else a SQLite file at ``./.ragmeter/ragmeter.db``."""
    env = os.environ.get("RAGMETER_DB")
    if env:
        return env if "://" in env else f"sqlite:///{env}"
    return f"sqlite:///{DEFAULT_PATH}"


_OPEN: weakref.WeakSet[Store] = weakref.WeakSet()


def close_all() -> None:
    """Close the connections of every store this process opened (SQLite checkpoints its write-ahead
    log when the last connection closes); the CLI calls it before its quick exit."""
    for store in list(_OPEN):
        store.engine.dispose()


def open_store(url: str | None = None, *, must_exist: bool = False) -> Store:
    """Open (and create or upgrade) the store at ``url``.

    Args:
        url: SQLAlchemy URL or SQLite path; default :func:`default_url`.
        must_exist: refuse a SQLite file that does not exist instead of creating it (read-only
            commands: a typo must not leave an empty database behind).

    Raises:
        StoreError: the database cannot be opened, or ``must_exist`` and the file is missing.
    """
    url = url or default_url()
    if "://" not in url:
        url = f"sqlite:///{url}"
    path = sqlite_path(url)
    if must_exist and path is not None and not path.exists():
        raise StoreError(f"no database at {path} (check --db / $RAGMETER_DB; `ragmeter eval` creates one)")
    return Store(url)


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL, or None (memory database, other dialects)."""
    if not url.startswith("sqlite"):
        return None
    rest = url.split(":///", 1)[1] if ":///" in url else ""
    rest = rest.split("?", 1)[0]
    if not rest or rest == ":memory:":
        return None
    return Path(rest)


def _alembic_config(conn: Connection) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.attributes["connection"] = conn
    return cfg


#: the newest migration's revision; a test keeps it equal to Alembic's head. A store already at it
#: opens without importing Alembic (a quarter of a second of every command's start-up)
SCHEMA_HEAD = "0007_judge_cache_tokens"


def head_revision() -> str:
    """The newest schema revision this ragmeter knows."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head is not None
    return head


def _known_revisions() -> set[str]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    return {rev.revision for rev in ScriptDirectory.from_config(cfg).walk_revisions()}


def _current_revision(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn).get_current_revision()


class Store(RunViewsMixin):
    """A handle on the database. Thread-safe for the runner's use (one session per call).

    Opening creates a new database at the newest schema revision, or upgrades an older one in
    place (Alembic migrations shipped in ``ragmeter/store/migrations``). Creation and upgrades run
    under a lock (a file lock next to a SQLite file, an advisory lock on PostgreSQL), so several
    processes opening one new database at once all succeed.
    """

    def __init__(self, url: str) -> None:
        if "://" not in url:
            url = f"sqlite:///{url}"
        self.url = url
        path = sqlite_path(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            kwargs: dict[str, Any] = {}
            if url.startswith("sqlite"):
                kwargs["connect_args"] = {"timeout": 60}
            self.engine: Engine = create_engine(url, future=True, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any driver/URL problem
            raise StoreError(f"cannot open database {url!r}: {exc}") from exc
        self.dialect = self.engine.dialect.name
        if self.dialect == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        try:
            self._ensure_schema(path)
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - unreachable server, bad credentials, corrupt file
            raise StoreError(f"cannot open database {url!r}: {type(exc).__name__}: {exc}") from exc
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        _OPEN.add(self)
        self._metric_ids: dict[str, int] = {}
        self._positions: dict[str, dict[str, int]] = {}

    # ---- schema -----------------------------------------------------------------------------
    def _ensure_schema(self, path: Path | None) -> None:
        try:
            with self.engine.connect() as conn:
                current = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all()
        except Exception:  # noqa: BLE001 - no table yet (a new database): Alembic below creates it
            current = []
        if current == [SCHEMA_HEAD]:
            return
        head = None
        if current:  # an older (or newer) schema: Alembic decides
            head = head_revision()
            with self.engine.connect() as conn:
                if _current_revision(conn) == head:
                    return
        if path is not None:
            from filelock import FileLock

            with FileLock(str(path) + ".lock", timeout=300):
                self._migrate(head)
        else:
            self._migrate(head)

    def _migrate(self, head: str | None) -> None:
        with self.engine.begin() as conn:
            if self.dialect == "postgresql":
                # one creator/upgrader at a time; released at commit
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7301202611)")
            tables = inspect(conn)
            if not tables.has_table("runs") and not tables.has_table("alembic_version"):
                # a new database: the current tables, stamped with the head revision (SCHEMA_HEAD is
                # the Alembic head, a test keeps them equal) without loading Alembic
                Base.metadata.create_all(conn)
                conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
                                     "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))")
                conn.exec_driver_sql(f"INSERT INTO alembic_version (version_num) VALUES ('{SCHEMA_HEAD}')")
                return
            from alembic import command

            head = head or head_revision()
            current = _current_revision(conn)
            if current == head:
                return
            cfg = _alembic_config(conn)
            if current is None and not tables.has_table("runs"):
                Base.metadata.create_all(conn)
                command.stamp(cfg, head)
                return
            if current is None:  # written by ragmeter before the schema was versioned
                command.stamp(cfg, BASELINE_REVISION)
            known = _known_revisions()
            if current is not None and current not in known:
                raise StoreError(f"database {self.url} has schema revision {current}, newer than this "
                                 f"ragmeter knows ({head}): upgrade ragmeter")
            command.upgrade(cfg, "head")

    def schema_revision(self) -> str | None:
        """The schema revision stamped in the database."""
        with self.engine.connect() as conn:
            return _current_revision(conn)

    def session(self) -> Session:
        return self._sessions()

    # ---- idempotent inserts -----------------------------------------------------------------
    def _insert_ignore(self, conn: Session | Connection, table: Any, rows: list[dict[str, Any]],
                       keys: Sequence[str]) -> None:
        """Insert rows, skipping any whose key is already stored (by anyone, at any moment):
        ``INSERT ... ON CONFLICT DO NOTHING`` on SQLite and PostgreSQL, so concurrent writers
        never collide."""
        if not rows:
            return
        if self.dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        elif self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            existing = set()
            for r in rows:
                cond = and_(*(table.c[k] == r[k] for k in keys))
                if conn.execute(select(func.count()).select_from(table).where(cond)).scalar():
                    existing.add(tuple(r[k] for k in keys))
            rows = [r for r in rows if tuple(r[k] for k in keys) not in existing]
            if rows:
                conn.execute(table.insert(), rows)
            return
        stmt = dialect_insert(table).on_conflict_do_nothing(index_elements=list(keys))
        for i in range(0, len(rows), 5000):
            conn.execute(stmt, rows[i:i + 5000])

    def put_judge_cache(self, session: Session, rows: list[dict[str, Any]]) -> None:
        """Store judge replies (dicts of :class:`JudgeCacheRow` columns); a key already stored,
        by this or another process, is kept as it is."""
        uniq = list({r["key"]: r for r in rows}.values())
        self._insert_ignore(session, JudgeCacheRow.__table__, uniq, ["key"])

    # ---- runs -------------------------------------------------------------------------------
    def create_run(self, *, dataset_source: str, fingerprint: str, samples: Sequence[Sample],
                   metrics: list[dict[str, Any]], config: dict[str, Any], version: str,
                   name: str | None = None, tags: Sequence[str] = (), n_samples: int | None = None) -> str:
        """Store a new run (status ``running``, this process holding its lease) with its ``samples``.

        ``n_samples``: a run whose samples are stored later, chunk by chunk (:meth:`add_samples`,
        :mod:`ragmeter.run.stream`): its sample count, with ``samples`` empty."""
        if n_samples is not None:
            if samples:
                raise ValueError("give samples or n_samples, not both")
            run_id = uuid.uuid4().hex[:12]
            with self.session() as s, s.begin():
                s.add(Run(id=run_id, name=name, status="running", ragmeter_version=version,
                          dataset_source=dataset_source, dataset_fingerprint=fingerprint,
                          n_samples=n_samples, metrics=metrics, config=config, tags=list(tags),
                          owner=lease_owner(), heartbeat_at=utcnow()))
            return run_id
        run_id = uuid.uuid4().hex[:12]
        with self.session() as s, s.begin():
            s.add(Run(id=run_id, name=name, status="running", ragmeter_version=version,
                      dataset_source=dataset_source, dataset_fingerprint=fingerprint,
                      n_samples=len(samples), metrics=metrics, config=config, tags=list(tags),
                      owner=lease_owner(), heartbeat_at=utcnow()))
            s.flush()
            self._insert_samples(s.connection(), run_id, samples, 0)
        self._positions[run_id] = {x.id: i for i, x in enumerate(samples)}
        if len(samples) > 20_000:  # what a large run's report shows of its data, known now
            from ragmeter.store.columns import DATASET_NAMESPACE, dataset_fields

            self.kv_put(DATASET_NAMESPACE, run_id, dataset_fields(samples))
        return run_id

    def _insert_samples(self, conn: Any, run_id: str, samples: Sequence[Sample], start: int) -> None:
        """Insert ``samples`` at positions ``start``, ``start + 1`` ... of the run."""
        if samples and self.dialect == "sqlite":
            # pydantic writes each sample's JSON itself (in Rust), compressed as the column
            # stores it (store/codec.py): the column reads back the same
            from ragmeter.store.codec import encode_json

            conn.exec_driver_sql(
                "INSERT INTO run_samples (run_id, sample_id, position, data) VALUES (?, ?, ?, ?)",
                [(run_id, x.id, i, encode_json(x.model_dump_json(exclude_defaults=True)))
                 for i, x in enumerate(samples, start)])
        elif samples:
            conn.execute(RunSample.__table__.insert(), [
                {"run_id": run_id, "sample_id": x.id, "position": i,
                 "data": x.model_dump(mode="json", exclude_defaults=True)}
                for i, x in enumerate(samples, start)])

    def add_samples(self, run_id: str, samples: Sequence[Sample], start: int) -> None:
        """Store a chunk of a run's samples at positions ``start`` onwards (a run created with
        ``n_samples``, or one whose samples a resume completes), in one transaction. The run's
        id-to-position map is not kept in memory: :meth:`add_scores_at` writes by position."""
        with self.engine.begin() as conn:
            self._insert_samples(conn, run_id, samples, start)
        self._positions.pop(run_id, None)

    def stored_sample_count(self, run_id: str) -> int:
        """How many of the run's samples are stored (fewer than ``n_samples``: a streamed run that
        stopped before it stored them all)."""
        with self.session() as s:
            return int(s.execute(select(func.count()).select_from(RunSample)
                                 .where(RunSample.run_id == run_id)).scalar_one())

    def resolve_run(self, ref: str) -> str:
        """A full id, ``latest``, a run name, or a unique id prefix -> the run id (in that order:
        a run's full name is never taken for the prefix of another run's id).

        Ids are compared exactly or by prefix (never as SQL LIKE patterns, so ``%`` and ``_``
        match only themselves)."""
        with self.session() as s:
            if ref in {"latest", "last"}:
                rid = s.scalar(select(Run.id).order_by(Run.created_at.desc()).limit(1))
                if rid is None:
                    raise StoreError("the store holds no run yet")
                return rid
            if s.get(Run, ref) is not None:
                return ref
            # a name given in full wins over an id that merely starts with the same letters
            # (`compare a b` of runs named "a" and "b" must not pick a run whose id starts with "a")
            named = s.scalars(select(Run.id).where(Run.name == ref)
                              .order_by(Run.created_at.desc())).all()
            if named:
                return named[0]
            if ref:
                ids = s.scalars(select(Run.id).where(func.substr(Run.id, 1, len(ref)) == ref)
                                .order_by(Run.id)).all()
                if len(ids) == 1:
                    return ids[0]
                if len(ids) > 1:
                    raise StoreError(f"run id prefix {ref!r} is ambiguous: {', '.join(ids[:5])}")
        raise no_run(ref, self.url)

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

    def finish_run(self, run_id: str, *, status: str, summary: RunSummary | dict[str, Any],
                   timings: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
        """Mark a run finished with its summary (a :class:`~ragmeter.store.records.RunSummary`,
        stored as its JSON with its format version; a plain ``{metric: {...}}`` dict is taken as
        the current format)."""
        from ragmeter.store.records import RunSummary

        record = summary if isinstance(summary, RunSummary) else RunSummary.from_dict(summary)
        self.update_run(run_id, status=status, summary=record.to_dict(), summary_format=record.format_version,
                        timings=timings, extra=extra or {}, finished_at=utcnow(), heartbeat_at=None)

    def run_summary(self, run: str | Run) -> RunSummary:
        """A run's summary as a typed record, whatever format version it was stored in (a run
        stored before versions existed is read as version 0). ``run``: a reference
        (:meth:`get_run`), or a run row already read (no query); a run not finished yet has an
        empty summary.

        Raises:
            StoreError: no such run, or a format version newer than this ragmeter reads.
        """
        from ragmeter.store.records import RunSummary

        row = run if isinstance(run, Run) else self.get_run(run)
        return RunSummary.from_stored(row.summary, row.summary_format)

    def list_runs(self, limit: int | None = None, tag: str | None = None) -> list[Run]:
        """Runs, newest first; with ``tag``, only runs carrying that tag."""
        with self.session() as s:
            q = select(Run).order_by(Run.created_at.desc(), Run.id)
            if limit and tag is None:
                q = q.limit(limit)
            runs = list(s.scalars(q).all())
        if tag is not None:
            runs = [r for r in runs if tag in (r.tags or [])]
            if limit:
                runs = runs[:limit]
        return runs

    def delete_run(self, ref: str) -> str:
        """Delete a run, its samples and scores (never the embedding or judge caches)."""
        rid = self.resolve_run(ref)
        with self.session() as s, s.begin():
            s.execute(delete(ScoreRow).where(ScoreRow.run_id == rid))
            s.execute(delete(RunSample).where(RunSample.run_id == rid))
            s.execute(delete(Run).where(Run.id == rid))
        self._positions.pop(rid, None)
        return rid

    def rename_run(self, ref: str, name: str | None) -> str:
        rid = self.resolve_run(ref)
        self.update_run(rid, name=name)
        return rid

    def tag_run(self, ref: str, add: Sequence[str] = (), remove: Sequence[str] = ()) -> list[str]:
        """Add and remove tags of a run; returns its tags."""
        rid = self.resolve_run(ref)
        with self.session() as s, s.begin():
            run = s.get(Run, rid)
            assert run is not None
            tags = [t for t in (run.tags or []) if t not in set(remove)]
            tags += [t for t in add if t not in tags]
            run.tags = tags
        return tags

    # ---- lease ------------------------------------------------------------------------------
    def acquire_lease(self, run_id: str, stale: timedelta = LEASE_STALE) -> bool:
        """Take over writing a run unless another live process holds it (its heartbeat is
        younger than ``stale``). Atomic: of two processes resuming one run, one wins."""
        now = utcnow()
        with self.engine.begin() as conn:
            holder = conn.execute(select(Run.owner).where(Run.id == run_id)).scalar()
            # a holder on this machine whose process is gone (killed, crashed) holds nothing
            dead = [holder] if holder and _dead_local_owner(holder) else []
            res = conn.execute(update(Run).where(
                Run.id == run_id,
                or_(Run.status != "running", Run.heartbeat_at.is_(None), Run.heartbeat_at < now - stale,
                    Run.owner.in_([lease_owner(), *dead])))
                .values(owner=lease_owner(), heartbeat_at=now, status="running"))
            return res.rowcount == 1

    def heartbeat(self, run_id: str) -> None:
        """Say this process is still writing the run."""
        with self.engine.begin() as conn:
            conn.execute(update(Run).where(Run.id == run_id, Run.owner == lease_owner())
                         .values(heartbeat_at=utcnow()))

    def owns_lease(self, run_id: str) -> bool:
        with self.session() as s:
            return s.scalar(select(Run.owner).where(Run.id == run_id)) == lease_owner()

    def run_samples(self, run_id: str) -> list[Sample]:
        with self.session() as s:
            rows = s.execute(select(RunSample.data).where(RunSample.run_id == run_id)
                             .order_by(RunSample.position)).scalars().all()
            return [Sample.model_validate(r) for r in rows]

    # ---- scores -----------------------------------------------------------------------------
    def _metric_id(self, name: str) -> int:
        mid = self._metric_ids.get(name)
        if mid is None:
            with self.engine.begin() as conn:
                self._insert_ignore(conn, MetricName.__table__, [{"name": name}], ["name"])
                mid = conn.execute(select(MetricName.id).where(MetricName.name == name)).scalar_one()
            self._metric_ids[name] = mid
        return mid

    def _sample_positions(self, run_id: str) -> dict[str, int]:
        pos = self._positions.get(run_id)
        if pos is None:
            with self.session() as s:
                pos = dict(s.execute(select(RunSample.sample_id, RunSample.position)
                                     .where(RunSample.run_id == run_id)).all())
            self._positions[run_id] = pos
        return pos

    def _sample_ids(self, run_id: str) -> dict[int, str]:
        return {p: sid for sid, p in self._sample_positions(run_id).items()}

    def add_scores(self, run_id: str, metric: str, sample_ids: Sequence[str],
                   scores: Sequence[Score] | ScoreColumn) -> None:
        """Insert one metric's scores for some samples, in one transaction (one executemany).
        A pair already stored is left as it is, so concurrent or repeated writers never fail.
        ``scores`` is a list of :class:`Score` or a :class:`~ragmeter.core.schema.ScoreColumn`."""
        if len(sample_ids) != len(scores):
            raise ValueError("sample_ids and scores differ in length")
        if not len(scores):
            return
        if isinstance(scores, ScoreColumn):
            self._add_column(run_id, metric, sample_ids, scores)
            return
        mid = self._metric_id(metric)
        pos = self._sample_positions(run_id)
        unknown = [sid for sid in sample_ids if sid not in pos]
        if unknown:
            self._positions.pop(run_id, None)
            pos = self._sample_positions(run_id)
            unknown = [sid for sid in sample_ids if sid not in pos]
            if unknown:
                raise StoreError(f"run {run_id} has no sample {unknown[0]!r}")
        if self.dialect == "sqlite":
            # one executemany of plain tuples: SQLAlchemy's per-row parameter processing costs more
            # than SQLite's insert here; details are JSON as the JSON column would write them
            dumps = json.dumps
            tuples = [(run_id, mid, pos[sid], sc.value, sc.reason, dumps(sc.details) if sc.details else None)
                      for sid, sc in zip(sample_ids, scores, strict=True)]
            with self.engine.begin() as conn:
                conn.exec_driver_sql("INSERT INTO scores (run_id, metric_id, position, value, reason, details) "
                                     "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", tuples)
            return
        rows = [{"run_id": run_id, "metric_id": mid, "position": pos[sid], "value": sc.value,
                 "reason": sc.reason, "details": sc.details or None}
                for sid, sc in zip(sample_ids, scores, strict=True)]
        with self.engine.begin() as conn:
            self._insert_ignore(conn, ScoreRow.__table__, rows, ["run_id", "metric_id", "position"])

    def _positions_of(self, run_id: str, sample_ids: Sequence[str]) -> list[int]:
        pos = self._sample_positions(run_id)
        try:
            return list(map(pos.__getitem__, sample_ids))
        except KeyError:
            self._positions.pop(run_id, None)
            pos = self._sample_positions(run_id)
            unknown = [sid for sid in sample_ids if sid not in pos]
            if unknown:
                raise StoreError(f"run {run_id} has no sample {unknown[0]!r}") from None
            return list(map(pos.__getitem__, sample_ids))

    def _add_column(self, run_id: str, metric: str, sample_ids: Sequence[str], col: ScoreColumn) -> None:
        """:meth:`add_scores` of a column: on SQLite, a column without reasons and details (a lexical
        metric's usual batch) binds two parameters per row, position and value."""
        self.add_scores_at(run_id, metric, self._positions_of(run_id, sample_ids), col)

    def add_scores_at(self, run_id: str, metric: str, positions: Sequence[int], col: ScoreColumn) -> None:
        """:meth:`add_scores` of a column by the samples' positions in the run (their order in the
        dataset) instead of their ids."""
        if len(positions) != len(col):
            raise ValueError("positions and scores differ in length")
        if not len(col):
            return
        mid = self._metric_id(metric)
        values = col.value_list()
        if self.dialect == "sqlite" and col.reasons is None and col.details is None and run_id.isalnum():
            with self.engine.begin() as conn:
                conn.exec_driver_sql(f"INSERT INTO scores (run_id, metric_id, position, value) "  # noqa: S608
                                     f"VALUES ('{run_id}', {int(mid)}, ?, ?) ON CONFLICT DO NOTHING",
                                     list(zip(positions, values, strict=True)))
            return
        reasons = col.reason_list()  # made by Score.missing or by the runner: already redacted
        details = col.details or [None] * len(values)
        if self.dialect == "sqlite":
            dumps = json.dumps
            tuples = [(run_id, mid, p, v, r, dumps(d) if d else None)
                      for p, v, r, d in zip(positions, values, reasons, details, strict=True)]
            with self.engine.begin() as conn:
                conn.exec_driver_sql("INSERT INTO scores (run_id, metric_id, position, value, reason, details) "
                                     "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", tuples)
            return
        rows = [{"run_id": run_id, "metric_id": mid, "position": p, "value": v, "reason": r, "details": d or None}
                for p, v, r, d in zip(positions, values, reasons, details, strict=True)]
        with self.engine.begin() as conn:
            self._insert_ignore(conn, ScoreRow.__table__, rows, ["run_id", "metric_id", "position"])

    def scored_pairs(self, run_id: str) -> set[tuple[str, str]]:
        """The (sample_id, metric) pairs already stored for a run (what a resume can skip)."""
        ids = self._sample_ids(run_id)
        with self.session() as s:
            rows = s.execute(select(ScoreRow.position, MetricName.name)
                             .join(MetricName, MetricName.id == ScoreRow.metric_id)
                             .where(ScoreRow.run_id == run_id)).all()
        return {(ids[pos], m) for pos, m in rows}

    def _score_rows(self, run_id: str, metric: str | None = None) -> Iterable[tuple[Any, ...]]:
        """``(metric, sample_id, value, reason, details)`` by metric then sample position. Sample
        ids come from the run's position map (one read), not from a per-row join."""
        ids = self._sample_ids(run_id)
        q = (select(MetricName.name, ScoreRow.position, ScoreRow.value, ScoreRow.reason, ScoreRow.details)
             .join(MetricName, MetricName.id == ScoreRow.metric_id)
             .where(ScoreRow.run_id == run_id))
        if metric is not None:
            q = q.where(MetricName.name == metric)
        with self.session() as s:
            rows = s.execute(q.order_by(ScoreRow.metric_id, ScoreRow.position)).all()
        return [(m, ids[pos], v, r, d) for m, pos, v, r, d in rows]

    def scores(self, run_id: str, metric: str | None = None) -> list[StoredScore]:
        """A run's stored scores (one :class:`StoredScore` per pair), by metric then sample."""
        return [StoredScore(run_id, sid, m, v, r, d) for m, sid, v, r, d in self._score_rows(run_id, metric)]

    def score_table(self, run_id: str) -> dict[str, dict[str, Score]]:
        """``{metric: {sample_id: Score}}`` for a run."""
        out: dict[str, dict[str, Score]] = {}
        # plain tuples, not ORM objects: this is the hot path of reports and comparisons
        for metric, sid, value, reason, details in self._score_rows(run_id):
            out.setdefault(metric, {})[sid] = Score(value, reason, details)
        return out

    def count_scores(self, run_id: str | None = None) -> int:
        with self.session() as s:
            q = select(func.count()).select_from(ScoreRow)
            if run_id is not None:
                q = q.where(ScoreRow.run_id == run_id)
            return int(s.scalar(q) or 0)

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
        rows = [{"model_id": model_id, "text_hash": h, "dim": dim, "vector": v} for h, v in items.items()]
        with self.engine.begin() as conn:
            self._insert_ignore(conn, EmbeddingCacheRow.__table__, rows, ["model_id", "text_hash"])

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
        """Store ``value`` under (namespace, key), replacing an older value; safe when several
        processes write the same key at once (insert-or-ignore, then update)."""
        with self.engine.begin() as conn:
            self._insert_ignore(conn, KeyValueRow.__table__,
                                [{"namespace": namespace, "key": key, "value": value, "created_at": utcnow()}],
                                ["namespace", "key"])
            conn.execute(update(KeyValueRow).where(KeyValueRow.namespace == namespace,
                                                   KeyValueRow.key == key).values(value=value))

    def kv_list(self, namespace: str) -> dict[str, dict[str, Any]]:
        with self.session() as s:
            return {r.key: r.value for r in s.scalars(select(KeyValueRow)
                                                      .where(KeyValueRow.namespace == namespace))}

    def close(self) -> None:
        self.engine.dispose()


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # busy timeout first: switching to WAL itself waits for other writers
    cur.execute("PRAGMA busy_timeout=60000")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def lease_owner() -> str:
    """``host:pid`` of this process, recorded on the runs it writes."""
    return f"{socket.gethostname()}:{os.getpid()}"


class StoredScore:
    """One stored (run, sample, metric) value as read back by :meth:`Store.scores`."""

    __slots__ = ("run_id", "sample_id", "metric", "value", "reason", "details")

    def __init__(self, run_id: str, sample_id: str, metric: str, value: float | None,
                 reason: str | None, details: dict[str, Any] | None) -> None:
        self.run_id = run_id
        self.sample_id = sample_id
        self.metric = metric
        self.value = value
        self.reason = reason
        self.details = details

    def __repr__(self) -> str:
        return f"StoredScore({self.sample_id!r}, {self.metric!r}, {self.value!r})"


def _dead_local_owner(owner: str) -> bool:
    """Is ``owner`` (``host:pid``) a process of this machine that no longer runs?"""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    import psutil  # psutil, not os.kill(pid, 0): on Windows that signal would end the process

    try:
        return psutil.Process(int(pid)).status() == psutil.STATUS_ZOMBIE  # exited, not yet reaped
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # exists, but belongs to someone else
        return False
