"""The SQLite readers of a run's sample ids and primary keys, which join them in SQLite in the
table's order and sort by position in numpy, give what ``ORDER BY position`` gives: samples stored
out of position order, and an id holding the join separator, included."""

from __future__ import annotations

import sqlite3

import numpy as np

import ragmeter
from ragmeter.apps.report.paged_columns import _pks
from ragmeter.store import Store
from ragmeter.store.columns import _sqlite_ids, run_columns


def _ordered(path, run_id, cols):
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT {cols} FROM run_samples WHERE run_id = ? ORDER BY position",  # noqa: S608
                            (run_id,)).fetchall()


def _check(store, path, run_id):
    conn = store.engine.raw_connection()
    try:
        positions, ids = _sqlite_ids(conn.cursor(), run_id)
    finally:
        conn.close()
    expected = _ordered(path, run_id, "position, sample_id")
    assert list(zip(positions.tolist(), ids, strict=True)) == expected and positions.dtype == np.int64
    pk_arr, pos_arr = _pks(store, run_id)
    assert list(zip(pk_arr.tolist(), pos_arr.tolist(), strict=True)) == _ordered(path, run_id, "pk, position")
    return ids


def test_ids_and_primary_keys_in_position_order(tmp_path):
    path = tmp_path / "r.db"
    url = f"sqlite:///{path}"
    rows = [{"id": f"q{i:02d}", "question": f"Q{i}?", "answer": f"A {i}", "reference": f"A {i % 3}"}
            for i in range(25)]
    res = ragmeter.evaluate(rows, metrics=["token_f1"], db=url)
    store = Store(url)
    cols, _ = run_columns(store, res.run_id)
    assert _check(store, path, res.run_id) == cols.sample_ids == [r["id"] for r in rows]
    # positions no longer in the table's order (reversed), then an id holding the separator
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE run_samples SET position = 24 - position WHERE run_id = ?", (res.run_id,))
    store.close()
    store = Store(url)
    assert _check(store, path, res.run_id) == [r["id"] for r in reversed(rows)]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE run_samples SET sample_id = 'a\x1fb' WHERE run_id = ? AND position = 3",
                     (res.run_id,))
    assert _check(store, path, res.run_id)[3] == "a\x1fb"
    conn = store.engine.raw_connection()
    try:
        positions, ids = _sqlite_ids(conn.cursor(), "no-such-run")
    finally:
        conn.close()
    assert positions.size == 0 and ids == []
    assert [a.size for a in _pks(store, "no-such-run")] == [0, 0]
    store.close()
