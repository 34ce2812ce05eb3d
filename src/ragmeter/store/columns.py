"""A stored run's scores read as columns: one float array per metric, indexed by sample position.

What paired comparisons, exports and aggregates of large runs read: one query of plain
``(metric id, position, value)`` tuples turned into numpy arrays, instead of one
:class:`~ragmeter.core.schema.Score` object per stored score.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select

from ragmeter.store.models import MetricName, RunSample, ScoreRow


@dataclass
class RunColumns:
    """Scores of one run by sample position.

    Attributes:
        sample_ids: the run's sample ids in position order.
        values: ``{metric: float array}`` of length ``len(sample_ids)``, NaN where the sample has no
            value (not scored, or scored without a value).
        scored: ``{metric: bool array}``, True where a score (with or without a value) is stored.
    """

    sample_ids: list[str]
    values: dict[str, np.ndarray]
    scored: dict[str, np.ndarray]


def run_columns(store: Any, run_id: str, *, reasons: bool = False) -> tuple[RunColumns, dict[str, list[str | None]]]:
    """``(columns, reasons)`` of a stored run; ``reasons`` (``{metric: reason or None per
    position}``) is filled only when asked for."""
    if store.dialect == "sqlite":
        dense = _sqlite_dense(store, run_id, reasons)
        if dense is not None:
            return dense
    return _from_rows(store, run_id, reasons)


def _sqlite_dense(store: Any, run_id: str, reasons: bool) -> tuple[RunColumns, dict[str, list[str | None]]] | None:
    """:func:`run_columns` of a SQLite run whose every metric scored every sample (the usual run),
    one metric at a time on the scores' key: only the values (and reasons) cross from SQLite,
    already in position order, about half the work of reading ``(metric, position, value)``
    tuples. ``None`` when a metric scored only some samples (a conversation run, a run stopped
    part way) or the positions are not ``0..n-1``: :func:`_from_rows` places those by position."""
    picked = "value, reason" if reasons else "value"
    with store.engine.connect() as conn:
        cur = conn.connection.driver_connection.cursor()
        try:
            positions, ids = _sqlite_ids(cur, run_id)
            n = len(ids)
            if not n or positions[0] != 0 or positions[-1] != n - 1:
                return None
            values: dict[str, np.ndarray] = {}
            why: dict[str, list[str | None]] = {}
            for mid, name in cur.execute("SELECT id, name FROM metric_names").fetchall():
                rows = cur.execute(f"SELECT {picked} FROM scores WHERE run_id = ? AND metric_id = ? "  # noqa: S608
                                   "ORDER BY position", (run_id, mid)).fetchall()
                if not rows:
                    continue
                if len(rows) != n:
                    return None
                # None (no value) -> NaN in one conversion
                values[name] = np.fromiter((r[0] for r in rows), dtype=object, count=n).astype(np.float64)
                if reasons:
                    why[name] = [r[1] for r in rows]
        finally:
            cur.close()
    scored = {m: np.ones(n, dtype=bool) for m in values}
    return RunColumns(ids, values, scored), why


def _from_rows(store: Any, run_id: str, reasons: bool) -> tuple[RunColumns, dict[str, list[str | None]]]:
    """:func:`run_columns` from ``(metric, position, value[, reason])`` tuples of every score."""
    pos_ids, names, rows = _read(store, run_id, reasons)
    ids = [sid for _, sid in pos_ids]
    positions = [p for p, _ in pos_ids]
    n = len(ids)
    dense = positions == list(range(n))
    index = None if dense else {p: i for i, p in enumerate(positions)}
    values: dict[str, np.ndarray] = {}
    scored: dict[str, np.ndarray] = {}
    why: dict[str, list[str | None]] = {}
    if rows:
        # None -> NaN in one conversion of the plain tuples
        table = np.array([r[:3] for r in rows] if reasons else rows, dtype=np.float64).reshape(len(rows), 3)
        mids = table[:, 0].astype(np.int64)
        pos = table[:, 1].astype(np.int64)
        if index is not None:
            pos = np.fromiter((index[int(p)] for p in pos), dtype=np.int64, count=len(rows))
        vals = table[:, 2]
        starts = np.flatnonzero(np.r_[True, mids[1:] != mids[:-1]])
        ends = np.r_[starts[1:], len(rows)]
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            name = names[int(mids[a])]
            col = np.full(n, np.nan)
            col[pos[a:b]] = vals[a:b]
            mask = np.zeros(n, dtype=bool)
            mask[pos[a:b]] = True
            values[name], scored[name] = col, mask
            if reasons:
                r_col: list[str | None] = [None] * n
                for i, r in zip(pos[a:b].tolist(), rows[a:b], strict=True):
                    r_col[i] = r[3]
                why[name] = r_col
    return RunColumns(ids, values, scored), why


def _read(store: Any, run_id: str, reasons: bool) -> tuple[list[Any], dict[int, str], list[Any]]:
    """The run's ``(position, sample_id)``, the metric names by id, and its score tuples ordered by
    metric and position: on SQLite straight from the driver's cursor (no row objects at all)."""
    cols = "metric_id, position, value" + (", reason" if reasons else "")
    with store.engine.connect() as conn:
        if store.dialect == "sqlite":
            cur = conn.connection.driver_connection.cursor()
            positions, ids = _sqlite_ids(cur, run_id)
            pos_ids = list(zip(positions.tolist(), ids, strict=True))
            names = dict(cur.execute("SELECT id, name FROM metric_names").fetchall())
            rows = cur.execute(f"SELECT {cols} FROM scores WHERE run_id = ? "  # noqa: S608 - fixed columns
                               "ORDER BY metric_id, position", (run_id,)).fetchall()
            cur.close()
            return pos_ids, names, rows
        pos_ids = conn.execute(select(RunSample.position, RunSample.sample_id)
                               .where(RunSample.run_id == run_id).order_by(RunSample.position)).all()
        names = dict(conn.execute(select(MetricName.id, MetricName.name)).all())
        picked = [ScoreRow.metric_id, ScoreRow.position, ScoreRow.value] + ([ScoreRow.reason] if reasons else [])
        rows = conn.execute(select(*picked).where(ScoreRow.run_id == run_id)
                            .order_by(ScoreRow.metric_id, ScoreRow.position)).all()
        return [tuple(r) for r in pos_ids], names, [tuple(r) for r in rows]


#: kv namespace of the per-run dataset summaries (:func:`dataset_fields`)
DATASET_NAMESPACE = "run-dataset-fields"


def dataset_fields(samples: Any) -> dict[str, Any]:
    """Which fields a run's samples carry (counts per field of
    :data:`ragmeter.core.schema.FIELD_PRESENT`, except ``context_texts``) and their mean numbers of
    contexts and relevant chunks: what the report's dataset section shows, computed once when the
    run is created (a large run's report then needs no pass over its samples)."""
    counts = FieldCounts()
    counts.add(samples)
    return counts.result()


class FieldCounts:
    """:func:`dataset_fields` counted chunk by chunk (:meth:`add`), for a run whose samples are read
    a chunk at a time (:mod:`ragmeter.run.stream`); :meth:`result` is the same record."""

    def __init__(self) -> None:
        from ragmeter.core.schema import FIELD_PRESENT

        self._present = {f: p for f, p in FIELD_PRESENT.items() if f != "context_texts"}
        self.fields = dict.fromkeys(self._present, 0)
        self._contexts = [0, 0]  # total, samples with contexts
        self._relevant = [0, 0]

    def add(self, samples: Any) -> None:
        for f, present in self._present.items():
            self.fields[f] += sum(1 for s in samples if present(s))
        for s in samples:
            if s.contexts is not None:
                self._contexts[0] += len(s.contexts)
                self._contexts[1] += 1
            if s.relevant is not None:
                self._relevant[0] += len(s.relevant)
                self._relevant[1] += 1

    def result(self) -> dict[str, Any]:
        # the mean of integer counts: their exact sum over their number (numpy's mean of them)
        def mean(total_n: list[int]) -> float | None:
            return float(np.float64(total_n[0]) / total_n[1]) if total_n[1] else None

        return {"fields": dict(self.fields), "mean_contexts": mean(self._contexts),
                "mean_relevant": mean(self._relevant)}


_SEP = "\x1f"


def _sqlite_ids(cur: Any, run_id: str) -> tuple[np.ndarray, list[str]]:
    """The positions (int64, ascending) and sample ids of a SQLite run, in position order.

    Read as two strings joined in SQLite in the table's own order (no row per sample, no sort in
    SQLite: ordering by position there costs a temporary B-tree of the run's rows), then put in
    position order by numpy; both aggregates walk the same rows, so their items pair up. Row by
    row when an id holds the separator."""
    joined, pos_text = cur.execute("SELECT group_concat(sample_id, char(31)), group_concat(position) "
                                   "FROM run_samples WHERE run_id = ?", (run_id,)).fetchone()
    if joined is None:
        return np.zeros(0, dtype=np.int64), []
    ids = joined.split(_SEP)
    positions = np.array(pos_text.split(","), dtype=np.int64)
    if len(ids) == len(positions):
        order = np.argsort(positions, kind="stable")
        return positions[order], [ids[i] for i in order.tolist()]
    rows = cur.execute("SELECT position, sample_id FROM run_samples WHERE run_id = ? ORDER BY position",
                       (run_id,)).fetchall()
    return np.array([p for p, _ in rows], dtype=np.int64), [sid for _, sid in rows]
