"""How well a metric agrees with human labels, and how well people agree among themselves.

Point values are scipy's (``pearsonr``, ``spearmanr``, ``kendalltau``, which is tau-b). Every value
has a percentile bootstrap interval over items: one set of ``B`` resamples (multinomial counts of
each item) serves every metric and the human ceiling, so their intervals are comparable and a
difference between two metrics can be read on the same draws. Each resample's statistic is what
scipy gives on the resampled arrays, computed from the counts without building them: weighted
moments (Pearson), mid-ranks of the resampled multiset (Spearman, AUROC) and weighted concordance
(Kendall's tau-b); tests/test_meta_eval.py checks resamples against scipy on the expanded arrays.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

CORRELATIONS = ("pearson", "spearman", "kendall")
N_BOOTSTRAP = 1000
SEED = 20261122
#: above this many items Kendall's resamples are computed one by one with scipy (the weighted form
#: needs an items x items matrix)
_KENDALL_MATRIX_MAX = 2000
#: tie calibration tries at most this many thresholds (quantiles of |difference|) on large data
_MAX_EPSILONS = 1000


@dataclass(frozen=True)
class Resamples:
    """Bootstrap resamples of ``n`` items as multiplicities: ``counts[b, i]`` is how often item ``i``
    is drawn in resample ``b`` (each row sums to ``n``).

    Attributes:
        counts: ``(B, n)`` integer array, ``B = 0`` for no intervals.
        level: the intervals' confidence level.
    """

    counts: np.ndarray
    level: float = 0.95

    @classmethod
    def draw(cls, n: int, n_bootstrap: int = N_BOOTSTRAP, *, seed: int = SEED, level: float = 0.95) -> Resamples:
        rng = np.random.default_rng(seed)
        counts = (rng.multinomial(n, np.full(n, 1.0 / n), size=n_bootstrap).astype(np.int32)
                  if n and n_bootstrap else np.zeros((0, n), dtype=np.int32))
        return cls(counts, level)

    @property
    def n_bootstrap(self) -> int:
        return int(self.counts.shape[0])


def interval(boot: np.ndarray, level: float) -> tuple[float | None, float | None]:
    """Percentile interval of the finite resample values (``None`` when fewer than half are finite:
    the statistic is undefined on too many resamples to say)."""
    ok = boot[np.isfinite(boot)]
    if boot.size == 0 or ok.size < 0.5 * boot.size:
        return None, None
    a = (1 - level) / 2
    lo, hi = np.quantile(ok, [a, 1 - a])
    return float(lo), float(hi)


def _entry(value: float | None, boot: np.ndarray | None, level: float, **extra: Any) -> dict[str, Any]:
    if value is None or not math.isfinite(value):
        return {"value": None, "ci_low": None, "ci_high": None, **extra}
    lo, hi = interval(boot, level) if boot is not None else (None, None)
    return {"value": float(value), "ci_low": lo, "ci_high": hi, **extra}


def _constant(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per resample: whether the drawn values of ``v`` are all equal."""
    drawn = w > 0
    hi = np.where(drawn, v, -np.inf).max(axis=1)
    lo = np.where(drawn, v, np.inf).min(axis=1)
    return hi == lo


def _wpearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson's r of each resample (``x``, ``y``: ``(m,)`` or ``(B, m)``; ``w``: ``(B, m)``)."""
    s = w.sum(axis=1, keepdims=True)
    dx = x - (w * x).sum(axis=1, keepdims=True) / s
    dy = y - (w * y).sum(axis=1, keepdims=True) / s
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (w * dx * dy).sum(axis=1) / np.sqrt((w * dx * dx).sum(axis=1) * (w * dy * dy).sum(axis=1))
    xb, yb = np.broadcast_to(x, w.shape), np.broadcast_to(y, w.shape)
    r[_constant(xb, w) | _constant(yb, w)] = np.nan
    return np.clip(r, -1.0, 1.0)


def _groups(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, starts, group of each sorted position)`` of the tie groups of ``v``."""
    order = np.argsort(v, kind="stable")
    vs = v[order]
    starts = np.flatnonzero(np.r_[True, vs[1:] != vs[:-1]])
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, v.size]))
    return order, starts, group


def _wranks(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Mid-rank of each item's value in each resampled multiset (``(B, m)``): the rank
    ``scipy.stats.rankdata`` gives every copy of it in the expanded resample."""
    order, starts, group = _groups(v)
    gw = np.add.reduceat(w[:, order], starts, axis=1).astype(np.float64)
    mid = np.cumsum(gw, axis=1) - gw + (gw + 1) / 2
    out = np.empty(w.shape)
    out[:, order] = mid[:, group]
    return out


def _tie_pairs(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Per resample: pairs of the expanded resample tied in ``v``, sum of t (t - 1) / 2 over groups."""
    order, starts, _ = _groups(v)
    gw = np.add.reduceat(w[:, order], starts, axis=1).astype(np.float64)
    return (gw * (gw - 1) / 2).sum(axis=1)


def _wkendall(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each resample, ``(P - Q) / sqrt((n0 - n1)(n0 - n2))`` with pairs weighted
    by the product of the items' counts (copies of one item tie in both and count in n1 and n2)."""
    m = x.size
    if m > _KENDALL_MATRIX_MAX:
        from scipy.stats import kendalltau

        out = np.empty(w.shape[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for b in range(w.shape[0]):
                out[b] = kendalltau(np.repeat(x, w[b]), np.repeat(y, w[b])).statistic
        return out
    sign = np.sign(x[:, None] - x[None, :]) * np.sign(y[:, None] - y[None, :])
    wf = w.astype(np.float64)
    s = ((wf @ sign) * wf).sum(axis=1) / 2
    big_n = wf.sum(axis=1)
    n0 = big_n * (big_n - 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = s / np.sqrt((n0 - _tie_pairs(x, w)) * (n0 - _tie_pairs(y, w)))
    tau[~np.isfinite(tau)] = np.nan
    return np.clip(tau, -1.0, 1.0)


def correlations(x: np.ndarray, y: np.ndarray, w: np.ndarray | None, level: float = 0.95) -> dict[str, Any]:
    """Pearson, Spearman and Kendall tau-b of ``x`` with ``y``: scipy's value and p-value, and the
    bootstrap interval over the resamples ``w`` (``(B, m)`` counts of these items; ``None``: no
    interval). An undefined value (fewer than 3 items, a constant side) is ``None`` with the reason.
    """
    from scipy.stats import kendalltau, pearsonr, spearmanr

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    out: dict[str, Any] = {}
    why = None
    if x.size < 3:
        why = f"{x.size} item{'s' if x.size != 1 else ''}: a correlation needs 3 or more"
    elif np.all(x == x[0]):
        why = "the metric has the same value on every item"
    elif np.all(y == y[0]):
        why = "the human label has the same value on every item"
    if why:
        return {name: {"value": None, "ci_low": None, "ci_high": None, "undefined": why}
                for name in CORRELATIONS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        points = {"pearson": pearsonr(x, y), "spearman": spearmanr(x, y), "kendall": kendalltau(x, y)}
    boots: dict[str, np.ndarray] = boot_correlations(x, y, w) if w is not None and w.shape[0] else {}
    for name, res in points.items():
        p = float(res.pvalue)
        out[name] = _entry(float(res.statistic), boots.get(name), level, p_value=p if math.isfinite(p) else None)
    return out


def boot_correlations(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
    """Pearson, Spearman and Kendall tau-b of every resample (``w``: ``(B, m)`` counts), NaN where
    a resample is constant on one side."""
    return {"pearson": _wpearson(x, y, w), "spearman": _wpearson(_wranks(x, w), _wranks(y, w), w),
            "kendall": _wkendall(x, y, w)}


def auroc(score: np.ndarray, positive: np.ndarray, w: np.ndarray | None, level: float = 0.95) -> dict[str, Any]:
    """Area under the ROC curve of ``score`` for the binary label ``positive`` (ties count 1/2,
    as ``sklearn.metrics.roc_auc_score``): the Mann-Whitney U of the positives over
    ``n_pos * n_neg``, with its bootstrap interval."""
    from scipy.stats import rankdata

    pos = positive.astype(bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if not n_pos or not n_neg:
        return {"value": None, "ci_low": None, "ci_high": None, "undefined": "one class only"}
    r = rankdata(score)
    value = (r[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    boot = None
    if w is not None and w.shape[0]:
        wf = w.astype(np.float64)
        ranks = _wranks(score, w)
        wp, wn = wf[:, pos].sum(axis=1), wf[:, ~pos].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = ((wf[:, pos] * ranks[:, pos]).sum(axis=1) - wp * (wp + 1) / 2) / (wp * wn)
    return _entry(float(value), boot, level, n_positive=n_pos, n_negative=n_neg)


def _f1(pred: np.ndarray, truth: np.ndarray, w: np.ndarray) -> np.ndarray:
    tp = (w * (pred & truth)).sum(axis=-1)
    fp = (w * (pred & ~truth)).sum(axis=-1)
    fn = (w * (~pred & truth)).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)


def best_threshold(score: np.ndarray, truth: np.ndarray, higher_is_better: bool = True) -> tuple[float, float]:
    """The threshold maximising F1 of "positive when score >= t" (``<= t`` for lower-is-better
    metrics) over the observed values, the lowest such one on a tie; and that F1."""
    cand = np.unique(score)
    pred = score[None, :] >= cand[:, None] if higher_is_better else score[None, :] <= cand[:, None]
    f1 = _f1(pred, truth[None, :], np.ones(score.size))
    f1 = np.where(np.isnan(f1), -1.0, f1)
    i = int(np.argmax(f1))
    return float(cand[i]), float(f1[i])


def cv_f1(score: np.ndarray, truth: np.ndarray, w: np.ndarray | None, *, higher_is_better: bool = True,
          folds: int = 5, seed: int = SEED, level: float = 0.95) -> dict[str, Any]:
    """F1 at a threshold chosen by stratified k-fold cross-validation: each fold is predicted with
    the threshold that maximises F1 on the other folds, and F1 is taken over the pooled
    out-of-fold predictions (so the threshold never sees the labels it is scored on). The
    interval resamples those predictions; ``threshold`` is the one chosen on every item (what to
    use from here on) with its in-sample F1."""
    truth = truth.astype(bool)
    n_pos, n_neg = int(truth.sum()), int((~truth).sum())
    k = min(folds, n_pos, n_neg)
    if k < 2:
        return {"value": None, "ci_low": None, "ci_high": None,
                "undefined": "cross-validation needs 2 or more items of each class"}
    rng = np.random.default_rng(seed)
    fold = np.empty(score.size, dtype=np.int64)
    for cls in (True, False):
        idx = np.flatnonzero(truth == cls)
        fold[rng.permutation(idx)] = np.arange(idx.size) % k
    pred = np.zeros(score.size, dtype=bool)
    for f in range(k):
        train = fold != f
        t, _ = best_threshold(score[train], truth[train], higher_is_better)
        test = ~train
        pred[test] = score[test] >= t if higher_is_better else score[test] <= t
    value = float(_f1(pred, truth, np.ones(score.size)))
    boot = _f1(pred[None, :], truth[None, :], w.astype(np.float64)) if w is not None and w.shape[0] else None
    t_all, f1_all = best_threshold(score, truth, higher_is_better)
    return _entry(value, boot, level, folds=k, threshold=t_all, f1_at_threshold_in_sample=f1_all)


def _signs_agree(d: np.ndarray, h: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """``(m, K)``: whether the metric's sign (0 when ``|d| <= eps``) equals the human's sign."""
    sd = np.where(np.abs(d)[:, None] <= eps[None, :], 0.0, np.sign(d)[:, None])
    return sd == np.sign(h)[:, None]


def pairwise_accuracy(diff: np.ndarray, pref: np.ndarray, w: np.ndarray | None,
                      level: float = 0.95) -> dict[str, dict[str, Any]]:
    """Pairwise accuracy of a metric's preference (sign of B - A) against people's (sign of the mean
    label), ties handled as in Deutsch, Foster and Freitag, "Ties Matter: Meta-Evaluating Modern
    Metrics with Pairwise Accuracy and Tie Calibration" (EMNLP 2023): a tie agrees only with a tie,
    so a metric is rewarded for predicting ties. ``pairwise_accuracy`` counts exact ties (B == A);
    ``pairwise_accuracy_tie_calibrated`` first treats ``|B - A| <= epsilon`` as a tie, with the
    epsilon that maximises the accuracy (their tie calibration; chosen on the same items, so it is
    optimistic, and re-chosen in every resample of the interval)."""
    eps = np.r_[0.0, np.unique(np.abs(diff))]
    if eps.size > _MAX_EPSILONS:
        eps = np.r_[0.0, np.quantile(np.abs(diff), np.linspace(0, 1, _MAX_EPSILONS))]
    agree = _signs_agree(diff, pref, eps).astype(np.float64)  # (m, K)
    acc = agree.mean(axis=0)
    best = int(np.argmax(acc))
    boot0 = bootc = None
    if w is not None and w.shape[0]:
        wf = w.astype(np.float64)
        per = (wf @ agree) / wf.sum(axis=1, keepdims=True)  # (B, K)
        boot0, bootc = per[:, 0], per.max(axis=1)
    return {"pairwise_accuracy": _entry(float(acc[0]), boot0, level),
            "pairwise_accuracy_tie_calibrated": _entry(float(acc[best]), bootc, level,
                                                       epsilon=float(eps[best]))}


def agreement(values: np.ndarray, human: np.ndarray, w: np.ndarray | None, *, level: float = 0.95,
              pairwise: bool = False, binary: np.ndarray | None = None,
              higher_is_better: bool = True) -> dict[str, Any]:
    """Every agreement statistic of one metric with the human label on the items it has a value.

    Args:
        values: the metric per item (pairwise: its difference B - A).
        human: the human label per item (the mean over raters; pairwise: the mean preference,
            positive for B).
        w: bootstrap counts of these items, ``(B, m)``, or ``None``.
        pairwise: add the pairwise accuracies.
        binary: for 0/1 labels, the majority label per item (NaN for a tie between raters): adds
            AUROC and the cross-validated F1 over the items with one.
        higher_is_better: the metric's direction (the F1 threshold rule, the preference a
            difference expresses).
    """
    out: dict[str, Any] = {"n": int(values.size)}
    out.update(correlations(values, human, w, level))
    if pairwise and values.size:
        # the metric's own preference: for a lower-is-better metric B wins when B - A < 0
        out.update(pairwise_accuracy(values if higher_is_better else -values, human, w, level))
    if binary is not None and values.size:
        keep = ~np.isnan(binary)
        wb = w[:, keep] if w is not None else None
        out["auroc"] = auroc(values[keep], binary[keep] == 1, wb, level)
        out["f1"] = cv_f1(values[keep], binary[keep] == 1, wb, higher_is_better=higher_is_better, level=level)
    return out


def _average(parts: list[tuple[int, dict[str, Any], dict[str, np.ndarray]]], level: float,
             names: tuple[str, ...]) -> dict[str, Any]:
    """Item-weighted average of per-pair (or per-rater) statistics, with the interval of the
    averaged resamples."""
    out: dict[str, Any] = {}
    for name in names:
        got = [(n, p[name]["value"], b.get(name)) for n, p, b in parts if p[name]["value"] is not None]
        if not got:
            out[name] = {"value": None, "ci_low": None, "ci_high": None, "undefined": "no rater pair with a value"}
            continue
        weights = np.array([n for n, _, _ in got], dtype=np.float64)
        value = float(np.dot(weights, [v for _, v, _ in got]) / weights.sum())
        boot = None
        if all(b is not None for _, _, b in got):
            stack = np.stack([b for _, _, b in got])  # a resample undefined for one pair is left out
            boot = (weights[:, None] * stack).sum(axis=0) / weights.sum()
        out[name] = _entry(value, boot, level)
    return out


def _part(x: np.ndarray, y: np.ndarray, w: np.ndarray | None, level: float,
          pairwise: bool) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    point = correlations(x, y, None, level)
    boots: dict[str, np.ndarray] = {}
    if w is not None and w.shape[0] and all(point[c]["value"] is not None for c in CORRELATIONS):
        boots = boot_correlations(x, y, w)
    if pairwise:
        acc = pairwise_accuracy(x, y, w, level)["pairwise_accuracy"]
        point["pairwise_accuracy"] = acc
        if w is not None and w.shape[0]:
            agree = (np.sign(x) == np.sign(y)).astype(np.float64)
            boots["pairwise_accuracy"] = (w * agree).sum(axis=1) / w.sum(axis=1)
    return point, boots


def human_ceiling(ratings: np.ndarray, raters: list[str], w: np.ndarray | None, *, level: float = 0.95,
                  pairwise: bool = False) -> dict[str, Any] | None:
    """What people reach among themselves, with the statistics a metric gets: rater against rater
    (every pair of raters on the items both rated) and leave-one-out (each rater against the mean
    of the others on the items where both exist), each averaged over pairs (raters) weighted by
    their number of items. ``None`` with fewer than two raters.

    Args:
        ratings: ``(items, raters)`` labels, NaN where a rater did not rate an item.
        raters: the raters' names.
        w: bootstrap counts of these items, ``(B, items)``, or ``None``.
        pairwise: preference labels: adds the pairwise accuracy (sign agreement).
    """
    if ratings.shape[1] < 2:
        return None
    names = CORRELATIONS + (("pairwise_accuracy",) if pairwise else ())
    present = ~np.isnan(ratings)
    pairs, pair_parts = [], []
    for a, b in combinations(range(ratings.shape[1]), 2):
        both = present[:, a] & present[:, b]
        if both.sum() < 3:
            continue
        point, boots = _part(ratings[both, a], ratings[both, b], w[:, both] if w is not None else None,
                             level, pairwise)
        pair_parts.append((int(both.sum()), point, boots))
        pairs.append({"raters": [raters[a], raters[b]], "n": int(both.sum()),
                      **{k: point[k]["value"] for k in names}})
    loo_parts = []
    for r in range(ratings.shape[1]):
        others = np.delete(ratings, r, axis=1)
        keep = present[:, r] & (~np.isnan(others)).any(axis=1)
        if keep.sum() < 3:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean_others = np.nanmean(others[keep], axis=1)
        point, boots = _part(ratings[keep, r], mean_others, w[:, keep] if w is not None else None,
                             level, pairwise)
        loo_parts.append((int(keep.sum()), point, boots))
    if not pair_parts:
        return None
    return {"n_raters": int(ratings.shape[1]), "n_items": int((present.sum(axis=1) >= 2).sum()),
            "rater_vs_rater": {**_average(pair_parts, level, names), "n_pairs": len(pair_parts)},
            "leave_one_out": {**_average(loo_parts, level, names), "n_raters": len(loo_parts)} if loo_parts
            else None,
            "pairs": pairs}
