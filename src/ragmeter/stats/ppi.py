r"""Prediction-powered inference (PPI) of a mean: a cheap, biased predictor (an LLM judge's score on
every sample) plus a few hundred gold labels (people's) give an estimate of the true mean that is
unbiased, with a valid interval narrower than the labels' own.

Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, "Prediction-powered inference", Science 382
(2023); the power-tuned estimator (PPI++) of Angelopoulos, Duchi and Zrnic, "PPI++: Efficient
prediction-powered inference", arXiv:2311.01453 (2023). The formulas are those of the reference
implementation ``ppi_py`` (package ``ppi-python``), to which :func:`ppi_mean_ci` is equal
(tests/test_ppi.py).

With labels :math:`y_i` and predictions :math:`\hat y_i` on the ``n`` labelled samples and
predictions :math:`\tilde y_j` on ``N`` unlabelled ones,

.. math::

    \hat\theta_\lambda = \lambda \bar{\tilde y} + \overline{(y - \lambda \hat y)}, \qquad
    \hat\theta_\lambda \pm z_{1-\alpha/2}
    \sqrt{\operatorname{sd}(\lambda \tilde y)^2 / N + \operatorname{sd}(y - \lambda \hat y)^2 / n}

(standard deviations with divisor ``n``). ``lam = 1`` is the classic PPI estimator, ``lam = 0``
the labels' own mean; the power-tuned ``lam`` minimises the variance,
:math:`\lambda^* = \widehat{\mathrm{cov}}(y, \hat y) / ((1 + n/N)\, \widehat{\mathrm{var}}(\hat y, \tilde y))`,
clipped to [0, 1], so the interval is never wider (asymptotically) than the labels' alone.

The interval is a normal approximation: the central limit theorem for the mean of the rectifier
``y - lam * yhat`` over the ``n`` labels (and of the predictions over the ``N`` others), valid as
``n`` grows (Angelopoulos et al. 2023, Theorem 1 and its proof; ``ppi_py.ppi_mean_ci`` uses the
same z interval). With few labels the rectifier's standard deviation is underestimated and the
interval undercovers: with 2 labels it held the truth in 27-48% of the study's data sets, with 10 in
85-88%. Below :data:`MIN_LABELS` labels :func:`ppi_mean_ci` refuses
(``min_labels=`` lowers it for a study); ``benchmarks/ppi.py --small-n`` measures the coverage by
number of labels (docs/meta-eval.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: the fewest labelled samples (with a predictor value) for which a PPI interval is given. In
#: ``benchmarks/ppi.py --small-n`` (10,000 repetitions per case) the 95% PPI++ interval covered
#: 0.924-0.938 at 50 labels on the three judges whose labels are not rare, as the labels' own CLT
#: interval does (0.934-0.943), and 0.944-0.946 at 200; below, 0.92-0.935 at 40, 0.85-0.88 at 10,
#: 0.27-0.48 at 2. Rare 0/1 labels need more (:data:`RARE_LABELS`).
MIN_LABELS = 50

#: 0/1 labels with fewer of their rarer value than this get a warning: the normal approximation of
#: a proportion needs about 10 of each value (the success-failure condition of the Wald interval);
#: at p = 0.9 and 0.95 the study's coverage was 0.89 with 50 labels, 0.92-0.94 with 200
RARE_LABELS = 10

#: why, and where the rule comes from (every refusal says it)
MIN_LABELS_REASON = (
    "the interval of prediction-powered inference is a normal approximation (the central limit theorem "
    "for the mean of the labels' rectifier y - lambda*yhat: Angelopoulos, Bates, Fannjiang, Jordan and "
    "Zrnic, 'Prediction-powered inference', Science 2023; ppi_py's ppi_mean_ci), valid only with enough "
    "labels: in ragmeter's coverage study (benchmarks/ppi.py --small-n, docs/meta-eval.md) its 95% "
    "interval covered 0.92-0.94 from 50 labels, 0.85-0.88 with 10 and 0.27-0.48 with 2")


def rare_labels_warning(y: Sequence[float] | np.ndarray) -> str | None:
    """A warning for 0/1 labels with fewer than :data:`RARE_LABELS` of their rarer value, else ``None``."""
    a = np.asarray(y, dtype=np.float64)
    if a.size == 0 or not np.all((a == 0) | (a == 1)):
        return None
    ones = int(a.sum())
    rare = min(ones, a.size - ones)
    if rare >= RARE_LABELS:
        return None
    value = 1 if ones <= a.size - ones else 0
    return (f"only {rare} of the {a.size} labels are {value}: with 0/1 labels the normal approximation of "
            f"the PPI interval needs about {RARE_LABELS} of each value (the success-failure condition of "
            "the Wald interval); in benchmarks/ppi.py --small-n such intervals covered about 0.89 instead "
            "of 0.95. Label more samples of the rarer kind")


def too_few_labels(n: int, minimum: int = MIN_LABELS) -> str:
    """The message of a refusal for ``n`` labels: the minimum, the reason and its source."""
    return (f"{n} labelled sample{'s' if n != 1 else ''} with a value; a calibrated (PPI) interval needs at "
            f"least {minimum}: {MIN_LABELS_REASON}")


def _vector(x: Sequence[float] | np.ndarray, name: str, minimum: int) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.size < minimum:
        raise ValueError(f"{name} needs at least {minimum} value{'s' if minimum > 1 else ''}, got {a.size}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} has a NaN or infinite value at position {int(np.flatnonzero(~np.isfinite(a))[0])}")
    return a


def _z(level: float) -> float:
    if not (isinstance(level, int | float) and 0 < level < 1):
        raise ValueError(f"level must be between 0 and 1 (0.95 for a 95% interval), got {level!r}")
    from scipy.special import ndtri  # the standard normal quantile

    return float(ndtri(1 - (1 - level) / 2))


def ppi_lambda(y: Sequence[float] | np.ndarray, yhat: Sequence[float] | np.ndarray,
               yhat_unlabeled: Sequence[float] | np.ndarray) -> float:
    """The power-tuning parameter of PPI++ for a mean (``ppi_py``'s ``_calc_lam_glm`` with the
    mean's gradients): :math:`\\mathrm{cov}_n(y, \\hat y) / ((1 + n/N) \\mathrm{var}(\\hat y \\cup \\tilde y))`
    (covariance with divisor ``n``, variance of every prediction with divisor ``n + N - 1``), clipped
    to [0, 1]; 0 when the predictions are all equal (they carry no information).
    """
    y, yhat = _vector(y, "y", 2), _vector(yhat, "yhat", 2)
    unl = _vector(yhat_unlabeled, "yhat_unlabeled", 1)
    if y.size != yhat.size:
        raise ValueError(f"y and yhat must have the same length, got {y.size} and {yhat.size}")
    n, big_n = y.size, unl.size
    cov = float(np.sum((y - y.mean()) * (yhat - yhat.mean()))) / n
    var = float(np.var(np.concatenate([yhat, unl]), ddof=1))
    if var == 0:
        return 0.0
    return float(np.clip(cov / ((1 + n / big_n) * var), 0.0, 1.0))


def ppi_mean_ci(y: Sequence[float] | np.ndarray, yhat: Sequence[float] | np.ndarray,
                yhat_unlabeled: Sequence[float] | np.ndarray, *, level: float = 0.95,
                lam: float | None = None, min_labels: int = MIN_LABELS) -> tuple[float, float, float]:
    """Prediction-powered estimate of the mean of ``y`` and its confidence interval.

    Args:
        y: gold labels (people's) of the ``n`` labelled samples.
        yhat: the predictor's values (a judge's scores) on the same samples, in the same order.
        yhat_unlabeled: the predictor's values on the ``N`` samples without a label.
        level: the interval's confidence level.
        lam: ``None`` for the power-tuned PPI++ (:func:`ppi_lambda`), ``1`` for the classic PPI
            estimator, ``0`` for the labels' own mean and CLT interval; any real number is valid.
        min_labels: refuse fewer labels than this (:data:`MIN_LABELS`, module docstring); at
            least 2. A lower value than the default is for coverage studies.

    Returns:
        ``(estimate, ci_low, ci_high)``: :math:`\\lambda \\bar{\\tilde y} + \\overline{y - \\lambda \\hat y}`
        and the normal-approximation interval of the module docstring (``ppi_py.ppi_mean_ci``'s,
        with ``alpha = 1 - level``). Valid for any predictor; the better it tracks ``y``, the
        narrower the interval.

    Raises:
        ValueError: fewer than ``min_labels`` labels (the message names the minimum, the reason
            and its source), no unlabelled value, lengths that differ, a NaN or infinite value, a
            level outside (0, 1) or a non-finite ``lam``.

    >>> est, lo, hi = ppi_mean_ci([0, 1, 1, 0], [0.2, 0.9, 0.8, 0.1], [0.7, 0.6, 0.9, 0.2], lam=1, min_labels=2)
    >>> round(est, 3), lo < est < hi
    (0.6, True)
    """
    if isinstance(min_labels, bool) or not isinstance(min_labels, int) or min_labels < 2:
        raise ValueError(f"min_labels must be an integer of at least 2, got {min_labels!r}")
    y, yhat = _vector(y, "y", 2), _vector(yhat, "yhat", 2)
    unl = _vector(yhat_unlabeled, "yhat_unlabeled", 1)
    if y.size != yhat.size:
        raise ValueError(f"y and yhat must have the same length, got {y.size} and {yhat.size}")
    z = _z(level)
    if lam is not None and (not (isinstance(lam, int | float) and math.isfinite(lam)) or isinstance(lam, bool)):
        raise ValueError(f"lam must be a finite number or None (power-tuned), got {lam!r}")
    if y.size < min_labels:  # the inputs are well formed, but too few for the normal approximation
        raise ValueError(too_few_labels(int(y.size), min_labels))
    lam = ppi_lambda(y, yhat, unl) if lam is None else float(lam)
    rect = y - lam * yhat
    estimate = float(lam * unl.mean() + rect.mean())
    se = math.sqrt(float(np.std(lam * unl)) ** 2 / unl.size + float(np.std(rect)) ** 2 / y.size)
    return estimate, estimate - z * se, estimate + z * se


def classical_mean_ci(y: Sequence[float] | np.ndarray, *, level: float = 0.95) -> tuple[float, float, float]:
    """The labels' own mean and its CLT interval, ``mean +- z sd / sqrt(n)`` (standard deviation with
    divisor ``n``): ``ppi_py.classical_mean_ci``, the interval PPI is compared with (it equals
    :func:`ppi_mean_ci` with ``lam=0``).

    Returns:
        ``(mean, ci_low, ci_high)``.
    """
    y = _vector(y, "y", 2)
    z = _z(level)
    m = float(y.mean())
    h = z * float(np.std(y)) / math.sqrt(y.size)
    return m, m - h, m + h
