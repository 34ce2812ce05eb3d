"""The report's and dashboard's judge-panel section: the judges with their calls and cost, and per
judge metric Krippendorff's alpha, each judge's mean, agreement with the rest of the panel and
self-preference (the run's panel record, :mod:`ragmeter.run.panel_record`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def panel_view(run: Any) -> dict[str, Any] | None:
    """What the section shows, or ``None`` when the run had no panel of judges."""
    from ragmeter.run.panel_record import PanelSummary

    raw = (run.extra or {}).get("panel")
    if not isinstance(raw, Mapping) or "metrics" not in raw:
        return None
    rec = PanelSummary.from_dict(raw)
    metrics = []
    for key, m in rec.metrics.items():
        rows = []
        for label in m.values:
            a = m.agreement.get(label, {})
            p = m.self_preference.get(label) or {}
            rows.append({"judge": label, "mean": m.means.get(label), "mad": a.get("mean_abs_diff"),
                         "pearson": a.get("pearson"), "n": a.get("n", 0), "family": p.get("family"),
                         "self_n": p.get("n"), "self": p.get("difference"), "self_low": p.get("ci_low"),
                         "self_high": p.get("ci_high"),
                         "others": (p.get("other_families") or {}).get("difference")})
        metrics.append({"key": key, "alpha": m.alpha, "level": m.level, "n_items": m.n_items, "rows": rows,
                        "has_self": bool(m.self_preference)})
    return {"combine": rec.combine, "judges": [j.__dict__ for j in rec.judges], "metrics": metrics}
