"""Runs side by side in the report and the dashboard: each metric's paired difference between two runs
(samples paired by id; the interval, test and decision rule of ``ragmeter compare``), the metrics the
runs share, and the samples whose quality changed most."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragmeter.apps.report.metric_views import is_live, metric_views, run_header
from ragmeter.apps.report.samples import brief_samples, quality
from ragmeter.stats.clustered import cluster_codes
from ragmeter.stats.paired import paired_mean_ci
from ragmeter.store import Store
from ragmeter.store.models import Run

#: above this many pairs the permutation p-value is left out (its cost grows with n; the CI stays).
MAX_PAIRS_FOR_PVALUE = 20_000


def paired_difference(a: Mapping[str, float | None], b: Mapping[str, float | None], *,
                      higher_is_better: bool = True, level: float = 0.95,
                      bounds: Sequence[float] | None = None,
                      clusters: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Paired comparison of one metric between two runs: samples paired by id.

    ``diff = mean(b_i - a_i)`` over the ids where both runs have a value, with the confidence
    interval of the per-sample differences (:func:`ragmeter.stats.paired.paired_mean_ci`, the
    interval of ``ragmeter compare``), within ``[low - high, high - low]`` for a metric on
    ``bounds = (low, high)``. ``wins`` counts
    samples where ``b`` is better than ``a`` in the metric's direction, ``losses`` where it is
    worse, ``ties`` where equal. ``verdict`` is ``"better"`` or ``"worse"`` (``b`` relative to ``a``)
    when the permutation p-value, Holm-adjusted over the family of tests (one test here; every
    metric x run in :func:`compare_view`), is below 0.05 (the rule of ``ragmeter compare``), else
    ``"no significant difference"``; ``significant`` says whether it is either.
    ``p_value`` is the two-sided paired permutation test of
    :func:`ragmeter.stats.paired.compare_paired` when that module is installed (and
    there are at most :data:`MAX_PAIRS_FOR_PVALUE` pairs), else ``None``. With no pair, every
    figure is ``None``. ``clusters`` (``{turn id: conversation id}`` of a run of conversations):
    the interval and the test are per conversation, as in ``ragmeter compare``.

    >>> r = paired_difference({"q1": 0.5, "q2": 0.7}, {"q1": 0.6, "q2": 0.9})
    >>> round(r["diff"], 3), r["n_pairs"], r["wins"]
    (0.15, 2, 2)
    """
    ids = [k for k, v in a.items() if v is not None and b.get(k) is not None]
    out: dict[str, Any] = {"n_pairs": len(ids), "mean_a": None, "mean_b": None, "diff": None,
                           "ci_low": None, "ci_high": None, "p_value": None, "wins": 0, "ties": 0,
                           "losses": 0, "significant": False, "verdict": "no paired samples",
                           "p_adjusted": None, "n_clusters": None, "cluster_unit": None}
    if not ids:
        return out
    xa = np.array([a[k] for k in ids], dtype=np.float64)
    xb = np.array([b[k] for k in ids], dtype=np.float64)
    d = xb - xa
    up, down = int((d > 1e-12).sum()), int((d < -1e-12).sum())
    from ragmeter.analysis.runs import cluster_labels

    labels = cluster_labels(clusters, ids)
    stats = _experiments_statistics()
    if stats is not None and len(ids) <= MAX_PAIRS_FOR_PVALUE:
        res = stats.compare_paired(xa, xb, level=level, bounds=bounds, clusters=labels)
        ci = (res.ci_low, res.ci_high) if res.ci_low is not None else None
        out["p_value"] = float(res.pvalue)
        up, down = res.wins, res.losses
        if res.n_clusters is not None:
            out["n_clusters"] = res.n_clusters
            out["cluster_unit"] = getattr(clusters, "unit", "conversation")
    else:  # no p-value: the interval alone, by the one rule (per conversation when the turns are)
        ci = paired_mean_ci(xa, xb, level=level, bounds=bounds, clusters=labels)
        if labels is not None:
            out["n_clusters"] = cluster_codes(labels)[1]
            out["cluster_unit"] = getattr(clusters, "unit", "conversation")
    wins, losses = (up, down) if higher_is_better else (down, up)
    out.update(mean_a=float(xa.mean()), mean_b=float(xb.mean()), diff=float(d.mean()),
               ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None,
               wins=wins, losses=losses, ties=len(ids) - wins - losses)
    out["higher_is_better"] = higher_is_better
    decide([out])
    return out


def decide(differences: Sequence[dict[str, Any]], alpha: float = 0.05) -> None:
    """Verdicts for a family of paired differences, with the rule ``ragmeter compare`` uses
    (:func:`ragmeter.stats.paired.family_verdicts`: Holm-adjusted permutation p-value below
    ``alpha``); without a p-value, no verdict. Sets ``p_adjusted``, ``significant`` and ``verdict``."""
    stats = _experiments_statistics()
    rows = [d for d in differences if d["n_pairs"]]
    if stats is None:
        decided = [(None, "no significant difference")] * len(rows)
    else:
        decided = stats.family_verdicts([(d["diff"], d["p_value"], d["higher_is_better"]) for d in rows],
                                        alpha=alpha)
    for d, (p, v) in zip(rows, decided, strict=True):
        d["p_adjusted"] = p
        d["verdict"] = v
        d["significant"] = v in ("better", "worse")
    for d in differences:
        d.pop("higher_is_better", None)  # an input of the rule, not a figure of the comparison


def _experiments_statistics() -> Any:
    """The A/B statistics module (paired permutation test ...), when installed."""
    try:
        mod = importlib.import_module("ragmeter.stats.paired")
    except ImportError:
        return None
    return mod if hasattr(mod, "compare_paired") else None


def shared_metrics(per_run: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The metrics at least two of the compared runs have (``per_run[i]["metas"]``: key -> metric
    view), in first-seen order, with each run's cell."""
    keys: list[str] = []
    for pr in per_run:
        for k in pr["metas"]:
            if k not in keys and sum(k in other["metas"] for other in per_run) >= 2:
                keys.append(k)
    metrics = []
    for k in keys:
        meta = next(pr["metas"][k] for pr in per_run if k in pr["metas"])
        metrics.append({
            "key": k, "direction": meta["direction"], "higher_is_better": meta["higher_is_better"],
            "banded": meta["banded"], "family": meta["family"], "range": meta["range"], "bounds": meta["bounds"],
            "runs": [run_metric_cell(pr["metas"].get(k)) for pr in per_run],
        })
    return metrics

def run_metric_cell(meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if meta is None:
        return None
    return {k: meta[k] for k in ("mean", "ci_low", "ci_high", "n", "n_missing", "band", "band_css")}


def _sample_changes(per_run: Sequence[Mapping[str, Any]], metrics: Sequence[Mapping[str, Any]],
                    max_samples: int | None) -> dict[str, Any]:
    """Per sample (paired by id): each run's quality over the compared metrics and its change
    from the baseline; the largest drops first."""
    metas = [dict(m) for m in metrics if m["banded"]]
    base = per_run[0]
    rows = []
    for s in base["samples"]:
        qualities = []
        for pr in per_run:
            vals = {m["key"]: pr["values"].get(m["key"], {}).get(s.id) for m in metas}
            qualities.append(quality(vals, metas) if any(s.id in pr["values"].get(m["key"], {})
                                                          for m in metas) else None)
        if qualities[0] is None:
            continue
        deltas = [q - qualities[0] if q is not None else None for q in qualities[1:]]
        if all(d is None for d in deltas):
            continue
        rows.append({"id": s.id, "question": s.question, "answer": s.answer,
                     "qualities": qualities, "deltas": deltas,
                     "worst_delta": min(d for d in deltas if d is not None)})
    rows.sort(key=lambda r: (r["worst_delta"], r["id"]))
    total = len(rows)
    if max_samples is not None:
        rows = rows[:max_samples]
    return {"sample_changes": rows, "sample_changes_total": total}


def compare_rows(store: Store, runs: Sequence[Run], max_samples: int | None) -> dict[str, Any]:
    """:func:`ragmeter.apps.report.data.compare_view` of runs read as rows (none of them larger than
    :data:`ragmeter.apps.report.columnar.LARGE_RUN`): per-metric means with CIs, every run's paired
    difference to the first run (the baseline) per metric, and the samples that changed most."""
    per_run = []
    for run in runs:
        # only what a comparison reads: ids, questions and answers; values and reasons (no
        # details), so two runs of 100k samples do not need whole Sample objects in memory
        samples = brief_samples(store, run.id)
        table = store.score_values(run.id)
        summary = store.run_summary(run)
        metas = metric_views(run, summary, samples, table, is_live(run, summary))
        values = {m["key"]: {s.id: (table.get(m["key"], {}).get(s.id).value
                                    if table.get(m["key"], {}).get(s.id) is not None else None)
                             for s in samples} for m in metas}
        per_run.append({"run": run, "samples": samples, "metas": {m["key"]: m for m in metas},
                        "values": values})
    metrics = shared_metrics(per_run)
    base = per_run[0]
    from ragmeter.analysis.runs import stored_clusters

    clusters = stored_clusters(store, base["run"].id)  # turns compared per conversation
    differences = []
    for pr in per_run[1:]:
        for m in metrics:
            k = m["key"]
            if k not in base["values"] or k not in pr["values"]:
                continue
            d = paired_difference(base["values"][k], pr["values"][k],
                                  higher_is_better=m["higher_is_better"], bounds=m["bounds"],
                                  clusters=clusters)
            differences.append({"metric": k, "baseline": base["run"].id, "run": pr["run"].id,
                                "run_label": pr["run"].name or pr["run"].id,
                                "direction": m["direction"], **d, "higher_is_better": m["higher_is_better"]})
    decide(differences)
    return {
        "runs": [run_header(pr["run"]) for pr in per_run],
        "baseline": base["run"].id,
        "metrics": metrics,
        "differences": differences,
        **_sample_changes(per_run, metrics, max_samples),
    }
