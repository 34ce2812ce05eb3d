"""The sections of a run's report and dashboard page that come from other features' records: composite
scores and hints (:mod:`ragmeter.analysis.composite`), the calibration curve and grid searches a run
belongs to (``Run.extra``, kv namespace ``grid``), judge reliability cards (:mod:`ragmeter.human`);
and :func:`jsonable`, which makes any of them JSON."""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ragmeter.apps.report.bands import band
from ragmeter.core.errors import RagmeterError
from ragmeter.core.redact import redact_obj
from ragmeter.store import Store
from ragmeter.store.models import Run

#: ``Run.extra`` entries shown as their own sections rather than as service figures.
EXTRA_SECTIONS = {"calibration", "method", "skipped_rows"}


def _composite_module() -> Any:
    try:
        return importlib.import_module("ragmeter.analysis.composite")
    except ImportError:
        return None


def hints_for(metrics: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Automatic hints ("low faithfulness: improve context retrieval") for a run's metric views
    (:func:`ragmeter.apps.report.metric_views.metric_views`) when the composite module provides
    them; ``[]`` otherwise."""
    mod = _composite_module()
    fn = getattr(mod, "hints", None)
    if fn is None or not metrics:
        return []
    # the summary's JSON shape, of the figures shown
    summary = {m["key"]: {k: m[k] for k in ("mean", "ci_low", "ci_high", "n", "n_missing", "direction", "family")}
               for m in metrics}
    try:
        out = fn(summary)
    except Exception:  # noqa: BLE001 - a hint failure must not take the report down
        return []
    return [h if isinstance(h, Mapping) else {"message": str(h)} for h in (out or [])]


def composites_for(store: Store, run: Run) -> list[dict[str, Any]]:
    """Composite (weighted overall) scores of a run: every built-in preset of
    :mod:`ragmeter.analysis.composite` and every composite the run's ``options.composite``
    defines, where the run has any of its components. ``[]`` when the module is absent."""
    mod = _composite_module()
    fn = getattr(mod, "composite_scores", None)
    if fn is None:
        return []
    custom = ((run.config or {}).get("options") or {}).get("composite")
    names = list(getattr(mod, "PRESETS", {}) or {}) + (list(custom) if isinstance(custom, Mapping) else [])
    out = []
    columns: list[Any] = []  # the run's score columns, read once for every preset that applies

    def cols() -> Any:
        if not columns:
            from ragmeter.store.columns import run_columns

            columns.append(run_columns(store, run.id)[0])
        return columns[0]

    for preset in dict.fromkeys(names):
        try:
            res = fn(store, run.id, preset, columns=cols)
        except Exception as exc:  # noqa: BLE001 - one bad composite must not take the report down
            out.append({"composite": str(preset), "error": str(exc)})
            continue
        if res:
            res = jsonable(res)
            b = band(res.get("mean")) if isinstance(res.get("mean"), float | int) else None
            res["band_css"] = b.css if b else None
            out.append(res)
    return out


def run_settings(run: Run) -> dict[str, Any]:
    """What a run's view shows of how it was run: its configuration (redacted here, so a run stored
    before redaction shows no secret either), the metric requests, the method, the timings and the
    services it used. One place for the report, the dashboard and the large-run view."""
    extra = run.extra or {}
    return {
        "config": jsonable(redact_obj(run.config or {})),
        "requests": jsonable(run.metrics or []),
        "method": jsonable(extra.get("method")) if extra.get("method") else None,
        "timings": jsonable(run.timings or {}),
        "services": jsonable({k: v for k, v in extra.items() if k not in EXTRA_SECTIONS}),
    }


def jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float | int | str | bool) or obj is None:
        return None if isinstance(obj, float) and math.isnan(obj) else obj
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if hasattr(obj, "model_dump"):
        return jsonable(obj.model_dump(mode="json"))
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return jsonable(asdict(obj))
    return str(obj)


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


def reliability_for(store: Store, run_id: str) -> list[dict[str, Any]]:
    """Judge reliability cards of the run's judge metrics (ragmeter.human), as text lines."""
    try:
        from ragmeter.human.reliability import card_lines, reliability_cards

        cards = reliability_cards(store, run_id)
    except (ImportError, RagmeterError, ValueError) as exc:
        return [{"metric": "judge reliability", "lines": [f"not available: {exc}"]}]
    return [{"metric": m, "lines": card_lines(c)} for m, c in cards.items()]
