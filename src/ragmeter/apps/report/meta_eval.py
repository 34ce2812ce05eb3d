"""The report's meta-evaluation section: each metric's agreement with the human label (sorted,
beside the human ceiling) and one plot per metric of its score against the label (drawn by
:func:`ragmeter.apps.report.figures.meta_eval_scatter`)."""

from __future__ import annotations

from typing import Any

from ragmeter.store import Store

_STATS = ("pearson", "spearman", "kendall", "pairwise_accuracy", "auroc", "f1")
_TITLES = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ-b",
           "pairwise_accuracy": "pairwise accuracy", "auroc": "AUROC", "f1": "F1 (cv)"}


def meta_eval_view(store: Store, run: Any) -> dict[str, Any] | None:
    """What the section shows, or ``None`` when the run is not a meta-evaluation."""
    from ragmeter.analysis.meta_eval.evaluation import stored_item_values, stored_meta_eval

    rec = stored_meta_eval(run)
    if rec is None:
        return None
    stats = [s for s in _STATS if any(s in m.statistics for m in rec.metrics.values())]
    human = rec.items["human"]
    ids = rec.items["ids"]
    rows, plots = [], []
    for key in rec.ranking:
        m = rec.metrics[key]
        rows.append({"metric": key, "direction": m.direction, "n": m.n, "n_missing": m.n_missing,
                     "stats": {s: st.to_dict() if (st := m.stat(s)) is not None else {} for s in stats}})
        values = stored_item_values(store, rec, key)
        keep = [i for i, v in enumerate(values.tolist()) if v == v]
        plots.append({"metric": key, "x": [human[i] for i in keep], "y": [values[i] for i in keep],
                      "ids": [ids[i] for i in keep], "direction": m.direction,
                      "pearson": _value(m, "pearson"), "kendall": _value(m, "kendall")})
    ceiling = rec.human_ceiling or {}
    ceilings = [{"title": title, "stats": {s: (ceiling.get(part) or {}).get(s) or {} for s in stats}}
                for part, title in (("rater_vs_rater", "rater vs rater"), ("leave_one_out", "one rater vs the rest"))
                if ceiling.get(part)]
    return {"kind": rec.kind, "dataset": rec.dataset, "label": rec.label, "n_items": rec.n_items,
            "n_ratings": rec.n_ratings, "raters": rec.raters, "level": rec.level, "sort": rec.sort,
            "n_bootstrap": rec.n_bootstrap, "stats": stats, "titles": {s: _TITLES[s] for s in stats},
            "rows": rows, "ceilings": ceilings, "plots": plots}


def _value(m: Any, name: str) -> float | None:
    stat = m.stat(name)
    return stat.value if stat is not None else None
