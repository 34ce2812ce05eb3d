"""The checks every metric's scores pass before they are stored: a value outside the metric's
range is an error (the metric is wrong), NaN without a reason becomes "metric returned NaN"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ragmeter.core.errors import ConfigError, MetricError
from ragmeter.core.schema import Sample, Score, ScoreColumn
from ragmeter.metrics.registry import MetricRequest


def checked_column(req: MetricRequest, col: ScoreColumn) -> ScoreColumn:
    """A vectorised metric's column with the checks :func:`checked_scores` makes per Score: NaN
    without a reason becomes "metric returned NaN"; a value outside the metric's range is an error."""
    import numpy as np

    vals = np.asarray(col.values, dtype=np.float64)
    nan = np.isnan(vals)
    lo, hi = req.spec.range
    bad = ~nan & ((vals < lo - 1e-9) | (vals > hi + 1e-9))
    if bad.any():
        v = float(vals[np.flatnonzero(bad)[0]])
        raise MetricError(f"metric {req.spec.name} returned {v}, outside its range [{lo}, {hi}]")
    reasons = col.reasons
    if nan.any():
        reasons = list(col.reasons) if col.reasons is not None else [None] * len(vals)
        for i in np.flatnonzero(nan).tolist():
            if reasons[i] is None:
                reasons[i] = "metric returned NaN"
    return ScoreColumn(vals, reasons, col.details)


def checked_scores(req: MetricRequest, scores: Sequence[Score]) -> list[Score]:
    lo, hi = req.spec.range
    out = []
    for s in scores:
        if s.value is not None:
            v = float(s.value)
            if math.isnan(v):
                s = Score.missing("metric returned NaN", s.details)
            elif not (lo - 1e-9 <= v <= hi + 1e-9):
                raise MetricError(f"metric {req.spec.name} returned {v}, outside its range [{lo}, {hi}]")
        out.append(s)
    return out


def run_metric(req: MetricRequest, chunk: list[Sample], ctx: Any) -> ScoreColumn:
    """One metric on one batch of samples, checked (:func:`checked_column`): what every engine
    calls. A metric's crash is "no value" with the error as the reason for the batch (one metric's
    crash must not lose the run); configuration and metric errors stop the run."""
    try:
        scores = req.spec.fn(chunk, ctx, **req.params)
    except (ConfigError, MetricError):
        raise
    except Exception as exc:  # noqa: BLE001 - one metric's crash must not lose the run
        reason = f"error in {req.spec.name}: {type(exc).__name__}: {exc}"
        return ScoreColumn.of([Score.missing(reason)] * len(chunk))
    if len(scores) != len(chunk):
        raise MetricError(f"metric {req.spec.name} returned {len(scores)} scores for {len(chunk)} samples")
    if isinstance(scores, ScoreColumn):
        return checked_column(req, scores)
    return ScoreColumn.of(checked_scores(req, scores))
