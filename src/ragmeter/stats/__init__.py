"""Statistics of scores, none of which reads a file or the store:

- :mod:`.intervals`: the mean of a metric with a confidence interval inside its range
  (:func:`mean_ci`, :func:`mean_ci_rows`), run summaries (:func:`aggregate_many`), the bootstrap;
  a run summary's running sums (:class:`Moments`: fed a chunk of values at a time, the same
  figures whatever the chunks);
- :mod:`.ppi`: prediction-powered inference of a mean from a few gold labels and many predictions;
- :mod:`.paired`: paired tests of two runs on the same samples (CI of the mean difference,
  permutation, Wilcoxon, Holm, sample size);
- :mod:`.agreement`: inter-rater agreement (Cohen's and Fleiss' kappa, Krippendorff's alpha).

The names of :mod:`.intervals` and :mod:`.ppi` are importable from here (``from ragmeter.stats
import mean_ci, ppi_mean_ci``).
"""

from ragmeter.stats.intervals import (
    N_BOOTSTRAP,
    SEED,
    Bounds,
    Intervals,
    Method,
    Moments,
    aggregate,
    aggregate_many,
    beta_cdf,
    beta_quantile,
    boot_means_many,
    bootstrap_ci,
    choose_method,
    clopper_pearson_ci,
    difference_bounds,
    mean_ci,
    mean_ci_rows,
    t_quantile,
)
from ragmeter.stats.ppi import classical_mean_ci, ppi_lambda, ppi_mean_ci

__all__ = [
    "N_BOOTSTRAP", "SEED", "Bounds", "Intervals", "Method", "Moments", "aggregate", "aggregate_many", "beta_cdf",
    "beta_quantile", "boot_means_many", "bootstrap_ci", "choose_method", "classical_mean_ci",
    "clopper_pearson_ci", "difference_bounds", "mean_ci", "mean_ci_rows", "ppi_lambda", "ppi_mean_ci",
    "t_quantile",
]
