"""Plotly figures of plain values, for a result in a notebook (``EvaluationResult.figure``): means
with their intervals, and one metric's per-sample values with its threshold. Plotly
(``pip install 'ragmeter-eval[report]'``) is imported inside the functions. The report's and the
dashboard's figures, styled for their page, are :mod:`ragmeter.apps.report.figures`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def means_figure(means: Mapping[str, tuple[float, float | None, float | None]], title: str) -> Any:
    """A bar per metric: ``{key: (mean, ci_low, ci_high)}``, each bar with its interval as error bars
    (none where a side is ``None``)."""
    import plotly.graph_objects as go

    keys = list(means)
    values = [m for m, _, _ in means.values()]
    err_hi = [high - m if high is not None else 0 for m, _, high in means.values()]
    err_lo = [m - low if low is not None else 0 for m, low, _ in means.values()]
    return go.Figure(go.Bar(x=keys, y=values, error_y={"type": "data", "array": err_hi, "arrayminus": err_lo}),
                     layout={"title": title})


def values_figure(values: Sequence[float], name: str, threshold: float | None = None) -> Any:
    """A histogram (20 bins) of one metric's per-sample values, its ``threshold`` as a dashed line."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Histogram(x=list(values), nbinsx=20, name=name),
                    layout={"title": f"{name}: per-sample values (n={len(values)})",
                            "xaxis_title": name, "yaxis_title": "samples"})
    if threshold is not None:
        fig.add_vline(x=threshold, line_dash="dash", annotation_text=f"threshold {threshold:g}")
    return fig
