"""Ranking configurations: mean with confidence interval, paired permutation test against the
winner with Holm correction, 'within noise of the winner'; the judge re-ranking's cost estimate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ragmeter.analysis.grid.plan import CORRECTNESS_KEY, JUDGE_KEY
from ragmeter.core.schema import Sample
from ragmeter.stats.paired import holm, paired_permutation_test

# ---- ranking -----------------------------------------------------------------------------------------

@dataclass
class ConfigResult:
    params: dict[str, Any]
    name: str
    run_id: str | None = None
    mean: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0
    values: dict[str, float | None] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    directions: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    eliminated_round: int | None = None
    judge_run_id: str | None = None
    judge_mean: float | None = None
    judge_ci: tuple[float | None, float | None] = (None, None)
    judge_values: dict[str, float | None] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "params": self.params, "mean": self.mean,
                "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n, "metrics": self.metrics,
                "error": self.error, "eliminated_round": self.eliminated_round,
                "judge_run_id": self.judge_run_id, "judge_mean": self.judge_mean,
                "judge_ci_low": self.judge_ci[0], "judge_ci_high": self.judge_ci[1]}


def rank(results: Sequence[ConfigResult], *, alpha: float, judge: bool = False) -> dict[str, Any]:
    """Order configurations by mean (best first; ties broken by the other metrics in the order
    listed) and test them against the winner.

    Each configuration is compared with the winner by a two-sided paired permutation test on the
    per-question scores; the p-values are Holm-adjusted over those comparisons. ``within_noise``
    lists the configurations *not* significantly different from the winner; ``runner_up_p`` is
    the winner-vs-runner-up p-value (unadjusted) and ``winner_within_noise`` whether it is >= alpha.
    """
    def mean_of(r: ConfigResult) -> float | None:
        return r.judge_mean if judge else r.mean

    def values_of(r: ConfigResult) -> dict[str, float | None]:
        return r.judge_values if judge else r.values

    def key(r: ConfigResult) -> tuple[float, ...]:
        # ties are broken by the other metrics, in the order the config lists them
        rest = []
        for k, v in r.metrics.items():
            if k in (CORRECTNESS_KEY, JUDGE_KEY):
                continue
            sign = 1.0 if r.directions.get(k, "higher") != "lower" else -1.0
            rest.append(-sign * v if v is not None else math.inf)
        return (-float(mean_of(r)), *rest)  # type: ignore[arg-type]

    ok = [r for r in results if mean_of(r) is not None]
    ordered = sorted(ok, key=key)
    out: dict[str, Any] = {"order": [r.name for r in ordered], "rows": [], "alpha": alpha}
    if not ordered:
        return out
    win = ordered[0]
    pvals: list[float] = []
    for r in ordered[1:]:
        a, b = values_of(win), values_of(r)
        ids = [i for i, v in a.items() if v is not None and b.get(i) is not None]
        if len(ids) == 0:
            pvals.append(1.0)
            continue
        pvals.append(paired_permutation_test([a[i] for i in ids], [b[i] for i in ids]).pvalue)  # type: ignore[misc]
    adj = holm(pvals).tolist() if pvals else []
    for pos, r in enumerate(ordered):
        ci = r.judge_ci if judge else (r.ci_low, r.ci_high)
        row = {"rank": pos + 1, "name": r.name, "params": r.params, "run_id": r.judge_run_id if judge else r.run_id,
               "mean": mean_of(r), "ci_low": ci[0], "ci_high": ci[1],
               "metrics": {k: v for k, v in r.metrics.items() if k != CORRECTNESS_KEY},
               "p_vs_winner": None if pos == 0 else pvals[pos - 1],
               "p_vs_winner_holm": None if pos == 0 else adj[pos - 1]}
        row["within_noise_of_winner"] = pos == 0 or row["p_vs_winner_holm"] >= alpha
        out["rows"].append(row)
    if len(ordered) > 1:
        out["runner_up_p"] = pvals[0]
        out["winner_within_noise"] = pvals[0] >= alpha
    else:
        out["runner_up_p"] = None
        out["winner_within_noise"] = False
    out["within_noise"] = [row["name"] for row in out["rows"] if row["within_noise_of_winner"]]
    return out


# ---- judge cost --------------------------------------------------------------------------------------

def estimate_judge_cost(samples: Sequence[Sample], options: dict[str, Any], store: Any,
                        judge_params: dict[str, Any] | None = None) -> dict[str, Any]:
    """What judging ``samples`` with ``graded_correctness`` would cost, without calling the judge:
    the judge service's dry run (cache hits excluded; ~4 characters per token; the price table).
    The common rule of thumb (200 tokens per evaluation at $0.002 / 1K tokens) is reported too."""
    from ragmeter.llm import JudgeService, config_from_options
    from ragmeter.metrics.registry import get_spec, missing_fields

    spec = get_spec("graded_correctness")
    params = {**spec.defaults, **(judge_params or {})}
    ok = [s for s in samples if not missing_fields(s, spec.requires)]
    from ragmeter.core.schema import Score

    reqs = [r for r in spec.fn.requests(ok, params) if not isinstance(r, Score)] if ok else []
    svc = JudgeService(config_from_options({**options, "judge_dry_run": True}), store=store)
    try:
        svc.submit(reqs)
        plan = svc.plan()
    finally:
        svc.close()
    plan["samples"] = len(samples)
    plan["judge"] = svc.cfg.label
    plan["rule_of_thumb_usd"] = round(len(reqs) * 200 / 1000 * 0.002, 6)
    plan["requests"] = len(reqs)
    plan["reused"] = len(reqs) - plan.get("planned_calls", 0)  # cache hits and duplicate prompts
    return plan
