"""Plotly figures of the monitoring page: latency percentiles, traffic, errors, cost and online
quality over time, with threshold lines."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragmeter.apps.report.figures import RUN_COLORS, _axis, _figure, _layout

THRESHOLD = "#dc2626"


def _threshold_line(y: float, label: str) -> dict[str, Any]:
    return {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y,
            "line": {"color": THRESHOLD, "dash": "dash", "width": 1.5}, "name": label}


def latency(points: Sequence[Mapping[str, Any]], max_p95_ms: float | None = None) -> dict[str, Any]:
    x = [p["start"] for p in points]
    data = [{"type": "scatter", "mode": "lines+markers", "name": q, "x": x,
             "y": [p["latency_ms"][q] for p in points], "line": {"color": c}}
            for q, c in (("p50", RUN_COLORS[0]), ("p95", RUN_COLORS[1]), ("p99", RUN_COLORS[3]))]
    shapes = [_threshold_line(max_p95_ms, "max p95")] if max_p95_ms else []
    return _figure(data, _layout(height=300, showlegend=True, shapes=shapes,
                                 xaxis=_axis(title={"text": "time (UTC)"}),
                                 yaxis=_axis(title={"text": "latency (ms)"}, rangemode="tozero")))


def traffic(points: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    x = [p["start"] for p in points]
    data = [{"type": "bar", "name": "calls", "x": x, "y": [p["calls"] for p in points],
             "marker": {"color": RUN_COLORS[0]}},
            {"type": "bar", "name": "errors", "x": x, "y": [p["errors"] for p in points],
             "marker": {"color": THRESHOLD}}]
    return _figure(data, _layout(height=260, showlegend=True, barmode="overlay",
                                 xaxis=_axis(title={"text": "time (UTC)"}),
                                 yaxis=_axis(title={"text": "calls"}, rangemode="tozero")))


def rate(points: Sequence[Mapping[str, Any]], key: str, label: str,
         threshold: float | None = None) -> dict[str, Any]:
    x = [p["start"] for p in points]
    y = [p[key] for p in points]
    shapes = [_threshold_line(threshold, f"max {label}")] if threshold is not None else []
    return _figure([{"type": "scatter", "mode": "lines+markers", "x": x, "y": y, "name": label,
                     "line": {"color": RUN_COLORS[2]}}],
                   _layout(height=260, shapes=shapes, xaxis=_axis(title={"text": "time (UTC)"}),
                           yaxis=_axis(title={"text": label}, rangemode="tozero")))


def quality(rows: Sequence[Mapping[str, Any]], metric: str, minimum: float | None = None) -> dict[str, Any]:
    """One metric's mean with its 95% interval per monitor run (x = end of the run's window)."""
    x = [r["end"] for r in rows]
    y = [r["mean"] for r in rows]
    plus = [None if r["ci_high"] is None or r["mean"] is None else r["ci_high"] - r["mean"] for r in rows]
    minus = [None if r["ci_low"] is None or r["mean"] is None else r["mean"] - r["ci_low"] for r in rows]
    shapes = [_threshold_line(minimum, f"min {metric}")] if minimum is not None else []
    return _figure([{"type": "scatter", "mode": "lines+markers", "x": x, "y": y, "name": metric,
                     "error_y": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus},
                     "line": {"color": RUN_COLORS[4]}}],
                   _layout(height=260, shapes=shapes, xaxis=_axis(title={"text": "window end (UTC)"}),
                           yaxis=_axis(title={"text": f"{metric} (95% CI)"})))


def trend(rows: Sequence[Mapping[str, Any]], metric: str) -> dict[str, Any]:
    """A metric across runs, regressions marked."""
    x = [r["created_at"] for r in rows]
    y = [r["mean"] for r in rows]
    plus = [None if r["ci_high"] is None or r["mean"] is None else r["ci_high"] - r["mean"] for r in rows]
    minus = [None if r["ci_low"] is None or r["mean"] is None else r["mean"] - r["ci_low"] for r in rows]
    text = [f"{r['name'] or r['run_id']}<br>commit {(r.get('git_commit') or '—')[:10]}" for r in rows]
    reg = [r for r in rows if r.get("regression")]
    data = [{"type": "scatter", "mode": "lines+markers", "x": x, "y": y, "text": text,
             "hovertemplate": "%{text}<br>%{y:.4f}<extra></extra>", "name": metric,
             "error_y": {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus},
             "line": {"color": RUN_COLORS[0]}}]
    if reg:
        data.append({"type": "scatter", "mode": "markers", "name": "regression",
                     "x": [r["created_at"] for r in reg], "y": [r["mean"] for r in reg],
                     "marker": {"color": THRESHOLD, "size": 14, "symbol": "triangle-down"}})
    return _figure(data, _layout(height=300, showlegend=bool(reg),
                                 xaxis=_axis(title={"text": "run"}),
                                 yaxis=_axis(title={"text": f"{metric} (95% CI)"})))
