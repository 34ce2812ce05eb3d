"""The statistics of an arena: pairwise verdicts between systems, each pair judged in both orders.

From the per-item outcomes of every pair of systems (``a`` wins, ``b`` wins, ``tie``, or not
judged) and the position each item's two verdicts followed:

- **win rate** of A over B: ``(wins + ties / 2) / judged``, with the interval ragmeter gives every
  bounded mean (:func:`ragmeter.stats.intervals.mean_ci` on the item scores 1 / 0.5 / 0: the
  Clopper-Pearson exact binomial interval when no item is a tie, else the quasi-binomial score
  interval -- Wilson's score interval with the observed variance, McCullagh & Nelder §9.2 --
  chosen by the coverage study of docs/statistics.md, which holds 95% from n = 3 on);
- **position-bias rate**: the share of judged items whose two verdicts picked the same position
  (the answer shown first both times, or shown second both times), with its Clopper-Pearson interval;
- **Bradley-Terry strengths** (Bradley & Terry 1952) for three or more systems: log-strengths
  ``theta`` (mean 0) maximising ``sum_ij W_ij log sigma(theta_i - theta_j)``, ``W_ij`` = i's wins
  over j plus half their ties, by Newton's method (the estimate of ``choix.opt_pairwise`` /
  ``ilsr_pairwise`` with ``alpha=0`` on the same comparisons, ties entered as one win each way);
  intervals are percentile bootstrap intervals over items (every pair's verdicts on a resampled
  item go together). The maximum-likelihood estimate exists only when every system both wins
  and loses somewhere in every split of the systems (the comparison graph is strongly connected,
  Zermelo 1929 / Ford 1957); otherwise the penalty ``alpha * |theta|^2`` is added (a Gaussian prior;
  ``alpha`` = :data:`PRIOR_ALPHA`, as choix's ``alpha``) and the record says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: the record's format (``Run.extra["arena"]["format"]``)
FORMAT = 1
#: ``Run.extra`` key and the run's tag
EXTRA_KEY = "arena"
TAG = "arena"
N_BOOTSTRAP = 1000
SEED = 20261128
#: the prior's precision when the maximum-likelihood strengths do not exist
PRIOR_ALPHA = 0.01
OUTCOME_SCORE = {"a": 1.0, "b": 0.0, "tie": 0.5}
WIN_RATE_METHOD = ("(wins + ties/2) / judged items; interval: ragmeter's bounded-mean interval "
                   "(Clopper-Pearson when no tie, else the quasi-binomial score interval; docs/statistics.md)")
BIAS_METHOD = "share of judged items whose two verdicts picked the same position; Clopper-Pearson interval"
BT_METHOD = ("Bradley-Terry maximum likelihood (Newton's method; ties count half a win each way), "
             "log-strengths with mean 0; percentile bootstrap intervals over items")


@dataclass
class PairOutcomes:
    """One pair of systems over the shared items: per item ``a`` / ``b`` / ``tie`` / ``None`` (not
    judged, with ``reasons``), and the position both verdicts followed (``first`` / ``second`` /
    ``None``)."""

    a: str
    b: str
    outcomes: list[str | None]
    positions: list[str | None]
    reasons: list[str | None] = field(default_factory=list)


def _interval(values: np.ndarray, level: float) -> tuple[float | None, float | None, str | None]:
    from ragmeter.stats.intervals import choose_method, mean_ci

    if values.size == 0:
        return None, None, None
    ci = mean_ci(values, level=level, bounds=(0.0, 1.0))
    method = choose_method(values, bounds=(0.0, 1.0))
    return (None, None, None) if ci is None else (float(ci[0]), float(ci[1]), str(method))


def pair_stats(p: PairOutcomes, level: float = 0.95) -> dict[str, Any]:
    """Win/tie/loss counts, the win rate with its interval and the position-bias rate of one pair."""
    from ragmeter.stats.intervals import clopper_pearson_ci

    judged = [o for o in p.outcomes if o is not None]
    wins, losses, ties = judged.count("a"), judged.count("b"), judged.count("tie")
    scores = np.array([OUTCOME_SCORE[o] for o in judged], dtype=np.float64)
    lo, hi, method = _interval(scores, level)
    pos = [x for o, x in zip(p.outcomes, p.positions, strict=True) if o is not None]
    first, second = pos.count("first"), pos.count("second")
    n = len(judged)
    bias_lo, bias_hi = clopper_pearson_ci(first + second, n, level=level) if n else (None, None)
    reasons: dict[str, int] = {}
    for o, r in zip(p.outcomes, p.reasons or [None] * len(p.outcomes), strict=True):
        if o is None:
            reasons[r or "not judged"] = reasons.get(r or "not judged", 0) + 1
    return {
        "a": p.a, "b": p.b, "n_items": len(p.outcomes), "n_judged": n, "n_not_judged": len(p.outcomes) - n,
        "not_judged_reasons": reasons, "wins": wins, "ties": ties, "losses": losses,
        "win_rate": {"value": float(scores.mean()) if n else None, "ci_low": lo, "ci_high": hi,
                     "ci_method": method, "level": level},
        "position_bias": {"rate": (first + second) / n if n else None, "ci_low": bias_lo, "ci_high": bias_hi,
                          "first": first, "second": second, "n": n},
    }


# ---- Bradley-Terry --------------------------------------------------------------------------------
def wins_matrix(k: int, pairs: Sequence[tuple[int, int, float]]) -> np.ndarray:
    """``W[i, j]``: i's credit against j from ``(i, j, score)`` comparisons (score 1: i won, 0.5 a tie)."""
    w = np.zeros((k, k))
    for i, j, s in pairs:
        w[i, j] += s
        w[j, i] += 1.0 - s
    return w


def ml_exists(w: np.ndarray) -> bool:
    """Whether the Bradley-Terry maximum-likelihood estimate exists: the graph with an edge i -> j
    when i has credit against j is strongly connected (Ford 1957)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n, _ = connected_components(csr_matrix(w > 0), directed=True, connection="strong")
    return n == 1


def _loglik(theta: np.ndarray, w: np.ndarray, alpha: float) -> float:
    d = theta[:, None] - theta[None, :]
    return float(-(w * np.logaddexp(0.0, -d)).sum() - alpha * theta @ theta)


def bradley_terry(w: np.ndarray, alpha: float = 0.0, tol: float = 1e-12, max_iter: int = 200) -> np.ndarray:
    """Log-strengths (mean 0) maximising the Bradley-Terry likelihood of the credit matrix ``w``,
    less ``alpha * |theta|^2`` when ``alpha > 0`` (choix's regularisation: a Gaussian prior).

    Newton's method on the centred parameters: the log-likelihood is concave, its Hessian is minus
    a weighted graph Laplacian (singular along the all-ones direction, which ``J / k`` fills), and
    a halved step is taken while a full one would lower the likelihood.
    """
    k = w.shape[0]
    n = w + w.T
    theta = np.zeros(k)
    ones = np.ones((k, k)) / k
    ll = _loglik(theta, w, alpha)
    for _ in range(max_iter):
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        grad = (w - n * p).sum(axis=1) - 2 * alpha * theta
        c = n * p * (1.0 - p)
        lap = np.diag(c.sum(axis=1)) - c + 2 * alpha * np.eye(k)
        step = np.linalg.solve(lap + ones, grad)
        t = 1.0
        while True:
            cand = theta + t * step
            cand -= cand.mean()
            new = _loglik(cand, w, alpha)
            if new >= ll - 1e-15 or t < 1e-8:
                break
            t /= 2
        theta, ll = cand, new
        if np.max(np.abs(t * step)) < tol:
            break
    return theta - theta.mean()


def strengths(w: np.ndarray) -> tuple[np.ndarray, bool]:
    """``(theta, penalised)``: the ML log-strengths, or the prior's when the ML ones do not exist."""
    if ml_exists(w):
        return bradley_terry(w), False
    return bradley_terry(w, alpha=PRIOR_ALPHA), True


def bt_stats(systems: Sequence[str], pairs: Sequence[PairOutcomes], *, n_bootstrap: int = N_BOOTSTRAP,
             level: float = 0.95, seed: int = SEED) -> dict[str, Any] | None:
    """Bradley-Terry strengths of the systems with percentile bootstrap intervals over items, and
    the ranking; ``None`` with fewer than three systems or no judged comparison."""
    k = len(systems)
    if k < 3:
        return None
    index = {s: i for i, s in enumerate(systems)}
    n_items = len(pairs[0].outcomes) if pairs else 0
    # per item, its k x k credit matrix (flattened): the bootstrap sums resampled items' rows
    per_item = np.zeros((n_items, k * k))
    for p in pairs:
        i, j = index[p.a], index[p.b]
        for t, o in enumerate(p.outcomes):
            if o is not None:
                s = OUTCOME_SCORE[o]
                per_item[t, i * k + j] += s
                per_item[t, j * k + i] += 1.0 - s
    w = per_item.sum(axis=0).reshape(k, k)
    if w.sum() == 0:
        return None
    theta, penalised = strengths(w)
    boot = np.empty((n_bootstrap, k))
    n_penalised = 0
    if n_bootstrap and n_items:
        rng = np.random.default_rng(seed)
        for b in range(n_bootstrap):
            counts = np.bincount(rng.integers(0, n_items, n_items), minlength=n_items)
            boot[b], pen = strengths((counts @ per_item).reshape(k, k))
            n_penalised += pen
    tail = (1 - level) / 2
    rows = []
    for i, s in enumerate(systems):
        lo = float(np.quantile(boot[:, i], tail)) if n_bootstrap and n_items else None
        hi = float(np.quantile(boot[:, i], 1 - tail)) if n_bootstrap and n_items else None
        rows.append({"system": s, "strength": float(theta[i]), "ci_low": lo, "ci_high": hi,
                     "wins": float(w[i].sum()), "comparisons": float((w[i] + w[:, i]).sum())})
    order = sorted(range(k), key=lambda i: -theta[i])
    for r, i in enumerate(order, 1):
        rows[i]["rank"] = r
    return {"method": BT_METHOD if not penalised else
            BT_METHOD.replace("maximum likelihood", f"penalised maximum likelihood (alpha={PRIOR_ALPHA}: the "
                                                    "ML estimate does not exist, a system never lost or never won "
                                                    "against a group)"),
            "maximum_likelihood": not penalised, "prior_alpha": PRIOR_ALPHA if penalised else None,
            "n_bootstrap": n_bootstrap, "bootstrap_penalised": n_penalised, "level": level, "seed": seed,
            "strengths": [rows[i] for i in order], "ranking": [systems[i] for i in order]}


def position_bias(pairs: Sequence[PairOutcomes], level: float = 0.95) -> dict[str, Any]:
    """The position-bias rate over every judged comparison of every pair (Clopper-Pearson interval,
    which treats the comparisons as independent)."""
    from ragmeter.stats.intervals import clopper_pearson_ci

    first = second = n = 0
    for p in pairs:
        for o, x in zip(p.outcomes, p.positions, strict=True):
            if o is not None:
                n += 1
                first += x == "first"
                second += x == "second"
    lo, hi = clopper_pearson_ci(first + second, n, level=level) if n else (None, None)
    return {"rate": (first + second) / n if n else None, "ci_low": lo, "ci_high": hi, "first": first,
            "second": second, "n": n, "method": BIAS_METHOD}


def analyse(systems: Sequence[str], pairs: Sequence[PairOutcomes], *, n_bootstrap: int = N_BOOTSTRAP,
            level: float = 0.95, seed: int = SEED) -> dict[str, Any]:
    """Every statistic of an arena, as the JSON record stored in ``Run.extra["arena"]``."""
    rows = [pair_stats(p, level) for p in pairs]
    bt = bt_stats(systems, pairs, n_bootstrap=n_bootstrap, level=level, seed=seed)
    if bt is not None:
        ranking = bt["ranking"]
    elif len(rows) == 1 and rows[0]["win_rate"]["value"] is not None:
        r = rows[0]
        ranking = [r["a"], r["b"]] if r["win_rate"]["value"] >= 0.5 else [r["b"], r["a"]]
    else:  # nothing judged: no ranking rather than the order the runs were given in
        ranking = []
    return {"format": FORMAT, "pairs": rows, "position_bias": position_bias(pairs, level),
            "bradley_terry": bt, "ranking": ranking, "level": level, "win_rate_method": WIN_RATE_METHOD}


def stored_arena(run: Any) -> Mapping[str, Any] | None:
    """The arena record kept in a stored run, or ``None`` when the run is not an arena."""
    rec = (getattr(run, "extra", None) or {}).get(EXTRA_KEY)
    return rec if isinstance(rec, Mapping) and rec.get("pairs") is not None else None
