"""The dashboard's cached view of a large run (:func:`ragmeter.apps.report.paged.cached_run`) built from
its score columns: one array per metric (:mod:`ragmeter.store.columns`), the sample orders sorted
in numpy, the dataset's field counts recorded when the run was created, and no sample decoded. The
record is the one :func:`ragmeter.apps.report.paged._build` makes row by row for smaller runs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ragmeter.apps.report import columnar
from ragmeter.apps.report.metric_views import is_live, run_header
from ragmeter.apps.report.sections import calibration_of, composites_for, hints_for, jsonable, run_settings


class _LazyTable(Mapping[str, Any]):
    """``Store.score_values`` of the run, read only if something (a composite score) asks."""

    def __init__(self, store: Any, run_id: str) -> None:
        self._store, self._run_id = store, run_id
        self._table: dict[str, Any] | None = None

    def _get(self) -> dict[str, Any]:
        if self._table is None:
            self._table = self._store.score_values(self._run_id)
        return self._table

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def _pks(store: Any, run_id: str) -> tuple[np.ndarray, np.ndarray]:
    """The run's ``run_samples`` primary keys and positions, in position order."""
    from sqlalchemy import select

    from ragmeter.store.models import RunSample

    t = RunSample.__table__
    if store.dialect == "sqlite":
        # two integer lists joined in SQLite in the table's order, sorted by position in numpy
        # (ordering there costs a temporary B-tree of the run's rows)
        with store.engine.connect() as conn:
            cur = conn.connection.driver_connection.cursor()
            pks, positions = cur.execute("SELECT group_concat(pk), group_concat(position) FROM run_samples "
                                         "WHERE run_id = ?", (run_id,)).fetchone()
            cur.close()
        if pks is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        pk_arr = np.array(pks.split(","), dtype=np.int64)
        pos_arr = np.array(positions.split(","), dtype=np.int64)
        order = np.argsort(pos_arr, kind="stable")
        return pk_arr[order], pos_arr[order]
    with store.session() as s:
        rows = [tuple(r) for r in s.execute(select(t.c.pk, t.c.position).where(t.c.run_id == run_id)
                                            .order_by(t.c.position))]
    table = np.array(rows, dtype=np.int64).reshape(len(rows), 2)
    return table[:, 0], table[:, 1]


def build(store: Any, run: Any, version: str, one_run: Any, pack: Any) -> dict[str, Any]:
    """The cached record (``version``, ``view``, ``orders``, ``positions``) of a large run."""
    cols, reasons = columnar.columns_of(store, run)
    n = len(cols.sample_ids)
    pk_arr, pos_arr = _pks(store, run.id)
    summary = store.run_summary(run)
    live = is_live(run, summary)
    metas = columnar.metric_views(run, summary, cols, reasons, live)
    orders = {"position": pack(pk_arr),
              "worst": pack(pk_arr[columnar.worst_first(columnar.quality(cols.values, metas, n))])}
    pos = np.arange(n)
    for m in metas:
        v = cols.values.get(m["key"], np.full(n, np.nan))
        none = np.isnan(v)
        key = np.where(none, 0.0, v if m["higher_is_better"] else -v)
        orders["metric:" + m["key"]] = pack(pk_arr[np.lexsort((pos, key, none))])
    view = run_view_fields(run, live, columnar.dataset_summary(store, run, n), metas, n,
                           one_run(store, run, _LazyTable(store, run.id)))
    return {"version": version, "view": view, "orders": orders, "positions": pack(pos_arr)}


def run_view_fields(run: Any, live: bool, dataset: Any, metas: list[dict[str, Any]], n: int,
                    one_run: Any) -> dict[str, Any]:
    """The cached view of one run (header, configuration, dataset, metrics, calibration,
    composites, hints); ``one_run``: the run's scores as :func:`sections.composites_for` reads them."""
    return {
        "run": run_header(run), "live": live,
        **run_settings(run),
        "dataset": dataset, "metrics": jsonable(metas), "samples_total": n,
        "calibration": calibration_of(run),
        "composites": composites_for(one_run, run),
        "hints": jsonable(hints_for(metas)),
    }
