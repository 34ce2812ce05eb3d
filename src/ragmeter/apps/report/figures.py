"""Plotly figures of the report: distributions, runs compared with error bars, paired
differences, the threshold calibration curve and the grid-search heat map.

Each function returns a figure as a plain dict (``{"data": [...], "layout": {...}}``), the JSON
plotly's figure classes write for it (a test validates every builder through them); the page draws
it with the embedded plotly.js. Plotly is imported only for figures that need its encoders.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ragmeter.apps.report.bands import band

FONT = ("-apple-system, BlinkMacSystemFont, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, "
        "sans-serif")
TEXT = "#1f2937"
GRID = "#e5e7eb"
AXIS = "#d1d5db"
MUTED = "#9ca3af"
#: bar colours of the score bands (the page's CSS uses the same hues).
BAND_COLORS = {"excellent": "#15803d", "good": "#65a30d", "fair": "#ca8a04", "poor": "#ea580c",
               "critical": "#dc2626"}
#: one colour per run in comparisons.
RUN_COLORS = ("#2563eb", "#f97316", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#db2777")
NEUTRAL = "#6366f1"
CONFIG = {"displaylogo": False, "responsive": True,
          "modeBarButtonsToRemove": ["lasso2d", "select2d", "autoScale2d"]}


def _axis(**kw: Any) -> dict[str, Any]:
    return {"gridcolor": GRID, "linecolor": AXIS, "zeroline": False, "ticks": "outside",
            "tickcolor": AXIS, "automargin": True, **kw}


def _layout(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "template": "none",
        "paper_bgcolor": "#ffffff", "plot_bgcolor": "#ffffff",
        "font": {"family": FONT, "size": 12, "color": TEXT},
        "margin": {"l": 52, "r": 16, "t": 28, "b": 44},
        "hoverlabel": {"font": {"family": FONT}},
        "showlegend": False,
    }
    base.update(kw)
    return base


#: what plotly writes for ``layout.template = "none"`` (its figure classes resolve the name)
_NONE_TEMPLATE = {"data": {"scatter": [{"type": "scatter"}]}}
#: layout lists of objects, which plotly leaves out of its JSON when empty
_LAYOUT_ARRAYS = frozenset({"shapes", "annotations", "images", "selections", "sliders", "updatemenus"})


class _NotPlain(Exception):
    """A figure holds something other than JSON's own types (a numpy array, a date)."""


def _plain(value: Any) -> Any:
    """``value`` as plotly's JSON writes plain Python data: tuples as lists, NaN and infinities as
    null; raises :class:`_NotPlain` on any other type (plotly has its own encodings for those)."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise _NotPlain
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    raise _NotPlain


def _figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    """The plain JSON-able dict plotly.js takes, as plotly's figure classes write it.

    Figures of plain data with ``template="none"`` (every figure here) are written without
    loading plotly: importing and validating through its classes cost 0.1-0.2 s of a fresh
    process's first page. ``tests/test_figures_plain.py`` checks each builder's output against
    :func:`validated` (plotly's classes, which validate every property); anything else goes
    through :func:`validated` itself.
    """
    if layout.get("template") == "none":
        try:
            fig = {"data": [{**_plain(t), "type": t.get("type", "scatter")} for t in data],
                   "layout": {**{k: v for k, v in _plain(layout).items()
                                 if not (k in _LAYOUT_ARRAYS and v == [])}, "template": _NONE_TEMPLATE}}
        except _NotPlain:
            pass
        else:
            return {**json.loads(json.dumps(fig)), "config": CONFIG}
    return validated(data, layout)


def validated(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    """Validate with plotly's classes, return the plain JSON-able dict plotly.js takes."""
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = go.Figure(data=data, layout=layout)
    return {**json.loads(pio.to_json(fig, validate=True)), "config": CONFIG}


def distribution(metric: Mapping[str, Any]) -> dict[str, Any]:
    """Histogram of one metric's per-sample values, bars coloured by score band, with the mean.

    ``metric`` is an entry of :func:`ragmeter.apps.report.metric_views.metric_views`.
    """
    edges = metric["histogram"]["edges"]
    counts = metric["histogram"]["counts"]
    centers = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    width = (edges[-1] - edges[0]) / max(1, len(counts))
    if metric.get("banded"):
        colors = [BAND_COLORS[band(c, metric["higher_is_better"]).css] for c in centers]
    else:
        colors = [NEUTRAL] * len(centers)
    hover = [f"{a:.3g} – {b:.3g}: {c} sample{'s' if c != 1 else ''}"
             for a, b, c in zip(edges[:-1], edges[1:], counts, strict=True)]
    shapes, annotations = [], []
    if metric.get("mean") is not None:
        m = metric["mean"]
        shapes.append({"type": "line", "x0": m, "x1": m, "yref": "paper", "y0": 0, "y1": 1,
                       "line": {"color": TEXT, "width": 1.5, "dash": "dash"}})
        pos = (m - edges[0]) / ((edges[-1] - edges[0]) or 1.0)
        anchor = "right" if pos > 0.8 else "left" if pos < 0.2 else "center"
        annotations.append({"x": m, "y": 1, "yref": "paper", "yanchor": "bottom", "xanchor": anchor,
                            "showarrow": False, "text": f"mean {m:.3f}",
                            "font": {"size": 11, "color": TEXT}})
    arrow = "↓ lower is better" if not metric.get("higher_is_better", True) else "↑ higher is better"
    return _figure(
        [{"type": "bar", "x": centers, "y": counts, "width": [width * 0.92] * len(centers),
          "marker": {"color": colors}, "hovertext": hover, "hoverinfo": "text"}],
        _layout(height=210, bargap=0.05, shapes=shapes, annotations=annotations,
                margin={"l": 44, "r": 12, "t": 24, "b": 40},
                xaxis=_axis(range=[edges[0], edges[-1]], title={"text": arrow, "font": {"size": 11, "color": MUTED}}),
                yaxis=_axis(title={"text": "samples"}, rangemode="tozero")))


def compare_bars(runs: Sequence[Mapping[str, Any]], metrics: Sequence[Mapping[str, Any]]
                 ) -> dict[str, Any]:
    """Grouped bars: one group per metric, one bar per run, 95% CI error bars."""
    data = []
    keys = [m["key"] for m in metrics]
    for i, run in enumerate(runs):
        cells = [m["runs"][i] for m in metrics]
        means = [c["mean"] if c else None for c in cells]
        plus = [(c["ci_high"] - c["mean"]) if c and c["ci_high"] is not None and c["mean"] is not None
                else 0 for c in cells]
        minus = [(c["mean"] - c["ci_low"]) if c and c["ci_low"] is not None and c["mean"] is not None
                 else 0 for c in cells]
        hover = [f"{run['label']}<br>{k}: {v:.4f}" + (f" [{c['ci_low']:.4f}, {c['ci_high']:.4f}]"
                                                    if c and c["ci_low"] is not None else "")
                 if v is not None else f"{run['label']}<br>{k}: no value"
                 for k, v, c in zip(keys, means, cells, strict=True)]
        data.append({"type": "bar", "name": run["label"], "x": keys, "y": means,
                     "marker": {"color": RUN_COLORS[i % len(RUN_COLORS)]},
                     "error_y": {"type": "data", "symmetric": False, "array": plus,
                                 "arrayminus": minus, "color": TEXT, "thickness": 1.2, "width": 4},
                     "hovertext": hover, "hoverinfo": "text"})
    height = 320
    return _figure(data, _layout(
        height=height, barmode="group", bargap=0.25, bargroupgap=0.06, showlegend=True,
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        margin={"l": 52, "r": 16, "t": 40, "b": 36},
        xaxis=_axis(tickangle=-30 if len(keys) > 4 else 0),
        yaxis=_axis(title={"text": "mean (95% CI)"}, rangemode="tozero")))


def difference_forest(differences: Sequence[Mapping[str, Any]], n_runs: int) -> dict[str, Any]:
    """Paired differences (run − baseline) with their 95% CIs, one row per (run, metric);
    green where significantly better, red where significantly worse, grey otherwise."""
    rows = [d for d in differences if d.get("diff") is not None]
    labels = [d["metric"] + (f" · {d['run_label']}" if n_runs > 2 else "") for d in rows]
    colors = [BAND_COLORS["excellent"] if d["verdict"] == "better"
              else BAND_COLORS["critical"] if d["verdict"] == "worse" else MUTED for d in rows]
    plus = [(d["ci_high"] - d["diff"]) if d["ci_high"] is not None else 0 for d in rows]
    minus = [(d["diff"] - d["ci_low"]) if d["ci_low"] is not None else 0 for d in rows]
    hover = [f"{lab}<br>Δ {d['diff']:+.4f}" + (f" [{d['ci_low']:+.4f}, {d['ci_high']:+.4f}]"
                                               if d["ci_low"] is not None else "")
             + f"<br>{d['verdict']} ({d['direction']} is better), n={d['n_pairs']}"
             for lab, d in zip(labels, rows, strict=True)]
    height = max(180, 60 + 30 * len(rows))
    return _figure(
        [{"type": "scatter", "mode": "markers", "x": [d["diff"] for d in rows], "y": labels,
          "marker": {"color": colors, "size": 10, "symbol": "diamond"},
          "error_x": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus,
                      "color": TEXT, "thickness": 1.2, "width": 5},
          "hovertext": hover, "hoverinfo": "text"}],
        _layout(height=height,
                shapes=[{"type": "line", "x0": 0, "x1": 0, "yref": "paper", "y0": 0, "y1": 1,
                         "line": {"color": MUTED, "width": 1}}],
                margin={"l": 12, "r": 16, "t": 16, "b": 44},
                xaxis=_axis(title={"text": "paired difference vs baseline (95% CI)"}, zeroline=False),
                yaxis=_axis(autorange="reversed", ticks="")))


def calibration_curve(cal: Mapping[str, Any]) -> dict[str, Any]:
    """Accuracy and F1 against the similarity threshold, with the chosen threshold marked."""
    data = []
    for key, color, name in (("accuracy", "#2563eb", "accuracy"), ("f1", "#f97316", "F1")):
        if key in cal:
            data.append({"type": "scatter", "mode": "lines", "name": name, "x": cal["thresholds"],
                         "y": cal[key], "line": {"color": color, "width": 2}})
    shapes, annotations = [], []
    if isinstance(cal.get("chosen"), int | float):
        t = cal["chosen"]
        shapes.append({"type": "line", "x0": t, "x1": t, "yref": "paper", "y0": 0, "y1": 1,
                       "line": {"color": TEXT, "width": 1.5, "dash": "dash"}})
        annotations.append({"x": t, "y": 1, "yref": "paper", "yanchor": "bottom", "showarrow": False,
                            "text": f"chosen {t:.3g}" + (f" (max {cal['objective']})"
                                                         if cal.get("objective") else ""),
                            "font": {"size": 11}})
    return _figure(data, _layout(
        height=300, showlegend=True, shapes=shapes, annotations=annotations,
        legend={"orientation": "h", "y": -0.25, "x": 0},
        xaxis=_axis(title={"text": "similarity threshold"}),
        yaxis=_axis(title={"text": "score"}, range=[0, 1.02])))


def grid_heatmap(grid: Mapping[str, Any]) -> dict[str, Any]:
    """Mean score over two grid parameters (or a bar per value when only one varies); the cell
    of the run the page is about is outlined."""
    axes = grid["axes"]
    x = [str(v) for v in grid["x"]]
    cell = grid.get("highlight_cell")
    if len(axes) < 2:
        z = grid["z"][0]
        colors = [BAND_COLORS["excellent"] if cell is not None and i == cell[0] else RUN_COLORS[0]
                  for i in range(len(x))]
        return _figure([{"type": "bar", "x": x, "y": z, "marker": {"color": colors},
                         "hovertemplate": f"{axes[0] if axes else 'config'}=%{{x}}<br>{grid['metric']}=%{{y:.4f}}<extra></extra>"}],
                       _layout(height=300, xaxis=_axis(type="category", title={"text": axes[0] if axes else ""}),
                               yaxis=_axis(title={"text": grid["metric"]}, rangemode="tozero")))
    y = [str(v) for v in grid["y"]]
    text = [[f"{v:.3f}" if v is not None else "" for v in row] for row in grid["z"]]
    shapes = []
    if cell is not None:
        xi, yi = cell
        shapes.append({"type": "rect", "xref": "x", "yref": "y", "x0": xi - 0.5, "x1": xi + 0.5,
                       "y0": yi - 0.5, "y1": yi + 0.5, "line": {"color": TEXT, "width": 3}})
    return _figure(
        [{"type": "heatmap", "x": x, "y": y, "z": grid["z"], "text": text, "texttemplate": "%{text}",
          "colorscale": [[0, "#fee2e2"], [0.5, "#fef9c3"], [1, "#15803d"]],
          "hovertemplate": f"{axes[0]}=%{{x}}<br>{axes[1]}=%{{y}}<br>{grid['metric']}=%{{z:.4f}}<extra></extra>",
          "colorbar": {"title": {"text": grid["metric"]}, "thickness": 12}, "xgap": 2, "ygap": 2}],
        _layout(height=max(260, 80 + 46 * len(y)), shapes=shapes,
                xaxis=_axis(type="category", title={"text": axes[0]}, showgrid=False),
                yaxis=_axis(type="category", title={"text": axes[1]}, showgrid=False)))


def run_figures(view: Mapping[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    """Every figure of one run's section, keyed by the id of the element it is drawn in."""
    figs = {}
    for i, m in enumerate(view["metrics"]):
        if m["n"] > 0:
            figs[f"{prefix}-dist-{i}"] = distribution(m)
    if view.get("calibration"):
        figs[f"{prefix}-calibration"] = calibration_curve(view["calibration"])
    for i, g in enumerate(view.get("grids") or []):
        if g["axes"] and any(v is not None for row in g["z"] for v in row):
            figs[f"{prefix}-grid-{i}"] = grid_heatmap(g)
    me = view.get("meta_eval")
    for i, p in enumerate(me["plots"] if me else []):
        figs[f"{prefix}-meta-{i}"] = meta_eval_scatter(p, me["kind"] == "pairwise", me["label"])
    return figs


def meta_eval_scatter(p: Mapping[str, Any], pairwise: bool, label: str) -> dict[str, Any]:
    """A metric's score (pairwise: B - A) against the human label, one point per item
    (``p``: a plot of :func:`ragmeter.apps.report.meta_eval.meta_eval_view`)."""
    note = ", ".join(f"{name} {v:.3f}" for name, v in (("r", p["pearson"]), ("τ-b", p["kendall"])) if v is not None)
    title = f"{p['metric']}{' ↓' if p['direction'] == 'lower' else ''}" + (f" — {note}" if note else "")
    return _figure(
        [{"type": "scatter", "mode": "markers", "x": p["x"], "y": p["y"], "text": p["ids"],
          "hovertemplate": "%{text}<br>human %{x:.3g}<br>metric %{y:.3g}<extra></extra>",
          "marker": {"color": NEUTRAL, "size": 6, "opacity": 0.55}}],
        _layout(height=260, margin={"l": 52, "r": 12, "t": 30, "b": 44}, title={"text": title, "font": {"size": 12}},
                xaxis=_axis(title={"text": "human preference (B > 0)" if pairwise else f"human label ({label})"}),
                yaxis=_axis(title={"text": "metric B − A" if pairwise else "metric"})))


def compare_figures(view: Mapping[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    """The comparison section's figures: grouped bars with CIs and the paired differences."""
    figs = {}
    if view["metrics"]:
        figs[f"{prefix}-bars"] = compare_bars(view["runs"], view["metrics"])
    if any(d.get("diff") is not None for d in view["differences"]):
        figs[f"{prefix}-diffs"] = difference_forest(view["differences"], len(view["runs"]))
    return figs
