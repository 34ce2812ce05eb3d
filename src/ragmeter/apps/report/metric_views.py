"""A run's metrics as the report and the dashboard show them: the run's header, and per metric its
aggregate (read from the run's :class:`~ragmeter.store.records.RunSummary`, or computed from the
scores stored so far while the run is going), the scale it is shown on, its band and a histogram.

The views are JSON-able dicts: the dashboard's API returns them as they are and the templates read
them; the aggregates inside are read from the typed records (:meth:`ragmeter.store.Store.run_summary`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragmeter.analysis.composite import bands_apply
from ragmeter.apps.report.bands import band
from ragmeter.core.errors import ConfigError, StoreError
from ragmeter.core.redact import redact_obj
from ragmeter.core.schema import FIELD_PRESENT, Sample, Score
from ragmeter.stats.intervals import aggregate
from ragmeter.store import Store
from ragmeter.store.models import Run
from ragmeter.store.records import MetricSummary, RunSummary

HISTOGRAM_BINS = 20


def run_header(run: Run) -> dict[str, Any]:
    """The few fields that identify a run in lists and comparisons."""
    return {
        "id": run.id,
        "name": run.name,
        "label": run.name or run.id,
        "status": run.status,
        "created_at": run.created_at.isoformat(timespec="seconds") if run.created_at else None,
        "finished_at": run.finished_at.isoformat(timespec="seconds") if run.finished_at else None,
        "n_samples": run.n_samples,
        "dataset": run.dataset_source,
        "metrics": [m["key"] for m in (run.metrics or [])],
        "ragmeter_version": run.ragmeter_version,
    }


def is_live(run: Run, summary: RunSummary) -> bool:
    """Whether a run is still going (or stopped before it was summarised): its views are then
    aggregated from the scores stored so far."""
    return run.status not in ("completed", "incomplete") or not summary


def runs_list(store: Store, limit: int | None = None) -> list[dict[str, Any]]:
    """Every stored run, newest first, with its headline means (none for a run whose summary this
    ragmeter cannot read: a newer format)."""
    out = []
    for run in store.list_runs(limit):
        head = run_header(run)
        try:
            summary = store.run_summary(run)
        except StoreError:
            summary = RunSummary()
        head["means"] = {k: m.mean for k, m in summary.items()}
        head["directions"] = {k: m.direction for k, m in summary.items()}
        options = (run.config or {}).get("options") or {}
        bands = {k: band(m.mean, m.direction != "lower") for k, m in summary.items()
                 if m.mean is not None and 0.0 <= m.mean <= 1.0 and bands_apply(k, m.family, options)}
        head["bands"] = {k: b.css for k, b in bands.items() if b is not None}
        out.append(head)
    return out


def metric_bounds(run: Run, summary: RunSummary, key: str) -> tuple[float, float] | None:
    """The declared range of metric ``key`` of ``run``, what its intervals and paired differences
    are bounded by: :func:`ragmeter.metrics.registry.recorded_range` of its request (the spec, or
    the definition that built it), else of the range its summary records; ``None`` when it declares
    none (an OpenAI python grader without ``range``: the rule for no declared range)."""
    from ragmeter.metrics.registry import recorded_range

    req = next((m for m in (run.metrics or []) if m.get("key") == key), None)
    return recorded_range(key, req, summary[key].range if key in summary else None)


def shown_range(bounds: tuple[float, float] | None, lo: float | None, hi: float | None) -> tuple[float, float]:
    """The scale a metric is shown on: its declared range, else the house range [0, 1] when the
    values ``lo .. hi`` fit it, else ``(lo, hi)``."""
    if bounds is not None:
        return bounds
    fits = lo is None or (lo >= 0 and hi is not None and hi <= 1)
    return (0.0, 1.0) if fits else (float(lo), float(hi) if hi is not None else float(lo))


def _spec_direction(name: str | None) -> str | None:
    from ragmeter.metrics.registry import get_spec

    try:
        return "higher" if get_spec(name or "").higher_is_better else "lower"
    except (ConfigError, ImportError):
        return None


def metric_keys(run: Run, table: Mapping[str, Any]) -> list[str]:
    """The run's metric keys in request order, then any other metric found among its scores."""
    keys = [m["key"] for m in (run.metrics or [])]
    return keys + sorted(k for k in table if k not in keys)


def metric_meta(run: Run, summary: RunSummary, key: str, agg: MetricSummary) -> dict[str, Any]:
    """What a metric is (name, parameters, family, direction, the scale it is shown on, whether
    it is banded): from the run's summary, else its registered spec, and the values of ``agg``."""
    req = next((m for m in (run.metrics or []) if m.get("key") == key), {})
    name = req.get("name") or key
    stored = summary.get(key)
    direction = stored.direction if stored is not None else _spec_direction(name) or "higher"
    bounds = metric_bounds(run, summary, key)
    rng = shown_range(bounds, agg.min, agg.max)
    banded = rng == (0.0, 1.0)
    family = (stored.family if stored is not None else None) or ""
    options = (run.config or {}).get("options") or {}
    # ``banded``: on the 0-1 scale (enters a sample's quality); ``show_band``: a band is meaningful
    return {"key": key, "name": name, "params": req.get("params") or {},
            "family": family, "direction": direction,
            "higher_is_better": direction != "lower", "range": list(rng), "banded": banded,
            "bounds": list(bounds) if bounds is not None else None,
            "show_band": banded and bands_apply(key, family, options)}


def histogram(values: Sequence[float], lo: float, hi: float, bins: int = HISTOGRAM_BINS) -> dict[str, Any]:
    """Counts of ``values`` in ``bins`` equal bins over ``[lo, hi]`` (values outside are clipped)."""
    if not hi > lo:
        hi = lo + 1.0
    x = np.clip(np.asarray(values, dtype=np.float64), lo, hi)
    counts, edges = np.histogram(x, bins=bins, range=(lo, hi))
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


def metric_view(meta: Mapping[str, Any], agg: MetricSummary, values: Any, n_pending: int) -> dict[str, Any]:
    """One metric's view: ``meta`` (:func:`metric_meta`), the figures of its aggregate, its band,
    and a histogram of its ``values`` on its scale."""
    lo, hi = meta["range"]
    b = band(agg.mean, meta["higher_is_better"]) if meta["show_band"] else None
    return {
        **meta,
        "mean": agg.mean, "std": agg.std, "min": agg.min, "max": agg.max,
        "ci_low": agg.ci_low, "ci_high": agg.ci_high, "n": agg.n, "n_missing": agg.n_missing,
        "n_pending": n_pending,
        "missing_reasons": redact_obj(dict(agg.missing_reasons)),
        "band": b.name if b else None, "band_css": b.css if b else None,
        "band_action": b.action if b else None,
        "histogram": histogram(values, lo, hi),
    }


def metric_views(run: Run, summary: RunSummary, samples: Sequence[Sample],
                 table: Mapping[str, Mapping[str, Score]], live: bool) -> list[dict[str, Any]]:
    """Per-metric aggregates (mean, CI, n, missing and why, band) and a histogram of the values.

    A finished run's stored summary (``summary``, :meth:`ragmeter.store.Store.run_summary`) is
    used as it is; a run still going is aggregated from the scores stored so far (samples not
    scored yet are counted as pending, not as missing).
    """
    out = []
    for key in metric_keys(run, table):
        col = table.get(key, {})
        scores = [col.get(s.id) for s in samples]
        present = [s for s in scores if s is not None]
        if key in summary and not live:
            agg = summary[key]
        else:
            agg = MetricSummary.from_dict(aggregate(present, bounds=metric_bounds(run, summary, key)))
        values = [s.value for s in present if s.value is not None]
        # pending: not scored yet, in a running run; in a finished one, a sample without a score is
        # outside the metric's scope (a conversation's turns, a per-span run's rows of other kinds)
        pending = len(scores) - len(present) if live else 0
        out.append(metric_view(metric_meta(run, summary, key, agg), agg, values, pending))
    return out


def dataset_summary(run: Run, samples: Sequence[Sample]) -> dict[str, Any]:
    """Where the data came from and which fields its samples carry."""
    fields = {f: sum(1 for s in samples if present(s)) for f, present in FIELD_PRESENT.items()}
    n_ctx = [len(s.contexts) for s in samples if s.contexts is not None]
    n_rel = [len(s.relevant) for s in samples if s.relevant is not None]
    extra = run.extra or {}
    return {
        "source": run.dataset_source,
        "fingerprint": run.dataset_fingerprint,
        "n_samples": run.n_samples,
        "n_stored": len(samples),
        "fields": {k: v for k, v in fields.items() if k != "context_texts"},
        "mean_contexts": float(np.mean(n_ctx)) if n_ctx else None,
        "mean_relevant": float(np.mean(n_rel)) if n_rel else None,
        "skipped_rows": extra.get("skipped_rows"),
    }
