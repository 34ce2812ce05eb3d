"""A stored run's result rows built as columns, in bulk: what ``ragmeter export`` writes.

The same columns, values and order as :func:`ragmeter.run.rows.result_rows` (inputs, one value per
metric, ``METRIC__pass``, ``no_value_reasons``, ``judge``), but read straight from the store: the
samples' stored JSON decoded once each (no model objects), the scores as one array per metric
(:mod:`ragmeter.store.columns`), the judge verdicts read only for the metrics that stored details,
and pass/fail decided per column. A table of 100,000 rows is then handed to pandas (or pyarrow)
whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragmeter.core.records import sample_columns, sample_record
from ragmeter.core.thresholds import from_record, passes
from ragmeter.run.rows import PASS_SUFFIX, verdict_summary
from ragmeter.store.codec import decode

_EMPTY = "{}"
#: input columns holding lists or objects (JSON text in the tabular formats)
_JSON_COLUMNS = frozenset({"references", "negative_references", "contexts", "relevant", "metadata", "trace"})
_enc = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) writes for a str


def _sample_data(store: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's samples as stored (plain dicts), in position order."""
    from sqlalchemy import select

    from ragmeter.store.models import RunSample

    with store.engine.connect() as conn:
        if store.dialect == "sqlite":
            cur = conn.connection.driver_connection.cursor()
            raw = [r[0] for r in cur.execute("SELECT data FROM run_samples WHERE run_id = ? ORDER BY position",
                                             (run_id,)).fetchall()]
            cur.close()
        else:
            raw = list(conn.execute(select(RunSample.__table__.c.data).where(RunSample.run_id == run_id)
                                    .order_by(RunSample.position)).scalars())
    if raw and all(isinstance(r, bytes) and r[:1] == b"\x01" for r in raw):
        # every sample in the current format: decompress each, parse them all as one JSON array
        import pydantic_core

        from ragmeter.store.codec import _MAX_OUTPUT, _zstd

        dec = _zstd()[1]
        return pydantic_core.from_json(b"[" + b",".join([dec.decompress(r[1:], max_output_size=_MAX_OUTPUT)
                                                           for r in raw]) + b"]")
    return [decode(r) for r in raw]


def _json_list(items: list[Any]) -> str:
    """``json.dumps(items, ensure_ascii=False)`` of a list of strings and ``None`` (the contexts'
    texts and ids), without its per-call overhead; anything else goes through ``json.dumps``."""
    if all(isinstance(x, str) or x is None for x in items):
        return "[" + ", ".join(["null" if x is None else _enc(x) for x in items]) + "]"
    return json.dumps(items, ensure_ascii=False)


def _details(store: Any, run_id: str, ids: list[str]) -> dict[str, dict[int, dict[str, Any]]]:
    """``{metric: {row index: details}}`` of the run's scores that stored details: one query on the
    scores' key (no join), rows placed by their sample position."""
    from sqlalchemy import select

    from ragmeter.store.models import MetricName, RunSample, ScoreRow

    with store.session() as s:
        rows = s.execute(select(ScoreRow.metric_id, ScoreRow.position, ScoreRow.details)
                         .where(ScoreRow.run_id == run_id, ScoreRow.details.is_not(None))).all()
        if not rows:
            return {}
        names = dict(s.execute(select(MetricName.id, MetricName.name)).all())
        at = dict(s.execute(select(RunSample.position, RunSample.sample_id).where(RunSample.run_id == run_id)).all())
    index = {sid: i for i, sid in enumerate(ids)}
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for mid, pos, d in rows:
        i = index.get(at.get(pos))  # type: ignore[arg-type]
        if d and i is not None:
            out.setdefault(names[mid], {})[i] = d
    return out


def run_table(store: Any, run_id: str, *, flat: bool) -> tuple[list[str], dict[str, list[Any]]]:
    """``(metric keys, {column: values})`` of a stored run, one value per sample in position order.
    ``flat``: lists and mappings as JSON text (the tabular formats), else as Python objects."""
    from ragmeter.store.columns import run_columns

    run = store.get_run(run_id)
    keys = [m["key"] for m in run.metrics]
    summary = store.run_summary(run)
    higher = {k: summary[k].direction == "higher" if k in summary else True for k in keys}
    thr, _ = from_record((run.extra or {}).get("thresholds"))
    data = _sample_data(store, run_id)
    cols, reasons = run_columns(store, run_id, reasons=True)
    n = len(data)
    dumps = (lambda v: json.dumps(v, ensure_ascii=False)) if flat else (lambda v: v)
    as_list = _json_list if flat else (lambda v: v)
    records = [sample_record(d) for d in data]
    out: dict[str, list[Any]] = {}  # ragmeter.run.rows.INPUT_COLUMNS, as result_rows writes them
    for col in sample_columns(records):
        vals = [r[col] for r in records]
        if flat and col in _JSON_COLUMNS:
            vals = [None if v is None else as_list(v) if isinstance(v, list) else dumps(v) for v in vals]
        out[col] = vals
    missing: list[dict[str, str] | None] = [None] * n
    judge: list[dict[str, str] | None] = [None] * n
    details = _details(store, run_id, out["id"])
    for key in keys:
        vals = cols.values.get(key)
        if vals is None:
            values: list[float | None] = [None] * n
            why: Sequence[str | None] = [None] * n
        else:
            values = [None if v != v else v for v in vals.tolist()]
            why = reasons.get(key) or [None] * n
        out[key] = values
        for i in np.flatnonzero(np.isnan(vals) if vals is not None else np.ones(n, dtype=bool)).tolist():
            if missing[i] is None:
                missing[i] = {}
            missing[i][key] = why[i] or "not scored"  # type: ignore[index]
        if key in thr:
            out[key + PASS_SUFFIX] = [passes(v, thr[key], higher.get(key, True)) for v in values]
        if vals is not None:
            for i, det in details.get(key, {}).items():
                if (text := verdict_summary(det, key)):
                    if judge[i] is None:
                        judge[i] = {}
                    judge[i][key] = text  # type: ignore[index]
    out["no_value_reasons"] = [(dumps(m) if flat else m) if m else (_EMPTY if flat else {}) for m in missing]
    out["judge"] = [(dumps(j) if flat else j) if j else (_EMPTY if flat else {}) for j in judge]
    return keys, out


def select(table: dict[str, list[Any]], columns: Sequence[str] | None) -> dict[str, list[Any]]:
    """Keep ``columns`` in that order (``None``: all); unknown names raise ``ConfigError`` as
    :func:`ragmeter.run.rows.select_columns` does."""
    from ragmeter.core.errors import ConfigError

    if not columns:
        return table
    unknown = [c for c in columns if c not in table]
    if unknown:
        raise ConfigError(f"unknown column(s) {', '.join(unknown)}; available: {', '.join(table)}")
    return {c: table[c] for c in columns}
