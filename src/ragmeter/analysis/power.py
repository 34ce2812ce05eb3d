"""How many samples does a paired comparison need to detect a given drop in a metric?"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragmeter.analysis.runs import load_runs, paired_arrays
from ragmeter.core.errors import ConfigError
from ragmeter.stats.paired import paired_power, sample_size_paired


@dataclass
class PowerAnalysis:
    metric: str
    run: str
    drop: float
    alpha: float
    power: float
    alternative: str
    sd_diff: float
    sd_source: str
    n_required: int
    n_current: int
    power_at_current_n: float | None
    assumptions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def power_for_run(run: str | Any, metric: str, drop: float, *, against: str | Any | None = None,
                  rho: float = 0.5, alpha: float = 0.05, power: float = 0.8,
                  alternative: str = "one-sided", store: Any = None) -> PowerAnalysis:
    """Samples needed to detect a drop of ``drop`` in ``metric`` with a paired test.

    The standard deviation of the paired differences, :math:`\\sigma_d`, comes from the data:

    - with ``against`` (a second run on the same samples, e.g. the previous version):
      the sample standard deviation of the observed per-sample differences;
    - otherwise from the run alone: :math:`\\sigma_d = \\sigma\\sqrt{2(1-\\rho)}`, where
      :math:`\\sigma` is the metric's per-sample standard deviation in the run and :math:`\\rho`
      the assumed correlation between two versions' scores on the same sample (default 0.5;
      successive versions of one system usually correlate more, which needs fewer samples).

    Then :func:`ragmeter.stats.paired.sample_size_paired` gives the smallest ``n``
    whose paired t-test power reaches ``power`` at level ``alpha`` (one-sided by default, as a
    regression gate asks "did it get worse?").

    Raises:
        ConfigError: unknown metric, fewer than two values, invalid numbers.
    """
    if not drop > 0 or not math.isfinite(drop):
        raise ConfigError(f"the drop to detect must be a positive number, got {drop}")
    if not -1 <= rho < 1:
        raise ConfigError(f"rho must be in [-1, 1), got {rho}")
    if alternative not in ("one-sided", "two-sided"):
        raise ConfigError(f"alternative must be 'one-sided' or 'two-sided', got {alternative!r}")
    rv = load_runs(run, store)
    if metric not in rv.values:
        raise ConfigError(f"run {rv.label} has no metric {metric!r}; it has {rv.metrics}")
    assumptions = [
        "scores are paired: both versions are evaluated on the same samples",
        "the mean of the paired differences is approximately normal (paired t-test; the permutation "
        "test used by compare/gate has about the same power)",
        "the spread of the differences stays what it was measured to be",
    ]
    if against is not None:
        other = load_runs(against, store)
        xa, xb, _ids, _u = paired_arrays(rv, other, metric)
        if xa.size < 2:
            raise ConfigError(f"{rv.label} and {other.label} share fewer than two scored samples for {metric}")
        sd = float(np.std(xb - xa, ddof=1))
        source = f"observed paired differences with {other.label} (n={xa.size})"
        n_now = int(xa.size)
    else:
        x = np.array([v for v in rv.values[metric].values() if v is not None], dtype=np.float64)
        if x.size < 2:
            raise ConfigError(f"{metric} has fewer than two values in {rv.label}")
        sigma = float(np.std(x, ddof=1))
        sd = sigma * math.sqrt(2 * (1 - rho))
        source = f"sd {sigma:.4f} of {metric} in the run, with correlation rho={rho} between versions"
        assumptions.append(f"the correlation between two versions' per-sample scores is {rho} (an assumption; "
                           "pass --against RUN to measure the real paired spread)")
        n_now = int(x.size)
    if sd == 0:
        assumptions.append("the differences have zero spread: any consistent drop is detected with 2 samples")
    n_req = sample_size_paired(sd, drop, alpha=alpha, power=power, alternative=alternative)  # type: ignore[arg-type]
    p_now = paired_power(sd, drop, n_now, alpha=alpha, alternative=alternative) if n_now >= 2 else None  # type: ignore[arg-type]
    return PowerAnalysis(metric, rv.label, drop, alpha, power, alternative, sd, source, n_req, n_now,
                         p_now, assumptions)
