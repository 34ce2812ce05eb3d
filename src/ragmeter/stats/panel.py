"""The numerics of a panel of judges: combining their values, each judge's agreement with the rest
of the panel, and a judge's preference for its own model family's answers (a paired difference
with a bootstrap interval). Krippendorff's alpha between the judges is
:func:`ragmeter.stats.agreement.krippendorff_alpha`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

#: how a panel's values of one sample become the metric's value
COMBINES = ("mean", "median", "majority", "min")
#: resamples and seed of the self-preference interval
N_BOOTSTRAP = 2000
SEED = 20261128


def combine(values: Sequence[float], how: str, bounds: tuple[float, float] = (0.0, 1.0)) -> float:
    """One value from the judges' values of a sample (at least one).

    ``mean`` and ``median`` of the values; ``min``: the lowest; ``majority``: each judge votes
    "high" when its value is at least the middle of the metric's range (0.5 on [0, 1]); the value
    is the range's top when more judges vote high than low, its bottom when fewer, and the middle
    when the votes split evenly (an even panel with no majority). On 0/1 verdicts that is the
    median of the verdicts.

    >>> combine([1.0, 0.0, 0.6], "majority"), combine([1.0, 0.0], "majority"), combine([1.0, 0.0, 0.5], "mean")
    (1.0, 0.5, 0.5)
    """
    if not values:
        raise ValueError("combine needs at least one value")
    v = np.asarray(values, dtype=float)
    if how == "mean":
        return float(v.mean())
    if how == "median":
        return float(np.median(v))
    if how == "min":
        return float(v.min())
    if how == "majority":
        low, high = (float(b) for b in bounds)
        middle = (low + high) / 2
        up = int((v >= middle).sum())
        down = len(v) - up
        return high if up > down else low if down > up else middle
    raise ValueError(f"unknown combine {how!r}; use one of {', '.join(COMBINES)}")


def leave_one_out(matrix: np.ndarray, judge: int, how: str, bounds: tuple[float, float]) -> np.ndarray:
    """The panel's value of every item without judge ``judge`` (``nan`` where no other judge has one).

    Args:
        matrix: judges x items, ``nan`` where a judge gave no value.
    """
    others = np.delete(matrix, judge, axis=0)
    out = np.full(matrix.shape[1], np.nan)
    for i in range(matrix.shape[1]):
        col = others[:, i]
        col = col[~np.isnan(col)]
        if col.size:
            out[i] = combine(col.tolist(), how, bounds)
    return out


def agreement_with_panel(matrix: np.ndarray, judge: int, how: str,
                         bounds: tuple[float, float] = (0.0, 1.0)) -> dict[str, Any]:
    """How judge ``judge`` agrees with the rest of the panel: on the items where it and at least
    one other judge have a value, the mean absolute difference ``mean |v_j - c_-j|`` and Pearson's
    r between ``v_j`` and ``c_-j``, the panel's combined value without judge j (the same combine).
    ``pearson`` is ``None`` when either side is constant (r is undefined).
    """
    loo = leave_one_out(matrix, judge, how, bounds)
    own = matrix[judge]
    ok = ~np.isnan(own) & ~np.isnan(loo)
    x, y = own[ok], loo[ok]
    n = int(ok.sum())
    if n == 0:
        return {"n": 0, "mean_abs_diff": None, "pearson": None}
    r = None
    if n >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
        r = float(np.corrcoef(x, y)[0, 1])
    return {"n": n, "mean_abs_diff": float(np.abs(x - y).mean()), "pearson": r}


def paired_difference(own: np.ndarray, others: np.ndarray, *, level: float = 0.95,
                      n_bootstrap: int = N_BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    """The mean of ``own - others`` over paired items, with a percentile bootstrap interval over
    items (``n_bootstrap`` resamples, ``seed``); ``None`` figures without items, no interval with one."""
    d = np.asarray(own, dtype=float) - np.asarray(others, dtype=float)
    d = d[~np.isnan(d)]
    if d.size == 0:
        return {"n": 0, "difference": None, "ci_low": None, "ci_high": None}
    mean = float(d.mean())
    if d.size < 2:
        return {"n": 1, "difference": mean, "ci_low": None, "ci_high": None}
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(0, d.size, size=(n_bootstrap, d.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = (float(x) for x in np.percentile(boot, [tail, 100 - tail]))
    return {"n": int(d.size), "difference": mean, "ci_low": low, "ci_high": high}


def others_mean(matrix: np.ndarray, judge: int) -> np.ndarray:
    """The mean of the other judges' values of every item (``nan`` where none has one)."""
    others = np.delete(matrix, judge, axis=0)
    with np.errstate(invalid="ignore"):
        counts = (~np.isnan(others)).sum(axis=0)
        sums = np.nansum(others, axis=0)
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)
