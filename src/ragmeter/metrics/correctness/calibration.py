"""Threshold calibration for semantic correctness (phase 2: calibrated threshold) and binary classification
scores computed from real labels (a common F1 bug uses ``y_true = [1] * n``)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ragmeter.core.errors import MetricError

Objective = Literal["accuracy", "f1"]

#: the label proxy when no human label exists: similarity above this counts as correct
PROXY_THRESHOLD = 0.9


@dataclass(frozen=True)
class BinaryScores:
    """Confusion counts and the scores derived from them (positive class = "correct")."""

    tp: int
    fp: int
    tn: int
    fn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / self.n if self.n else math.nan

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        return 2 * self.tp / (2 * self.tp + self.fp + self.fn) if self.tp else 0.0

    def to_dict(self) -> dict[str, float | int]:
        return {"n": self.n, "tp": self.tp, "fp": self.fp, "tn": self.tn, "fn": self.fn,
                "accuracy": self.accuracy, "precision": self.precision, "recall": self.recall,
                "f1": self.f1}


def binarize_labels(labels: Sequence[float] | np.ndarray) -> np.ndarray:
    """Human labels in [0, 1] -> 0/1 (``label >= 0.5`` is correct)."""
    y = np.asarray(labels, dtype=np.float64).ravel()
    if y.size and (np.any(~np.isfinite(y)) or y.min() < 0 or y.max() > 1):
        raise MetricError("labels must be numbers in [0, 1]")
    return (y >= 0.5).astype(np.int8)


def binary_scores(y_true: Sequence[float] | np.ndarray,
                  y_pred: Sequence[float] | np.ndarray) -> BinaryScores:
    """Accuracy, precision, recall and F1 of predictions against real labels.

    Both inputs are binarised at 0.5. With the positive class "correct":

    .. math:: P = \\frac{TP}{TP+FP},\\quad R = \\frac{TP}{TP+FN},\\quad
              F_1 = \\frac{2TP}{2TP+FP+FN},\\quad \\text{acc} = \\frac{TP+TN}{n}

    ``P``, ``R`` and ``F1`` are 0 when their denominator is 0 (sklearn's ``zero_division=0``).
    Unlike a common snippet, ``y_true`` is the human labels, never ``[1] * n``: with all-ones
    truth, F1 only rewards predicting "correct" everywhere.

    Example:
        >>> binary_scores([1, 0, 1, 0], [1, 1, 1, 0]).f1
        0.8
    """
    t = binarize_labels(y_true)
    p = binarize_labels(y_pred)
    if t.shape != p.shape:
        raise MetricError(f"y_true and y_pred differ in length ({t.size} vs {p.size})")
    tp = int(np.sum((t == 1) & (p == 1)))
    fp = int(np.sum((t == 0) & (p == 1)))
    tn = int(np.sum((t == 0) & (p == 0)))
    fn = int(np.sum((t == 1) & (p == 0)))
    return BinaryScores(tp, fp, tn, fn)


@dataclass
class Calibration:
    """A calibrated threshold and the whole curve it was chosen from.

    Attributes:
        thresholds / accuracy / f1: the curve (one entry per candidate threshold).
        chosen: the threshold picked.
        objective: what was maximised (``accuracy`` or ``f1``).
        label_source: ``human`` or ``proxy(similarity > 0.9)``.
        circular: ``True`` when the labels were the similarity proxy (the curve then only shows
            how well a threshold reproduces another threshold; it says nothing about correctness).
        n_validation: samples the threshold was calibrated on.
        validation_scores: accuracy/precision/recall/F1 at ``chosen`` on the validation split.
    """

    thresholds: list[float]
    accuracy: list[float]
    f1: list[float]
    chosen: float
    objective: str
    label_source: str = "human"
    circular: bool = False
    n_validation: int = 0
    validation_scores: dict[str, Any] = field(default_factory=dict)
    held_out_scores: dict[str, Any] | None = None
    grid: str = "fine"

    def to_dict(self) -> dict[str, Any]:
        return {"thresholds": self.thresholds, "accuracy": self.accuracy, "f1": self.f1,
                "chosen": self.chosen, "objective": self.objective,
                "label_source": self.label_source, "circular": self.circular,
                "n_validation": self.n_validation, "validation": self.validation_scores,
                "held_out": self.held_out_scores, "grid": self.grid}


def candidate_thresholds(similarities: np.ndarray, grid: str = "fine") -> np.ndarray:
    """Thresholds to try.

    - ``fine``: 0.00, 0.01, ..., 1.00 (101 values), plus every midpoint between distinct
      similarities so no decision boundary the data allows is missed;
    - ``midpoints``: the midpoints between consecutive distinct similarities, plus one below the
      smallest and one above the largest (the exact set of distinct decisions);
    - ``coarse``: 0.50, 0.55, ..., 0.90 (kept for comparison only).
    """
    s = np.unique(np.round(similarities.astype(np.float64), 6))
    mids = (s[:-1] + s[1:]) / 2 if s.size > 1 else np.empty(0)
    if grid == "coarse":
        return np.round(np.arange(0.5, 0.9001, 0.05), 2)
    if grid == "midpoints":
        ends = [s[0] - 1e-3, s[-1] + 1e-3] if s.size else []
        return np.unique(np.round(np.concatenate([mids, ends]), 6))
    if grid == "fine":
        return np.unique(np.round(np.concatenate([np.round(np.arange(0, 1.0001, 0.01), 2), mids]), 6))
    raise MetricError(f"grid must be 'fine', 'midpoints' or 'coarse', got {grid!r}")


def threshold_curve(similarities: Sequence[float] | np.ndarray, labels: Sequence[float] | np.ndarray,
                    thresholds: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy and F1 of the rule ``similarity >= t`` against ``labels`` for every ``t``."""
    s = np.asarray(similarities, dtype=np.float64).ravel()
    y = binarize_labels(labels)
    if s.shape != y.shape:
        raise MetricError(f"{s.size} similarities but {y.size} labels")
    t = np.asarray(thresholds, dtype=np.float64).ravel()
    pred = s[None, :] >= t[:, None]
    pos = y[None, :] == 1
    tp = np.sum(pred & pos, axis=1)
    fp = np.sum(pred & ~pos, axis=1)
    fn = np.sum(~pred & pos, axis=1)
    tn = np.sum(~pred & ~pos, axis=1)
    n = max(1, s.size)
    acc = (tp + tn) / n
    denom = 2 * tp + fp + fn
    f1 = np.where(tp > 0, 2 * tp / np.maximum(denom, 1), 0.0)
    return acc, f1


def calibrate_threshold(similarities: Sequence[float] | np.ndarray,
                        labels: Sequence[float] | np.ndarray | None = None, *,
                        objective: Objective = "accuracy", grid: str = "fine",
                        proxy_threshold: float = PROXY_THRESHOLD) -> Calibration:
    """Choose the similarity threshold that best separates correct from incorrect answers.

    Every candidate threshold ``t`` (see :func:`candidate_thresholds`) predicts "correct" when
    ``similarity >= t``; the curve of accuracy and F1 against the labels is computed for all of
    them and the threshold maximising ``objective`` is chosen. Several thresholds usually tie (any
    ``t`` between two neighbouring similarities gives the same predictions): the middle of the
    widest best-scoring run of candidates is chosen, which keeps the largest margin to the data.

    Without ``labels`` the similarity proxy is used (``similarity > 0.9`` counts as correct). That is
    circular — the best threshold then simply reproduces 0.9 — so a ``UserWarning`` is raised and
    the returned calibration says ``circular=True``.

    Args:
        similarities: cosine similarities of the validation answers to their references.
        labels: human correctness labels in [0, 1] (binarised at 0.5), aligned with ``similarities``.
        objective: ``accuracy`` or ``f1``.
        grid: ``fine`` (default), ``midpoints`` or ``coarse``.

    Raises:
        MetricError: empty input, mismatched lengths, unknown objective or grid.

    Example:
        >>> calibrate_threshold([0.9, 0.8, 0.4, 0.3], [1, 1, 0, 0]).chosen  # doctest: +SKIP
        0.6
    """
    s = np.asarray(similarities, dtype=np.float64).ravel()
    if s.size == 0:
        raise MetricError("threshold calibration needs at least one validation sample")
    if objective not in ("accuracy", "f1"):
        raise MetricError(f"objective must be 'accuracy' or 'f1', got {objective!r}")
    if labels is None:
        warnings.warn("semantic_dynamic: no human labels, calibrating against the similarity proxy "
                      f"(similarity > {proxy_threshold} = correct). This is circular: the chosen "
                      "threshold only reproduces the proxy and says nothing about correctness.",
                      UserWarning, stacklevel=2)
        y = (s > proxy_threshold).astype(np.float64)
        source, circular = f"proxy(similarity > {proxy_threshold})", True
    else:
        y = np.asarray(labels, dtype=np.float64).ravel()
        source, circular = "human", False
    cand = candidate_thresholds(s, grid)
    acc, f1 = threshold_curve(s, y, cand)
    target = acc if objective == "accuracy" else f1
    best = target.max()
    chosen = float(cand[_middle_of_widest_run(np.isclose(target, best, rtol=0, atol=1e-12))])
    val = binary_scores(y, (s >= chosen).astype(np.float64))
    return Calibration(thresholds=[round(float(t), 6) for t in cand],
                       accuracy=[float(a) for a in acc], f1=[float(v) for v in f1],
                       chosen=round(chosen, 6), objective=objective, label_source=source,
                       circular=circular, n_validation=int(s.size),
                       validation_scores=val.to_dict(), grid=grid)


def _middle_of_widest_run(mask: np.ndarray) -> int:
    best_start, best_len, start = 0, 0, None
    for i, m in enumerate([*mask.tolist(), False]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            if i - start > best_len:
                best_start, best_len = start, i - start
            start = None
    return best_start + (best_len - 1) // 2


def validation_split(ids: Sequence[str], labels: Sequence[float | None], *, fraction: float = 0.5,
                     seed: int = 0, split_of: Sequence[str | None] | None = None) -> set[str]:
    """The ids used for calibration.

    When samples carry a split name (``metadata.split``), those named ``validation``, ``val``,
    ``dev`` or ``calibration`` form the split. Otherwise a ``fraction`` of the labelled samples is
    drawn at random, stratified by label (so both classes are represented), with a fixed seed.
    Unlabelled samples are never in the split.
    """
    if not 0 < fraction < 1:
        raise MetricError(f"validation fraction must be in (0, 1), got {fraction}")
    named = {"validation", "val", "dev", "calibration"}
    if split_of is not None and any((x or "").lower() in named for x in split_of):
        return {i for i, x, lab in zip(ids, split_of, labels, strict=True)
                if (x or "").lower() in named and lab is not None}
    rng = np.random.default_rng(seed)
    chosen: set[str] = set()
    labelled = [(i, lab) for i, lab in zip(ids, labels, strict=True) if lab is not None]
    for cls in (0, 1):
        group = sorted(i for i, lab in labelled if int(lab >= 0.5) == cls)
        if not group:
            continue
        k = max(1, int(round(fraction * len(group))))
        if k >= len(group) and len(labelled) > 1:
            k = len(group) - 1 if len(group) > 1 else len(group)
        chosen.update(rng.permutation(group)[:k].tolist())
    return chosen
