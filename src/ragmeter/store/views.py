"""Read paths of the dashboard: exact run lookups and paged reads of a run's samples and scores.

The dashboard must stay fast on runs of 100k samples, so nothing here loads a whole run as
objects: aggregates are built from streamed plain rows (once per run version, then cached by the
caller), and a page of samples reads only that page's rows of ``run_samples`` and ``scores``.
Everything uses SQLAlchemy Core on the current tables, so a change of the tables' layout is
adapted here, in one place. User text is never used as a SQL ``LIKE`` pattern.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from ragmeter.core.errors import StoreError
from ragmeter.core.schema import Sample, Score
from ragmeter.store.models import MetricName, Run, RunSample, ScoreRow

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

#: a run reference longer than this cannot name a run (ids are 12 characters, names are short).
MAX_REF_LENGTH = 300


def no_run(ref: str, url: str) -> StoreError:
    """No run is ``ref``: the error, with ``latest`` suggested for a misspelling of it."""
    import difflib

    hint = "; did you mean 'latest'?" if difflib.get_close_matches(ref.lower(), ["latest"], cutoff=0.7) else ""
    return StoreError(f"no run {ref[:80]!r} in {url} (see `ragmeter runs`){hint}")
_CHUNK = 500


class RunViewsMixin:
    """Store methods for presentation layers that must not load a whole run.

    Mixed into :class:`ragmeter.store.Store`; relies on its ``session()`` and ``url``.
    """

    url: str

    def session(self) -> Session:  # pragma: no cover - provided by Store
        raise TypeError("RunViewsMixin needs a Store")

    # ---- runs -------------------------------------------------------------------------------
    def find_run(self, ref: str) -> Run:
        """The run named by ``ref``, matched exactly: ``latest``/``last``, a full id, a unique id
        prefix (compared as a plain string, never as a pattern), or a run name (the newest).

        Raises:
            StoreError: no run matches, or an id prefix matches several runs.
        """
        missing = no_run(ref, self.url)
        if not ref or len(ref) > MAX_REF_LENGTH:
            raise missing
        with self.session() as s:
            if ref in {"latest", "last"}:
                run = s.scalars(select(Run).order_by(Run.created_at.desc(), Run.id).limit(1)).first()
                if run is None:
                    raise StoreError("the store holds no run yet")
                return run
            run = s.get(Run, ref)
            if run is not None:
                return run
            ids = s.scalars(select(Run.id).where(func.substr(Run.id, 1, len(ref)) == ref)
                            .order_by(Run.id).limit(6)).all()
            if len(ids) > 1:
                raise StoreError(f"run id prefix {ref!r} is ambiguous: {', '.join(ids[:5])}")
            if ids:
                return s.get(Run, ids[0])  # type: ignore[return-value]
            run = s.scalars(select(Run).where(Run.name == ref)
                            .order_by(Run.created_at.desc()).limit(1)).first()
            if run is not None:
                return run
        raise missing

    def run_version(self, run: Run) -> str:
        """A key that changes whenever what the dashboard shows of ``run`` can change: its
        status, its finish time, and how many scores it holds (scores are only ever added)."""
        with self.session() as s:
            n_scores = s.scalar(select(func.count()).select_from(ScoreRow)
                                .where(ScoreRow.run_id == run.id)) or 0
        fin = run.finished_at.isoformat() if run.finished_at else "-"
        return f"{run.status}|{fin}|{n_scores}"

    # ---- streamed reads (for building aggregates once) ---------------------------------------
    def iter_sample_rows(self, run_id: str, chunk: int = 2000) -> Iterator[tuple[int, int, str, dict[str, Any]]]:
        """``(pk, position, sample_id, data)`` of every sample of a run, streamed in chunks of
        ``chunk`` rows by primary key (bounded memory whatever the run's size)."""
        t = RunSample.__table__
        last = -1
        while True:
            with self.session() as s:
                rows = s.execute(select(t.c.pk, t.c.position, t.c.sample_id, t.c.data)
                                 .where(t.c.run_id == run_id, t.c.pk > last)
                                 .order_by(t.c.pk).limit(chunk)).all()
            if not rows:
                return
            for pk, pos, sid, data in rows:
                yield int(pk), int(pos), sid, data
            last = rows[-1][0]

    def score_values(self, run_id: str) -> dict[str, dict[str, Score]]:
        """``{metric: {sample_id: Score(value, reason)}}`` without the details (judge verdicts
        can be large and aggregates never read them)."""
        ids = self._sample_ids(run_id)  # position -> sample id (the scores table stores positions)
        out: dict[str, dict[str, Score]] = {}
        with self.session() as s:
            rows = s.execute(select(MetricName.name, ScoreRow.position, ScoreRow.value, ScoreRow.reason)
                             .join(MetricName, MetricName.id == ScoreRow.metric_id)
                             .where(ScoreRow.run_id == run_id)
                             .order_by(ScoreRow.metric_id, ScoreRow.position)
                             .execution_options(yield_per=5000))
            for metric, pos, value, reason in rows:
                out.setdefault(metric, {})[ids[pos]] = Score(value, reason)
        return out

    # ---- paged reads -------------------------------------------------------------------------
    def samples_by_pk(self, run_id: str, pks: Sequence[int]) -> dict[int, tuple[int, Sample]]:
        """``{pk: (position, Sample)}`` for these ``run_samples`` primary keys of one run."""
        t = RunSample.__table__
        out: dict[int, tuple[int, Sample]] = {}
        with self.session() as s:
            for i in range(0, len(pks), _CHUNK):
                part = [int(p) for p in pks[i:i + _CHUNK]]
                for pk, pos, data in s.execute(select(t.c.pk, t.c.position, t.c.data)
                                               .where(t.c.run_id == run_id, t.c.pk.in_(part))):
                    out[int(pk)] = (int(pos), Sample.model_validate(data))
        return out

    def sample_ids_by_pk(self, run_id: str, pks: Sequence[int]) -> dict[int, str]:
        """``{pk: sample_id}`` for these ``run_samples`` primary keys of one run."""
        t = RunSample.__table__
        with self.session() as s:
            return {int(pk): sid for pk, sid in s.execute(
                select(t.c.pk, t.c.sample_id).where(t.c.run_id == run_id,
                                                    t.c.pk.in_([int(p) for p in pks])))}

    def sample_by_id(self, run_id: str, sample_id: str) -> tuple[int, int, Sample] | None:
        """``(pk, position, Sample)`` of one sample of a run (exact id), or ``None``."""
        if len(sample_id) > MAX_REF_LENGTH:
            return None
        t = RunSample.__table__
        with self.session() as s:
            row = s.execute(select(t.c.pk, t.c.position, t.c.data)
                            .where(t.c.run_id == run_id, t.c.sample_id == sample_id)).first()
        if row is None:
            return None
        return int(row[0]), int(row[1]), Sample.model_validate(row[2])

    def sample_scores(self, run_id: str, sample_ids: Sequence[str]) -> dict[str, dict[str, Score]]:
        """``{metric: {sample_id: Score}}`` (with details) for only these samples of a run."""
        t = RunSample.__table__
        out: dict[str, dict[str, Score]] = {}
        with self.session() as s:
            for i in range(0, len(sample_ids), _CHUNK):
                part = list(sample_ids[i:i + _CHUNK])
                pos_of = {int(pos): sid for pos, sid in s.execute(
                    select(t.c.position, t.c.sample_id).where(t.c.run_id == run_id, t.c.sample_id.in_(part)))}
                if not pos_of:
                    continue
                for metric, pos, value, reason, details in s.execute(
                        select(MetricName.name, ScoreRow.position, ScoreRow.value, ScoreRow.reason,
                               ScoreRow.details)
                        .join(MetricName, MetricName.id == ScoreRow.metric_id)
                        .where(ScoreRow.run_id == run_id, ScoreRow.position.in_(list(pos_of)))
                        .order_by(ScoreRow.metric_id, ScoreRow.position)):
                    out.setdefault(metric, {})[pos_of[int(pos)]] = Score(value, reason, details)
        return out
