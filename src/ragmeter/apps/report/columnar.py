"""The report's views of a large run built from its score columns.

Above :data:`LARGE_RUN` samples, :func:`ragmeter.apps.report.data.run_view` and
:func:`ragmeter.apps.report.data.compare_view` read the run's scores as one array per metric
(:mod:`ragmeter.store.columns`), rank every sample by quality in numpy, and build a table row (with
the sample and its judge verdicts) only for the samples shown: the worst, the best and a random
sample of the rest (:data:`SHOWN`), the dashboard (``ragmeter serve``) pages through all of them. So
the file stays small and quick to write for a run of any size; smaller runs are shown as before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragmeter.apps.report.differences import decide, shared_metrics
from ragmeter.apps.report.metric_views import (
    is_live,
    metric_bounds,
    metric_keys,
    metric_meta,
    metric_view,
    run_header,
)
from ragmeter.apps.report.samples import sample_detail, sample_row
from ragmeter.core.schema import Sample
from ragmeter.stats import aggregate_many
from ragmeter.store.records import MetricSummary, RunSummary

#: runs with more samples than this get their views from the score columns
LARGE_RUN = 20_000
#: rows of a large run's tables in the one-file report: the worst, the best, a random sample
SHOWN = {"worst": 100, "best": 50, "random": 50}
SEED = 0


def quality(values: dict[str, np.ndarray], metas: Sequence[dict[str, Any]], n: int) -> np.ndarray:
    """Per sample, the mean of its banded values turned so higher is better (NaN: none), as
    :func:`ragmeter.apps.report.samples.quality` computes it one sample at a time."""
    total, count = np.zeros(n), np.zeros(n)
    for m in metas:
        if not m["banded"] or m["key"] not in values:
            continue
        v = values[m["key"]] if m["higher_is_better"] else 1.0 - values[m["key"]]
        ok = ~np.isnan(v)
        total[ok] += v[ok]
        count[ok] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def worst_first(q: np.ndarray) -> np.ndarray:
    """Positions worst first; samples without a quality last, in dataset order."""
    pos = np.arange(q.size)
    none = np.isnan(q)
    return np.lexsort((pos, np.where(none, 0.0, q), none))


def shown_positions(order: np.ndarray, limit: int | None) -> tuple[np.ndarray, str | None]:
    """The positions a table shows (in ``order``) and a note saying which, when not all."""
    if limit is None or order.size <= limit:
        return order, None
    scale = limit / sum(SHOWN.values())
    k_worst = max(1, int(SHOWN["worst"] * min(scale, 1.0)))
    k_best = int(SHOWN["best"] * min(scale, 1.0))
    k_rand = int(SHOWN["random"] * min(scale, 1.0))
    middle = order[k_worst:order.size - k_best]
    rng = np.random.default_rng(SEED)
    picked = set(order[:k_worst].tolist()) | set(order[order.size - k_best:].tolist())
    picked |= set(rng.choice(middle, size=min(k_rand, middle.size), replace=False).tolist())
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    chosen = np.array(sorted(picked, key=lambda p: rank[p]), dtype=np.int64)
    note = (f"Showing the {k_worst} worst, the {k_best} best and {min(k_rand, middle.size)} random "
            f"samples of {order.size:,}, worst first")
    return chosen, note


def samples_at(store: Any, run_id: str, positions: Sequence[int]) -> dict[int, Sample]:
    """``{position: Sample}`` of these positions of a run."""
    from sqlalchemy import select

    from ragmeter.store.models import RunSample

    t = RunSample.__table__
    out: dict[int, Sample] = {}
    pos = [int(p) for p in positions]
    with store.session() as s:
        for i in range(0, len(pos), 500):
            for p, data in s.execute(select(t.c.position, t.c.data)
                                     .where(t.c.run_id == run_id, t.c.position.in_(pos[i:i + 500]))):
                out[int(p)] = Sample.model_validate(data)
    return out


def metric_views(run: Any, summary: RunSummary, cols: Any, reasons: dict[str, list[str | None]], live: bool
                 ) -> list[dict[str, Any]]:
    """:func:`ragmeter.apps.report.metric_views.metric_views` from the columns (same fields)."""
    out = []
    n = len(cols.sample_ids)
    for key in metric_keys(run, cols.values):
        v = cols.values.get(key, np.full(n, np.nan))
        scored = cols.scored.get(key, np.zeros(n, dtype=bool))
        if key in summary and not live:
            agg = summary[key]
        else:
            why = reasons.get(key) or [None] * n
            idx = np.flatnonzero(scored)
            agg = MetricSummary.from_dict(aggregate_many({key: (v[idx], [why[i] for i in idx.tolist()])},
                                                         bounds={key: metric_bounds(run, summary, key)})[key])
        meta = metric_meta(run, summary, key, agg)
        pending = int(n - np.count_nonzero(scored)) if live else 0  # finished: unscored = out of scope
        out.append(metric_view(meta, agg, v[~np.isnan(v)], pending))
    return out


def dataset_summary(store: Any, run: Any, n_stored: int) -> dict[str, Any]:
    """:func:`ragmeter.apps.report.data.dataset_summary` of a large run: the counts recorded when it was
    created (:func:`ragmeter.store.columns.dataset_fields`), or, for a run stored before they were,
    counted once from its stored samples and kept."""
    from ragmeter.store.columns import DATASET_NAMESPACE, dataset_fields

    rec = store.kv_get(DATASET_NAMESPACE, run.id)
    if rec is None:
        rec = json.loads(json.dumps(dataset_fields(store.run_samples(run.id))))
        store.kv_put(DATASET_NAMESPACE, run.id, rec)
    return {"source": run.dataset_source, "fingerprint": run.dataset_fingerprint,
            "n_samples": run.n_samples, "n_stored": n_stored, "fields": rec["fields"],
            "mean_contexts": rec["mean_contexts"], "mean_relevant": rec["mean_relevant"],
            "skipped_rows": (run.extra or {}).get("skipped_rows")}


_COLUMNS: dict[tuple[int, str, str], Any] = {}


def columns_of(store: Any, run: Any) -> tuple[Any, dict[str, list[str | None]]]:
    """:func:`ragmeter.store.columns.run_columns` with reasons, kept for the last few (store, run
    version)s: one report reads each run's columns once for its section and its comparison."""
    from ragmeter.store.columns import run_columns

    key = (id(store), run.id, store.run_version(run))
    hit = _COLUMNS.get(key)
    if hit is None:
        hit = run_columns(store, run.id, reasons=True)
        while len(_COLUMNS) >= 4:
            _COLUMNS.pop(next(iter(_COLUMNS)))
        _COLUMNS[key] = hit
    return hit


def run_parts(store: Any, run: Any, summary: RunSummary, live: bool, max_samples: int | None,
              with_details: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int, dict[str, Any], str | None]:
    """``(metrics, rows, total, dataset, note)`` of :func:`ragmeter.apps.report.data.run_view` for a
    large run: rows only for the samples shown (``note`` says which)."""
    cols, reasons = columns_of(store, run)
    metrics = metric_views(run, summary, cols, reasons, live)
    n = len(cols.sample_ids)
    order = worst_first(quality(cols.values, metrics, n))
    shown, note = shown_positions(order, max_samples)
    samples = samples_at(store, run.id, shown.tolist())
    table = store.sample_scores(run.id, [cols.sample_ids[p] for p in shown.tolist()])
    rows = []
    for p in shown.tolist():
        row = sample_row(samples[p], p, table, metrics)
        if with_details:
            row["detail"] = sample_detail(samples[p], table, metrics)
        rows.append(row)
    return metrics, rows, n, dataset_summary(store, run, n), note


def _none(x: float) -> float | None:
    return None if x != x else float(x)


def compare_view(store: Any, runs: list[Any], max_samples: int | None) -> dict[str, Any]:
    """:func:`ragmeter.apps.report.data.compare_view` of runs of which one at least is large: pairs by
    sample id in bulk, and the rows of the samples that changed most only for those shown."""
    from ragmeter.stats.paired import compare_paired

    per_run = []
    for run in runs:
        cols, reasons = columns_of(store, run)
        summary = store.run_summary(run)
        metas = metric_views(run, summary, cols, reasons, is_live(run, summary))
        per_run.append({"run": run, "cols": cols, "metas": {m["key"]: m for m in metas}})
    metrics = shared_metrics(per_run)
    base = per_run[0]
    base_ids = base["cols"].sample_ids
    # each run's values on the baseline's samples (NaN where a sample is not in the run)
    aligned = []
    for pr in per_run:
        ids = pr["cols"].sample_ids
        if ids == base_ids:
            aligned.append(pr["cols"].values)
            continue
        at = {sid: i for i, sid in enumerate(ids)}
        idx = np.array([at.get(sid, -1) for sid in base_ids], dtype=np.int64)
        aligned.append({k: np.where(idx >= 0, v[np.maximum(idx, 0)], np.nan) for k, v in pr["cols"].values.items()})
    from ragmeter.analysis.runs import cluster_labels, stored_clusters

    clusters = stored_clusters(store, base["run"].id)  # turns compared per conversation
    differences = []
    for j, pr in enumerate(per_run[1:], start=1):
        for m in metrics:
            k = m["key"]
            if k not in aligned[0] or k not in aligned[j]:
                continue
            xa_all, xb_all = aligned[0][k], aligned[j][k]
            both = ~np.isnan(xa_all) & ~np.isnan(xb_all)
            xa, xb = xa_all[both], xb_all[both]
            out: dict[str, Any] = {"n_pairs": int(xa.size), "mean_a": None, "mean_b": None, "diff": None,
                                 "ci_low": None, "ci_high": None, "p_value": None, "wins": 0, "ties": 0,
                                 "losses": 0, "significant": False, "verdict": "no paired samples",
                                 "p_adjusted": None, "n_clusters": None, "cluster_unit": None}
            if xa.size:
                labels = (cluster_labels(clusters, [base_ids[i] for i in np.flatnonzero(both).tolist()])
                          if clusters else None)
                res = compare_paired(xa, xb, bounds=m["bounds"], clusters=labels) if xa.size > 1 else None
                if res is not None and res.n_clusters is not None:
                    out["n_clusters"] = res.n_clusters
                    out["cluster_unit"] = getattr(clusters, "unit", "conversation")  # or per-span runs' traces
                diff = xb - xa
                # one pair: compare_paired's interval (paired_mean_ci) is not defined either
                ci = (res.ci_low, res.ci_high) if res is not None and res.ci_low is not None else None
                up, down = int((diff > 1e-12).sum()), int((diff < -1e-12).sum())
                wins, losses = (up, down) if m["higher_is_better"] else (down, up)
                out.update(mean_a=float(xa.mean()), mean_b=float(xb.mean()), diff=float(diff.mean()),
                         ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None,
                         p_value=float(res.pvalue) if res is not None else None,
                         wins=wins, losses=losses, ties=int(xa.size) - wins - losses)
            differences.append({"metric": k, "baseline": base["run"].id, "run": pr["run"].id,
                                "run_label": pr["run"].name or pr["run"].id, "direction": m["direction"],
                                **out, "higher_is_better": m["higher_is_better"]})
    decide(differences)
    return {"runs": [run_header(pr["run"]) for pr in per_run], "baseline": base["run"].id,
            "metrics": metrics, "differences": differences,
            **_sample_changes(store, base, aligned, metrics, max_samples)}


def _sample_changes(store: Any, base: dict[str, Any], aligned: list[dict[str, np.ndarray]],
                    metrics: list[dict[str, Any]], max_samples: int | None) -> dict[str, Any]:
    """``sample_changes`` of :func:`ragmeter.apps.report.data.compare_view`: per sample each run's
    quality and its change from the baseline, the largest drops first; rows only for those shown."""
    metas = [m for m in metrics if m["banded"]]
    ids = base["cols"].sample_ids
    n = len(ids)
    q = [quality(vals, metas, n) for vals in aligned]
    deltas = np.stack([qr - q[0] for qr in q[1:]]) if len(q) > 1 else np.full((0, n), np.nan)
    keep = ~np.isnan(q[0]) & ~np.all(np.isnan(deltas), axis=0)
    with np.errstate(invalid="ignore"):
        worst = np.where(np.all(np.isnan(deltas), axis=0), np.inf, np.nanmin(np.where(np.isnan(deltas), np.inf, deltas), axis=0))
    pos = np.flatnonzero(keep)
    order = pos[np.lexsort((np.array(ids, dtype=object)[pos].astype(str), worst[pos]))]
    total = int(order.size)
    limit = sum(SHOWN.values())  # the one-file page of a large run stays small
    order = order[:limit if max_samples is None else min(max_samples, limit)]
    samples = samples_at(store, base["run"].id, order.tolist())
    rows = [{"id": ids[p], "question": samples[p].question, "answer": samples[p].answer,
             "qualities": [_none(qr[p]) for qr in q], "deltas": [_none(x) for x in deltas[:, p]],
             "worst_delta": float(worst[p])} for p in order.tolist()]
    return {"sample_changes": rows, "sample_changes_total": total}
