"""Every figure builder's plain dict (written without plotly) is what plotly's figure classes
write, with every property validated by them (figures.validated)."""

from __future__ import annotations

from ragmeter.apps.report import figures, metric_views, monitor_figures

# plotly is installed with .[dev] (the report extra): figures.validated imports it


def _figures() -> list[dict]:
    hist = metric_views.histogram([0.05, 0.5, 0.95, 0.95], 0, 1)
    metric = {"histogram": hist, "banded": True, "higher_is_better": True, "mean": 0.6125}
    runs = [{"label": "a"}, {"label": "b"}]
    cell = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
    metrics = [{"key": "token_f1", "runs": [cell, {**cell, "mean": 0.55}]},
               {"key": "exact_match", "runs": [None, {"mean": None, "ci_low": None, "ci_high": None}]}]
    diffs = [{"metric": "token_f1", "run_label": "b", "diff": 0.05, "ci_low": 0.01, "ci_high": 0.09,
              "verdict": "better", "direction": "higher", "n_pairs": 10},
             {"metric": "exact_match", "run_label": "b", "diff": -0.01, "ci_low": None, "ci_high": None,
              "verdict": "no significant difference", "direction": "higher", "n_pairs": 10}]
    cal = {"thresholds": [0.1, 0.5, 0.9], "accuracy": [0.5, 0.8, 0.6], "f1": [0.4, 0.7, 0.5],
           "chosen": 0.5, "objective": "f1"}
    grid2 = {"axes": ["k", "temperature"], "x": [1, 3], "y": [0.0, 0.7], "z": [[0.5, None], [0.6, 0.7]],
             "metric": "token_f1", "highlight_cell": (1, 0)}
    grid1 = {"axes": ["k"], "x": [1, 3], "y": [], "z": [[0.5, 0.6]], "metric": "token_f1",
             "highlight_cell": None}
    scatter = {"metric": "faithfulness", "direction": "lower", "pearson": 0.5, "kendall": None,
               "x": [0.0, 1.0], "y": [0.2, float("nan")], "ids": ("s1", "s2")}
    points = [{"start": "2026-11-28T08:00:00Z", "latency_ms": {"p50": 10.0, "p95": 20.0, "p99": 30.0},
               "calls": 5, "errors": 1, "error_rate": 0.2},
              {"start": "2026-11-28T09:00:00Z", "latency_ms": {"p50": 11.0, "p95": 21.0, "p99": float("inf")},
               "calls": 3, "errors": 0, "error_rate": 0.0}]
    rows = [{"end": "2026-11-28T09:00:00Z", "created_at": "2026-11-28T09:00:00Z", "mean": 0.5,
             "ci_low": 0.4, "ci_high": 0.6, "name": "r1", "run_id": "abc", "regression": True},
            {"end": "2026-11-28T10:00:00Z", "created_at": "2026-11-28T10:00:00Z", "mean": None,
             "ci_low": None, "ci_high": None, "name": None, "run_id": "def", "git_commit": "0123456789ab"}]
    return [figures.distribution(metric), figures.distribution({**metric, "banded": False, "mean": None}),
            figures.compare_bars(runs, metrics), figures.difference_forest(diffs, 3),
            figures.calibration_curve(cal), figures.grid_heatmap(grid2), figures.grid_heatmap(grid1),
            figures.meta_eval_scatter(scatter, True, "human"),
            monitor_figures.latency(points, 25.0), monitor_figures.traffic(points),
            monitor_figures.rate(points, "error_rate", "error rate", 0.1),
            monitor_figures.quality(rows, "token_f1", 0.45), monitor_figures.trend(rows, "token_f1"),
            monitor_figures.latency([]), monitor_figures.trend([], "token_f1")]


def test_plain_figures_are_what_plotly_writes(monkeypatch):
    checked = []
    plain = figures._figure

    def both(data, layout):
        fig = plain(data, layout)
        assert fig == figures.validated(data, layout)
        checked.append(fig)
        return fig

    monkeypatch.setattr(figures, "_figure", both)
    monkeypatch.setattr(monitor_figures, "_figure", both)
    assert len(_figures()) == len(checked) == 15


def test_plain_figure_without_plotly_and_fallback(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "plotly", None)  # importing plotly now fails
    fig = figures._figure([{"x": (1, 2), "y": [float("nan"), 1.5]}], figures._layout())
    assert fig["data"] == [{"x": [1, 2], "y": [None, 1.5], "type": "scatter"}]
    assert fig["layout"]["template"] == {"data": {"scatter": [{"type": "scatter"}]}}
    monkeypatch.delitem(sys.modules, "plotly")
    import numpy as np
    # a numpy array is plotly's to encode (a typed array): such a figure goes through plotly
    data, layout = [{"x": np.array([1.0, 2.0])}], figures._layout()
    fig = figures._figure(data, layout)
    assert fig == figures.validated(data, layout) and isinstance(fig["data"][0]["x"], dict)
