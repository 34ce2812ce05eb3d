"""Regression gate: does a run score significantly worse than a baseline by more than a tolerance?"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ragmeter.analysis.runs import RunValues, cluster_words, load_runs, pair_clusters, paired_arrays
from ragmeter.core.errors import EXIT_CHECK_FAILED, EXIT_INCOMPLETE, EXIT_OK, ConfigError
from ragmeter.stats.paired import (
    adjust_pvalues,
    cluster_permutation_test,
    paired_mean_ci,
    paired_permutation_test,
)


@dataclass
class GateRow:
    """One metric of the gate.

    ``drop`` is how much worse the current run is (positive = worse, in the metric's direction;
    relative to the baseline mean with ``relative=True``); ``pvalue`` is the one-sided paired
    permutation test of "current is worse", ``pvalue_adjusted`` the same Holm-adjusted over every
    metric of the gate (the correction ``compare`` and the report use); ``regressed`` =
    ``drop > max_drop`` and ``pvalue_adjusted < alpha`` (or, against a means-only baseline,
    ``drop > max_drop`` alone).
    ``ci_low``/``ci_high``: 95% interval of ``change`` (:func:`paired_mean_ci`, within
    ``[low - high, high - low]`` for a metric on ``[low, high]``); with ``relative=True`` of the
    relative change ``change / |baseline mean|``, on the same scale as ``drop``, and within the
    range a relative change of the metric can take (:func:`relative_bounds`).
    """

    metric: str
    direction: str
    baseline: float | None
    current: float | None
    change: float | None
    drop: float | None
    ci_low: float | None
    ci_high: float | None
    pvalue: float | None
    n: int
    regressed: bool
    status: str
    note: str | None = None
    pvalue_adjusted: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class GateResult:
    current: str
    baseline: str
    max_drop: float
    alpha: float
    relative: bool
    rows: list[GateRow] = field(default_factory=list)
    run_problems: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """A gated metric regressed (significantly, beyond the tolerance)."""
        return any(r.regressed for r in self.rows)

    @property
    def incomplete(self) -> list[str]:
        """Why the gate could not check everything it was asked to: a gated metric without a
        value in one of the runs, or a run stored as incomplete (empty list: nothing missing)."""
        rows = [f"{r.metric}: {r.note or 'no value'}" for r in self.rows if r.status == "no value"]
        return [*rows, *self.run_problems]

    @property
    def exit_code(self) -> int:
        """1 when a metric regressed, else 3 when the gate is incomplete, else 0 (a found
        regression wins: what could be checked already failed)."""
        if self.failed:
            return EXIT_CHECK_FAILED
        return EXIT_INCOMPLETE if self.incomplete else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {"current": self.current, "baseline": self.baseline, "max_drop": self.max_drop,
                "alpha": self.alpha, "relative": self.relative, "failed": self.failed,
                "incomplete": self.incomplete, "exit_code": self.exit_code,
                "rows": [r.to_dict() for r in self.rows]}

    def report(self) -> str:
        """A plain-text table of what moved (for assertion messages and logs)."""
        lines = [f"gate: {self.current} vs baseline {self.baseline} (max drop {self.max_drop:g}"
                 f"{' relative' if self.relative else ''}, alpha {self.alpha:g})"]
        for r in self.rows:
            def f(v: float | None) -> str:
                return "—" if v is None else f"{v:.4f}"
            lines.append(f"  {r.status:<10} {r.metric:<32} baseline {f(r.baseline)}  current {f(r.current)}"
                         f"  drop {f(r.drop)}  p {f(r.pvalue)}  n {r.n}" + (f"  ({r.note})" if r.note else ""))
        return "\n".join(lines)


def gate(current: str | Any, baseline: str | Any, *, max_drop: float = 0.05,
         metrics: list[str] | None = None, alpha: float = 0.05, relative: bool = False,
         store: Any = None, n_resamples: int = 10_000) -> GateResult:
    """Compare ``current`` with ``baseline`` metric by metric and flag significant regressions.

    For each metric, on the samples both scored (paired by id): ``change = mean_cur - mean_base``;
    ``drop = -change`` for higher-is-better metrics and ``+change`` for lower-is-better ones
    (``relative=True`` divides by the baseline mean, so ``0.05`` means "5% worse").
    The p-value is the one-sided paired permutation test that the current run is worse. A metric
    **regressed** when ``drop > max_drop`` *and* the Holm-adjusted ``p < alpha`` (Holm over the
    gated metrics, as in ``compare``): a large drop that is noise (few samples) does not fail the
    gate, and neither does a tiny significant one.

    Against a baseline with means only (a ``{"date", "metrics": {name: mean}}`` file), no paired test is possible: a metric
    regresses when ``drop > max_drop``, and the row says so.

    Args:
        current / baseline: run ids/names, baseline JSON files, or evaluation results.
        metrics: the metrics to gate (default: every metric in both).

    A gate of two stored runs is cached in the store per run versions and options, like
    ``compare`` (:mod:`ragmeter.analysis.compare_cache`).

    The result's ``exit_code`` is 1 when a metric regressed, 3 when the gate is incomplete (a
    gated metric has no value in a run, or a run is stored as incomplete), else 0.

    Raises:
        ConfigError: invalid tolerance or alpha, unknown metrics, nothing in common (exit 2).
        StoreError: the run or the baseline does not exist (exit 2).
    """
    if not max_drop >= 0:
        raise ConfigError(f"max_drop must be >= 0, got {max_drop}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha}")
    from ragmeter.analysis import compare_cache

    cached = compare_cache.cache_key(store, [current, baseline], {
        "gate": True, "max_drop": max_drop, "metrics": metrics, "alpha": alpha, "relative": relative,
        "n_resamples": n_resamples})
    if cached is not None and (hit := compare_cache.get(store, cached[0])) is not None:
        return GateResult(cached[1][0]["label"], cached[1][1]["label"], max_drop, alpha, relative,
                          [GateRow(**r) for r in hit["rows"]], list(hit["problems"]))
    res = _gate(current, baseline, max_drop, metrics, alpha, relative, store, n_resamples)
    if cached is not None:
        compare_cache.put(store, cached[0], {"rows": [r.to_dict() for r in res.rows], "problems": res.run_problems})
    return res


def _gate(current: Any, baseline: Any, max_drop: float, metrics: list[str] | None, alpha: float,
          relative: bool, store: Any, n_resamples: int) -> GateResult:
    cur = load_runs(current, store)
    base = load_runs(baseline, store)
    common = [m for m in base.metrics if m in cur.values]
    if metrics:
        missing = [m for m in metrics if m not in common]
        if missing:
            raise ConfigError(f"metric(s) {missing} are not in both runs; in both: {common}")
        common = list(metrics)
    if not common:
        raise ConfigError(f"{cur.label} and {base.label} have no metric in common")
    res = GateResult(cur.label, base.label, max_drop, alpha, relative)
    for m in common:
        res.rows.append(_row(m, cur, base, max_drop, alpha, relative, n_resamples))
    # the multiplicity rule of compare and the report: Holm over the metrics gated together
    for r, padj in zip(res.rows, adjust_pvalues([r.pvalue for r in res.rows]), strict=True):
        r.pvalue_adjusted = padj
        if padj is not None and r.status in ("REGRESSED", "noise"):
            r.regressed = padj < alpha
            r.status = "REGRESSED" if r.regressed else "noise"
    for which, run in (("run", cur), ("baseline", base)):
        for reason in run.extra.get("incomplete") or []:
            # only what concerns the gated metrics (or the whole run) makes the gate incomplete
            subject = str(reason).split(":", 1)[0]
            if subject in common or subject == "no samples":
                res.run_problems.append(f"{which} {run.label} is incomplete: {reason}")
    return res


def _row(m: str, cur: RunValues, base: RunValues, max_drop: float, alpha: float, relative: bool,
         n_resamples: int) -> GateRow:
    direction = base.directions.get(m) or cur.directions.get(m, "higher")
    sign = -1.0 if direction != "lower" else 1.0
    if m not in base.values:
        b_mean, c_mean = base.means.get(m), cur.means.get(m)
        if b_mean is None or c_mean is None:
            return GateRow(m, direction, b_mean, c_mean, None, None, None, None, None, 0, False,
                           "no value", "a mean is missing")
        change = c_mean - b_mean
        drop = _scale(sign * change, b_mean, relative)
        bad = drop is not None and drop > max_drop
        return GateRow(m, direction, b_mean, c_mean, change, drop, None, None, None, 0, bad,
                       "REGRESSED" if bad else "ok", "baseline has means only: no significance test")
    xb, xc, ids, unpaired = paired_arrays(base, cur, m)
    clusters = pair_clusters(base, cur, ids)  # turns of conversations: tested per conversation
    if xb.size == 0:
        return GateRow(m, direction, base.means.get(m), cur.means.get(m), None, None, None, None, None, 0,
                       False, "no value", "no sample has a value in both runs")
    b_mean, c_mean = float(xb.mean()), float(xc.mean())
    change = c_mean - b_mean
    drop = _scale(sign * change, b_mean, relative)
    alt = "less" if direction != "lower" else "greater"
    p = _pvalue(xb, xc, clusters, alt, n_resamples)
    bounds = base.range_of(m) or cur.range_of(m)
    ci = paired_mean_ci(xb, xc, bounds=bounds, clusters=clusters)
    if relative and ci is not None:
        # the interval of the change on the scale of the drop beside it: relative to the baseline mean
        ci = _relative_ci(ci, b_mean, bounds) if b_mean else None
    bad = drop is not None and drop > max_drop and p < alpha
    if bad:
        status = "REGRESSED"
    elif drop is not None and drop > max_drop:
        status = "noise"  # dropped past the tolerance, but not significantly
    elif change != 0 and sign * change < 0:
        status = "improved" if p_improved(xb, xc, alt, alpha, n_resamples, clusters) else "ok"
    else:
        status = "ok"
    notes = [f"{unpaired} sample(s) not in both runs"] if unpaired else []
    if clusters is not None:
        unit, members = cluster_words(base, cur)
        notes.append(f"{xb.size} {members} of {len(set(clusters))} {unit}s: tested per {unit}")
    note = "; ".join(notes) or None
    return GateRow(m, direction, b_mean, c_mean, change, drop, ci[0] if ci else None, ci[1] if ci else None,
                   p, int(xb.size), bad, status, note)


def _pvalue(xb: Any, xc: Any, clusters: list[str] | None, alternative: str, n_resamples: int) -> float:
    """The one-sided paired sign-flip p-value; with ``clusters``, whole conversations flip."""
    if clusters is None:
        return paired_permutation_test(xb, xc, alternative=alternative,  # type: ignore[arg-type]
                                       n_resamples=n_resamples).pvalue
    return cluster_permutation_test(xb, xc, clusters, alternative=alternative,  # type: ignore[arg-type]
                                    n_resamples=n_resamples).pvalue


def p_improved(xb: Any, xc: Any, worse_alt: str, alpha: float, n_resamples: int,
               clusters: list[str] | None = None) -> bool:
    """Whether the current run is significantly *better* (the opposite one-sided test)."""
    alt = "greater" if worse_alt == "less" else "less"
    return _pvalue(xb, xc, clusters, alt, n_resamples) < alpha


def relative_bounds(bounds: tuple[float, float] | None, base_mean: float) -> tuple[float, float]:
    """The range of a relative change ``(c - b) / |b|`` of a metric on ``[low, high]`` whose
    baseline mean is ``b``: ``[(low - b) / |b|, (high - b) / |b|]`` (from -100% for a metric that
    cannot go below 0); without a range, the whole line."""
    if bounds is None:
        return -math.inf, math.inf
    low, high = bounds
    return (low - base_mean) / abs(base_mean), (high - base_mean) / abs(base_mean)


def _relative_ci(ci: tuple[float, float], base_mean: float, bounds: tuple[float, float] | None
                 ) -> tuple[float, float]:
    lo, hi = relative_bounds(bounds, base_mean)
    scale = abs(base_mean)
    return min(max(ci[0] / scale, lo), hi), max(min(ci[1] / scale, hi), lo)


def _scale(drop: float, base_mean: float | None, relative: bool) -> float | None:
    if not relative:
        return drop
    if not base_mean:
        return None  # relative change of a zero baseline is undefined
    return drop / abs(base_mean)
