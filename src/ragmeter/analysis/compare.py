"""A/B comparison of runs on the same samples (an A/B test with paired statistics)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ragmeter.analysis.runs import RunValues, cluster_words, load_runs, pair_clusters, paired_arrays
from ragmeter.core.errors import ConfigError
from ragmeter.stats.paired import VERDICT_BETTER, VERDICT_WORSE, compare_paired, family_verdicts


@dataclass
class MetricComparison:
    """One metric, run ``a`` (reference) vs run ``b``.

    ``diff = mean_b - mean_a`` over the paired samples; ``pvalue`` is the two-sided paired
    permutation test, ``pvalue_adjusted`` the Holm-adjusted one over every test of the
    comparison; ``winner`` is ``"a"``, ``"b"`` or ``None`` (no significant difference), taking the
    metric's direction into account, and ``verdict`` the same decision in words (``b`` relative to
    ``a``), from :func:`ragmeter.stats.paired.verdict` like the report and dashboard.
    """

    metric: str
    a: str
    b: str
    n: int
    n_unpaired: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    pvalue: float | None
    pvalue_adjusted: float | None
    wilcoxon_pvalue: float | None
    wilcoxon_note: str | None
    wins: int
    ties: int
    losses: int
    direction: str
    winner: str | None = None
    note: str | None = None
    verdict: str | None = None
    #: conversations the paired turns came from (their interval and test are per conversation)
    n_clusters: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Comparison:
    runs: list[RunValues]
    rows: list[MetricComparison] = field(default_factory=list)
    alpha: float = 0.05
    correction: str = "holm"

    def to_dict(self) -> dict[str, Any]:
        return {"runs": [{"id": r.run_id, "label": r.label} for r in self.runs], "alpha": self.alpha,
                "correction": self.correction, "comparisons": [r.to_dict() for r in self.rows]}

    def _repr_html_(self) -> str:
        """The comparison as an HTML table in Jupyter: means, the paired difference with its 95%
        CI, adjusted p-value and the winner of every metric x pair."""
        from html import escape

        def f(v: float | None) -> str:
            return "–" if v is None else f"{v:.4f}"

        head = ("<tr><th>metric</th><th>a</th><th>b</th><th>n</th><th>mean a</th><th>mean b</th>"
                "<th>diff (b − a)</th><th>95% CI</th><th>p (adj.)</th><th>winner</th></tr>")
        body = "".join(
            f"<tr><td>{escape(r.metric)}</td><td>{escape(r.a)}</td><td>{escape(r.b)}</td><td>{r.n}</td>"
            f"<td>{f(r.mean_a)}</td><td>{f(r.mean_b)}</td><td>{f(r.diff)}</td>"
            f"<td>[{f(r.ci_low)}, {f(r.ci_high)}]</td><td>{f(r.pvalue_adjusted)}</td>"
            f"<td>{escape(r.winner or 'no significant difference')}</td></tr>" for r in self.rows)
        return (f'<table class="ragmeter-compare"><caption>comparison, alpha {self.alpha:g}, '
                f"{escape(self.correction)} correction</caption><thead>{head}</thead><tbody>{body}</tbody></table>")


def compare_runs(runs: list[str | Any], *, metrics: list[str] | None = None, alpha: float = 0.05,
                 correction: str = "holm", all_pairs: bool = False, store: Any = None,
                 n_resamples: int = 10_000) -> Comparison:
    """Compare runs metric by metric on the samples they share.

    With two runs, ``b`` is compared with ``a``; with more, every run is compared with the first
    (``all_pairs=True``: every pair). For each metric and pair: both means, the mean paired
    difference with its 95% CI (within ``[low - high, high - low]`` for a metric on ``[low, high]``), the two-sided paired permutation p-value (and
    Wilcoxon's where it fits), win/tie/loss counts. ``correction="holm"`` adjusts the p-values over
    all the tests reported (metrics x pairs) for multiple comparisons; a winner is declared only
    when the adjusted p-value is below ``alpha``.

    In a run of conversations, a per-turn metric's pairs are clustered by conversation: the
    interval is cluster-robust (CR1) and the sign-flip test flips whole conversations
    (:func:`ragmeter.stats.paired.cluster_permutation_test`); conversation metrics (one value per
    conversation) are paired as usual.

    Runs are read as score columns and paired in bulk; the permutation p-value of a large run is
    the closed form of :mod:`ragmeter.stats.large_sample`. The comparison of stored runs is
    cached in the store per set of run versions (:mod:`ragmeter.analysis.compare_cache`): asking
    again costs one lookup; the ``runs`` of a cached comparison carry ids and labels, not values.

    Raises:
        ConfigError: fewer than two runs, no metric in common, unknown correction.
    """
    if len(runs) < 2:
        raise ConfigError("compare needs at least two runs")
    if correction not in ("holm", "none"):
        raise ConfigError(f"correction must be 'holm' or 'none', got {correction!r}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha}")
    from ragmeter.analysis import compare_cache

    cached = compare_cache.cache_key(store, list(runs), {
        "metrics": metrics, "alpha": alpha, "correction": correction, "all_pairs": all_pairs,
        "n_resamples": n_resamples})
    if cached is not None and (hit := compare_cache.get(store, cached[0])) is not None:
        return Comparison([RunValues(r["id"], r["name"], label=r["label"]) for r in cached[1]],
                          [MetricComparison(**r) for r in hit["rows"]], alpha=alpha, correction=correction)
    vals = [load_runs(r, store) for r in runs]
    common = [m for m in vals[0].metrics if all(m in v.values for v in vals[1:]) and m in vals[0].values]
    if metrics:
        missing = [m for m in metrics if m not in common]
        if missing:
            raise ConfigError(f"metric(s) {missing} are not in every run; common metrics: {common}")
        common = list(metrics)
    if not common:
        raise ConfigError("the runs have no metric with per-sample values in common")
    pairs = ([(i, j) for i in range(len(vals)) for j in range(i + 1, len(vals))] if all_pairs
             else [(0, j) for j in range(1, len(vals))])
    out = Comparison(vals, alpha=alpha, correction=correction)
    for i, j in pairs:
        a, b = vals[i], vals[j]
        for m in common:
            xa, xb, ids, unpaired = paired_arrays(a, b, m)
            direction = a.directions.get(m, "higher")
            if xa.size == 0:
                out.rows.append(MetricComparison(m, a.label, b.label, 0, unpaired, None, None, None, None,
                                                 None, None, None, None, None, 0, 0, 0, direction,
                                                 note="no sample has a value in both runs"))
                continue
            clusters = pair_clusters(a, b, ids)
            c = compare_paired(xa, xb, n_resamples=n_resamples, bounds=a.range_of(m) or b.range_of(m),
                               clusters=clusters)
            unit, members = cluster_words(a, b)  # conversations' turns, or a per-span run's traces
            note = (f"{c.n} {members} of {c.n_clusters} {unit}s: interval and test per {unit}"
                    if c.n_clusters is not None else None)
            out.rows.append(MetricComparison(
                m, a.label, b.label, c.n, unpaired, c.mean_a, c.mean_b, c.diff, c.ci_low, c.ci_high,
                c.pvalue, None, c.wilcoxon_pvalue, c.wilcoxon_note, c.wins, c.ties, c.losses, direction,
                note=note, n_clusters=c.n_clusters))
    decided = family_verdicts([(r.diff, r.pvalue, r.direction != "lower") for r in out.rows],
                              alpha=alpha, correction=correction)
    for r, (p, v) in zip(out.rows, decided, strict=True):
        r.pvalue_adjusted = p
        r.verdict = v
        r.winner = "b" if v == VERDICT_BETTER else "a" if v == VERDICT_WORSE else None
    if cached is not None:
        compare_cache.put(store, cached[0], {"rows": [r.to_dict() for r in out.rows]})
    return out
