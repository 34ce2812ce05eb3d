"""Human-calibrated estimates: a judge metric's mean over a run, corrected by the human labels of
some of its samples with prediction-powered inference (:mod:`ragmeter.stats.ppi`; Angelopoulos et al.,
Science 2023, power-tuned as PPI++). The judge is cheap and biased, the labels expensive and
right: together they give an unbiased mean with a valid interval narrower than the labels' own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ragmeter.core.errors import ConfigError, DatasetError
from ragmeter.stats.intervals import mean_ci
from ragmeter.stats.ppi import MIN_LABELS, ppi_lambda, ppi_mean_ci, rare_labels_warning, too_few_labels
from ragmeter.store import Store

#: columns of a labels file: the sample id, then the label
ID_COLUMNS = ("sample_id", "id", "sample")
LABEL_COLUMNS = ("label", "human", "human_label", "value", "score")
_TRUE = {"true", "yes", "y", "correct", "pass", "t"}
_FALSE = {"false", "no", "n", "incorrect", "fail", "f"}


def read_labels_file(path: str | Path, *, label_range: tuple[float, float] | None = None
                     ) -> dict[str, tuple[float, int]]:
    """``{sample id: (label, line)}`` from a CSV (or JSONL, JSON, TSV, Parquet) file with columns
    ``sample_id,label``.

    Args:
        path: the file.
        label_range: ``(lo, hi)``: labels on that scale are mapped to [0, 1] (``(x - lo) / (hi - lo)``);
            without it labels must already be in [0, 1] (or true/false).

    Raises:
        DatasetError: naming the file, line and field of a missing column, an id given twice, a
            label that is not a number or is outside its range.
    """
    from ragmeter.io.formats import iter_rows

    rows, _ = iter_rows(path)
    out: dict[str, tuple[float, int]] = {}
    file = str(path)
    for lineno, row in rows:
        if isinstance(row, DatasetError):
            raise row
        if not isinstance(row, Mapping):
            raise DatasetError(f"expected an object with fields, got {type(row).__name__}", file=file, line=lineno)
        id_col = next((c for c in ID_COLUMNS if c in row), None)
        lab_col = next((c for c in LABEL_COLUMNS if c in row), None)
        if id_col is None or lab_col is None:
            need = "sample_id" if id_col is None else "label"
            raise DatasetError(f"no {need} column (columns: {', '.join(map(str, row))}); a labels file has "
                               "the columns sample_id,label", file=file, line=lineno, field=need)
        sid = row[id_col]
        if sid is None or (isinstance(sid, float) and math.isnan(sid)) or str(sid).strip() == "":
            raise DatasetError("no sample id", file=file, line=lineno, field=id_col)
        if isinstance(sid, bool) or not isinstance(sid, str | int | float):
            raise DatasetError(f"expected text or a number, got {type(sid).__name__}", file=file, line=lineno,
                               field=id_col)
        sid = str(int(sid)) if isinstance(sid, float) and sid.is_integer() else str(sid).strip()
        if sid in out:
            raise DatasetError(f"sample {sid!r} is labelled twice (first on line {out[sid][1]})", file=file,
                               line=lineno, field=id_col)
        out[sid] = (_label_value(row[lab_col], label_range, file, lineno, lab_col), lineno)
    if not out:
        raise DatasetError("no labels: the file has no row", file=file)
    return out


def _label_value(v: Any, label_range: tuple[float, float] | None, file: str, line: int, field: str) -> float:
    def err(msg: str) -> DatasetError:
        return DatasetError(msg, file=file, line=line, field=field)

    if isinstance(v, bool):
        x = 1.0 if v else 0.0
    elif isinstance(v, int | float):
        x = float(v)
    elif isinstance(v, str) and v.strip():
        s = v.strip().lower()
        if s in _TRUE or s in _FALSE:
            x = 1.0 if s in _TRUE else 0.0
        else:
            try:
                x = float(s)
            except ValueError:
                raise err(f"label must be a number or true/false, got {v!r}") from None
    else:
        raise err("no label" if v is None or v == "" else f"label must be a number, got {type(v).__name__}")
    if not math.isfinite(x):
        raise err(f"label must be a finite number, got {v!r}")
    lo, hi = label_range or (0.0, 1.0)
    if not lo <= x <= hi:
        hint = "" if label_range else " (labels on another scale: --label-range LO,HI maps them to [0, 1])"
        raise err(f"label {x:g} is outside [{lo:g}, {hi:g}]{hint}")
    return (x - lo) / (hi - lo)


def _human_mean_ci(y: np.ndarray, level: float) -> tuple[float, float, float]:
    """The labels' mean with ragmeter's interval on [0, 1] (the scale labels are mapped to)."""
    lo, hi = mean_ci(y.tolist(), level=level, bounds=(0.0, 1.0))[:2]
    return float(np.mean(y)), float(lo), float(hi)


def calibrate_values(y: np.ndarray, yhat: np.ndarray, yhat_unlabeled: np.ndarray, *, level: float = 0.95,
                     lam: float | None = None) -> dict[str, Any]:
    """The PPI estimate of the mean of ``y`` from labels ``y`` and predictions ``yhat`` on the same
    samples and predictions ``yhat_unlabeled`` on the others, with ``lam`` (power-tuned when
    ``None``). ``warnings``: what makes the interval less trustworthy than its level says (0/1 labels
    with few of one value: :func:`ragmeter.stats.ppi.rare_labels_warning`).

    Raises:
        ConfigError: fewer than :data:`ragmeter.stats.ppi.MIN_LABELS` labelled samples with a value
            (the PPI interval is a normal approximation; the message names the minimum, the reason and
            its source). When every sample with a value is labelled there is nothing to calibrate and
            the labels' own interval (:func:`ragmeter.stats.mean_ci`, valid at every n) is the estimate,
            from 2 labels.
    """
    if y.size < 2:
        raise ConfigError(f"a calibrated estimate needs 2 or more labelled samples with a metric value, got {y.size}")
    if yhat_unlabeled.size == 0:
        m, lo, hi = _human_mean_ci(y, level)
        return {"value": m, "ci_low": lo, "ci_high": hi, "lam": 0.0, "method": "labels only", "warnings": [],
                "note": "every sample with a metric value is labelled: the human mean is the estimate"}
    if y.size < MIN_LABELS:
        raise ConfigError(too_few_labels(int(y.size)))
    used = ppi_lambda(y, yhat, yhat_unlabeled) if lam is None else float(lam)
    est, lo, hi = ppi_mean_ci(y, yhat, yhat_unlabeled, level=level, lam=used)
    # labels lie in [0, 1], so the mean does: intersecting the interval with [0, 1] keeps its coverage
    est, lo, hi = (min(max(float(x), 0.0), 1.0) for x in (est, lo, hi))
    rare = rare_labels_warning(y)
    return {"value": est, "ci_low": lo, "ci_high": hi, "lam": used,
            "method": "PPI++ (power-tuned)" if lam is None else f"PPI, lambda = {used:g}",
            "warnings": [rare] if rare else []}


def calibrated_estimate(store: Store, run_ref: str, metric: str, labels: Mapping[str, float | tuple[float, int]],
                        *, level: float = 0.95, lam: float | None = None, source: str = "labels",
                        flip_lower: bool = False) -> dict[str, Any]:
    """A run's metric mean, the human-only mean and the calibrated (PPI) estimate, side by side.

    Args:
        store: the results store.
        run_ref: the run (id, prefix, name, ``latest``).
        metric: a metric of the run (usually a judge metric).
        labels: ``{sample id: label in [0, 1]}`` (or ``(label, line)`` as :func:`read_labels_file`
            gives, so an unknown sample is reported with its line).
        level: the intervals' confidence level.
        lam: ``None`` for the power-tuned PPI++, 1 for classic PPI.
        source: where the labels came from (named in errors and the result).
        flip_lower: the labels are on a higher-is-better scale (an annotation task's) while the
            metric is lower-is-better: use ``1 - label``.

    Raises:
        DatasetError: a label for a sample the run does not have (naming it, exit 2).
        ConfigError: the metric is not in the run, or fewer than
            :data:`ragmeter.stats.ppi.MIN_LABELS` labelled samples have a value (fewer than 2 when
            every sample with a value is labelled).
    """
    run = store.get_run(run_ref)
    summary = store.run_summary(run)
    keys = [m.get("key") for m in run.metrics or []]
    if metric not in keys and metric not in summary:
        raise ConfigError(f"run {run.id} has no metric {metric!r}; it has {', '.join(map(str, keys)) or 'none'}")
    sample_ids = {s.id for s in store.run_samples(run.id)}
    table = store.score_table(run.id).get(metric, {})
    summ = summary.get(metric)
    lower = summ is not None and summ.direction == "lower"
    values: dict[str, float] = {sid: float(sc.value) for sid, sc in table.items() if sc.value is not None}
    flat: dict[str, float] = {}
    for sid, lab in labels.items():
        value, line = lab if isinstance(lab, tuple) else (lab, None)
        if sid not in sample_ids:
            raise DatasetError(f"label for sample {sid!r}, which run {run.id} does not have", file=source,
                               line=line, field="sample_id")
        flat[sid] = 1.0 - value if (flip_lower and lower) else value
    labelled = [sid for sid in flat if sid in values]
    y = np.array([flat[s] for s in labelled], dtype=np.float64)
    yhat = np.array([values[s] for s in labelled], dtype=np.float64)
    unl = np.array([v for s, v in values.items() if s not in flat], dtype=np.float64)
    all_y = np.array(list(flat.values()), dtype=np.float64)
    if all_y.size < 2:
        raise ConfigError(f"{source}: a human mean needs 2 or more labels, got {all_y.size}")
    hm, hlo, hhi = _human_mean_ci(all_y, level)
    if unl.size and y.size < MIN_LABELS:
        raise ConfigError(f"{source}: {too_few_labels(int(y.size))}")
    calibrated = calibrate_values(y, yhat, unl, level=level, lam=lam)
    bias = float(np.mean(yhat - y)) if y.size else None
    return {
        "run_id": run.id, "metric": metric, "direction": "lower" if lower else "higher", "level": level,
        "labels": source,
        "metric_mean": {"value": summ.mean, "ci_low": summ.ci_low, "ci_high": summ.ci_high, "n": summ.n,
                        "method": summ.ci_method or "the run's interval"} if summ is not None else
                       {"value": None, "ci_low": None, "ci_high": None, "n": len(values),
                        "method": "the run's interval"},
        "human_mean": {"value": hm, "ci_low": hlo, "ci_high": hhi, "n": int(all_y.size),
                       "method": "ragmeter.stats.mean_ci of the labels on [0, 1]"},
        "calibrated": calibrated,
        "n_labeled": int(y.size), "n_unlabeled": int(unl.size),
        "n_labeled_without_value": int(all_y.size - y.size),
        "judge_bias": bias,
        "width_ratio": ((calibrated["ci_high"] - calibrated["ci_low"]) / (hhi - hlo)) if hhi > hlo else None,
    }


def task_labels(store: Store, task_ref: str, scale: str) -> dict[str, float]:
    """An annotation task's labels on one numeric scale: the raters' mean per item, in [0, 1]."""
    from ragmeter.human.tasks import human_labels

    return human_labels(store, task_ref, scale, "mean")


def calibration_lines(c: Mapping[str, Any]) -> list[str]:
    """The three estimates as text lines."""
    pct = f"{c['level']:.0%}"

    def line(title: str, e: Mapping[str, Any], extra: str) -> str:
        if e.get("value") is None:
            return f"{title}: no value"
        ci = f"[{e['ci_low']:.4f}, {e['ci_high']:.4f}]" if e.get("ci_low") is not None else "(no interval)"
        return f"{title:<22} {e['value']:.4f}  {pct} CI {ci}  {extra}"

    cal = c["calibrated"]
    out = [line(f"{c['metric']} mean", c["metric_mean"], f"n = {c['metric_mean'].get('n')} (the judge alone)"),
           line("human mean", c["human_mean"], f"n = {c['human_mean']['n']} labels"),
           line("calibrated (PPI)", cal, f"{cal['method']}, lambda {cal['lam']:.3f}; {c['n_labeled']} labelled + "
                                         f"{c['n_unlabeled']} judge-only samples")]
    if c.get("judge_bias") is not None:
        out.append(f"judge minus humans on the labelled samples: {c['judge_bias']:+.4f}")
    if c.get("width_ratio") is not None:
        out.append(f"calibrated interval / human-only interval: {c['width_ratio']:.2f}")
    if c.get("n_labeled_without_value"):
        out.append(f"{c['n_labeled_without_value']} labelled sample(s) have no metric value (judge failure): "
                   "used in the human mean only")
    if cal.get("note"):
        out.append(cal["note"])
    out += [f"WARNING: {w}" for w in cal.get("warnings") or []]
    return out
