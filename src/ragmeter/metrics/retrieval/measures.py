"""Ranking measures as numpy reductions of a :class:`~ragmeter.metrics.retrieval.relevance.RelevanceMatrix`.

Each function returns one float per query. Where a measure divides by the number of relevant
items ``R`` and a query has none, the value is ``NaN``: trec_eval prints 0 there, a sample-level
metric records "no relevant chunks" instead (the callers decide). Definitions follow trec_eval
exactly for exact matching; see ``docs/metrics/retrieval.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragmeter.core.errors import MetricError
from ragmeter.metrics.retrieval.relevance import RelevanceMatrix

GAINS = ("linear", "exponential")


def _k(k: int | None, name: str = "k") -> int | None:
    if k is None:
        return None
    try:
        bad = isinstance(k, bool) or int(k) != k or k < 1
    except (TypeError, ValueError):
        bad = True
    if bad:
        raise MetricError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


def _count(m: RelevanceMatrix, mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    return np.bincount(m.q[mask], weights=None if weights is None else weights[mask],
                       minlength=m.n_queries).astype(np.float64)


def _over_r(m: RelevanceMatrix, num: np.ndarray) -> np.ndarray:
    r = m.n_rel
    out = np.full(m.n_queries, np.nan)
    np.divide(num, r, out=out, where=r > 0)
    return out


def relevant_in_top(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """Relevant positions among the first ``k`` (all when ``None``)."""
    k = _k(k)
    mask = m.novel if k is None else m.novel & (m.rank <= k)
    return _count(m, mask)


def precision(m: RelevanceMatrix, k: int) -> np.ndarray:
    """P@k = (relevant positions among the first k) / k; k is not reduced for shorter lists."""
    k = _k(k)
    if k is None:
        raise MetricError("precision needs k")
    return relevant_in_top(m, k) / k


def recall(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """R@k = (relevant items retrieved in the first k) / R; NaN when R = 0."""
    k = _k(k)
    mask = m.rel_ret if k is None else m.rel_ret & (m.rank <= k)
    return _over_r(m, _count(m, mask))


def f1(m: RelevanceMatrix, k: int) -> np.ndarray:
    """F1@k = 2 P R / (P + R), 0 when P + R = 0; NaN when R = 0."""
    p, r = precision(m, k), recall(m, k)
    out = np.zeros(m.n_queries)
    s = p + r
    np.divide(2 * p * r, s, out=out, where=s > 0)
    out[np.isnan(r)] = np.nan
    return out


def hit_rate(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """1.0 when a relevant item is among the first k (trec_eval ``success_k``), else 0.0."""
    return (relevant_in_top(m, k) > 0).astype(np.float64)


def reciprocal_rank(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """1 / rank of the first relevant item (0 when none is retrieved within k)."""
    k = _k(k)
    mask = m.novel if k is None else m.novel & (m.rank <= k)
    idx = np.flatnonzero(mask)
    q = m.q[idx]
    first = np.ones(len(idx), dtype=bool)
    first[1:] = q[1:] != q[:-1]
    out = np.zeros(m.n_queries)
    out[q[first]] = 1.0 / m.rank[idx[first]]
    return out


def average_precision(m: RelevanceMatrix, k: int | None = None) -> np.ndarray:
    """AP = (1/R) * sum over relevant retrieved items of the precision at their rank.

    With ``k`` only items retrieved in the first k count (trec_eval ``map_cut_k``: still divided by
    R). NaN when R = 0.
    """
    k = _k(k)
    mask = m.rel_ret if k is None else m.rel_ret & (m.rank <= k)
    found = m.cumulative_in_query(m.novel)
    prec = np.zeros(len(m.q))
    prec[mask] = found[mask] / m.rank[mask]
    return _over_r(m, _count(m, mask, prec))


def r_precision(m: RelevanceMatrix) -> np.ndarray:
    """Precision at rank R: (relevant positions among the first R) / R; NaN when R = 0."""
    mask = m.novel & (m.rank <= m.n_rel[m.q])
    return _over_r(m, _count(m, mask))


def gains(grade: np.ndarray, gain: str) -> np.ndarray:
    if gain == "linear":
        return grade
    if gain == "exponential":
        return np.exp2(grade) - 1.0
    raise MetricError(f"gain must be one of {GAINS}, got {gain!r}")


def dcg(m: RelevanceMatrix, k: int | None = None, gain: str = "linear") -> np.ndarray:
    """DCG@k = sum over retrieved items in the first k of gain / log2(rank + 1)."""
    k = _k(k)
    mask = m.retrieved & (m.grade > 0)
    if k is not None:
        mask &= m.rank <= k
    g = np.zeros(len(m.q))
    g[mask] = gains(m.grade[mask], gain) / np.log2(m.rank[mask] + 1.0)
    return _count(m, mask, g)


def ideal_dcg(m: RelevanceMatrix, k: int | None = None, gain: str = "linear") -> np.ndarray:
    """DCG@k of the ideal ranking (every positive grade, highest first)."""
    k = _k(k)
    q, irank, g = m.ideal
    if k is not None:
        sel = irank <= k
        q, irank, g = q[sel], irank[sel], g[sel]
    w = gains(g, gain) / np.log2(irank + 1.0)
    return np.bincount(q, weights=w, minlength=m.n_queries).astype(np.float64)


def ndcg(m: RelevanceMatrix, k: int | None = None, gain: str = "linear") -> np.ndarray:
    """nDCG@k = DCG@k / ideal DCG@k; NaN when no item has a positive grade.

    When one retrieved item accounts for several relevant items (span / similarity matching)
    their gains add up at its rank, so the ratio is capped at 1.
    """
    d, i = dcg(m, k, gain), ideal_dcg(m, k, gain)
    out = np.full(m.n_queries, np.nan)
    np.divide(d, i, out=out, where=i > 0)
    if m.multi_match:
        np.minimum(out, 1.0, out=out)
    return out


def log_rank_score(rank: np.ndarray | float, n: np.ndarray | float, gamma: float) -> np.ndarray:
    """``1 - log(1 + gamma (rank - 1)) / log(1 + gamma (n - 1))``; 1.0 when n = 1."""
    if not gamma > 0:
        raise MetricError(f"gamma must be > 0, got {gamma!r}")
    rank = np.asarray(rank, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    den = np.log1p(gamma * (n - 1.0))
    out = np.ones(np.broadcast(rank, n).shape)
    np.subtract(1.0, np.log1p(gamma * (rank - 1.0)) / np.where(den > 0, den, 1.0), out=out, where=den > 0)
    return out


def hybrid_log_rank(m: RelevanceMatrix, gamma: float = 1.0, alpha: float = 0.5) -> np.ndarray:
    """alpha * recall + (1 - alpha) * (sum of log_rank_score of relevant retrieved items) / R.

    Ranks are the first rank at which each relevant item was retrieved, ``n`` is the length of
    the retrieved list. NaN when R = 0.
    """
    if not gamma > 0:
        raise MetricError(f"gamma must be > 0, got {gamma!r}")
    if not 0.0 <= alpha <= 1.0:
        raise MetricError(f"alpha must be in [0, 1], got {alpha!r}")
    mask = m.rel_ret
    lrs = np.zeros(len(m.q))
    lrs[mask] = log_rank_score(m.rank[mask], m.n_ret[m.q[mask]], gamma)
    rec = _over_r(m, _count(m, mask))
    quality = _over_r(m, _count(m, mask, lrs))
    return alpha * rec + (1.0 - alpha) * quality


def num_ret(m: RelevanceMatrix) -> np.ndarray:
    return m.n_ret.astype(np.float64)


def num_rel(m: RelevanceMatrix) -> np.ndarray:
    return m.n_rel.astype(np.float64)


def num_rel_ret(m: RelevanceMatrix) -> np.ndarray:
    return _count(m, m.rel_ret)


def num_nonrel_judged_ret(m: RelevanceMatrix) -> np.ndarray:
    return _count(m, m.retrieved & ~m.relevant)


def bpref(m: RelevanceMatrix) -> np.ndarray:
    """trec_eval's bpref: (1/R) sum over relevant retrieved r of 1 - min(n_above, R) / min(N, R),
    with n_above the judged non-relevant items ranked above r and N all judged non-relevant."""
    nonrel = m.retrieved & ~m.relevant
    above = m.cumulative_in_query(nonrel)
    n_nonrel = np.bincount(m.q[~m.relevant], minlength=m.n_queries)
    r = m.n_rel[m.q]
    mask = m.rel_ret
    contrib = np.zeros(len(m.q))
    a = above[mask]
    den = np.minimum(n_nonrel[m.q[mask]], r[mask])
    frac = np.minimum(a, r[mask]) / np.where(den > 0, den, 1)
    contrib[mask] = np.where(a > 0, 1.0 - frac, 1.0)
    return _over_r(m, _count(m, mask, contrib))


def iprec_at_recall(m: RelevanceMatrix, levels: Sequence[float]) -> np.ndarray:
    """Interpolated precision at recall levels, as trec_eval computes it: ``(n_queries, len(levels))``.

    The recall level ``p`` is turned into a count of relevant documents ``int(p * R + 0.9)``;
    interpolated precision at the j-th relevant retrieved document is the best precision at it or
    any later relevant document.
    """
    levels = np.asarray(levels, dtype=np.float64)
    nq = m.n_queries
    out = np.zeros((nq, len(levels)))
    idx = np.flatnonzero(m.rel_ret)
    q = m.q[idx]
    j = m.cumulative_in_query(m.rel_ret)[idx]
    prec = j / m.rank[idx]
    # interpolated: max over later relevant docs of the same query (reverse running max by group)
    nrr = np.bincount(q, minlength=nq)
    ip = _reverse_cummax_by_group(prec, j - 1, nrr[q])
    cut = np.floor(levels[None, :] * m.n_rel[:, None] + 0.9).astype(np.int64)
    first = np.zeros(nq, dtype=np.int64)
    gstart = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(nrr, out=gstart[1:])
    first[:] = gstart[:-1]
    ok = (cut >= 1) & (cut <= nrr[:, None])
    rows, cols = np.nonzero(ok)
    out[rows, cols] = ip[first[rows] + cut[rows, cols] - 1]
    zero = cut <= 0
    has = nrr > 0
    rows, cols = np.nonzero(zero & has[:, None])
    out[rows, cols] = ip[first[rows]]
    rows, cols = np.nonzero(zero & ~has[:, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        base = np.where(m.n_ret > 0, 0.0, np.nan)
    out[rows, cols] = base[rows]
    return out


def _reverse_cummax_by_group(x: np.ndarray, pos: np.ndarray, size: np.ndarray) -> np.ndarray:
    """``out[i] = max(x[i], x[i+1], ...)`` within each contiguous group; ``pos`` is the 0-based
    position of every element in its group and ``size`` its group's size."""
    out = x.copy()
    order = np.argsort(pos, kind="stable")
    bounds = np.searchsorted(pos[order], np.arange(int(pos.max()) + 2 if len(pos) else 1))
    for step in range(len(bounds) - 2, -1, -1):
        sel = order[bounds[step]:bounds[step + 1]]
        sel = sel[pos[sel] + 1 < size[sel]]
        out[sel] = np.maximum(out[sel], out[sel + 1])
    return out
