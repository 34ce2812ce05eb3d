"""Fitting ``quality_offline`` (:mod:`ragmeter.metrics.quality_model`) to human labels, and its
honest agreement: grouped K-fold cross-validation, where every item is predicted by a model fitted
on folds that hold neither it nor any item of its group (the same question: the same references).

The model is ridge regression on standardised features; its penalty is chosen from
:data:`ALPHAS` by an inner grouped cross-validation on the training folds only, so the reported
agreement never saw the items it scores, not even through the choice of the penalty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.core.schema import Sample

#: ridge penalties tried (on standardised features)
ALPHAS = (0.1, 1.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
#: folds of the cross-validation
FOLDS = 5
#: fewest labelled items a model is fitted on
MIN_ITEMS = 20
SEED = 20261128
GROUPS_BY_REFERENCES = "references"


def ridge(x: np.ndarray, y: np.ndarray, alpha: float) -> dict[str, Any]:
    """Ridge regression of ``y`` on standardised ``x``: ``{"mean", "scale", "coef", "intercept"}``."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale <= 1e-12] = 1.0
    z = (x - mean) / scale
    yc = y - y.mean()
    coef = np.linalg.solve(z.T @ z + alpha * np.eye(z.shape[1]), z.T @ yc)
    return {"mean": mean.tolist(), "scale": scale.tolist(), "coef": coef.tolist(), "intercept": float(y.mean())}


def _predict(m: Mapping[str, Any], x: np.ndarray) -> np.ndarray:
    return float(m["intercept"]) + ((x - np.asarray(m["mean"])) / np.asarray(m["scale"])) @ np.asarray(m["coef"])


def group_folds(groups: Sequence[Any], folds: int, seed: int = SEED) -> np.ndarray:
    """The fold of each item: whole groups go to one fold, groups shuffled with ``seed``."""
    uniq = list(dict.fromkeys(groups))
    order = np.random.default_rng(seed).permutation(len(uniq))
    fold_of = {uniq[g]: i % folds for i, g in enumerate(order)}
    return np.array([fold_of[g] for g in groups], dtype=np.int64)


def choose_alpha(x: np.ndarray, y: np.ndarray, groups: Sequence[Any], folds: int = FOLDS,
                 alphas: Sequence[float] = ALPHAS, seed: int = SEED) -> float:
    """The penalty chosen by grouped cross-validation on ``x``, ``y`` with the one-standard-error
    rule (Hastie, Tibshirani and Friedman, The Elements of Statistical Learning, 7.10): the largest
    penalty whose mean squared error is within one standard error of the best one, so the model
    stays as simple as the data allow (the features are strongly correlated: BERTScore P, R, F)."""
    k = min(folds, len(set(groups)))
    fold = group_folds(groups, k, seed)
    errors = np.zeros((len(alphas), k))
    for i, a in enumerate(alphas):
        for f in range(k):
            tr = fold != f
            errors[i, f] = float(((_predict(ridge(x[tr], y[tr], a), x[~tr]) - y[~tr]) ** 2).mean())
    mean = errors.mean(axis=1)
    best = int(np.argmin(mean))
    se = errors[best].std(ddof=1) / np.sqrt(k) if k > 1 else 0.0
    ok = [i for i in range(len(alphas)) if mean[i] <= mean[best] + se]
    return float(max(alphas[i] for i in ok))


def cross_validated_predictions(x: np.ndarray, y: np.ndarray, groups: Sequence[Any], *, folds: int = FOLDS,
                                alphas: Sequence[float] = ALPHAS, seed: int = SEED) -> tuple[np.ndarray, list[float]]:
    """Each item's prediction by a model fitted on the other folds (penalty chosen inside them),
    clipped to [0, 1]; and the penalty of each fold."""
    k = min(folds, len(set(groups)))
    if k < 2:
        raise ConfigError("cross-validation needs items of at least two groups")
    fold = group_folds(groups, k, seed)
    pred = np.empty(len(y), dtype=np.float64)
    chosen = []
    codes = {key: i for i, key in enumerate(dict.fromkeys(groups))}
    g = np.array([codes[key] for key in groups], dtype=np.int64)
    for f in range(k):
        tr = fold != f
        a = choose_alpha(x[tr], y[tr], list(g[tr]), folds, alphas, seed + 1)
        chosen.append(a)
        pred[~tr] = _predict(ridge(x[tr], y[tr], a), x[~tr])
    return np.clip(pred, 0.0, 1.0), chosen


def default_groups(samples: Sequence[Sample]) -> list[Any]:
    """Items with the same references answer the same question: one group."""
    return [tuple(sorted(s.references)) for s in samples]


def groups_of(samples: Sequence[Sample], field: str | None, lines: Sequence[int] | None = None,
              source: str = "labels") -> tuple[list[Any], str]:
    """Each sample's group (its metadata ``field``, or its references) and how they were formed.

    Raises:
        DatasetError: a sample lacks ``field`` (the file and line named).
    """
    if not field:
        return default_groups(samples), GROUPS_BY_REFERENCES
    out = []
    for i, s in enumerate(samples):
        meta = s.metadata or {}
        v = meta.get(field, getattr(s, field, None) if field in ("id", "question") else None)
        if v is None or v == "":
            line = f", line {lines[i]}" if lines and i < len(lines) else ""
            raise DatasetError(f"{source}{line}, field {field!r}: missing (the --groups field names a field of "
                               "every row: its metadata, or id / question)")
        out.append(str(v))
    return out, f"field {field}"


def scale_labels(y: np.ndarray, label_range: Sequence[float] | None = None) -> tuple[np.ndarray, list[float]]:
    """Labels mapped to [0, 1] by ``label_range`` (default: their own min and max)."""
    lo, hi = (float(label_range[0]), float(label_range[1])) if label_range else (float(y.min()), float(y.max()))
    if not hi > lo:
        raise ConfigError(f"the labels have one value ({lo:g}) on every item: nothing to fit")
    return np.clip((y - lo) / (hi - lo), 0.0, 1.0), [lo, hi]


def agreement(pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from scipy import stats

    return {"pearson": float(stats.pearsonr(pred, y)[0]), "spearman": float(stats.spearmanr(pred, y)[0]),
            "kendall": float(stats.kendalltau(pred, y)[0])}


def fit_quality_model(x: np.ndarray, y: np.ndarray, groups: Sequence[Any], *, label: str, source: str,
                      groups_how: str = GROUPS_BY_REFERENCES, label_range: Sequence[float] | None = None,
                      folds: int = FOLDS, name: str | None = None) -> dict[str, Any]:
    """A quality model (the file ``ragmeter fit-quality`` writes) fitted on all items, with the
    grouped cross-validated agreement of the same procedure.

    Raises:
        ConfigError: fewer than :data:`MIN_ITEMS` items, fewer than two groups, or one label value.
    """
    from ragmeter.metrics.quality_model import FEATURES, MODEL_FORMAT

    if len(y) < MIN_ITEMS:
        raise ConfigError(f"{source}: {len(y)} labelled item(s); a quality model needs at least {MIN_ITEMS}")
    if len(set(groups)) < 2:
        raise ConfigError(f"{source}: every item is in one group ({groups_how}); cross-validation needs two or more")
    y01, rng = scale_labels(np.asarray(y, dtype=np.float64), label_range)
    pred, alphas = cross_validated_predictions(x, y01, groups, folds=folds)
    alpha = choose_alpha(x, y01, groups, folds)
    model = ridge(x, y01, alpha)
    return {"format": MODEL_FORMAT, "name": name or f"ridge on {source}", "method": "ridge regression on "
            "standardised features; q = clip(intercept + sum coef * (x - mean) / scale, 0, 1)",
            "features": list(FEATURES), **model, "alpha": alpha,
            "label": label, "label_range": rng, "fitted_on": source, "n": len(y),
            "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "cv": {"cross_validated": True, "folds": min(folds, len(set(groups))), "groups": groups_how,
                   "n_groups": len(set(groups)), "alphas": alphas, **agreement(pred, y01)}}


def labelled_features(samples: Sequence[Sample], options: Mapping[str, Any] | None = None,
                      store: Any = None, progress: Any = None) -> np.ndarray:
    """The features of ``samples`` (:func:`ragmeter.metrics.quality_model.features`), embedding
    through the services as a run does."""
    from ragmeter.core.context import ScoringContext
    from ragmeter.metrics.quality_model import features, prepare_features

    ctx = ScoringContext(dict(options or {}), store=store, progress=progress)
    prepare_features(samples, ctx)
    ctx.flush()
    return features(samples, ctx)


def cross_validate_scores(labels: Any, scores: Mapping[str, Sequence[Any]], key: str,
                          folds: int = FOLDS) -> tuple[dict[str, float | None], dict[str, Any]] | None:
    """For ``meta-eval``: the grouped cross-validated values of a learned metric (its features are
    in each score's details) on these pointwise labels, as ``({sample id: value}, info)``; ``None``
    for pairwise labels or too few items (then the fitted model's own values stand, and say so)."""
    from ragmeter.metrics.quality_model import FEATURES

    if labels.kind != "pointwise":
        return None
    column = scores.get(key)
    if column is None:
        return None
    human = labels.human
    keep = [i for i, s in enumerate(column)
            if s.value is not None and isinstance(s.details, Mapping) and isinstance(s.details.get("features"), Mapping)
            and np.isfinite(human[i])]
    samples = [labels.samples[i] for i in keep]
    groups = default_groups(samples)
    if len(keep) < MIN_ITEMS or len(set(groups)) < 2:
        return None
    x = np.array([[column[i].details["features"][f] for f in FEATURES] for i in keep], dtype=np.float64)
    y01, _ = scale_labels(human[keep])
    pred, alphas = cross_validated_predictions(x, y01, groups, folds=folds)
    values: dict[str, float | None] = {s.id: None for s in labels.samples}
    values.update({labels.samples[i].id: float(p) for i, p in zip(keep, pred, strict=True)})
    info = {"cross_validated": True, "folds": min(folds, len(set(groups))), "groups": GROUPS_BY_REFERENCES,
            "n_groups": len(set(groups)), "alphas": alphas,
            "method": "grouped K-fold: each item predicted by a ridge model fitted on the other folds "
                      "(no item of its group), penalty chosen by an inner grouped cross-validation",
            "values": values}
    return values, info
