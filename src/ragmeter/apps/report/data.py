"""What the report and the dashboard show, gathered from the store as plain JSON-able dicts.

Presentation reads only from the store: a run's config, summary and extra records, its samples as
they were evaluated and their scores. Nothing here writes to the store. The HTML layers (the
one-file report and the dashboard) and the dashboard's JSON API all use these views.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ragmeter.apps.report.bands import band, oriented
from ragmeter.apps.report.columnar import LARGE_RUN
from ragmeter.apps.report.conversations import conversations_for
from ragmeter.apps.report.meta_eval import meta_eval_view
from ragmeter.core.errors import ConfigError, RagmeterError, StoreError
from ragmeter.core.redact import redact, redact_obj
from ragmeter.core.schema import FIELD_PRESENT, Sample, Score
from ragmeter.metrics.composite import bands_apply
from ragmeter.stats.clustered import cluster_codes
from ragmeter.stats.intervals import aggregate
from ragmeter.stats.paired import paired_mean_ci
from ragmeter.store import Store
from ragmeter.store.models import Run

#: keys of ``Score.details`` read as a judge's reasoning, in this order.
_REASON_KEYS = ("reasoning", "reason", "explanation", "rationale", "justification", "feedback",
                "critique", "comment")
#: keys of ``Score.details`` holding per-claim/per-statement verdict lists.
_VERDICT_KEYS = ("verdicts", "claims", "statements", "steps")
#: ``Run.extra`` entries shown as their own sections rather than as service figures.
_EXTRA_SECTIONS = {"calibration", "method", "skipped_rows"}
HISTOGRAM_BINS = 20


# ---- runs ------------------------------------------------------------------------------------
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


def runs_list(store: Store, limit: int | None = None) -> list[dict[str, Any]]:
    """Every stored run, newest first, with its headline means."""
    out = []
    for run in store.list_runs(limit):
        head = run_header(run)
        head["means"] = {k: (a or {}).get("mean") for k, a in (run.summary or {}).items()}
        head["directions"] = {k: (a or {}).get("direction", "higher")
                              for k, a in (run.summary or {}).items()}
        options = (run.config or {}).get("options") or {}
        bands = {k: band(m, head["directions"][k] != "lower") for k, m in head["means"].items()
                 if m is not None and 0.0 <= m <= 1.0
                 and bands_apply(k, ((run.summary or {}).get(k) or {}).get("family"), options)}
        head["bands"] = {k: b.css for k, b in bands.items() if b is not None}
        out.append(head)
    return out


def metric_bounds(run: Run, key: str) -> tuple[float, float] | None:
    """The declared range of metric ``key`` of ``run``, what its intervals and paired differences
    are bounded by: :func:`ragmeter.metrics.registry.recorded_range` of its request (the spec, or
    the definition that built it), else of the range its summary records; ``None`` when it declares
    none (an OpenAI python grader without ``range``: the rule for no declared range)."""
    from ragmeter.metrics.registry import recorded_range

    req = next((m for m in (run.metrics or []) if m.get("key") == key), None)
    return recorded_range(key, req, ((run.summary or {}).get(key) or {}).get("range"))


def metric_range(run: Run, key: str, lo: float | None = None, hi: float | None = None
                 ) -> tuple[float, float]:
    """The scale metric ``key`` of ``run`` is shown on: its declared range (:func:`metric_bounds`),
    else the house range [0, 1] when the values ``lo .. hi`` fit it, else ``(lo, hi)``."""
    return _shown_range(metric_bounds(run, key), lo, hi)


def _shown_range(bounds: tuple[float, float] | None, lo: float | None, hi: float | None) -> tuple[float, float]:
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


def _metric_meta(run: Run, key: str, agg: Mapping[str, Any]) -> dict[str, Any]:
    req = next((m for m in (run.metrics or []) if m.get("key") == key), {})
    name = req.get("name") or key
    stored = (run.summary or {}).get(key) or {}
    direction = agg.get("direction") or stored.get("direction") or _spec_direction(name) or "higher"
    bounds = metric_bounds(run, key)
    rng = _shown_range(bounds, agg.get("min"), agg.get("max"))
    banded = rng == (0.0, 1.0)
    family = agg.get("family") or stored.get("family") or ""
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


def _scores_for(key: str, samples: Sequence[Sample], table: Mapping[str, Mapping[str, Score]]
                ) -> list[Score | None]:
    col = table.get(key, {})
    return [col.get(s.id) for s in samples]


def metric_views(run: Run, samples: Sequence[Sample], table: Mapping[str, Mapping[str, Score]],
                 live: bool) -> list[dict[str, Any]]:
    """Per-metric aggregates (mean, CI, n, missing and why, band) and a histogram of the values.

    A finished run's stored summary is used as it is; a run still going is aggregated from the
    scores stored so far (samples not scored yet are counted as pending, not as missing).
    """
    out = []
    summary = run.summary or {}
    for key in metric_keys(run, table):
        scores = _scores_for(key, samples, table)
        present = [s for s in scores if s is not None]
        if key in summary and not live:
            agg = dict(summary[key])
        else:
            agg = aggregate(present, bounds=metric_bounds(run, key))
        meta = _metric_meta(run, key, agg)
        values = [s.value for s in present if s.value is not None]
        lo, hi = meta["range"]
        b = band(agg.get("mean"), meta["higher_is_better"]) if meta["show_band"] else None
        out.append({
            **meta,
            "mean": agg.get("mean"), "std": agg.get("std"), "min": agg.get("min"),
            "max": agg.get("max"), "ci_low": agg.get("ci_low"), "ci_high": agg.get("ci_high"),
            "n": int(agg.get("n", len(values))), "n_missing": int(agg.get("n_missing", 0)),
            "n_pending": len(scores) - len(present),
            "missing_reasons": redact_obj(dict(agg.get("missing_reasons") or {})),
            "band": b.name if b else None, "band_css": b.css if b else None,
            "band_action": b.action if b else None,
            "histogram": histogram(values, lo, hi),
        })
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


# ---- samples ---------------------------------------------------------------------------------
def reasoning_text(details: Mapping[str, Any] | None, limit: int | None = None) -> str | None:
    """A judge's reasoning read from ``Score.details``: the metric's verdict summary, its
    reason-like strings, then its per-claim verdicts as ``verdict: reason`` lines. ``None`` when
    the details hold none."""
    if not isinstance(details, Mapping):
        return None
    parts: list[str] = []
    summary = details.get("summary")
    summary = summary.strip() if isinstance(summary, str) else ""
    if summary:  # the metric's own summary, built from the same verdicts as the score
        parts.append(summary)
    for k in _REASON_KEYS:
        v = details.get(k)
        if isinstance(v, str) and v.strip() and v.strip() not in summary:
            parts.append(v.strip())
    for k in _VERDICT_KEYS:
        v = details.get(k)
        if isinstance(v, list):
            for item in v:
                if isinstance(item, Mapping):
                    head = next((str(item[x]) for x in ("verdict", "label", "supported", "score")
                                 if x in item), "")
                    what = next((str(item[x]) for x in ("claim", "statement", "text", "step")
                                 if item.get(x)), "")
                    why = next((str(item[x]) for x in _REASON_KEYS if item.get(x)), "")
                    line = " — ".join(p for p in (what, why) if p)
                    parts.append(f"{head}: {line}" if head and line else head or line)
                elif isinstance(item, str):
                    parts.append(item)
    text = "\n".join(p for p in parts if p)
    if not text:
        return None
    if limit is not None and len(text) > limit:
        text = text[:limit - 1] + "…"
    return text


def _quality(values: Mapping[str, float | None], metas: Sequence[Mapping[str, Any]]) -> float | None:
    """Mean of the sample's banded values, each turned so higher is better (worst-first key)."""
    vals = [oriented(values.get(m["key"]), m["higher_is_better"]) for m in metas if m["banded"]]
    vals = [v for v in vals if v is not None]
    return math.fsum(vals) / len(vals) if vals else None


def sample_row(sample: Sample, position: int, table: Mapping[str, Mapping[str, Score]],
               metas: Sequence[Mapping[str, Any]], *, with_details: bool = False) -> dict[str, Any]:
    """One line of the per-sample table (and, with ``with_details``, what its detail view shows)."""
    values: dict[str, float | None] = {}
    reasons: dict[str, str] = {}
    bands: dict[str, str | None] = {}
    reasoning: list[dict[str, str]] = []
    for m in metas:
        sc = table.get(m["key"], {}).get(sample.id)
        v = sc.value if sc is not None else None
        values[m["key"]] = v
        b = band(v, m["higher_is_better"]) if m.get("show_band") else None
        bands[m["key"]] = b.css if b else None
        if sc is None:
            reasons[m["key"]] = "not scored yet"
        elif v is None:
            reasons[m["key"]] = redact(sc.reason or "no value")  # runs stored before redaction too
        text = reasoning_text(sc.details if sc is not None else None)
        if text:
            reasoning.append({"metric": m["key"], "text": text})
    q = _quality(values, metas)
    qb = band(q)
    row: dict[str, Any] = {
        "id": sample.id, "position": position, "question": sample.question,
        "answer": sample.answer, "reference": sample.reference,
        "n_contexts": len(sample.contexts) if sample.contexts is not None else None,
        "label": sample.label, "values": values, "reasons": reasons, "bands": bands,
        "quality": q, "quality_band": qb.css if qb else None, "reasoning": reasoning,
    }
    if with_details:
        row["detail"] = sample_detail(sample, table, metas)
    return row


def sample_detail(sample: Sample, table: Mapping[str, Mapping[str, Score]],
                  metas: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Everything about one sample: its fields, contexts, and every metric's value, band,
    reason and details (judge verdicts ...)."""
    scores = []
    for m in metas:
        sc = table.get(m["key"], {}).get(sample.id)
        v = sc.value if sc is not None else None
        b = band(v, m["higher_is_better"]) if m.get("show_band") else None
        scores.append({
            "metric": m["key"], "family": m["family"], "direction": m["direction"],
            "value": v, "band": b.name if b else None, "band_css": b.css if b else None,
            "reason": (sc.reason if sc is not None else "not scored yet"),
            "details": sc.details if sc is not None else None,
            "reasoning": reasoning_text(sc.details if sc is not None else None),
        })
    return {"sample": sample.model_dump(mode="json", exclude_none=True), "scores": scores,
            "quality": _quality({s["metric"]: s["value"] for s in scores}, metas)}


def _sort_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # worst first; samples without any banded value go last, in dataset order
    return sorted(rows, key=lambda r: (r["quality"] is None, r["quality"] if r["quality"] is not None
                                       else 0.0, r["position"]))


# ---- composite scores and hints (another feature's module; optional) ------------------------
def _composite_module() -> Any:
    try:
        return importlib.import_module("ragmeter.metrics.composite")
    except ImportError:
        return None


def hints_for(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Automatic hints ("low faithfulness: improve context retrieval") when the composite module
    provides them; ``[]`` otherwise."""
    mod = _composite_module()
    fn = getattr(mod, "hints", None)
    if fn is None or not summary:
        return []
    try:
        out = fn(dict(summary))
    except Exception:  # noqa: BLE001 - a hint failure must not take the report down
        return []
    return [h if isinstance(h, Mapping) else {"message": str(h)} for h in (out or [])]


def composites_for(store: Store, run: Run) -> list[dict[str, Any]]:
    """Composite (weighted overall) scores of a run: every built-in preset of
    :mod:`ragmeter.metrics.composite` and every composite the run's ``options.composite``
    defines, where the run has any of its components. ``[]`` when the module is absent."""
    mod = _composite_module()
    fn = getattr(mod, "composite_scores", None)
    if fn is None:
        return []
    custom = ((run.config or {}).get("options") or {}).get("composite")
    names = list(getattr(mod, "PRESETS", {}) or {}) + (list(custom) if isinstance(custom, Mapping) else [])
    out = []
    for preset in dict.fromkeys(names):
        try:
            res = fn(store, run.id, preset)
        except Exception as exc:  # noqa: BLE001 - one bad composite must not take the report down
            out.append({"composite": str(preset), "error": str(exc)})
            continue
        if res:
            res = _jsonable(res)
            b = band(res.get("mean")) if isinstance(res.get("mean"), float | int) else None
            res["band_css"] = b.css if b else None
            out.append(res)
    return out


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float | int | str | bool) or obj is None:
        return None if isinstance(obj, float) and math.isnan(obj) else obj
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if hasattr(obj, "model_dump"):
        return _jsonable(obj.model_dump(mode="json"))
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return _jsonable(asdict(obj))
    return str(obj)


# ---- plots' data: calibration and grid search -----------------------------------------------
def calibration_of(run: Run) -> dict[str, Any] | None:
    """``Run.extra["calibration"]`` when it has a usable curve (equal-length lists)."""
    cal = (run.extra or {}).get("calibration")
    if not isinstance(cal, Mapping):
        return None
    t = cal.get("thresholds")
    if not isinstance(t, list) or not t:
        return None
    curves = {k: cal[k] for k in ("accuracy", "f1") if isinstance(cal.get(k), list) and len(cal[k]) == len(t)}
    if not curves:
        return None
    return {"thresholds": t, **curves, "chosen": cal.get("chosen"), "objective": cal.get("objective"),
            **{k: v for k, v in cal.items() if k not in {"thresholds", "accuracy", "f1", "chosen", "objective"}
               and not isinstance(v, list | dict)}}


def grids_for(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Grid-search records (kv namespace ``grid``) that include this run, with the two
    parameters to draw the heat map over."""
    out = []
    for gid, rec in sorted(store.kv_list("grid").items()):
        runs = rec.get("runs") if isinstance(rec, Mapping) else None
        if not isinstance(runs, list) or not any(isinstance(r, Mapping) and r.get("run_id") == run_id
                                                 for r in runs):
            continue
        out.append(grid_view(gid, rec, highlight=run_id))
    return out


def grid_view(grid_id: str, rec: Mapping[str, Any], highlight: str | None = None) -> dict[str, Any]:
    """A grid record reduced to a heat map: the two parameters that take the most values are the
    axes; where other parameters vary too, a cell shows the best mean over them."""
    runs = [r for r in rec.get("runs", []) if isinstance(r, Mapping) and isinstance(r.get("params"), Mapping)]
    distinct: dict[str, list[Any]] = {}
    for r in runs:
        for k, v in r["params"].items():
            vals = distinct.setdefault(k, [])
            if v not in vals:
                vals.append(v)
    varying = sorted((k for k, v in distinct.items() if len(v) > 1), key=lambda k: -len(distinct[k]))
    axes = varying[:2]
    higher = rec.get("direction", "higher") != "lower"
    cells: dict[tuple[Any, Any], dict[str, Any]] = {}
    for r in runs:
        if r.get("mean") is None:
            continue
        key = tuple(_hashable(r["params"].get(a)) for a in axes) + (None,) * (2 - len(axes))
        best = cells.get(key)
        better = best is None or (r["mean"] > best["mean"] if higher else r["mean"] < best["mean"])
        if better:
            cells[key] = dict(r)
    x_vals = [_hashable(v) for v in _sorted_values(distinct.get(axes[0], []))] if axes else [None]
    y_vals = [_hashable(v) for v in _sorted_values(distinct.get(axes[1], []))] if len(axes) > 1 else [None]
    z, ci, ids = [], [], []
    for y in y_vals:
        zr, cr, ir = [], [], []
        for x in x_vals:
            c = cells.get((x, y))
            zr.append(c.get("mean") if c else None)
            cr.append([c.get("ci_low"), c.get("ci_high")] if c else None)
            ir.append(c.get("run_id") if c else None)
        z.append(zr)
        ci.append(cr)
        ids.append(ir)
    # the cell of the highlighted run: where its own parameters fall, best of its cell or not
    cell = None
    mine = next((r for r in runs if highlight is not None and r.get("run_id") == highlight), None)
    if mine is not None and axes:
        xv = _hashable(mine["params"].get(axes[0]))
        yv = _hashable(mine["params"].get(axes[1])) if len(axes) > 1 else None
        if xv in x_vals and yv in y_vals:
            cell = [x_vals.index(xv), y_vals.index(yv)]
    return {"id": grid_id, "metric": rec.get("metric") or rec.get("objective") or "mean",
            "axes": axes, "others": varying[2:], "x": x_vals, "y": y_vals, "z": z, "ci": ci,
            "run_ids": ids, "highlight": highlight, "highlight_cell": cell, "n_configs": len(runs),
            "ranking": rec.get("ranking") if isinstance(rec.get("ranking"), list) else []}


def _hashable(v: Any) -> Any:
    return v if isinstance(v, str | int | float | bool) or v is None else str(v)


def _sorted_values(vals: Iterable[Any]) -> list[Any]:
    vals = list(vals)
    try:
        return sorted(vals)
    except TypeError:
        return sorted(vals, key=str)


# ---- a whole run -----------------------------------------------------------------------------
def run_view(store: Store, ref: str, *, max_samples: int | None = 1000,
             with_details: bool = False) -> dict[str, Any]:
    """Everything the report shows about one run.

    Args:
        store: the results store.
        ref: a run id, unique prefix, name or ``latest``.
        max_samples: at most this many sample rows (the worst ones); ``None`` for all.
        with_details: attach each row's full detail (contexts, verdicts) for the one-file report.

    Raises:
        StoreError: no such run.
    """
    run = store.get_run(ref)
    live = run.status not in ("completed", "incomplete") or not run.summary
    note = None
    if run.n_samples > LARGE_RUN:  # from the score columns; rows only for the samples shown
        from ragmeter.apps.report import columnar

        metrics, rows, total, dataset, note = columnar.run_parts(sys.modules[__name__], store, run, live,
                                                                 max_samples, with_details)
    else:
        samples = store.run_samples(run.id)
        table = store.score_table(run.id)
        metrics = metric_views(run, samples, table, live)
        rows = _sort_rows([sample_row(s, i, table, metrics) for i, s in enumerate(samples)])
        total = len(rows)
        if max_samples is not None:
            rows = rows[:max_samples]
        if with_details:
            for r in rows:
                r["detail"] = sample_detail(samples[r["position"]], table, metrics)
        dataset = dataset_summary(run, samples)
    extra = run.extra or {}
    summary = {m["key"]: {k: m[k] for k in ("mean", "ci_low", "ci_high", "n", "n_missing",
                                            "direction", "family")} for m in metrics}
    return {
        "run": run_header(run),
        "live": live,
        "config": _jsonable(redact_obj(run.config or {})),  # runs stored before redaction too
        "requests": _jsonable(run.metrics or []),
        "method": _jsonable(extra.get("method")) if extra.get("method") else None,
        "timings": _jsonable(run.timings or {}),
        "services": _jsonable({k: v for k, v in extra.items() if k not in _EXTRA_SECTIONS}),
        "dataset": dataset,
        "metrics": metrics,
        "samples": rows,
        "samples_total": total,
        "samples_note": note,
        "calibration": calibration_of(run),
        "grids": grids_for(store, run.id),
        "composites": composites_for(store, run),
        "hints": _jsonable(hints_for(summary)),
        "reliability": reliability_for(store, run.id),
        "meta_eval": meta_eval_view(store, run),
        "conversations": conversations_for(store, run.id),
    }


def reliability_for(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Judge reliability cards of the run's judge metrics (ragmeter.human), as text lines."""
    try:
        from ragmeter.human.reliability import card_lines, reliability_cards

        cards = reliability_cards(store, run_id)
    except (ImportError, RagmeterError, ValueError) as exc:
        return [{"metric": "judge reliability", "lines": [f"not available: {exc}"]}]
    return [{"metric": m, "lines": card_lines(c)} for m, c in cards.items()]


def sample_view(store: Store, ref: str, sample_id: str) -> dict[str, Any]:
    """One sample of a run with its contexts and every metric's verdict.

    Raises:
        StoreError: no such run, or the run has no sample with this id.
    """
    run = store.get_run(ref)
    samples = store.run_samples(run.id)
    pos = next((i for i, s in enumerate(samples) if s.id == sample_id), None)
    if pos is None:
        raise StoreError(f"run {run.id} has no sample {sample_id!r}")
    table = store.score_table(run.id)
    metas = metric_views(run, [samples[pos]], table, live=True)
    # bands and directions come from the run's own metrics; aggregates here are per-sample only
    detail = sample_detail(samples[pos], table, metas)
    return {"run": run_header(run), "position": pos, "n_samples": len(samples),
            "prev_id": samples[pos - 1].id if pos > 0 else None,
            "next_id": samples[pos + 1].id if pos + 1 < len(samples) else None, **detail}


# ---- several runs ----------------------------------------------------------------------------
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
                           "p_adjusted": None, "n_clusters": None}
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
    else:  # no p-value: the interval alone, by the one rule (per conversation when the turns are)
        ci = paired_mean_ci(xa, xb, level=level, bounds=bounds, clusters=labels)
        if labels is not None:
            out["n_clusters"] = cluster_codes(labels)[1]
    wins, losses = (up, down) if higher_is_better else (down, up)
    out.update(mean_a=float(xa.mean()), mean_b=float(xb.mean()), diff=float(d.mean()),
               ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None,
               wins=wins, losses=losses, ties=len(ids) - wins - losses)
    out["higher_is_better"] = higher_is_better
    _decide([out])
    return out


def _decide(differences: Sequence[dict[str, Any]], alpha: float = 0.05) -> None:
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


def compare_view(store: Store, refs: Sequence[str], *, max_samples: int | None = 1000
                 ) -> dict[str, Any]:
    """Several runs side by side: per-metric means with CIs, and every run's paired difference
    to the first run (the baseline), per metric; plus the samples that changed most.

    Raises:
        StoreError: a run does not exist, or fewer than two distinct runs were given.
    """
    runs: list[Run] = []
    for ref in refs:
        r = store.get_run(ref)
        if all(r.id != x.id for x in runs):
            runs.append(r)
    if len(runs) < 2:
        raise StoreError("comparing needs at least two distinct runs")
    if max(r.n_samples for r in runs) > LARGE_RUN:  # in bulk from the score columns
        from ragmeter.apps.report import columnar

        return columnar.compare_view(sys.modules[__name__], store, runs, max_samples)
    per_run = []
    for run in runs:
        # only what a comparison reads: ids, questions and answers; values and reasons (no
        # details), so two runs of 100k samples do not need whole Sample objects in memory
        samples = _brief_samples(store, run.id)
        table = store.score_values(run.id)
        live = run.status not in ("completed", "incomplete") or not run.summary
        metas = metric_views(run, samples, table, live)
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
    _decide(differences)
    return {
        "runs": [run_header(pr["run"]) for pr in per_run],
        "baseline": base["run"].id,
        "metrics": metrics,
        "differences": differences,
        **_sample_changes(per_run, metrics, max_samples),
    }


class _BriefSample(NamedTuple):
    id: str
    question: str | None
    answer: str | None


def _brief_samples(store: Store, run_id: str) -> list[_BriefSample]:
    rows = [(pos, _BriefSample(sid, raw.get("question"), raw.get("answer")))
            for _pk, pos, sid, raw in store.iter_sample_rows(run_id)]
    rows.sort(key=lambda r: r[0])
    return [b for _pos, b in rows]



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
            "runs": [_run_metric_cell(pr["metas"].get(k)) for pr in per_run],
        })
    return metrics

def _run_metric_cell(meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
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
            qualities.append(_quality(vals, metas) if any(s.id in pr["values"].get(m["key"], {})
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
